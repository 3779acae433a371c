#!/usr/bin/env bash
# Remakes libthree.so: a linked HIP shared library with three translation units, so
# `.hip_fatbin` holds three bundles (4096-aligned) and `.hipFatBinSegment` three
# wrappers, each with an R_X86_64_RELATIVE relocation. The HIP runtime is replaced by
# hiprt_stub.c (from the project corpus), so no ROCm install is needed. Needs clang-22
# and lld-22.
set -euo pipefail
cd "$(dirname "$0")"
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
HIPF="-x hip --offload-arch=gfx906 --offload-arch=gfx90a:xnack+ --offload-arch=gfx1100 -nogpulib -nogpuinc -fPIC -O1"
for n in one two three; do
  cat > "$W/$n.hip" <<SRC
#define __global__ __attribute__((global))
typedef __SIZE_TYPE__ size_t;
struct dim3 { unsigned x, y, z; };
typedef struct ihipStream_t *hipStream_t;
extern "C" int hipLaunchKernel(const void *func, dim3 grid, dim3 block,
                               void **args, size_t shmem, hipStream_t stream);
__global__ void scale_$n(float *p, float s) {
  unsigned i = __builtin_amdgcn_workitem_id_x();
  p[i] = p[i] * s;
}
SRC
  clang-22 $HIPF -c "$W/$n.hip" -o "$W/$n.o"
done
clang-22 -O1 -fPIC -c hiprt_stub.c -o "$W/stub.o"
clang-22 -shared -fuse-ld=lld -o libthree.so "$W/one.o" "$W/two.o" "$W/three.o" "$W/stub.o"
sha256sum libthree.so
