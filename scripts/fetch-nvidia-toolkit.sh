#!/usr/bin/env bash
# Assembles a CUDA toolkit tree from NVIDIA's wheels on the Python package index (CPU-only
# tools, no driver) in a virtual environment under target/external/, and prints the tree's
# path. Quick when it is already there (a stamp names the pinned versions).
#
#   scripts/fetch-nvidia-toolkit.sh        # -> .../site-packages/nvidia/cu13
#
# The tree is what clang's CUDA driver expects of `--cuda-path` (bin/ptxas, bin/fatbinary,
# nvvm/libdevice/libdevice.10.bc, include/cuda.h with CUDA_VERSION, lib/), plus cuobjdump
# (bin/cuobjdump) for the reference listings and benches/nvfatbin.sh:
#   nvidia-cuda-nvcc       ptxas, fatbinary, nvlink, nvcc; nvvm/libdevice (with nvidia-nvvm)
#   nvidia-cuda-runtime    include/cuda_runtime.h & co., lib/libcudart.so.13
#   nvidia-cuda-crt        include/crt/ (host_config.h, host_runtime.h, ...)
#   nvidia-cuda-cccl       include/nv/target, which curand_mtgp32_kernel.h includes
#   nvidia-cuda-cuobjdump  bin/cuobjdump
#   nvidia-curand          include/curand*.h only (clang's __clang_cuda_runtime_wrapper.h
#                          includes curand_mtgp32_kernel.h, which a full toolkit has): taken
#                          out of the wheel, the 100 MB library is not installed.
# clang 22 knows CUDA up to 12.9 and takes this 13.5 tree with a warning
# (-Wunknown-cuda-version), see loader-sim/tests/suite/cuda_program.rs.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
dest="${OFFLOAD_IMAGE_EXTERNAL:-$repo/target/external}"
venv="$dest/nvidia-venv"
cuda_version=13.5.37
packages=(nvidia-cuda-nvcc==$cuda_version nvidia-cuda-runtime==$cuda_version
  nvidia-cuda-crt==$cuda_version nvidia-cuda-cuobjdump==$cuda_version
  nvidia-nvvm==$cuda_version nvidia-cuda-cccl==13.3.5.0.6)
curand=nvidia-curand==10.4.5.25
stamp="$venv/toolkit-stamp"
want="${packages[*]} $curand"
tree() { ls -d "$venv"/lib/python3*/site-packages/nvidia/cu13 2>/dev/null | head -n1; }
mkdir -p "$dest"
# One installer at a time (the tests that call this script run in parallel).
exec 9>"$dest/nvidia-toolkit.lock"
flock 9
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && [ -x "$(tree)/bin/ptxas" ]; then
  tree
  exit 0
fi
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
fi
"$venv/bin/python" -m pip install -q --disable-pip-version-check "${packages[@]}" >&2
cuda="$(tree)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
"$venv/bin/python" -m pip download -q --disable-pip-version-check --no-deps "$curand" -d "$tmp" >&2
"$venv/bin/python" - "$tmp" "$cuda/include" <<'PY'
import glob, os, sys, zipfile
whl = glob.glob(os.path.join(sys.argv[1], "nvidia_curand-*.whl"))[0]
with zipfile.ZipFile(whl) as z:
    for name in z.namelist():
        if "/include/" in name and name.endswith(".h"):
            with open(os.path.join(sys.argv[2], os.path.basename(name)), "wb") as f:
                f.write(z.read(name))
PY
for f in bin/ptxas bin/fatbinary bin/cuobjdump nvvm/libdevice/libdevice.10.bc include/cuda.h \
  include/cuda_runtime.h include/crt/host_runtime.h include/nv/target \
  include/curand_mtgp32_kernel.h lib/libcudart.so.13; do
  [ -e "$cuda/$f" ] || { echo "fetch-nvidia-toolkit: $cuda/$f is missing" >&2; exit 1; }
done
echo "$want" > "$stamp"
echo "$cuda"
