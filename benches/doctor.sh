#!/usr/bin/env bash
# Issue 15: `loader-sim doctor` over a directory of real ROCm libraries against `cat` reading
# the same files, side by side in one run, warm page cache. Target: doctor at most 0.2x
# cat's wall time, peak RSS under 64 MiB. Prints median wall times, peak RSS and the ratio.
#
#   benches/doctor.sh                 # 7 rounds
#   ROUNDS=11 benches/doctor.sh
#   WHEELS=0 benches/doctor.sh        # Debian's libraries only (no JAX wheels)
#   benches/doctor.sh wheel           # issue 23: a wheel read in place against unzip + doctor
#
# The tree (hard links, so no copy): librocsparse0 (1.3 GB), librocrand1, libhipsparse0,
# libhiprand1 from Debian (scripts/fetch-rocm-libs.sh), and with WHEELS=1 (default) the
# unpacked JAX ROCm PJRT plugins of scripts/check-jax-rocm.sh: jax-rocm60-pjrt 0.5.0
# (uncompressed bundles, 560 MB) and jax-rocm7-pjrt 0.12.0 (CCOB v3 zstd, 460 MB).
# Every run is one process started by benches/runtime.c (monotonic wall time, peak RSS from
# wait4); each round runs both sides once, alternating which goes first, after one untimed
# warm-up run of each.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
cd "$here"
ROUNDS="${ROUNDS:-7}"
WHEELS="${WHEELS:-1}"
work="${BENCH_DIR:-$here/target/bench-doctor}"
ext="${OFFLOAD_IMAGE_EXTERNAL:-$here/target/external}"
median() { sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }

