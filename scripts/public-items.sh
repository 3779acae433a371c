#!/usr/bin/env bash
# The library's public items reachable from its root (rustdoc JSON, feature `write`): the total
# and the count per module of the root, failing above the limit (docs/ARCHITECTURE.md, "Tiers").
# With the tools' layer (feature `tools`) the count is printed too, for information.
#
# Counted: every item reachable from the crate root but impl blocks and the members of trait
# impls: struct fields, enum variants, methods, constants and re-exports (`use`) included
# (scripts/public_items.py). Usage: scripts/public-items.sh [LIMIT]
set -euo pipefail
cd "$(dirname "$0")/.."
limit=${1:-500}
target=${CARGO_TARGET_DIR:-target}/public-items
json() {
    # rustdoc's JSON output is unstable: RUSTC_BOOTSTRAP lets the stable toolchain write it.
    RUSTC_BOOTSTRAP=1 CARGO_TARGET_DIR=$target cargo rustdoc --locked -q -p offload-image --lib \
        --features "$1" -- -Z unstable-options --output-format json
    echo "$target/doc/offload_image.json"
}
python3 scripts/public_items.py "$(json write)" --label "feature write" --limit "$limit"
python3 scripts/public_items.py "$(json write,tools)" --label "features write, tools; informational"
