#!/usr/bin/env bash
# Remakes librdc.so: a shared library of three CUDA translation units built by nvcc with
# relocatable device code for a.cu and b.cu (b defines a __device__ function a calls) and
# without it for c.cu, each for sm_80 and sm_90. Needs nvcc from the nvidia-cuda-nvcc wheel
# (scripts/fetch-nvidia-toolkit.sh installs it under $OFFLOAD_IMAGE_EXTERNAL/nvidia-venv) and
# a host gcc. nvlink records its command line in the library: the build runs in a scratch
# directory through relative paths, so no path of the building machine is recorded.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
EXT=${OFFLOAD_IMAGE_EXTERNAL:-$here/../../../target/external}
CUDA=$(echo "$EXT"/nvidia-venv/lib/python3*/site-packages/nvidia/cu13)
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
cp "$here"/a.cu "$here"/b.cu "$here"/c.cu "$W"/
cd "$W"
ln -s "$CUDA" cuda
# nvcc links -lcudart; the wheel ships only the versioned name.
mkdir lib
ln -s "$CUDA/lib/libcudart.so.13" lib/libcudart.so
export PATH="cuda/bin:$PATH"
ARCH="-gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90"
nvcc -rdc=true $ARCH -Xcompiler -fPIC -c a.cu -o a.o
nvcc -rdc=true $ARCH -Xcompiler -fPIC -c b.cu -o b.o
nvcc $ARCH -Xcompiler -fPIC -c c.cu -o c.o
nvcc -shared -rdc=true -cudart shared -Llib $ARCH a.o b.o c.o -o librdc.so
cp librdc.so "$here"/librdc.so
sha256sum "$here"/librdc.so
