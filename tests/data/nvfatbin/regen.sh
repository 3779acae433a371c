#!/usr/bin/env bash
# Regenerates the NVIDIA fatbinary test corpus of this directory and its MANIFEST with
# NVIDIA's own tools from the Python package index (CPU-only: nvcc, ptxas, fatbinary,
# cuobjdump 13.x). The tools are installed into a virtual environment under target/.
#
#   tests/data/nvfatbin/regen.sh
#
# MANIFEST lines: `<file> <kind> <arch> <sha256>` for every image that
# `cuobjdump -xelf all -xptx all <file>` writes (kind elf|ptx, arch as in its file name),
# so the tests compare against cuobjdump without needing it. Files under malformed/ have
# no MANIFEST lines: the tests expect an error from them.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../../.." && pwd)"
venv="$repo/target/external/nvidia-venv"
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
fi
"$venv/bin/pip" install -q nvidia-cuda-nvcc nvidia-cuda-cuobjdump
bin="$(ls -d "$venv"/lib/python3*/site-packages/nvidia/cu*/bin | head -n1)"
export PATH="$bin:$PATH"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cd "$work"

cat > k.cu <<'EOF'
__global__ void scale(float *x, float a, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= a; }
__global__ void add(float *x, const float *y, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] += y[i]; }
EOF
cat > k2.cu <<'EOF'
__global__ void neg(float *x, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] = -x[i]; }
EOF
cat > main.cu <<'EOF'
__global__ void neg(float *x, int n);
int main() { return 0; }
EOF

nvcc -ptx -arch=compute_75 k.cu -o k75.ptx
nvcc -ptx -arch=compute_86 k.cu -o k86.ptx
nvcc -ptx -arch=compute_90a k.cu -o k90a.ptx
nvcc -ptx -arch=compute_100f k.cu -o k100f.ptx
nvcc -ptx -arch=compute_120 k.cu -o k120.ptx
ptxas -arch=sm_75 k75.ptx -o sm75.cubin
ptxas -arch=sm_80 k75.ptx -o sm80.cubin
ptxas -arch=sm_86 k86.ptx -o sm86.cubin
ptxas -arch=sm_90a k90a.ptx -o sm90a.cubin
ptxas -arch=sm_100f k100f.ptx -o sm100f.cubin
ptxas -arch=sm_100a k100f.ptx -o sm100a.cubin
ptxas -arch=sm_120 k120.ptx -o sm120.cubin

out="$here"
rm -rf "$out/files"
mkdir -p "$out/files" "$out/files/malformed"
mixed=(--image3=kind=elf,sm=75,file=sm75.cubin --image3=kind=elf,sm=86,file=sm86.cubin
  --image3=kind=ptx,sm=86,file=k86.ptx --image3=kind=elf,sm=90a,file=sm90a.cubin)
for mode in default size speed balance none; do
  fatbinary --64 --create="$out/files/mixed.$mode.fatbin" --compress-mode=$mode "${mixed[@]}"
  fatbinary --64 --create="$out/files/mixed.$mode.all.fatbin" --compress-mode=$mode --compress-all "${mixed[@]}"
done
fatbinary --64 --create="$out/files/ptx_only.fatbin" --image3=kind=ptx,sm=75,file=k75.ptx \
  --image3=kind=ptx,sm=86,file=k86.ptx --image3=kind=ptx,sm=120,file=k120.ptx
fatbinary --64 --create="$out/files/cubin_only.fatbin" --compress-mode=none \
  --image3=kind=elf,sm=75,file=sm75.cubin --image3=kind=elf,sm=80,file=sm80.cubin \
  --image3=kind=elf,sm=86,file=sm86.cubin --image3=kind=elf,sm=120,file=sm120.cubin
fatbinary --64 --create="$out/files/variants.fatbin" --compress-mode=none \
  --image3=kind=elf,sm=90a,file=sm90a.cubin --image3=kind=ptx,sm=90a,file=k90a.ptx \
  --image3=kind=elf,sm=100a,file=sm100a.cubin --image3=kind=elf,sm=100f,file=sm100f.cubin \
  --image3=kind=ptx,sm=100f,file=k100f.ptx --image3=kind=ptx,sm=120,file=k120.ptx
fatbinary --64 --device-c --create="$out/files/device_c.fatbin" \
  --image3=kind=elf,sm=86,file=sm86.cubin --image3=kind=ptx,sm=86,file=k86.ptx

gen=(-gencode arch=compute_75,code=sm_75 -gencode arch=compute_86,code=[sm_86,compute_86])
nvcc -c k.cu -o k.o "${gen[@]}"
nvcc -c k2.cu -o k2.o -gencode arch=compute_80,code=[sm_80,compute_80]
nvcc -rdc=true -c k2.cu -o k2_rdc.o -gencode arch=compute_86,code=sm_86
ar rcs "$out/files/libk.a" k.o k2.o
cp k.o "$out/files/host.o"
nvcc -cudart none -Xcompiler -fPIC -shared -o "$out/files/libk.so" k.cu k2.cu "${gen[@]}"
ln -sf "$bin/../lib/libcudart.so.13" libcudart.so
# A library that calls the CUDA runtime it NEEDs (libcudart.so.13) to register: what
# `loader-sim register --load` runs with the shim standing in for it.
nvcc -cudart shared -L. -Xcompiler -fPIC -shared -o "$out/files/libk_rt.so" k.cu k2.cu "${gen[@]}"
nvcc -cudart shared -L. -o "$out/files/prog" k.cu k2.cu main.cu -gencode arch=compute_86,code=sm_86
cp k2_rdc.o "$out/files/rdc.o"
# The corpus fatbinary that tests/data/corpus/nvptx/cuda_fatbin.offbin wraps.
cp "$repo/tests/data/corpus/nvptx/saxpy3.fatbin" "$out/files/"
strip -g "$out/files/prog" "$out/files/libk.so" "$out/files/libk_rt.so"

