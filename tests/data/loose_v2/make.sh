#!/bin/sh
# A host object whose .rodata.kernels holds, back to back (each at a 256-byte boundary),
# two AMDGPU code objects of version 2 made by LLVM 14's assembler (the last LLVM that
# writes v2: LLVM 19 and 22 refuse `--amdhsa-code-object-version=2`) for gfx803 and gfx900,
# (LLVM 14 writes the ISA note 8:0:3 and 9:0:1 — xnack on, its default for a v2 gfx900 —
# whatever the directive says), and the v4 gfx90a code object the committed jax kpack archive holds first (issue 45:
# ROCr's libhsa-runtime64 keeps v2 objects beside later ones in its data).
set -eu
cd "$(dirname "$0")"
tmp=$(mktemp -d)
for isa in "8,0,3 gfx803" "9,0,0 gfx900"; do
    set -- $isa
    printf '\t.text\n\t.hsa_code_object_version 2,1\n\t.hsa_code_object_isa %s,"AMD","AMDGPU"\n' "$1" > "$tmp/$2.s"
    llvm-mc-14 -triple amdgcn-amd-amdhsa -mcpu="$2" --amdhsa-code-object-version=2 -filetype=obj "$tmp/$2.s" -o "$tmp/$2.o"
done
python3 - "$tmp" <<'PY'
import sys
tmp = sys.argv[1]
kpack = open("../kpack/jax/none/jax_lib_gfx90a.kpack", "rb").read()
parts = [open(f"{tmp}/gfx803.o", "rb").read(), open(f"{tmp}/gfx900.o", "rb").read(), kpack[64:64 + 2432]]
blob = b""
for p in parts:
    blob += p + b"\0" * (-(len(blob) + len(p)) % 256)
open(f"{tmp}/blob", "wb").write(blob)
PY
printf '\t.text\n' > "$tmp/host.s"
llvm-mc-22 -triple x86_64-unknown-linux-gnu -filetype=obj "$tmp/host.s" -o "$tmp/host.o"
llvm-objcopy-22 --add-section .rodata.kernels="$tmp/blob" \
    --set-section-flags .rodata.kernels=alloc,readonly,contents "$tmp/host.o" host_v2.o
rm -r "$tmp"
