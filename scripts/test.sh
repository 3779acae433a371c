#!/usr/bin/env bash
# The test command of the README: installs what the tests need, then runs every test of the
# workspace (library, CLI, differential tests against LLVM 22/19 and comgr). It turns on the
# tests that need tools or libraries from outside the repository
# (OFFLOAD_IMAGE_EXTERNAL_TESTS=1): here a missing one fails the run, it is never skipped.
# The drop-ins link the system's libzstd (feature system-zstd), as Debian's LLVM does, so
# that the differential tests can require compressed bundles byte-identical to LLVM 22's.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
export OFFLOAD_IMAGE_EXTERNAL_TESTS=1
# One build, not an edited tree: no incremental caches (they took 1.7 GB of disk).
export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"
cargo test --workspace --locked --features loader-sim/system-zstd "$@"
# The Python wheels of `pip wheel python/` and of an sdist, each installed into a fresh
# virtual environment, under pytest.
scripts/test-python.sh
