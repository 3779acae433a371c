#!/usr/bin/env bash
# The test command of the README: installs what the tests need, then runs every test of the
# workspace (library, CLI, differential tests against LLVM 22/19 and comgr).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cargo test --workspace --locked "$@"
