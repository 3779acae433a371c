#!/usr/bin/env bash
# Issue 47, item 3: `loader-sim select --target sm_90` against NVIDIA's `cuobjdump -lelf` on
# CUDA 13's libcublasLt.so.13 (nvidia-cublas 13.10.0.20: 552 MB, every one of its 5,666
# entries a zstd frame), side by side in the same run: alternating rounds, median wall time
# and peak RSS of each, and the ratio to cuobjdump. Goal: select at most 0.05 times
# cuobjdump, its peak RSS no higher than before issue 47 (103.7 MiB on the 2-vCPU machine).
#
#   benches/cublaslt.sh              # 5 rounds after one untimed run of each
#   ROUNDS=9 benches/cublaslt.sh
#   BASELINE=old/loader-sim benches/cublaslt.sh   # an older build's select in the same rounds
#
# Input: the wheel is fetched with pip into target/external/cublas13 when it is not there;
# cuobjdump 13.5 comes from NVIDIA's wheel (scripts/fetch-nvidia-toolkit.sh). Every run is
# one process started by benches/runtime.c (wall time from a monotonic clock, peak RSS from
# wait4, as `/usr/bin/time -f %M`). Needs a C compiler and jq. Checks: every fatbinary's
# choice is an sm_90 cubin, and the sm_90 cubins `list` finds are as many as cuobjdump lists.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
cd "$here"
ROUNDS="${ROUNDS:-5}"
work="${BENCH_DIR:-$here/target/bench-cublaslt}"
mkdir -p "$work/out" "$work/times"
rm -f "$work"/times/*
die() { echo "cublaslt.sh: $*" >&2; exit 1; }
for t in cc jq; do command -v "$t" >/dev/null || die "$t is missing (apt-get install gcc jq)"; done

echo "== data and tools"
ext="${OFFLOAD_IMAGE_EXTERNAL:-$here/target/external}"
lib="$ext/cublas13/wheel/nvidia/cu13/lib/libcublasLt.so.13"
if [ ! -e "$lib" ]; then
  mkdir -p "$ext/cublas13"
  python3 -m pip download -q --no-deps --only-binary=:all: -d "$ext/cublas13" nvidia-cublas==13.10.0.20
  python3 -m zipfile -e "$ext"/cublas13/nvidia_cublas-13.10.0.20-*.whl "$ext/cublas13/wheel"
fi
[ -e "$lib" ] || die "$lib is missing"
cuda="$(scripts/fetch-nvidia-toolkit.sh | tail -n1)"
CUOBJDUMP="$cuda/bin/cuobjdump"
"$CUOBJDUMP" --version | tail -n1
echo "$lib: $(stat -c %s "$lib") bytes"

echo "== binaries"
cargo build --release --locked -p loader-sim 2>&1 | tail -n1
LS="$here/target/release/loader-sim"
cc -O2 -Wall -o "$work/runtime" benches/runtime.c

declare -A CMD LABEL
CMD[select]="$LS select $lib --target sm_90"
LABEL[select]="loader-sim select --target sm_90"
CMD[cuobjdump]="$CUOBJDUMP -lelf $lib"
LABEL[cuobjdump]="cuobjdump -lelf"
names=(select cuobjdump)
# BASELINE=path/to/an/older/loader-sim adds its `select` to the same rounds.
if [ -n "${BASELINE:-}" ]; then
  CMD[baseline]="$BASELINE select $lib --target sm_90"
  LABEL[baseline]="baseline select --target sm_90"
  names+=(baseline)
fi

run() { # run NAME MODE: one timed run, appended to times/NAME.MODE ("wall rss exit")
  # shellcheck disable=SC2086
  "$work/runtime" -o "$work/out/$1.stdout" -- ${CMD[$1]} >> "$work/times/$1.$2" 2>> "$work/out/$1.stderr"
}

echo "== load: $(uptime | sed 's/.*load average/load average/')"
for c in "${names[@]}"; do run "$c" untimed; done
for ((r = 0; r < ROUNDS; r++)); do
  for ((k = 0; k < ${#names[@]}; k++)); do run "${names[$(((k + r) % ${#names[@]}))]}" warm; done
done
echo "== load: $(uptime | sed 's/.*load average/load average/')"

echo "== checks"
fail=0
# select exits 1 when some fatbinary has nothing for sm_90; 2 would be an error.
for f in "$work"/times/*.warm; do
  if awk '$3 > 1 { bad = 1 } END { exit !bad }' "$f"; then
    echo "FAILED: a run of $(basename "$f") exited with an error"; fail=1
  fi
done
"$LS" select "$lib" --target sm_90 --json > "$work/select.jsonl" || [ $? = 1 ] || fail=1
# The choice the driver's rule gives from the listing: in each fatbinary with an sm_90a or
# sm_90 cubin, the sm_90a one if there is one (COMPATIBILITY.md §9.5, rule 1), else sm_90.
"$LS" list --json --no-sha256 "$lib" > "$work/list.jsonl"
jq -s -r 'map(select(.image_kind == "cubin" and (.target_id == "sm_90" or .target_id == "sm_90a")))
  | group_by(.bundle_index)[] | "\(.[0].bundle_index) \(if any(.[]; .target_id == "sm_90a") then "sm_90a" else "sm_90" end)"' \
  "$work/list.jsonl" > "$work/want.txt"
jq -r 'select(.image_kind == "cubin") | "\(.bundle_index) \(.arch)"' "$work/select.jsonl" > "$work/got.txt"
cmp -s "$work/want.txt" "$work/got.txt" \
  || { echo "FAILED: select's cubins differ from the sm_90a/sm_90 cubin of each fatbinary (want.txt, got.txt)"; fail=1; }
for a in sm_90 sm_90a; do
  ours=$(jq -s --arg a "$a" '[.[] | select(.image_kind == "cubin" and .target_id == $a)] | length' "$work/list.jsonl")
  theirs=$("$CUOBJDUMP" -lelf "$lib" | grep -c "\.$a\.cubin\$" || true)
  [ "$ours" = "$theirs" ] || { echo "FAILED: list finds $ours $a cubins, cuobjdump $theirs"; fail=1; }
done
[ $fail = 0 ] && echo "select: the sm_90a or sm_90 cubin in each of the $(wc -l < "$work/want.txt") fatbinaries that have one; list's sm_90 and sm_90a cubins as many as cuobjdump lists"

med() { # median of column $2 of file $1
  sort -g -k"$2","$2" "$1" | awk -v c="$2" '{ v[NR] = $c } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
echo
echo "Machine: $(nproc) vCPU $(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -n1), $(uname -r); $(date -u +%Y-%m-%d); $ROUNDS warm rounds, medians"
echo
echo "| command | wall | peak RSS | wall / cuobjdump | RSS / cuobjdump |"
echo "|---|---|---|---|---|"
ref="$work/times/cuobjdump.warm"
rw=$(med "$ref" 1); rr=$(med "$ref" 2)
for name in "${names[@]}"; do
  f="$work/times/$name.warm"
  awk -v l="${LABEL[$name]}" -v w="$(med "$f" 1)" -v r="$(med "$f" 2)" -v rw="$rw" -v rr="$rr" 'BEGIN {
    printf "| %s | %.1f ms | %.1f MiB | %.3f | %.3f |\n", l, w * 1000, r / 1024, w / rw, r / rr }'
done
exit $fail