if [ "${1:-}" = wheel ]; then
  # Issue 23: `doctor` on the cyllama-rocm 0.2.18 wheel (47.5 MB; its libggml-hip is a
  # 168.8 MB deflated member with 130 bundles in .hip_fatbin) against `unzip` of the wheel
  # followed by `doctor` of the unpacked tree, in one shell (peak RSS: the largest process
  # of the two). Target: doctor on the wheel at most 1.5x the time of unzip + doctor, peak
  # RSS at most 64 MiB. Warm cache; each round runs both sides, alternating which goes first.
  scripts/fetch-cyllama-rocm.sh >/dev/null
  whl=$(ls "$ext"/cyllama-rocm/cyllama_rocm-0.2.18-*.whl | head -n1)
  mkdir -p "$work/wtimes"
  rm -f "$work"/wtimes/*
  cargo build --quiet --release --locked -p loader-sim
  cc -O2 -Wall -o "$work/runtime" benches/runtime.c
  RUN="$work/runtime"
  bin="${CARGO_TARGET_DIR:-$here/target}/release/loader-sim"
  devs=(--target gfx1100 --target gfx906 --target gfx90a:sramecc+:xnack- --json)
  unz="$work/unzipped"
  onwheel=("$bin" doctor "$whl" "${devs[@]}")
  unpacked=(sh -c 'rm -rf "$1" && unzip -q "$2" -d "$1" && shift 2 && "$@"; s=$?; [ $s -le 1 ]' sh
    "$unz" "$whl" "$bin" doctor "$unz" "${devs[@]}")
  echo "wheel: $(basename "$whl"), $(wc -c <"$whl") bytes"
  cat "$whl" >/dev/null
  # Untimed warm-up; the two verdicts must agree.
  "${onwheel[@]}" >"$work/wheel.jsonl" || [ $? -eq 1 ]
  "${unpacked[@]}" >/dev/null
  "$bin" doctor "$unz" "${devs[@]}" >"$work/unzipped.jsonl" || [ $? -eq 1 ]
  verdicts() { python3 -c 'import json,sys
for l in sys.stdin:
    r = json.loads(l)
    if not r.get("summary"):
        print(r["device"], r["units"], r["units_covered"], r["status"], r["reason"])' | sort; }
  if ! diff <(verdicts <"$work/wheel.jsonl") <(verdicts <"$work/unzipped.jsonl"); then
    echo "FAIL: the wheel and the unpacked tree give different verdicts"
    exit 1
  fi
  for ((r = 0; r < ROUNDS; r++)); do
    if ((r % 2)); then order="wheel unzip"; else order="unzip wheel"; fi
    for side in $order; do
      if [ "$side" = wheel ]; then
        "$RUN" -- "${onwheel[@]}" >>"$work/wtimes/wheel"
      else
        "$RUN" -- "${unpacked[@]}" >>"$work/wtimes/unzip"
      fi
    done
  done
  rm -rf "$unz"
  ww=$(cut -d' ' -f1 "$work/wtimes/wheel" | median)
  uw=$(cut -d' ' -f1 "$work/wtimes/unzip" | median)
  wr=$(cut -d' ' -f2 "$work/wtimes/wheel" | sort -n | tail -n1)
  ur=$(cut -d' ' -f2 "$work/wtimes/unzip" | sort -n | tail -n1)
  printf '%-16s %12s %14s\n' side "median s" "max RSS KiB"
  printf '%-16s %12.3f %14d\n' "unzip + doctor" "$uw" "$ur" "doctor on wheel" "$ww" "$wr"
  ratio=$(awk -v d="$ww" -v c="$uw" 'BEGIN {printf "%.3f", d / c}')
  echo "doctor on wheel / (unzip + doctor) wall time: $ratio (target <= 1.5); peak RSS $((wr / 1024)) MiB (target <= 64)"
  awk -v r="$ratio" -v m="$wr" 'BEGIN {exit !(r <= 1.5 && m <= 65536)}' && echo "PASS" || { echo "FAIL"; exit 1; }
  exit 0
fi
tree="$work/tree"
mkdir -p "$work/times"
rm -f "$work"/times/*

libs=$(scripts/fetch-rocm-libs.sh librocsparse0 libhipsparse0 libhiprand1 | tail -n1)
rm -rf "$tree"
mkdir -p "$tree/usr/lib"
for f in "$libs"/*; do
  [ -L "$f" ] && continue
  ln "$f" "$tree/usr/lib/" 2>/dev/null || cp "$f" "$tree/usr/lib/"
done
if [ "$WHEELS" = 1 ]; then
  for spec in jax-rocm60-pjrt==0.5.0 jax-rocm7-pjrt==0.12.0; do
    name="${spec%%==*}"
    dir="$ext/$name"
    mkdir -p "$dir"
    glob="${name//-/_}-*.whl"
    # shellcheck disable=SC2086
    ls "$dir"/$glob >/dev/null 2>&1 || pip download --quiet --no-deps "$spec" -d "$dir"
    # shellcheck disable=SC2086
    [ -d "$dir/wheel" ] || { mkdir "$dir/wheel" && (cd "$dir/wheel" && python3 -m zipfile -e ../$glob .); }
    mkdir -p "$tree/site-packages/$name"
    cp -rl "$dir/wheel/." "$tree/site-packages/$name/"
  done
fi

cargo build --quiet --release --locked -p loader-sim
cc -O2 -Wall -o "$work/runtime" benches/runtime.c
RUN="$work/runtime"
mapfile -t files < <(find "$tree" -type f | sort)
bytes=$(cat "${files[@]}" | wc -c)
echo "tree: ${#files[@]} files, $((bytes / 1000000)) MB ($tree)"

doctor=(target/release/loader-sim doctor "$tree" --target gfx90a:sramecc+:xnack- --target gfx1031
  --target gfx1100 --target gfx942:sramecc+:xnack+ --json)
catcmd=(cat "${files[@]}")
# Warm the page cache and check the doctor's output once.
"${catcmd[@]}" >/dev/null
"${doctor[@]}" >"$work/doctor.jsonl" || [ $? -eq 1 ]
tail -n1 "$work/doctor.jsonl"

for ((r = 0; r < ROUNDS; r++)); do
  if ((r % 2)); then order="doctor cat"; else order="cat doctor"; fi
  for side in $order; do
    if [ "$side" = doctor ]; then
      "$RUN" -- "${doctor[@]}" >>"$work/times/doctor"
    else
      "$RUN" -- "${catcmd[@]}" >>"$work/times/cat"
    fi
  done
done

dw=$(cut -d' ' -f1 "$work/times/doctor" | median)
cw=$(cut -d' ' -f1 "$work/times/cat" | median)
dr=$(cut -d' ' -f2 "$work/times/doctor" | sort -n | tail -n1)
cr=$(cut -d' ' -f2 "$work/times/cat" | sort -n | tail -n1)
printf '%-8s %12s %14s\n' side "median s" "max RSS KiB"
printf '%-8s %12.3f %14d\n' cat "$cw" "$cr" doctor "$dw" "$dr"
ratio=$(awk -v d="$dw" -v c="$cw" 'BEGIN {printf "%.3f", d / c}')
echo "doctor / cat wall time: $ratio (target <= 0.2); doctor peak RSS $((dr / 1024)) MiB (target < 64)"
awk -v r="$ratio" -v m="$dr" 'BEGIN {exit !(r <= 0.2 && m < 65536)}' && echo "PASS" || { echo "FAIL"; exit 1; }
