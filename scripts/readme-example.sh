#!/usr/bin/env bash
# The README's Rust example, built and run as a plugin would: a crate of its own that depends
# on offload-image with default features only (the doc test of the same block runs with the
# tools' layer on, which the crate's own tests enable), in a `main` returning
# `Box<dyn std::error::Error>`. It must find the gfx90a code object of hip_nonrdc.exe.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/src"
cat >"$work/Cargo.toml" <<TOML
[package]
name = "readme-example"
version = "0.0.0"
edition = "2021"
publish = false

[dependencies]
offload-image = { path = "$repo" }

[workspace]
TOML
awk '/^```rust/ {f = 1; next} f && /^```/ {exit} f' "$repo/README.md" >"$work/src/main.rs"
[ -s "$work/src/main.rs" ] || { echo "README.md has no Rust example" >&2; exit 1; }
cp "$repo/Cargo.lock" "$work/"
CARGO_TARGET_DIR="$work/target" cargo build --offline --quiet --manifest-path "$work/Cargo.toml"
out="$(cd "$repo" && "$work/target/debug/readme-example")"
printf '%s\n' "$out"
grep -q '^load Some("hipv4-amdgcn-amd-amdhsa--gfx90a:xnack+")' <<<"$out" || {
  echo "the README's example did not choose the gfx90a:xnack+ code object" >&2
  exit 1
}
