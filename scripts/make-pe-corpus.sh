#!/usr/bin/env bash
# Builds the PE/COFF test corpus of tests/data/pe/ with LLVM 22 (clang-22, lld-link-22,
# llvm-lib-22, llvm-ar-22, clang-offload-bundler-22) and NVIDIA's ptxas/fatbinary from the
# CUDA wheels (scripts/fetch-nvidia-toolkit.sh), following the recipes of docs/PE.md, and
# records what LLVM's and NVIDIA's tools extract from every container of those files in
# tests/data/pe/ORACLES.json (scripts/pe-oracles.py). With the fetched Windows wheels
# (scripts/fetch-windows-wheels.sh) it records the same for their DLLs and .pyd in
# tests/data/pe/REAL_ORACLES.json (the files themselves are not committed).
#
#   scripts/make-pe-corpus.sh            # corpus + ORACLES.json + REAL_ORACLES.json
#
# Outputs (tests/data/pe/PROVENANCE.md describes each):
#   k.obj k2.obj    HIP objects, classic driver: one bundle in .hip_fatbin (gfx90a, gfx1100)
#   k3z.obj         HIP object, --offload-compress: one CCOB v3 (zstd)
#   knr.obj         HIP object, new driver -fgpu-rdc: OffloadBinaries in .llvm.offloading
#   k3.dll          k.obj k2.obj k3z.obj linked by lld-link: 3 wrappers, 2 bundles + 1 CCOB
#   knr.dll         knr.obj linked by the new driver: .hip_fat, .hipFatB, llvm_off, .llvm
#   fat.obj         clang-offload-bundler -type=o fat object (__CLANG_OFFLOAD_BUNDLE__ sections)
#   fat.lib         llvm-ar archive of fat.obj and k2.obj
#   kc.obj kc2.obj  CUDA objects: one fatbinary each in .nv_fatbin (sm_75+sm_86 cubins, PTX)
#   kc.dll          kc.obj kc2.obj linked by lld-link: 2 fatbinaries in .nv_fatb
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
out="$repo/tests/data/pe"
cuda="$("$repo/scripts/fetch-nvidia-toolkit.sh")"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cd "$work"

# Kernels without the HIP/CUDA headers: the attributes, dim3 and the launch API clang's
# code generation looks up (it stops without them: "Can't find declaration for ...").
for api in hip cuda; do
  [ $api = hip ] && stream=ihipStream_t || stream=CUstream_st
  cat > $api.h <<EOF
#define __global__ __attribute__((global))
#define __device__ __attribute__((device))
#define __host__ __attribute__((host))
struct dim3 { unsigned x, y, z; };
typedef struct $stream *${api}Stream_t;
extern "C" int ${api}LaunchKernel(const void *, dim3, dim3, void **, __SIZE_TYPE__, ${api}Stream_t);
extern "C" unsigned __${api}PushCallConfiguration(dim3, dim3, __SIZE_TYPE__, ${api}Stream_t);
extern "C" unsigned __${api}PopCallConfiguration(dim3 *, dim3 *, __SIZE_TYPE__ *, ${api}Stream_t *);
EOF
done
echo '#include "hip.h"
extern "C" __global__ void scale(float *x, float a) { x[0] *= a; }' > k.hip
echo '#include "hip.h"
extern "C" __global__ void add(float *x, const float *y) { x[0] += y[0]; }' > k2.hip
echo '#include "hip.h"
extern "C" __global__ void neg(float *x) { x[0] = -x[0]; }' > k3.hip
echo '#include "cuda.h"
extern "C" __global__ void scale(float *x, float a) { x[0] *= a; }' > kc.cu
echo '#include "cuda.h"
extern "C" __global__ void neg(float *x) { x[0] = -x[0]; }' > kc2.cu
# What a DLL built with /nodefaultlib needs of the C runtime.
echo 'int _fltused = 0;
int atexit(void (*f)(void)) { (void)f; return 0; }' > crtstub.c
# Import libraries of the runtimes the wrappers' constructors call.
{ echo "LIBRARY amdhip64_7.dll"; echo EXPORTS
  for f in hipLaunchKernel __hipPushCallConfiguration __hipPopCallConfiguration \
    __hipRegisterFatBinary __hipRegisterFunction __hipRegisterVar __hipUnregisterFatBinary \
    __hipRegisterSurface __hipRegisterTexture __hipRegisterManagedVar; do echo "$f"; done
} > amdhip64.def
{ echo "LIBRARY cudart64_13.dll"; echo EXPORTS
  for f in cudaLaunchKernel __cudaPushCallConfiguration __cudaPopCallConfiguration \
    __cudaRegisterFatBinary __cudaRegisterFatBinaryEnd __cudaRegisterFunction \
    __cudaRegisterVar __cudaUnregisterFatBinary; do echo "$f"; done
} > cudart64_13.def

