#!/usr/bin/env bash
# Runs one cargo-fuzz target with its seeds from the reference corpus.
#
#   fuzz/run.sh TARGET [SECONDS] [libFuzzer options...]
#   fuzz/run.sh --list                 # the targets
#   fuzz/run.sh --all SECONDS          # build, then run every target for SECONDS (CI)
#   FUZZ_SANITIZER=none fuzz/run.sh TARGET 60   # without ASan (faster, stable without bootstrap)
#
# Builds with ASan on the stable toolchain (RUSTC_BOOTSTRAP=1 lets stable accept -Zsanitizer).
# The grown corpus goes to fuzz/corpus/TARGET (not committed); crashes to fuzz/artifacts/TARGET.
set -euo pipefail
cd "$(dirname "$0")"
self="$PWD/$(basename "$0")"
corpus=../tests/data/corpus

if [[ "${1:-}" == "--list" ]]; then
    RUSTC_BOOTSTRAP=1 cargo fuzz list
    exit 0
fi
if [[ "${1:-}" == "--all" ]]; then
    secs=${2:?usage: fuzz/run.sh --all SECONDS}
    san=()
    if [[ "${FUZZ_SANITIZER:-address}" == none ]]; then san=(-s none); fi
    RUSTC_BOOTSTRAP=1 cargo fuzz build "${san[@]}"
    log=$(mktemp)
    for t in $(RUSTC_BOOTSTRAP=1 cargo fuzz list); do
        echo "== fuzz $t (${secs} s)"
        rc=0
        "$self" "$t" "$secs" > "$log" 2>&1 || rc=$?
        # libFuzzer's summary lines only (seed loading and new units are noise in CI).
        grep -E '^#[0-9]+[[:space:]]+(INITED|DONE)|^Done' "$log" || true
        if [[ $rc -ne 0 ]]; then
            tail -n 60 "$log"
            echo "fuzz target $t failed (exit $rc)"
            rm -f "$log"
            exit 1
        fi
    done
    rm -f "$log"
    exit 0
fi
target=${1:?usage: fuzz/run.sh TARGET [SECONDS] [libFuzzer options...]}
secs=${2:-60}
shift $(( $# >= 2 ? 2 : 1 ))

# Seeds: the corpus files of the target's format; ID and stream targets get generated seeds.
seeds=()
case "$target" in
    bundle) seeds=("$corpus/bundles" "$corpus/nvptx/omp_nv_cubins.bundle") ;;
    text_bundle) seeds=("$corpus/text") ;;
    ccob) seeds=("$corpus/compressed" "$corpus/nvptx/omp_nv_cubins.v3-zstd.llvm22.ccob") ;;
    offload_binary) seeds=("$corpus/packager" "$corpus/nvptx") ;;
    nvfatbin) seeds=("$corpus/../nvfatbin/files" "$corpus/../nvfatbin/files/malformed") ;;
    kpack) seeds=("$corpus/../kpack/jax/.kpack" "$corpus/../kpack/jax/none" "$corpus/../kpack/rocrand/ref.msgpack"
                  "$corpus/../kpack/jax/ref.msgpack" "$corpus/../kpack/jax/wrappers.bin") ;;
    register) seeds=("$corpus/driver" "$corpus/bundles/host_elf.bundle.o" "$corpus/devobj/host.x86_64.o"
                     "$corpus/../damage/libthree.so") ;;
    pe) seeds=("$corpus/../pe") ;;
    prune) seeds=("$corpus/driver" "$corpus/bundles" "$corpus/compressed" "$corpus/../pe"
                  "$corpus/../nvfatbin/files" "$corpus/../damage/libthree.so" "$corpus/../nvrdc/librdc.so") ;;
    container | select) seeds=("$corpus/bundles" "$corpus/compressed" "$corpus/packager" "$corpus/text"
                               "$corpus/driver" "$corpus/nvptx" "$corpus/devobj" "$corpus/malformed"
                               "$corpus/../nvfatbin/files" "$corpus/../damage/libthree.so") ;;
esac
mkdir -p "corpus/$target"
# libFuzzer takes directories: single seed files are copied into the target's corpus.
dirs=()
for s in "${seeds[@]}"; do
    if [[ -d "$s" ]]; then dirs+=("$s"); else cp "$s" "corpus/$target/"; fi
done
seeds=("${dirs[@]}")
case "$target" in
    entry_id | target_id)
        # Every entry ID and target ID the manifest records, one per seed file.
        grep -oh '"\(entry_id\|target_id\|arch\|triple\)": "[^"]*"' "$corpus/MANIFEST.jsonl" \
            | sed 's/^"[a-z_]*": "//; s/"$//' | sort -u | while IFS= read -r id; do
                printf '%s' "$id" > "corpus/$target/seed-$(printf '%s' "$id" | md5sum | cut -c1-16)"
            done ;;
    registration_views)
        # Mode 1 with no patches is the valid template registration (see the target).
        printf '\x01' > "corpus/$target/seed-template"
        printf '\x01\x08\x00\x00\x00\x03\x00\x00\x00\x00' > "corpus/$target/seed-template-count0" ;;
    ccob_stream)
        # The compressed streams of the corpus CCOBs, behind the target's 5-byte prefix:
        # selector (bit 0 method, bits 1-2 version - 1) and the declared size (u32).
        for f in "$corpus"/compressed/*.ccob "$corpus"/nvptx/*.ccob; do
            read -r version method < <(od -An -tu2 -j4 -N4 "$f")
            case "$version" in 1) hdr=20 size_at=8 ;; 2) hdr=24 size_at=12 ;; *) hdr=32 size_at=16 ;; esac
            sel=$(( method | ((version - 1) << 1) ))
            out="corpus/$target/seed-$(basename "$f")"
            { printf "\\x$(printf %02x "$sel")"; dd if="$f" bs=1 skip="$size_at" count=4 status=none
              tail -c +"$((hdr + 1))" "$f"; } > "$out"
        done ;;
esac

# Aliasing shapes (issue 43): entries that all name one image, a fatbinary named by every
# entry, multi-frame and skippable-frame zstd payloads, zlib with bytes after the stream.
case "$target" in
    bundle | ccob | offload_binary | container | select | validate | prune | nvfatbin)
        if command -v python3 >/dev/null 2>&1; then
            python3 seeds/aliasing.py "corpus/$target" --fatbin "$corpus/../nvfatbin/files/device_c.fatbin"
        fi ;;
esac

# FUZZ_BIN: run an already built target binary (e.g. a saved copy) instead of building.
if [[ -n "${FUZZ_BIN:-}" ]]; then
    exec "$FUZZ_BIN" "corpus/$target" "${seeds[@]}" \
        -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 "$@"
fi
san=()
if [[ "${FUZZ_SANITIZER:-address}" == none ]]; then san=(-s none); fi
exec env RUSTC_BOOTSTRAP=1 cargo fuzz run "${san[@]}" "$target" "corpus/$target" "${seeds[@]}" -- \
    -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 "$@"
