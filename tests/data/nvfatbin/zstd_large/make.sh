#!/usr/bin/env bash
# Remakes zstd_large.fatbin and MANIFEST with CUDA 13.5's nvcc, fatbinary and cuobjdump from
# the package index (pip install nvidia-cuda-nvcc==13.5.37 nvidia-cuda-cuobjdump; their bin/
# on PATH). Issue 47: a zstd cubin larger than one zstd block (128 KiB), so that choosing
# and checking it can be shown to decode only its first blocks.
#
#   PATH=.../nvidia/cu13/bin:$PATH tests/data/nvfatbin/zstd_large/make.sh
#
# sm_86: a small kernel (5,416 bytes, one block); sm_90: 12,000 FMAs on a __constant__
# table of 12,000 floats (339,696 bytes, six blocks). `--compress-mode=size
# --compress-all` stores both as zstd frames. Compiling the large kernel takes minutes.
set -euo pipefail
out="$(cd "$(dirname "$0")" && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cd "$work"
cat > small.cu <<'CU'
__global__ void big(float *x, const float *y, int n) {
  int t = blockIdx.x * blockDim.x + threadIdx.x;
  float a = x[t], b = y[t];
#pragma unroll
  for (int i = 0; i < 12000; i++) { a = a * b + (float)(i * 7 + 3); b = b - a * 0.5f; }
  x[t] = a + b;
}
CU
python3 - <<'PY'
N = 12000
vals = [((i * 2654435761) % 1000003) / 1000003.0 + 0.5 for i in range(N)]
with open('big.cu', 'w') as f:
    f.write('__constant__ float c[%d] = {%s};\n' % (N, ','.join('%.7ff' % v for v in vals)))
    f.write('__global__ void big(float *x, const float *y) {\n  int t = blockIdx.x * blockDim.x + threadIdx.x;\n  float a = x[t], b = y[t];\n')
    for i in range(N):
        f.write('  a = __fmaf_rn(a, b, c[%d]);\n' % i if i % 2 == 0 else '  b = __fmaf_rn(b, a, c[%d]);\n' % i)
    f.write('  x[t] = a + b;\n}\n')
PY
nvcc -cubin -arch=sm_86 small.cu -o big86.cubin
nvcc -cubin -arch=sm_90 big.cu -o big90.cubin
fatbinary --64 --create="$out/zstd_large.fatbin" --compress-mode=size --compress-all \
  --image3=kind=elf,sm=86,file=big86.cubin --image3=kind=elf,sm=90,file=big90.cubin
mkdir x && cd x
cuobjdump -xelf all "$out/zstd_large.fatbin" > /dev/null
for f in $(ls | sort -t. -k2,2n); do echo "$f $(sha256sum "$f" | cut -d' ' -f1)"; done > "$out/MANIFEST"
