#!/usr/bin/env bash
# Fetches a real HIP library from the Python package index (pip download, no install) into
# target/external/ for the prune test of a `.hip_fatbin` in a segment of its own:
#
#   scripts/fetch-cyllama-rocm.sh
#   OFFLOAD_IMAGE_EXTERNAL_TESTS=1 cargo test -p loader-sim --test suite prune_layouts::cyllama
#
# Result: target/external/cyllama-rocm/libggml-hip.so, the libggml-hip-*.so of the
# cyllama-rocm 0.2.18 wheel (168.8 MB; 130 bundles of gfx1100/gfx1101/... code objects in
# .hip_fatbin, whose PT_LOAD segment has p_vaddr - p_offset = 0x8000 after patchelf).
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
dest="${OFFLOAD_IMAGE_EXTERNAL:-$here/target/external}"
wheel="cyllama-rocm==0.2.18"
mkdir -p "$dest/cyllama-rocm"
if ! ls "$dest"/cyllama-rocm/cyllama_rocm-0.2.18-*.whl >/dev/null 2>&1; then
  python3 -m pip download -q --no-deps "$wheel" -d "$dest/cyllama-rocm" >&2
fi
if [ ! -e "$dest/cyllama-rocm/libggml-hip.so" ]; then
  whl=$(ls "$dest"/cyllama-rocm/cyllama_rocm-0.2.18-*.whl | head -n1)
  python3 - "$whl" "$dest/cyllama-rocm" <<'PY'
import sys, zipfile, os
with zipfile.ZipFile(sys.argv[1]) as z:
    names = [n for n in z.namelist() if os.path.basename(n).startswith("libggml-hip-")]
    if len(names) != 1:
        sys.exit(f"expected one libggml-hip-*.so in the wheel, found {names}")
    tmp = os.path.join(sys.argv[2], "libggml-hip.so.part")
    with z.open(names[0]) as src, open(tmp, "wb") as out:
        while chunk := src.read(1 << 20):
            out.write(chunk)
    os.rename(tmp, os.path.join(sys.argv[2], "libggml-hip.so"))
PY
fi
echo "$dest/cyllama-rocm/libggml-hip.so"
