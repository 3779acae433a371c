#!/usr/bin/env bash
# Makes the two minimal split host libraries of tests/data/kpack/split from the committed
# sections of the real split libraries (rocm-kpack's splitter output, ../PROVENANCE.md):
# a shared library whose `.hipFatBinSegment` holds the same `HIPK` wrappers (24 bytes each:
# magic, version 1, pointer, reserved1 = the wrapper's index) and whose `.rocm_kpack_ref`
# holds the same ref record, the pointer zero in the section and its address in the
# `R_X86_64_RELATIVE` addend, as the splitter leaves it; `.hip_fatbin` without file bytes.
#
#   tests/data/kpack/split/make.sh   (needs clang-22 and ld.lld-22)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
# host NAME WRAPPERS REF_FILE
host() {
  local name="$1" count="$2" ref="$3" s="$tmp/$1.s"
  {
    echo '  .section .hip_fatbin,"aw",@nobits'
    echo '  .p2align 12'
    echo '  .zero 4096'
    echo '  .section .rocm_kpack_ref,"a",@progbits'
    echo 'kpack_ref:'
    echo "  .incbin \"$here/../$ref\""
    echo '  .section .hipFatBinSegment,"aw",@progbits'
    echo '  .p2align 3'
    for ((i = 0; i < count; i++)); do
      echo "  .long 0x4B504948, 1"
      echo "  .quad kpack_ref"
      echo "  .quad $i"
    done
  } >"$s"
  clang-22 --target=x86_64-linux-gnu -c "$s" -o "$tmp/$name.o"
  ld.lld-22 -shared --hash-style=gnu --build-id=none -soname "$name" -o "$name" "$tmp/$name.o"
}
host librocrand.so.1.1 1 rocrand/ref.msgpack
host xla_rocm_plugin.so 45 jax/ref.msgpack
sha256sum librocrand.so.1.1 xla_rocm_plugin.so
