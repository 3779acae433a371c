#!/usr/bin/env bash
# Fetches a JAX ROCm PJRT plugin wheel from the Python package index (pip download, no
# install), unpacks it into target/external/<name>/wheel and prints the path of its
# xla_rocm_plugin.so (a real HIP library: .hip_fatbin with one bundle per translation unit).
#
#   scripts/fetch-jax-rocm.sh                          # jax-rocm7-pjrt==0.12.0: 45 CCOB v3 (zstd)
#   scripts/fetch-jax-rocm.sh jax-rocm60-pjrt==0.5.0   # ROCm 6.0 build: 29 uncompressed bundles
#
# Used by scripts/check-jax-rocm.sh and by the ignored test `jax_rocm_plugins` of
# loader-sim/tests/suite/prune.rs. OFFLOAD_IMAGE_EXTERNAL moves target/external.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
spec="${1:-jax-rocm7-pjrt==0.12.0}"
name="${spec%%==*}"
work="${OFFLOAD_IMAGE_EXTERNAL:-$here/target/external}/$name"
mkdir -p "$work"
cd "$work"
wheel_glob="${name//-/_}-*.whl"
# shellcheck disable=SC2086
ls $wheel_glob >/dev/null 2>&1 || python3 -m pip download --quiet --no-deps "$spec" -d . >&2
# shellcheck disable=SC2086
[ -d wheel ] || { mkdir wheel && (cd wheel && python3 -m zipfile -e ../$wheel_glob .); }
lib=$(find wheel -name 'xla_rocm_plugin.so' | head -n1)
[ -n "$lib" ] || { echo "fetch-jax-rocm.sh: no xla_rocm_plugin.so in $spec" >&2; exit 1; }
echo "$work/$lib"
