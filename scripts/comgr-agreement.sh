#!/usr/bin/env bash
# Compares offload-image's selection with AMD comgr's amd_comgr_lookup_code_object on every
# bundle of a real ROCm library, for every ISA comgr knows in every feature combination
# (tests/suite/comgr_agreement.rs, ignored test `rocsparse`). Needs libamd-comgr-dev and cc.
#
#   scripts/comgr-agreement.sh                 # fetches librocsparse0, compares librocsparse.so.0
#   scripts/comgr-agreement.sh path/to/lib.so  # any file with uncompressed bundles
#
# Prints "<file>: N bundles (M entries) x K ISAs: C comparisons agree, F of them matches";
# exits non-zero at the first disagreement.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
cd "$here"
if [ $# -ge 1 ]; then
  lib="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
else
  libdir="$(scripts/fetch-rocm-libs.sh librocsparse0 | tail -n1)"
  lib="$libdir/librocsparse.so.0"
fi
COMGR_AGREEMENT_LIB="$lib" cargo test --release --test suite -- \
  --ignored --exact comgr_agreement::rocsparse --nocapture
