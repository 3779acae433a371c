#!/usr/bin/env bash
# Fetches real ROCm libraries from Debian's archive (apt-get download + dpkg -x) into
# target/external/ for the tests and benchmarks that read real device code.
#
#   scripts/fetch-rocm-libs.sh                 # librocrand1 (25 MB of device code) and ROCr's
#                                              # libhsa-runtime64-1 (2.4 MB); used by cargo test
#   scripts/fetch-rocm-libs.sh librocsparse0   # also the 1.3 GB rocSPARSE library (README, benches)
#
# Result: target/external/unpacked/usr/lib/x86_64-linux-gnu/librocrand.so.1, libhsa-runtime64.so.1
# (and librocsparse.so.0).
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
dest="${OFFLOAD_IMAGE_EXTERNAL:-$here/target/external}"
mkdir -p "$dest/debs" "$dest/unpacked"
packages=(librocrand1 libhsa-runtime64-1 "$@")
cd "$dest/debs"
for p in "${packages[@]}"; do
  if ! ls "${p}"_*.deb >/dev/null 2>&1; then
    apt-get download "$p" >/dev/null 2>&1 || { apt-get update -qq && apt-get download "$p"; }
  fi
  deb=$(ls "${p}"_*.deb | head -n1)
  stamp="$dest/unpacked/.${deb}.unpacked"
  if [ ! -e "$stamp" ]; then
    dpkg -x "$deb" "$dest/unpacked"
    touch "$stamp"
  fi
done
echo "$dest/unpacked/usr/lib/x86_64-linux-gnu"
