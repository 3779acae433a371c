#!/usr/bin/env bash
# The Python tests: builds the wheel (scripts/build-wheel.sh), installs it with pytest into a
# fresh virtual environment, and runs python/tests there against the installed module and
# command. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
wheel=$(scripts/build-wheel.sh)
env=target/py-test-env
rm -rf "$env"
python3 -m venv "$env"
"$env/bin/pip" install -q --disable-pip-version-check pytest==8.4.2 "$wheel"
ls -l "$wheel"
# Run from outside the source tree, so that `import offload_image` finds the installed one.
cd python/tests
PATH="$PWD/../../$env/bin:$PATH" "../../$env/bin/python" -m pytest -q -p no:cacheprovider "$@" .
