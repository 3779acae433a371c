#!/usr/bin/env bash
# Issue 14: `loader-sim prune` of librocsparse0 (1.3 GB .hip_fatbin, 111 bundles x 8 entries)
# to one device, side by side with `cp` of the same file in the same run: median wall time
# and peak RSS of each, the ratio, the sizes before and after; then checks the result
# (static `register` and `list` of the kept images agree with the original, llvm-readelf
# reads it without a warning). Also prints the rows for librocrand1 and for libcurand
# (CUDA 12, .nv_fatbin, kept: sm_86), and with WITH_NCCL=1 for libnccl (nvidia-nccl-cu12
# 2.32.3: relocatable device code in __nv_relfatbin and its linked result in .nv_fatbin).
#
#   benches/prune.sh                 # 5 rounds
#   ROUNDS=9 KEEP=gfx1030 benches/prune.sh
#
# Needs (Debian 12): llvm-readelf-22 (llvm-22), a C compiler, jq; fetches librocsparse0 with
# scripts/fetch-rocm-libs.sh (OFFLOAD_IMAGE_EXTERNAL reuses an unpacked copy). The runner
# is benches/runtime.c (wall time from a monotonic clock, peak RSS from wait4). Each round
# runs both sides once, alternating which goes first, with the input in the page cache
# (one untimed run of each first) and the outputs deleted before every run; both write
# to the same directory (target/bench-prune, or BENCH_DIR).
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
cd "$here"
ROUNDS="${ROUNDS:-5}"
KEEP="${KEEP:-gfx90a:sramecc+:xnack-}"
work="${BENCH_DIR:-$here/target/bench-prune}"
mkdir -p "$work"
die() { echo "prune.sh: $*" >&2; exit 1; }
for t in cc jq llvm-readelf-22 sha256sum; do
  command -v "$t" >/dev/null || die "$t is missing"
done

libdir="$(scripts/fetch-rocm-libs.sh librocsparse0 | tail -n1)"
cargo build --release --locked -p loader-sim 2>&1 | tail -n1
SIM="$here/target/release/loader-sim"
cc -O2 -Wall -o "$work/runtime" benches/runtime.c
RUN="$work/runtime"

med() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

bench() { # name lib [keep]
  local name="$1" lib="$2" out="$work/$1.pruned" copy="$work/$1.copy" KEEP="${3:-$KEEP}"
  : >"$work/$name.cp" ; : >"$work/$name.prune"
  cp "$lib" "$copy"; rm -f "$copy"
  "$SIM" prune "$lib" --keep "$KEEP" -o "$out" >/dev/null
  for i in $(seq 1 "$ROUNDS"); do
    rm -f "$out" "$copy"; sync
    if [ $((i % 2)) = 1 ]; then
      "$RUN" -- cp "$lib" "$copy" >>"$work/$name.cp"; rm -f "$copy"; sync
      "$RUN" -- "$SIM" prune "$lib" --keep "$KEEP" -o "$out" >>"$work/$name.prune"
    else
      "$RUN" -- "$SIM" prune "$lib" --keep "$KEEP" -o "$out" >>"$work/$name.prune"; sync
      "$RUN" -- cp "$lib" "$copy" >>"$work/$name.cp"; rm -f "$copy"
    fi
  done
  local t_cp t_pr r_cp r_pr before after fatbin
  t_cp=$(cut -d' ' -f1 "$work/$name.cp" | med); r_cp=$(cut -d' ' -f2 "$work/$name.cp" | med)
  t_pr=$(cut -d' ' -f1 "$work/$name.prune" | med); r_pr=$(cut -d' ' -f2 "$work/$name.prune" | med)
  before=$(stat -L -c %s "$lib"); after=$(stat -L -c %s "$out")
  fatbin=0
  for size in $(llvm-readelf-22 -S -W "$lib" | awk '{for (i = 1; i <= NF; i++) if ($i == ".hip_fatbin" || $i == ".nv_fatbin" || $i == "__nv_relfatbin") print $(i + 4)}'); do
    fatbin=$((fatbin + 16#$size))
  done
  [ "$fatbin" -gt 0 ] || die "$name: no .hip_fatbin, .nv_fatbin or __nv_relfatbin section"
  # Checks: no readelf warning, same static registration for the kept device, same kept images.
  if llvm-readelf-22 -a -W "$out" 2>&1 >/dev/null | grep -q .; then die "$name: llvm-readelf warns"; fi
  # (exit status 1 where a unit has nothing for the device, as in libnccl; anything else fails)
  local f rc
  for f in "$lib:a" "$out:b"; do
    rc=0
    "$SIM" register "${f%:*}" --device "$KEEP" --json >"$work/$name.reg.json" 2>"$work/$name.reg.err" || rc=$?
    [ "$rc" -le 1 ] || die "$name: register exited $rc: $(tail -n1 "$work/$name.reg.err")"
    jq -c "del(.unit, .address)" "$work/$name.reg.json" >"$work/$name.reg.${f##*:}"
  done
  [ -s "$work/$name.reg.a" ] || die "$name: static register gave no record"
  cmp -s "$work/$name.reg.a" "$work/$name.reg.b" || die "$name: static register differs"
  printf '| %s | %s | %s | %s (device code: %.1f%% of its %s bytes) | %.3f s (cp %.3f s, ratio %.2f) | %s KiB (cp %s KiB) |\n' \
    "$(basename "$lib")" "$KEEP" "$before" "$after" "$(echo "100*($after-($before-$fatbin))/$fatbin" | bc -l)" "$fatbin" \
    "$t_pr" "$t_cp" "$(echo "$t_pr/$t_cp" | bc -l)" "$r_pr" "$r_cp"
}

echo "Machine: $(nproc) vCPU, $(uname -r); $(date -u +%Y-%m-%d); $ROUNDS rounds, medians, warm page cache"
echo "| file | kept device | size before | size after | prune wall time | prune peak RSS |"
echo "|---|---|---|---|---|---|"
bench rocrand "$libdir/librocrand.so.1"
bench rocsparse "$libdir/librocsparse.so.0"
bench curand "$(scripts/fetch-nvidia-libs.sh | tail -n1)" sm_86
if [ -n "${WITH_NCCL:-}" ]; then
  nccl=$(scripts/fetch-nvidia-libs.sh --nccl | tail -n1)
  [ "$(basename "$nccl")" = libnccl.so.2 ] || die "no libnccl.so.2 fetched"
  bench nccl "$nccl" sm_86
fi
