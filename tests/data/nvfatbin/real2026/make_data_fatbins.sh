#!/usr/bin/env bash
# Links data_fatbins.s into libdata_fatbins.so (clang 22, lld 22): a host library whose
# device code lies in `.data` only (tests/suite/lto_entries.rs, loader-sim doctor tests).
set -euo pipefail
cd "$(dirname "$0")"
clang-22 --target=x86_64-unknown-linux-gnu -c data_fatbins.s -o data_fatbins.o
clang-22 --target=x86_64-unknown-linux-gnu -shared -nostdlib -fuse-ld=lld -o libdata_fatbins.so data_fatbins.o
rm -f data_fatbins.o
