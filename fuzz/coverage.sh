#!/usr/bin/env bash
# Line coverage of the library by a fuzz target's corpus (fuzz/corpus/TARGET).
#
#   fuzz/coverage.sh TARGET [FILE-REGEX]     # e.g. fuzz/coverage.sh bundle 'bundle\.rs'
#
# Prints llvm-cov's per-file table of the library (filtered by FILE-REGEX) and its TOTAL.
#
# `cargo fuzz coverage` builds an instrumented binary and runs the corpus, but merges the
# profiles with the toolchain's llvm-profdata (the llvm-tools component, absent here): the
# merge and the report are done with LLVM 22's tools instead (LLVM_PROFDATA, LLVM_COV).
set -euo pipefail
cd "$(dirname "$0")"
target=${1:?usage: fuzz/coverage.sh TARGET [FILE-REGEX]}
files=${2:-.}
profdata=${LLVM_PROFDATA:-llvm-profdata-22}
cov=${LLVM_COV:-llvm-cov-22}
rm -rf "coverage/$target"
mkdir -p coverage
# Seeds that add coverage are merged into the grown corpus first (libFuzzer -merge=1).
./run.sh "$target" 0 -merge=1 > "coverage/$target.merge.log" 2>&1
# Ends with a failed merge when llvm-tools is missing; the raw profiles are there.
RUSTC_BOOTSTRAP=1 cargo fuzz coverage "$target" "corpus/$target" > "coverage/$target.log" 2>&1 \
    || mkdir -p "coverage/$target"
"$profdata" merge -sparse "coverage/$target/raw" -o "coverage/$target/coverage.profdata"
bin=target/x86_64-unknown-linux-gnu/coverage/x86_64-unknown-linux-gnu/release/$target
"$cov" report "$bin" -instr-profile="coverage/$target/coverage.profdata" \
    --ignore-filename-regex='(\.cargo|rustc|/fuzz/)' \
    | awk -v re="$files" 'NR <= 2 || $1 ~ re || $1 == "TOTAL"'
