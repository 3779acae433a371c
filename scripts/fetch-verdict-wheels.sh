#!/usr/bin/env bash
# Fetches the wheels whose libraries doctor's verdicts are checked on
# (loader-sim/tests/suite/doctor_verdicts.rs, COMPATIBILITY.md §12): pip download, no install, into
# target/external/verdict-wheels/: six CUDA wheels (1.5 GB), and in outside/ mojolearn-amd
# 0.8.62 (28 MB), whose gfx942 code objects sit in .rodata outside any container.
# scripts/setup.sh runs it. Prints the folder.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
dest="${OFFLOAD_IMAGE_EXTERNAL:-$here/target/external}/verdict-wheels"
mkdir -p "$dest"
for spec in nvidia-cufft==12.0.0.61 nvidia-cublas==13.1.0.3 nvidia-cudnn-cu13==9.19.0.56 \
            nvidia-cusparselt-cu13==0.8.0 nvidia-cusparse==12.6.3.3 nvidia-cufft-cu12==11.4.1.4; do
  stem="$(echo "${spec%%==*}" | tr - _)-${spec##*==}"
  if ! ls "$dest/$stem"-*.whl >/dev/null 2>&1; then
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.11 \
      --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
      --platform manylinux2014_x86_64 "$spec" -d "$dest"
  fi
done
mkdir -p "$dest/outside"
if ! ls "$dest"/outside/mojolearn_amd-0.8.62-*.whl >/dev/null 2>&1; then
  python3 -m pip download -q --no-deps --only-binary=:all: "mojolearn-amd==0.8.62" -d "$dest/outside"
fi
echo "$dest"
