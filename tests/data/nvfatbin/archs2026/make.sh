#!/usr/bin/env bash
# Remakes new_archs.fatbin and MANIFEST (README.md) with CUDA 13.5's nvcc, ptxas, fatbinary
# and cuobjdump from the package index (pip install nvidia-cuda-nvcc==13.5.37
# nvidia-cuda-cuobjdump; their bin/ on PATH).
#
#   PATH=.../nvidia/cu13/bin:$PATH tests/data/nvfatbin/archs2026/make.sh
set -euo pipefail
out="$(cd "$(dirname "$0")" && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cd "$work"
cat > k.cu <<'CU'
__global__ void scale(float *x, float a, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= a; }
CU
for a in sm_88 sm_103a sm_103f sm_107 sm_107a sm_107f sm_110 sm_110a sm_110f sm_121; do
  nvcc -cubin -arch=$a k.cu -o k.$a.cubin
done
for a in compute_88 compute_107a compute_110f; do nvcc -ptx -arch=$a k.cu -o k.$a.ptx; done
images=()
for a in 88 103a 103f 107 107a 107f 110 110a 110f 121; do images+=(--image3=kind=elf,sm=$a,file=k.sm_$a.cubin); done
for a in 88 107a 110f; do images+=(--image3=kind=ptx,sm=$a,file=k.compute_$a.ptx); done
fatbinary --create="$out/new_archs.fatbin" "${images[@]}"
mkdir x && cd x
cuobjdump -xelf all -xptx all "$out/new_archs.fatbin" > /dev/null
for f in $(ls | sort -t. -k2,2n -k4); do echo "$f $(sha256sum "$f" | cut -d' ' -f1)"; done > "$out/MANIFEST"
