#!/usr/bin/env bash
# Builds the C API (crate offload-image-capi) and installs it:
#   capi/install.sh [--prefix DIR] [--destdir DIR] [--debug] [--no-build]
# installs, under DESTDIR/PREFIX (default prefix /usr/local):
#   include/offload_image.h
#   lib/liboffload_image.a
#   lib/liboffload_image.so.VERSION, with links liboffload_image.so.0 (its soname) and .so
#   lib/pkgconfig/offload_image.pc
# Then: cc prog.c $(pkg-config --cflags --libs offload_image)            (shared)
#       cc prog.c $(pkg-config --cflags --libs --static offload_image)   (+ system libs
#       of the static library; link lib/liboffload_image.a itself to avoid the .so)
set -euo pipefail
cd "$(dirname "$0")/.."
prefix=/usr/local
destdir=
profile=release
build=1
while [ $# -gt 0 ]; do
  case "$1" in
    --prefix) prefix=$2; shift 2 ;;
    --prefix=*) prefix=${1#*=}; shift ;;
    --destdir) destdir=$2; shift 2 ;;
    --destdir=*) destdir=${1#*=}; shift ;;
    --debug) profile=debug; shift ;;
    --no-build) build=0; shift ;;
    *) echo "usage: $0 [--prefix DIR] [--destdir DIR] [--debug] [--no-build]" >&2; exit 2 ;;
  esac
done
if [ "$build" = 1 ]; then
  if [ "$profile" = release ]; then
    cargo build --locked --release -p offload-image-capi
  else
    cargo build --locked -p offload-image-capi
  fi
fi
out=${CARGO_TARGET_DIR:-target}/$profile
version=$(sed -n 's/^version = "\(.*\)"/\1/p' capi/Cargo.toml | head -1)
major=${version%%.*}
lib=$destdir$prefix/lib
inc=$destdir$prefix/include
mkdir -p "$lib/pkgconfig" "$inc"
install -m 644 capi/include/offload_image.h "$inc/offload_image.h"
install -m 644 "$out/liboffload_image.a" "$lib/liboffload_image.a"
install -m 755 "$out/liboffload_image.so" "$lib/liboffload_image.so.$version"
ln -sf "liboffload_image.so.$version" "$lib/liboffload_image.so.$major"
ln -sf "liboffload_image.so.$major" "$lib/liboffload_image.so"
# Libs.private: what rustc reports for a staticlib on Linux (--print native-static-libs).
cat > "$lib/pkgconfig/offload_image.pc" <<PC
prefix=$prefix
libdir=\${prefix}/lib
includedir=\${prefix}/include

Name: offload_image
Description: Reader and selector of GPU offload device images (clang offload bundles, CCOB, OffloadBinary, NVIDIA fatbinaries, AMD .kpack archives), with the reasons for each choice
Version: $version
Cflags: -I\${includedir}
Libs: -L\${libdir} -loffload_image
Libs.private: -lgcc_s -lutil -lrt -lpthread -lm -ldl -lc
PC
echo "installed offload_image $version in $destdir$prefix"
