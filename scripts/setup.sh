#!/usr/bin/env bash
# Installs what the test suite needs on a fresh Debian 12 machine (run as root):
# LLVM 22 and 19 tools (reference outputs), AMD comgr (reference selection), and the real
# ROCm library librocrand1 from Debian's archive (into target/external/), and a CUDA 13 tree
# from NVIDIA's Python wheels (into target/external/nvidia-venv: clang's CUDA driver and
# cuobjdump for loader-sim/tests/suite/cuda_program.rs and benches/nvfatbin.sh), and the Windows
# wheels whose PE DLLs and .pyd hold device code (into target/external/windows: tests/suite/pe.rs),
# and libggml-hip of the cyllama-rocm wheel (tests/suite/damage.rs, loader-sim's doctor and prune tests),
# and the CUDA and mojolearn-amd wheels doctor's verdicts are checked on (into
# target/external/verdict-wheels: loader-sim/tests/suite/doctor_verdicts.rs).
set -euo pipefail
cd "$(dirname "$0")/.."
packages=(clang-22 clang-tools-22 llvm-22 lld-22 clang-19 clang-tools-19 llvm-19 libamd-comgr-dev
  g++ pkg-config binutils libzstd-dev valgrind)  # g++, binutils, valgrind: C API tests; pkg-config, libzstd-dev: the system libzstd of feature system-zstd (scripts/test.sh), as Debian's LLVM links it
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
scripts/fetch-rocm-libs.sh >/dev/null
scripts/fetch-nvidia-toolkit.sh >/dev/null
scripts/fetch-nvidia-libs.sh >/dev/null
scripts/fetch-windows-wheels.sh >/dev/null
scripts/fetch-cyllama-rocm.sh >/dev/null
scripts/fetch-verdict-wheels.sh >/dev/null
scripts/fetch-publish-oracles.sh >/dev/null
