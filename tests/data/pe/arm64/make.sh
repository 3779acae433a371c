#!/usr/bin/env bash
# Rebuilds k_x64.dll and k_arm64.dll from k.s with clang 22 and lld-link 22: the same two
# fatbinaries (cut from libcufft.so.12: tests/data/nvfatbin/real2026/, PTX and sm_100 cubin)
# and wrappers, linked for x86-64 (machine 0x8664) and AArch64 (0xAA64).
set -euo pipefail
cd "$(dirname "$0")"
for t in x64:x86_64 arm64:aarch64; do
  m=${t%%:*}; triple=${t#*:}-pc-windows-msvc
  clang-22 --target=$triple -c k.s -o k_$m.obj
  lld-link-22 /dll /noentry /nodefaultlib /machine:$m /out:k_$m.dll k_$m.obj
  rm -f k_$m.obj k_$m.lib
done
