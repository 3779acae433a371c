#!/usr/bin/env bash
# Issue 47: `loader-sim select` on jax-rocm7-pjrt 0.12.0's xla_rocm_plugin.so (459 MB, 45
# CCOB v3 zstd units in .hip_fatbin, 2.43 GB decompressed) with the hash verified, against
# `clang-offload-bundler-22 -list` over the same 45 units (each cut out, listed one after
# another), in the same run on the same machine. Prints median wall time, CPU time and peak
# RSS of each command and the ratio ours / peer (goal: <= 0.5 with the hash verified).
#
#   benches/xla.sh                 # 5 rounds
#   ROUNDS=3 benches/xla.sh
#
# Needs clang-tools-22, llvm-objcopy, python3, a C compiler; fetches the wheel with
# scripts/fetch-jax-rocm.sh (pip download). Every run is one process under
# benches/runtime.c (wall from a monotonic clock, peak RSS from wait4: the peer's shell
# loop reports the largest of its bundler runs). Each round runs every command once, the
# order rotating; one untimed run of each first (warm page cache).
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
cd "$here"
ROUNDS="${ROUNDS:-5}"
TARGET="gfx942:sramecc+:xnack-"
work="${BENCH_DIR:-$here/target/bench-xla}"
mkdir -p "$work/units" "$work/times"
rm -f "$work"/times/* "$work"/units/*

die() { echo "xla.sh: $*" >&2; exit 1; }
for t in clang-offload-bundler-22 llvm-objcopy python3 cc; do
  command -v "$t" >/dev/null || die "$t is missing (apt-get install clang-tools-22 llvm gcc)"
done
BUNDLER="$(command -v clang-offload-bundler-22)"

echo "== data"
lib="$(scripts/fetch-jax-rocm.sh | tail -n1)"
[ -e "$lib" ] || die "$lib is missing"
llvm-objcopy --dump-section ".hip_fatbin=$work/hip_fatbin.bin" "$lib" "$work/stripped.so"
rm -f "$work/stripped.so"
# Cut the units: each CCOB v2/v3 says its total size; the padding between is zeros.
python3 - "$work/hip_fatbin.bin" "$work/units" <<'EOF'
import struct, sys
data = open(sys.argv[1], "rb").read()
at, n = 0, 0
while True:
    at = data.find(b"CCOB", at)
    if at < 0:
        break
    version = struct.unpack_from("<H", data, at + 4)[0]
    if version == 3:
        total = struct.unpack_from("<Q", data, at + 8)[0]
    elif version == 2:
        total = struct.unpack_from("<I", data, at + 8)[0]
    else:
        sys.exit(f"unit at {at}: CCOB version {version}")
    open(f"{sys.argv[2]}/unit{n:03}.ccob", "wb").write(data[at:at + total])
    at, n = at + total, n + 1
print(f"{n} units")
EOF
units=$(ls "$work"/units | wc -l)
[ "$units" = 45 ] || die "expected 45 units, cut $units"

echo "== binaries"
cargo build --release --locked -p loader-sim 2>&1 | tail -n1
LS="$here/target/release/loader-sim"
cc -O2 -Wall -o "$work/runtime" benches/runtime.c
RUN="$work/runtime"
cat > "$work/peer.sh" <<EOF
#!/bin/sh
# clang-offload-bundler-22 -list over every unit, one after another.
for f in "$work"/units/*.ccob; do
  "$BUNDLER" -list -type=o "-input=\$f" || exit 2
done
EOF
chmod +x "$work/peer.sh"

declare -A CMD
CMD[ours]="$LS select $lib --target $TARGET"
CMD[ours_j1]="$LS select $lib --target $TARGET --jobs 1"
CMD[ours_j1_inline]="$LS select $lib --target $TARGET --jobs 1 --decode-thread never"
CMD[ours_nv]="$LS select $lib --target $TARGET --no-verify-hash"
CMD[peer]="$work/peer.sh"
names=(ours ours_j1 ours_j1_inline ours_nv peer)

run() { # run NAME MODE: "wall rss exit cpu" appended to times/NAME.MODE
  # shellcheck disable=SC2086
  "$RUN" -o "$work/$1.stdout" -- ${CMD[$1]} >> "$work/times/$1.$2" 2>> "$work/$1.stderr"
}
echo "== $ROUNDS rounds, $(nproc) CPUs"
for c in "${names[@]}"; do run "$c" untimed; done
n=${#names[@]}
for ((r = 0; r < ROUNDS; r++)); do
  for ((k = 0; k < n; k++)); do run "${names[$(((k + r) % n))]}" warm; done
done
echo "== load: $(uptime | sed 's/.*load average/load average/')"

echo "== checks"
fail=0
for c in "${names[@]}"; do
  if awk '$3 != 0 { bad = 1 } END { exit !bad }' "$work/times/$c.warm"; then
    echo "FAILED: a run of $c exited with an error (see $work/$c.stderr)"; fail=1
  fi
done
for c in ours_j1 ours_j1_inline ours_nv; do
  cmp -s "$work/ours.stdout" "$work/$c.stdout" || { echo "FAILED: $c prints other records than ours"; fail=1; }
done
records=$(grep -c "^section .hip_fatbin " "$work/ours.stdout" || true)
[ "$records" = 45 ] || { echo "FAILED: $records records, not 45"; fail=1; }
listed=$("$work/peer.sh" | grep -c "^hipv4-amdgcn-amd-amdhsa--" || true)
[ "$listed" -gt 0 ] || { echo "FAILED: the bundler lists no device entry"; fail=1; }
echo "45 records, the same for every command; the bundler lists $listed device entries"

med() { sort -g -k"$2","$2" "$1" | awk -v c="$2" '{ v[NR] = $c } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
echo
echo "Machine: $(nproc) CPUs, $(date -u +%F); $ROUNDS warm rounds, medians"
echo
echo "| command | wall | CPU | peak RSS | wall / peer |"
echo "|---|---|---|---|---|"
pw=$(med "$work/times/peer.warm" 1)
label() {
  case $1 in
    ours) echo "select, hash verified, default --jobs ($(nproc))" ;;
    ours_j1) echo "select, hash verified, --jobs 1 (decode thread)" ;;
    ours_j1_inline) echo "select, hash verified, --jobs 1 --decode-thread never" ;;
    ours_nv) echo "select --no-verify-hash" ;;
    peer) echo "clang-offload-bundler-22 -list x 45 (peer)" ;;
  esac
}
for c in "${names[@]}"; do
  f="$work/times/$c.warm"
  awk -v l="$(label "$c")" -v w="$(med "$f" 1)" -v m="$(med "$f" 2)" -v u="$(med "$f" 4)" -v p="$pw" \
    'BEGIN { printf "| %s | %.3f s | %.3f s | %.1f MiB | %.3f |\n", l, w, u, m / 1024, w / p }'
done
# The MD5 of 2.43 GB is work no thread can skip: one core's share of it bounds the
# verified run from below (CPU of the inline run minus that of --no-verify-hash is MD5
# plus decoding the part the unverified run skips).
awk -v a="$(med "$work/times/ours_j1_inline.warm" 4)" -v b="$(med "$work/times/ours_nv.warm" 4)" -v c="$(nproc)" -v p="$pw" \
  'BEGIN { d = a - b; printf "\nverified minus unverified CPU: %.3f s (MD5 of 2.43 GB and the rest of the decode: %.0f MB/s); spread over %d CPUs: %.3f s = %.3f of the peer\n", d, 2436.9 / d, c, d / c, d / c / p }'
echo
echo "goal (issue 47): select with the hash verified <= 0.5 x the peer"
[ $fail = 0 ] || exit 1
