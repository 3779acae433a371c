#!/usr/bin/env bash
# Builds the Python wheel for distribution: the wheel `pip wheel python/` makes (the
# offload_image module (PyO3, stable ABI, CPython 3.9+), the loader-sim command and its
# runtime shim for `register --load`), but all linked with zig against glibc 2.17 so that the
# wheel is manylinux_2_17 (manylinux2014) and installs on common distributions.
#
#   scripts/build-wheel.sh [OUT_DIR]      (default: target/wheels)
#
# The build tools (maturin, zig) come from the package index into
# target/wheel-tools. The script checks that no file of the wheel needs a glibc symbol
# newer than 2.17 or a library other than glibc's and libgcc_s, and prints the wheel's path.
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-target/wheels}"
tools=target/wheel-tools
pins="maturin==1.16.0 ziglang==0.17.1"
if [ "$(cat "$tools/pins" 2>/dev/null)" != "$pins" ]; then
    rm -rf "$tools"
    python3 -m venv "$tools"
    # shellcheck disable=SC2086
    "$tools/bin/pip" install -q --disable-pip-version-check --no-cache-dir $pins
    echo "$pins" >"$tools/pins"
fi
export PATH="$PWD/$tools/bin:$PATH"
glibc=2.17
triple=x86_64-unknown-linux-gnu
# No debug information and no symbol table in the wheel (the dynamic symbols stay).
export CARGO_PROFILE_RELEASE_DEBUG=false CARGO_PROFILE_RELEASE_STRIP=symbols

# The command and its runtime shim, built by maturin as a binary wheel first, so that both
# builds share one set of compiler wrappers and flags (and the module's build reuses what
# this one compiled).
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
maturin build --release --locked --features vendored-zstd --zig --compatibility manylinux2014 \
    --target "$triple" -b bin -m loader-sim/Cargo.toml -o "$bin" >&2
python3 -m zipfile -e "$bin"/*.whl "$bin/x"

# The module; then the command (installed by pip into the environment's bin directory, wheel
# .data/scripts) and the shim (into <prefix>/lib, the ../lib where `register --load` looks
# for it beside <prefix>/bin/loader-sim) added to its wheel as the PEP 517 build backend of
# python/pyproject.toml adds them to the wheels that pip and `python -m build` make.
rm -f "$out"/offload_image-*.whl
maturin build --release --locked --features vendored-zstd --zig --compatibility manylinux2014 --target "$triple" \
    -m python/Cargo.toml -o "$out" >&2
wheel=$(ls "$out"/offload_image-*.whl)
python3 python/build_backend/offload_image_build.py add-data "$wheel" "$bin"/x/*.data/scripts/loader-sim \
    "${CARGO_TARGET_DIR:-target}/$triple/release/deps/libloader_sim_rt.so"

# No file may need a newer glibc than the tag says.
check="$bin/check"
python3 -m zipfile -e "$wheel" "$check"
newest=$(find "$check" -type f \( -name '*.so' -o -name loader-sim \) -exec objdump -T {} + |
    { grep -o 'GLIBC_[0-9.]*' || true; } | sed 's/GLIBC_//' | sort -V | tail -1)
[ -n "$newest" ] || { echo "build-wheel: no glibc symbol versions found in the wheel" >&2; exit 1; }
if [ "$(printf '%s\n%s\n' "$newest" "$glibc" | sort -V | tail -1)" != "$glibc" ]; then
    echo "build-wheel: a file of the wheel needs glibc $newest (the tag says $glibc)" >&2
    exit 1
fi
# ... and it may load only the libraries manylinux2014 lets a wheel assume (glibc's, libgcc_s).
needed=$(find "$check" -type f \( -name '*.so' -o -name loader-sim \) -exec objdump -p {} + |
    awk '/NEEDED/ {print $2}' | sort -u)
for lib in $needed; do
    case "$lib" in
    libc.so.6 | libm.so.6 | libdl.so.2 | librt.so.1 | libpthread.so.0 | libgcc_s.so.1 | ld-linux-x86-64.so.2) ;;
    *)
        echo "build-wheel: a file of the wheel needs $lib, which manylinux2014 does not provide" >&2
        exit 1
        ;;
    esac
done
echo "$wheel"
