#!/usr/bin/env bash
# The Python tests: builds the wheel by the standard routes, `pip wheel --no-deps python/`
# and an sdist (`python -m build --sdist python/`) built into a wheel by pip, checks that the
# two wheels hold the same files (the module, the loader-sim command, the runtime shim),
# installs each with pytest into a fresh virtual environment, and runs python/tests there
# against the installed module and command. The sdist's wheel is also tested under the
# oldest (3.9) and newest CPython that pyenv has, where it has them: one stable-ABI wheel for
# all; mypy --strict checks python/tests and python/examples against the installed package.
# Extra arguments go to pytest.
#
# Both builds use the workspace's target directory (the sdist's build too, through
# CARGO_TARGET_DIR), so the second compiles only the workspace's own crates again; they run
# without OFFLOAD_IMAGE_EXTERNAL_TESTS (a cfg of the crates' tests, from their build
# scripts), so that they reuse the release build of the README's first command.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$root/target}"
work="$root/target/py-test"
rm -rf "$work"
mkdir -p "$work"
pip_q=(-q --disable-pip-version-check --no-cache-dir)

# The build front end (pip builds the wheels; `build` makes the sdist).
python3 -m venv "$work/tools"
"$work/tools/bin/pip" install "${pip_q[@]}" build==1.6.1
build=(env -u OFFLOAD_IMAGE_EXTERNAL_TESTS)
"${build[@]}" "$work/tools/bin/pip" wheel "${pip_q[@]}" --no-deps -w "$work/tree" python/ >&2
"${build[@]}" "$work/tools/bin/python" -m build --sdist -o "$work/sdist" python/ >&2
"${build[@]}" "$work/tools/bin/pip" wheel "${pip_q[@]}" --no-deps -w "$work/from-sdist" "$work"/sdist/offload_image-*.tar.gz >&2
tree=$(ls "$work"/tree/offload_image-*.whl)
sdist=$(ls "$work"/from-sdist/offload_image-*.whl)
ls -l "$tree" "$sdist"

# Both hold the same files, among them the command and the shim (the sdist's wheel also has
# the license file that maturin finds at the sdist's top, dist-info/licenses/LICENSE.txt).
files() {
    python3 -c 'import sys, zipfile; print("\n".join(sorted(zipfile.ZipFile(sys.argv[1]).namelist())))' "$1" |
        grep -v '\.dist-info/licenses/'
}
if ! diff <(files "$tree") <(files "$sdist"); then
    echo "test-python: the wheels of python/ and of its sdist hold different files" >&2
    exit 1
fi
for f in offload_image-0.1.0.data/scripts/loader-sim offload_image-0.1.0.data/data/lib/libloader_sim_rt.so offload_image/__init__.py; do
    files "$tree" | grep -qx "$f" || { echo "test-python: the wheel lacks $f" >&2; exit 1; }
done

pythons=(python3)
if command -v pyenv >/dev/null 2>&1; then
    for v in $(pyenv versions --bare 2>/dev/null | grep -E '^3\.[0-9]+\.[0-9]+$' | sort -V |
        awk -F. '$2 >= 9' | sed -n '1p;$p' | sort -u); do
        pythons+=("$(pyenv root)/versions/$v/bin/python3")
    done
fi
run() { # PYTHON WHEEL [pytest args]
    local py=$1 wheel=$2 env="$work/env"
    shift 2
    rm -rf "$env"
    "$py" -m venv "$env"
    "$env/bin/pip" install "${pip_q[@]}" pytest==8.4.2 "$wheel"
    echo "== python tests of $(basename "$(dirname "$wheel")")/$(basename "$wheel") under $("$env/bin/python" --version)"
    # From outside the source tree, so that `import offload_image` finds the installed one.
    (cd python/tests && PATH="$env/bin:$PATH" "$env/bin/python" -m pytest -q -p no:cacheprovider "$@" .)
}
run python3 "$tree" "$@"
# The types: the tests and the examples against the installed package (its py.typed and
# _native.pyi), mypy --strict.
"$work/env/bin/pip" install "${pip_q[@]}" mypy==2.4.1
(cd python/tests && "$work/env/bin/python" -m mypy --strict --cache-dir "$work/mypy-cache" . ../examples)
for py in "${pythons[@]}"; do
    run "$py" "$sdist" "$@"
done
rm -rf "$work"
