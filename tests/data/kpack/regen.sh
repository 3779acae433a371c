#!/usr/bin/env bash
# Makes tests/data/kpack again: runs rocm-kpack's own splitter on librocrand1 (Debian) and on
# the JAX ROCm plugin (CCOB v3), picks the committed files (make.py), builds rocm-kpack's C
# loader and records what it answers for every case of oracle/run.py (oracle.json).
#
#   tests/data/kpack/regen.sh RK_SOURCE_DIR
#
# RK_SOURCE_DIR: a checkout of ROCm/rocm-kpack at the commit PROVENANCE.md names (this script
# downloads no source). Needs Python 3.12 (PYTHON312, default python3.12), binutils (objcopy),
# clang-offload-bundler-22 and -19, g++; fetches the inputs with scripts/fetch-rocm-libs.sh
# and scripts/fetch-jax-rocm.sh (OFFLOAD_IMAGE_EXTERNAL moves target/external). The JAX split
# takes about 15 minutes on 2 cores; its outputs stay in target/external/kpack-work and are
# reused (delete the folder to split again).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../../.." && pwd)"
rk="$(cd "${1:?usage: regen.sh RK_SOURCE_DIR}" && pwd)"
ext="${OFFLOAD_IMAGE_EXTERNAL:-$repo/target/external}"
work="${KPACK_WORK:-$ext/kpack-work}"
mkdir -p "$work"
rocrand_dir="$("$repo/scripts/fetch-rocm-libs.sh")"
jax_lib="$("$repo/scripts/fetch-jax-rocm.sh" jax-rocm7-pjrt==0.12.0)"
mkdir -p "$work/orig"
cp "$rocrand_dir/librocrand.so.1.1" "$work/orig/"
cp "$jax_lib" "$work/orig/xla_rocm_plugin.so"
cd "$work"
[ -x venv/bin/python ] || "${PYTHON312:-python3.12}" -m venv venv
venv/bin/pip install -q msgpack==1.2.4 zstandard==0.25.0

# The splitter as it is (writes "none"), and with KPACK.md's one-line change (zstd).
rm -rf rk rk-zstd
mkdir rk && cp -r "$rk/python" rk/
cp -r rk rk-zstd
sed -i 's/^\(\s*\)gfx_arches=\[arch\],$/&\n\1compressor=ZstdCompressor(),/' \
  rk-zstd/python/rocm_kpack/artifact_splitter.py
grep -q 'compressor=ZstdCompressor(),' rk-zstd/python/rocm_kpack/artifact_splitter.py

# librocrand: the layout of KPACK.md §5.
rm -rf in out-none out-zstd
S=in/rand_lib/math-libs/rocRAND/stage/lib
mkdir -p "$S"
cp orig/librocrand.so.1.1 "$S/"
ln -s librocrand.so.1.1 "$S/librocrand.so.1"
echo math-libs/rocRAND/stage > in/rand_lib/artifact_manifest.txt
for scheme in none zstd; do
  src=rk; [ "$scheme" = zstd ] && src=rk-zstd
  PYTHONPATH=$src/python venv/bin/python -m rocm_kpack.tools.split_artifacts \
    --artifact-dir in/rand_lib --output-dir "out-$scheme" --artifact-prefix rand_lib
done

# The JAX plugin, zstd only (its archives are repacked smaller by make.py in both schemes).
if [ ! -e outjax-zstd/jax_lib_generic/jax_plugins/xla_rocm7/xla_rocm_plugin.so ]; then
  rm -rf injax outjax-zstd
  S=injax/jax_lib/jax_plugins/xla_rocm7
  mkdir -p "$S"
  cp orig/xla_rocm_plugin.so "$S/"
  echo jax_plugins/xla_rocm7 > injax/jax_lib/artifact_manifest.txt
  PYTHONPATH=rk-zstd/python venv/bin/python -m rocm_kpack.tools.split_artifacts \
    --artifact-dir injax/jax_lib --output-dir outjax-zstd --artifact-prefix jax_lib
fi

PYTHONPATH=rk/python venv/bin/python "$here/make.py" "$work" "$here"
probe="$("$repo/scripts/build-kpack-loader.sh" "$rk")"
python3 "$here/oracle/run.py" "$probe" "$work" "$here"
