#!/usr/bin/env bash
# Fetches a real CUDA library from the Python package index (pip download, no install) into
# target/external/ for the test that reads NVIDIA fatbinaries from it (scripts/setup.sh
# runs it):
#
#   scripts/fetch-nvidia-libs.sh
#   cargo test --test suite nvfatbin::libcurand
#
# Result: target/external/nvidia/libcurand.so.10 (nvidia-curand-cu12 10.3.10.19: 11
# fatbinaries, 153 entries in .nv_fatbin). Its cuobjdump extraction is recorded in
# tests/data/nvfatbin/libcurand.MANIFEST (tests/data/nvfatbin/regen.sh).
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
dest="${OFFLOAD_IMAGE_EXTERNAL:-$here/target/external}"
wheel="nvidia-curand-cu12==10.3.10.19"
mkdir -p "$dest/nvidia-wheels" "$dest/nvidia"
if ! ls "$dest"/nvidia-wheels/nvidia_curand_cu12-10.3.10.19-*.whl >/dev/null 2>&1; then
  python3 -m pip download -q --no-deps "$wheel" -d "$dest/nvidia-wheels"
fi
if [ ! -e "$dest/nvidia/libcurand.so.10" ]; then
  whl=$(ls "$dest"/nvidia-wheels/nvidia_curand_cu12-10.3.10.19-*.whl | head -n1)
  python3 - "$whl" "$dest/nvidia" <<'PY'
import sys, zipfile, os
with zipfile.ZipFile(sys.argv[1]) as z:
    data = z.read("nvidia/curand/lib/libcurand.so.10")
open(os.path.join(sys.argv[2], "libcurand.so.10"), "wb").write(data)
PY
fi
echo "$dest/nvidia/libcurand.so.10"

# `--large`: also the two large CUDA 12 libraries of the selection benchmark
# (benches/nvfatbin.sh): libcusolver.so.11 (nvidia-cusolver-cu12 11.7.5.82, 302 MB) and
# libcusparse.so.12 (nvidia-cusparse-cu12 12.5.10.65, 487 MB). Printed after libcurand.
# `--nccl`: libnccl.so.2 (nvidia-nccl-cu12 2.32.3, 474 MB, relocatable device code) for
# the prune benchmark (benches/prune.sh with WITH_NCCL=1).
specs=()
case "${1:-}" in
  --large) specs=("nvidia-cusolver-cu12 11.7.5.82 cusolver libcusolver.so.11"
                  "nvidia-cusparse-cu12 12.5.10.65 cusparse libcusparse.so.12") ;;
  --nccl) specs=("nvidia-nccl-cu12 2.32.3 nccl libnccl.so.2") ;;
  "") ;;
  *) echo "fetch-nvidia-libs.sh: unknown option $1 (--large, --nccl)" >&2; exit 2 ;;
esac
if [ "${#specs[@]}" -gt 0 ]; then
  for spec in "${specs[@]}"; do
    read -r name version pkg file <<< "$spec"
    stem="$(echo "$name" | tr - _)-$version"
    if ! ls "$dest"/nvidia-wheels/"$stem"-*.whl >/dev/null 2>&1; then
      python3 -m pip download -q --no-deps "$name==$version" -d "$dest/nvidia-wheels"
    fi
    if [ ! -e "$dest/nvidia/$file" ]; then
      whl=$(ls "$dest"/nvidia-wheels/"$stem"-*.whl | head -n1)
      python3 - "$whl" "$dest/nvidia" "nvidia/$pkg/lib/$file" <<'PY'
import os, shutil, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z, z.open(sys.argv[3]) as src:
    with open(os.path.join(sys.argv[2], os.path.basename(sys.argv[3])), "wb") as out:
        shutil.copyfileobj(src, out)
PY
    fi
    echo "$dest/nvidia/$file"
  done
fi