# -mno-incremental-linker-compatible: objects with a zero timestamp (not the time of the run).
win=(--target=x86_64-pc-windows-msvc -mno-incremental-linker-compatible)
H=(-x hip --offload-arch=gfx90a --offload-arch=gfx1100 -nogpulib -nogpuinc "${win[@]}" -O2)
clang-22 "${H[@]}" -c k.hip -o k.obj
clang-22 "${H[@]}" -c k2.hip -o k2.obj
clang-22 "${H[@]}" --offload-compress -c k3.hip -o k3z.obj
clang-22 "${H[@]}" --offload-new-driver -fgpu-rdc -c k.hip -o knr.obj
clang-22 "${win[@]}" -O2 -c crtstub.c -o crtstub.obj
llvm-lib-22 /def:amdhip64.def /machine:x64 /out:amdhip64.lib
llvm-lib-22 /def:cudart64_13.def /machine:x64 /out:cudart64_13.lib
# /Brepro: a timestamp from the contents, so the files do not change from run to run.
lld-link-22 /dll /noentry /nodefaultlib /Brepro k.obj k2.obj k3z.obj crtstub.obj amdhip64.lib \
  /out:k3.dll
clang-22 "${win[@]}" --offload-new-driver -fgpu-rdc --hip-link --offload-arch=gfx90a \
  --offload-arch=gfx1100 -nogpulib -fuse-ld=lld -shared -nostdlib -Wl,/noentry -Wl,/Brepro \
  knr.obj crtstub.obj amdhip64.lib -o knr.dll

# A fat object of the bundler (FORMATS.md §2.5) and an archive holding it.
clang-22 -x hip --offload-arch=gfx90a -nogpulib -nogpuinc --offload-device-only -O2 -c k.hip \
  -o gfx90a.co
clang-22 -x hip --offload-arch=gfx1100 -nogpulib -nogpuinc --offload-device-only -O2 -c k.hip \
  -o gfx1100.co
clang-offload-bundler-22 -type=o \
  -targets=host-x86_64-pc-windows-msvc,hipv4-amdgcn-amd-amdhsa--gfx90a,hipv4-amdgcn-amd-amdhsa--gfx1100 \
  -input=crtstub.obj -input=gfx90a.co -input=gfx1100.co -output=fat.obj
llvm-ar-22 rc fat.lib fat.obj k2.obj

# CUDA (clang 22 knows CUDA up to 12.9 and takes the 13.x tree with a warning).
C=(-x cuda -nocudalib -nocudainc "${win[@]}" --cuda-path="$cuda" -O2 -Wno-unknown-cuda-version)
PATH="$cuda/bin:$PATH" clang-22 "${C[@]}" --cuda-gpu-arch=sm_75 --cuda-gpu-arch=sm_86 \
  --cuda-include-ptx=sm_86 -c kc.cu -o kc.obj
PATH="$cuda/bin:$PATH" clang-22 "${C[@]}" --cuda-gpu-arch=sm_86 -c kc2.cu -o kc2.obj
lld-link-22 /dll /noentry /nodefaultlib /Brepro kc.obj kc2.obj crtstub.obj cudart64_13.lib \
  /out:kc.dll

mkdir -p "$out"
files=(k.obj k2.obj k3z.obj knr.obj k3.dll knr.dll fat.obj fat.lib kc.obj kc2.obj kc.dll)
for f in "${files[@]}"; do
  if grep -q "$work" "$f"; then
    echo "make-pe-corpus: $f records the build directory" >&2
    exit 1
  fi
  cp "$f" "$out/$f"
done
cd "$out"
python3 "$repo/scripts/pe-oracles.py" --cuda "$cuda" "${files[@]}" > "$out/ORACLES.json"
real="$("$repo/scripts/fetch-windows-wheels.sh")"
(cd "$real" && python3 "$repo/scripts/pe-oracles.py" --cuda "$cuda" \
  cu12/curand64_10.dll cu13/curand64_10.dll hip-quant-0.4.3/hip_quantize.dll \
  hip-quant-0.4.7/hip_quantize.dll hip-quant-0.4.7/hip_quantize_rocm721.dll \
  hip-quant-2.2.4/hip_quantize.dll hip-quant-2.2.4/hip_quantize_rocm721.dll \
  hip-quant-2.2.4/_C.cp312-win_amd64.pyd) > "$out/REAL_ORACLES.json"
du -ch "${files[@]}" | tail -n1
