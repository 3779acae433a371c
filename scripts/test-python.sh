#!/usr/bin/env bash
# The Python tests: builds the wheel (scripts/build-wheel.sh), installs it with pytest into a
# fresh virtual environment, and runs python/tests there against the installed module and
# command. The same wheel is also tested under the oldest (3.9) and newest CPython that pyenv
# has, where it has them: one stable-ABI wheel for all. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
wheel=$(scripts/build-wheel.sh)
ls -l "$wheel"
pythons=(python3)
if command -v pyenv >/dev/null 2>&1; then
    for v in $(pyenv versions --bare 2>/dev/null | grep -E '^3\.[0-9]+\.[0-9]+$' | sort -V |
        awk -F. '$2 >= 9' | sed -n '1p;$p' | sort -u); do
        pythons+=("$(pyenv root)/versions/$v/bin/python3")
    done
fi
for py in "${pythons[@]}"; do
    env="$root/target/py-test-env"
    rm -rf "$env"
    "$py" -m venv "$env"
    "$env/bin/pip" install -q --disable-pip-version-check --no-cache-dir pytest==8.4.2 "$wheel"
    echo "== python tests under $("$env/bin/python" --version)"
    # From outside the source tree, so that `import offload_image` finds the installed one.
    (cd python/tests && PATH="$env/bin:$PATH" "$env/bin/python" -m pytest -q -p no:cacheprovider "$@" .)
done
rm -rf "$root/target/py-test-env"
