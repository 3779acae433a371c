#!/usr/bin/env bash
# Makes outer.bin: OffloadBinaries nested two deep, with LLVM 22's clang-offload-packager
# from the corpus's saxpy code objects (tests/data/corpus/devobj). Run from this directory.
#
#   outer.bin  [0] gfx90a code object
#              [1] mid.bin (arch nested, triple x-y-z, as LLVM's llvm-offload-binary.ll test
#                  names a nested binary)
#                    [1.0] gfx1100 code object
#                    [1.1] inner.bin (arch nested)
#                            [1.1.0] sm_70 cubin
#                            [1.1.1] gfx942:sramecc+:xnack- code object
#              [2] sm_70 cubin
set -euo pipefail
c=../corpus/devobj
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
cp "$c/saxpy.gfx90a.co" "$t/gfx90a.o"
cp "$c/saxpy.gfx1100.co" "$t/gfx1100.o"
cp "$c/saxpy.sm_70.cubin" "$t/sm_70.cubin"
cp "$c/saxpy.gfx942_sramecc+_xnack-.co" "$t/gfx942.o"
p=clang-offload-packager-22
(
  cd "$t"
  $p -o inner.bin \
    --image=file=sm_70.cubin,triple=nvptx64-nvidia-cuda,arch=sm_70,kind=openmp \
    --image=file=gfx942.o,triple=amdgcn-amd-amdhsa,arch=gfx942:sramecc+:xnack-,kind=openmp
  $p -o mid.bin \
    --image=file=gfx1100.o,triple=amdgcn-amd-amdhsa,arch=gfx1100,kind=openmp \
    --image=file=inner.bin,triple=x-y-z,arch=nested,kind=openmp
  $p -o outer.bin \
    --image=file=gfx90a.o,triple=amdgcn-amd-amdhsa,arch=gfx90a,kind=openmp \
    --image=file=mid.bin,triple=x-y-z,arch=nested,kind=openmp \
    --image=file=sm_70.cubin,triple=nvptx64-nvidia-cuda,arch=sm_70,kind=openmp
)
cp "$t/outer.bin" outer.bin
