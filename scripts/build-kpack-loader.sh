#!/usr/bin/env bash
# Builds rocm-kpack's C runtime loader (librocm_kpack, `runtime/` of the ROCm/rocm-kpack
# repository) and tests/data/kpack/oracle/kpack_probe.cpp, the driver that asks it for a host
# library's code object as the HIP runtime (CLR) would, into target/external/kpack-loader/.
#
#   scripts/build-kpack-loader.sh RK_SOURCE_DIR
#
# RK_SOURCE_DIR is a checkout of ROCm/rocm-kpack (the commit tests/data/kpack/PROVENANCE.md
# names); this script does not download it. The loader needs the header-only msgpack-c++ (Debian
# libmsgpack-cxx-dev, unpacked with dpkg -x, not installed) and libzstd (libzstd-dev). It is
# compiled with plain g++, as CMake would (C++17, -DMSGPACK_NO_BOOST), without CMake.
# Result: target/external/kpack-loader/kpack_probe. The oracle script
# tests/data/kpack/oracle/run.sh runs it; its recorded output is tests/data/kpack/oracle.json.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
rk="${1:?usage: scripts/build-kpack-loader.sh RK_SOURCE_DIR}"
rk="$(cd "$rk" && pwd)"
[ -f "$rk/runtime/src/loader.cpp" ] || { echo "no runtime/src/loader.cpp under $rk" >&2; exit 1; }
out="${KPACK_LOADER_DIR:-${OFFLOAD_IMAGE_EXTERNAL:-$here/target/external}/kpack-loader}"
mkdir -p "$out/deps"
if ! dpkg-query -W -f='${Status}' libzstd-dev 2>/dev/null | grep -q "install ok installed"; then
  apt-get install -y -qq --no-install-recommends libzstd-dev >/dev/null
fi
if [ ! -f "$out/deps/usr/include/msgpack.hpp" ]; then
  (cd "$out/deps" && { apt-get download libmsgpack-cxx-dev >/dev/null 2>&1 ||
    { apt-get update -qq && apt-get download libmsgpack-cxx-dev >/dev/null; }; } &&
    dpkg -x libmsgpack-cxx-dev_*.deb .)
fi
flags=(-std=c++17 -O1 -g -fPIC -DMSGPACK_NO_BOOST -DROCM_KPACK_STATIC
  -I"$rk/runtime/include" -I"$rk/runtime/src" -I"$out/deps/usr/include")
objs=()
for src in "$rk"/runtime/src/*.cpp; do
  obj="$out/$(basename "${src%.cpp}").o"
  g++ "${flags[@]}" -c "$src" -o "$obj"
  objs+=("$obj")
done
rm -f "$out/librocm_kpack.a"
ar rcs "$out/librocm_kpack.a" "${objs[@]}"
g++ "${flags[@]}" "$here/tests/data/kpack/oracle/kpack_probe.cpp" "$out/librocm_kpack.a" -lzstd \
  -o "$out/kpack_probe"
echo "$out/kpack_probe"
