#!/usr/bin/env bash
# Checks on a machine with an NVIDIA GPU and its driver (docs/FINDINGS.md, "On a real GPU"):
# doctor's NVML detection, the driver loading what `select` chose (and the whole
# fatbinary), which PTX ISA versions the driver compiles, and `list` against cuobjdump on
# the machine's own CUDA libraries where a Python environment has them.
#
#   scripts/gpu-check.sh [LOADER_SIM] [PYTHON]     # results under $OUT (default: ./gpu-check)
#
# LOADER_SIM defaults to target/release/loader-sim; PYTHON (default python3) loads images
# with the CUDA driver through ctypes (scripts/cuda-load.py) and names the site-packages
# whose nvidia/ libraries are read. Needs nvidia-smi; cuobjdump where it is on the PATH.
set -uo pipefail
cd "$(dirname "$0")/.."
LS="${1:-target/release/loader-sim}"
PY="${2:-python3}"
OUT="${OUT:-$PWD/gpu-check}"
mkdir -p "$OUT"
W=$(mktemp -d)
F=tests/data/nvfatbin/files
exec > >(tee "$OUT/log.txt") 2>&1
set -x
nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv
# 1. doctor with no --target: the GPU and the driver from NVML.
"$LS" doctor "$F" --json > "$OUT/doctor_testdata.jsonl"
# 2. The image select chooses for the detected device, and the whole file, loaded by the driver.
cc=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -n1 | tr -d .)
for f in "$F"/*.fatbin; do
  b=$(basename "$f" .fatbin)
  "$LS" select "$f" --target "sm_$cc" --json -o "$W/$b.chosen"; echo "$b: select exit $?"
done
"$PY" scripts/cuda-load.py "$F"/*.fatbin "$W"/*.chosen | tee "$OUT/loads.jsonl"
# 3. Which PTX ISA versions the driver compiles: one PTX text under several .version lines.
"$LS" select "$F/ptx_only.fatbin" --target "sm_$cc" -o "$W/ptx.ptx"
for v in 7.8 8.0 8.5 8.8 9.0 9.1 9.2 9.5; do
  sed "s/^\.version [0-9.]*/.version $v/" "$W/ptx.ptx" > "$W/isa_$v.ptx"
done
"$PY" scripts/cuda-load.py "$W"/isa_*.ptx | tee "$OUT/ptx_isa.jsonl"
# 4. The environment's own CUDA libraries.
SP=$("$PY" -c 'import site; print(site.getsitepackages()[0])')
if [ -d "$SP/nvidia" ]; then
  "$LS" doctor "$SP/nvidia" --json > "$OUT/doctor_nvidia.jsonl"
  tail -n1 "$OUT/doctor_nvidia.jsonl"
  for lib in $(find "$SP/nvidia" -name 'libcurand.so*' | head -n1); do
    echo "$lib: ours $("$LS" list "$lib" --json --no-sha256 | wc -l)," \
      "cuobjdump $(cuobjdump -lelf -lptx "$lib" 2>/dev/null | grep -c -E '^(ELF|PTX) file')"
  done
fi
echo done