# nvlink records its command line (with absolute -L paths) in executables: blank the
# build machine's paths out (same length, so no offset moves) before the MANIFEST is made.
python3 - "$out/files" "$repo" <<'EOF'
import os, sys
d, repo = sys.argv[1], sys.argv[2].encode()
for name in os.listdir(d):
    p = os.path.join(d, name)
    if os.path.isfile(p):
        b = open(p, "rb").read()
        if repo in b:
            open(p, "wb").write(b.replace(repo, b"/" * len(repo)))
EOF

# Malformed fatbinaries, made from a valid one by the rules of NVFATBIN.md.
python3 - "$out/files" <<'EOF'
import struct, sys, os
d = sys.argv[1]
good = open(os.path.join(d, "device_c.fatbin"), "rb").read()
zs = open(os.path.join(d, "mixed.size.all.fatbin"), "rb").read()
m = os.path.join(d, "malformed")
def w(name, b): open(os.path.join(m, name), "wb").write(b)
w("truncated_header.fatbin", good[:10])
w("truncated_entry_header.fatbin", good[:16 + 20])
w("truncated_payload.fatbin", good[:len(good) - 40])
b = bytearray(good); struct.pack_into("<Q", b, 8, len(good) * 4); w("size_past_end.fatbin", bytes(b))
b = bytearray(good); struct.pack_into("<Q", b, 16 + 8, 1 << 40); w("entry_size_past_end.fatbin", bytes(b))
b = bytearray(good); struct.pack_into("<H", b, 16, 7); w("bad_kind.fatbin", bytes(b))
b = bytearray(good); struct.pack_into("<I", b, 16 + 4, 8); w("entry_header_too_small.fatbin", bytes(b))
b = bytearray(good); struct.pack_into("<H", b, 4, 9); w("bad_version.fatbin", bytes(b))
# Decompression bomb: the first compressed entry claims 1 TiB uncompressed.
b = bytearray(zs); struct.pack_into("<Q", b, 16 + 0x38, 1 << 40); w("bomb_claim.fatbin", bytes(b))
# The compressed payload decodes to more than the entry header claims.
b = bytearray(zs); struct.pack_into("<Q", b, 16 + 0x38, 16); w("bomb_short_claim.fatbin", bytes(b))
# Corrupt compressed payload.
b = bytearray(zs); h = struct.unpack_from("<I", b, 16 + 4)[0]
for i in range(16 + h, 16 + h + 24): b[i] ^= 0x5A
w("corrupt_payload.fatbin", bytes(b))
EOF

cd "$out/files"
manifest="$out/MANIFEST"
: > "$manifest"
for f in $(find . -type f ! -path './malformed/*' | sed 's|^\./||' | sort); do
  x="$work/x"; rm -rf "$x"; mkdir -p "$x"
  (cd "$x" && cuobjdump -xelf all -xptx all "$out/files/$f" >/dev/null 2>&1) || true
  for e in $(ls "$x" | sort); do
    kind=elf; case "$e" in *.ptx) kind=ptx ;; esac
    arch=$(echo "$e" | sed -E 's/.*\.(sm_[0-9]+[af]?)\.(cubin|ptx)$/\1/')
    echo "$f $kind $arch $(sha256sum "$x/$e" | cut -d' ' -f1)" >> "$manifest"
  done
done
# The real library of scripts/fetch-nvidia-libs.sh: its extraction only (the library is
# 167 MB and is not committed).
curand="$("$repo/scripts/fetch-nvidia-libs.sh")"
x="$work/x"; rm -rf "$x"; mkdir -p "$x"
(cd "$x" && cuobjdump -xelf all -xptx all "$curand" >/dev/null)
: > "$out/libcurand.MANIFEST"
for e in $(ls "$x" | sort); do
  kind=elf; case "$e" in *.ptx) kind=ptx ;; esac
  arch=$(echo "$e" | sed -E 's/.*\.(sm_[0-9]+[af]?)\.(cubin|ptx)$/\1/')
  echo "libcurand.so.10 $kind $arch $(sha256sum "$x/$e" | cut -d' ' -f1)" >> "$out/libcurand.MANIFEST"
done
rm -rf "$x"

{
  echo "# cuobjdump -lelf -lptx of every file, for reference"
  for f in $(find . -type f ! -path './malformed/*' | sed 's|^\./||' | sort); do
    echo "## $f"; cuobjdump -lelf -lptx "$f" 2>&1 || true
  done
  echo "# tools"; nvcc --version | tail -n2; cuobjdump --version | tail -n1
} | sed "s|$out/files/||g" > "$out/CUOBJDUMP.txt"
du -sh "$out/files"
