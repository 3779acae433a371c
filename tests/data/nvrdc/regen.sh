#!/usr/bin/env bash
# Remakes librdc.so: a shared library of three CUDA translation units built by nvcc with
# relocatable device code for a.cu and b.cu (b defines a __device__ function a calls) and
# without it for c.cu. Needs nvcc from the nvidia-cuda-nvcc wheel (scripts/fetch-nvidia-toolkit.sh
# installs it under $OFFLOAD_IMAGE_EXTERNAL/nvidia-venv) and a host gcc.
set -euo pipefail
cd "$(dirname "$0")"
EXT=${OFFLOAD_IMAGE_EXTERNAL:-../../../target/external}
CUDA=$(echo "$EXT"/nvidia-venv/lib/python3*/site-packages/nvidia/cu13)
export PATH="$CUDA/bin:$PATH"
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
# nvcc links -lcudart; the wheel ships only the versioned name.
mkdir -p "$W/lib"
ln -s "$CUDA/lib/libcudart.so.13" "$W/lib/libcudart.so"
nvcc -rdc=true -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90 -Xcompiler -fPIC -c a.cu -o "$W/a.o"
nvcc -rdc=true -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90 -Xcompiler -fPIC -c b.cu -o "$W/b.o"
nvcc -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90 -Xcompiler -fPIC -c c.cu -o "$W/c.o"
nvcc -shared -rdc=true -cudart shared -L"$W/lib" -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90 "$W/a.o" "$W/b.o" "$W/c.o" -o librdc.so
sha256sum librdc.so
