#!/usr/bin/env bash
# Issue 24: `loader-sim list`, `select` and `doctor` on a Windows DLL against the same work on
# the Linux library of the same package, side by side in the same run on the same machine;
# prints the median wall time, CPU time (user + system, every thread) and peak RSS per
# command and the ratios DLL / Linux (goal: within 1.2x).
#
#   benches/pe.sh                     # 7 warm rounds
#   ROUNDS=11 benches/pe.sh
#
# Inputs: nvidia-curand-cu12 10.3.10.19, both builds: curand64_10.dll (79 MB, `.nv_fatb` of
# 35.7 MB, 11 fatbinaries, 153 entries; scripts/fetch-windows-wheels.sh) and libcurand.so.10
# (167 MB, `.nv_fatbin` of 123.8 MB, 11 fatbinaries, 153 entries; scripts/fetch-nvidia-libs.sh).
# The Windows build compresses some of its cubins (LZ4, zstd), the Linux one does not, so
# the two do not hold the same bytes; to tell the cost of reading the PE file from that of
# its contents, the same commands also run on the DLL's `.nv_fatb` cut out by
# `llvm-objcopy-22 --dump-section` (a bare sequence of fatbinaries). Needs a C compiler, jq
# and llvm-objcopy-22.
#
# Every run is one process started by benches/runtime.c (wall time from a monotonic clock,
# CPU time and peak RSS from wait4). Each round runs every command once, rotating which goes first, after
# one untimed run of each (warm page cache). Checks: both files list 153 images in 11 units,
# with the same architectures per unit, and select chooses the same entry (architecture and
# kind) in every fatbinary of both for sm_86.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
cd "$here"
ROUNDS="${ROUNDS:-7}"
work="${BENCH_DIR:-$here/target/bench-pe}"
out="$work/out"
mkdir -p "$work" "$out" "$work/times"
rm -f "$work"/times/*

die() { echo "pe.sh: $*" >&2; exit 1; }
for t in cc jq llvm-objcopy-22; do
  command -v "$t" >/dev/null || die "$t is missing (apt-get install gcc jq)"
done

echo "== data"
so="$(scripts/fetch-nvidia-libs.sh | tail -n1)"
dll="$(scripts/fetch-windows-wheels.sh | tail -n1)/cu12/curand64_10.dll"
[ -e "$so" ] && [ -e "$dll" ] || die "inputs missing"
cut="$work/curand64_10.nv_fatb"
llvm-objcopy-22 --dump-section ".nv_fatb=$cut" "$dll" "$work/scratch.dll"
echo "$so: $(stat -c %s "$so") bytes; $dll: $(stat -c %s "$dll") bytes; its .nv_fatb: $(stat -c %s "$cut") bytes"

echo "== binaries"
cargo build --release --locked -p loader-sim 2>&1 | tail -n1
LS="${CARGO_TARGET_DIR:-$here/target}/release/loader-sim"
cc -O2 -Wall -o "$work/runtime" benches/runtime.c
RUN="$work/runtime"

declare -A CMD LABEL
for os in so dll cut; do
  f=$so; [ $os = dll ] && f=$dll; [ $os = cut ] && f=$cut
  CMD[select_$os]="$LS select $f --target sm_86"
  LABEL[select_$os]="select --target sm_86"
  CMD[nohash_$os]="$LS list --no-sha256 $f"
  LABEL[nohash_$os]="list --no-sha256"
  CMD[list_$os]="$LS list $f"
  LABEL[list_$os]="list (hashes every image)"
  CMD[quick_$os]="$LS select $f --target sm_86 --no-verify-hash"
  LABEL[quick_$os]="select --target sm_86 --no-verify-hash"
  CMD[doctor_$os]="$LS doctor $f --target sm_86"
  LABEL[doctor_$os]="doctor --target sm_86"
done
names=()
for c in select quick doctor nohash list; do names+=("${c}_so" "${c}_dll" "${c}_cut"); done

run() {
  # shellcheck disable=SC2086
  "$RUN" -o "$out/$1.stdout" -- ${CMD[$1]} >> "$work/times/$1.$2" 2>> "$out/$1.stderr"
}
for c in "${names[@]}"; do run "$c" untimed; done
echo "== load: $(uptime | sed 's/.*load average/load average/')"
count=${#names[@]}
for ((r = 0; r < ROUNDS; r++)); do
  for ((k = 0; k < count; k++)); do run "${names[$(((k + r) % count))]}" warm; done
done
echo "== load: $(uptime | sed 's/.*load average/load average/')"

echo "== checks"
fail=0
for f in "$work"/times/*.warm; do
  if awk '$3 != 0 { bad = 1 } END { exit !bad }' "$f"; then
    echo "FAILED: a run of $(basename "$f") exited with an error"; fail=1
  fi
done
for os in so dll; do
  f=$so; [ $os = dll ] && f=$dll
  "$LS" list --json --no-sha256 "$f" | jq -r '"\(.bundle_index) \(.image_kind) \(.target_id)"' > "$work/list.$os"
  "$LS" select --json "$f" --target sm_86 | jq -r '"\(.bundle_index) \(.selected) \(.image_kind)"' > "$work/select.$os"
done
[ "$(wc -l < "$work/list.so")" = 153 ] || { echo "FAILED: libcurand.so.10 does not list 153 images"; fail=1; }
cmp -s "$work/list.so" "$work/list.dll" || { echo "FAILED: the DLL lists other images than the .so"; fail=1; }
cmp -s "$work/select.so" "$work/select.dll" || { echo "FAILED: select chooses differently in the DLL"; fail=1; }
[ $fail = 0 ] && echo "both list 153 images in the same units and order; select chooses the same sm_86 entry in all $(wc -l < "$work/select.so") fatbinaries"

med() { sort -g -k"$2","$2" "$1" | awk -v c="$2" '{ v[NR] = $c } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
echo
echo "Machine: $(nproc) vCPU $(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -n1), $(uname -r); $(date -u +%Y-%m-%d); $ROUNDS warm rounds, medians"
echo
echo "| command | .so wall | .dll wall | .nv_fatb cut out | .dll / .so wall | .dll / cut out | .so CPU | .dll CPU | .dll / .so CPU | .so RSS | .dll RSS |"
echo "|---|---|---|---|---|---|---|---|---|---|---|"
for c in select quick doctor nohash list; do
  a="$work/times/${c}_so.warm"; b="$work/times/${c}_dll.warm"; x="$work/times/${c}_cut.warm"
  awk -v l="${LABEL[${c}_so]}" -v aw="$(med "$a" 1)" -v bw="$(med "$b" 1)" -v xw="$(med "$x" 1)" \
    -v ac="$(med "$a" 4)" -v bc="$(med "$b" 4)" -v ar="$(med "$a" 2)" -v br="$(med "$b" 2)" 'BEGIN {
    printf "| %s | %.1f ms | %.1f ms | %.1f ms | %.2f | %.2f | %.1f ms | %.1f ms | %.2f | %.1f MiB | %.1f MiB |\n",
      l, aw * 1000, bw * 1000, xw * 1000, bw / aw, bw / xw, ac * 1000, bc * 1000, bc / ac, ar / 1024, br / 1024 }'
done
exit $fail
