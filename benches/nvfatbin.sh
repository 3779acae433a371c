#!/usr/bin/env bash
# Issue 12: `loader-sim select --target sm_86` (and `list`) against NVIDIA's
# `cuobjdump -lelf -lptx` on the 123.8 MB .nv_fatbin of a real CUDA library, measured side by
# side in the same run on the same machine; prints median wall time and peak RSS per command
# and the ratios to cuobjdump.
#
#   benches/nvfatbin.sh                     # 7 warm rounds, 3 cold rounds
#   ROUNDS=11 COLD_ROUNDS=0 benches/nvfatbin.sh
#
# Input: libcurand.so.10 of nvidia-curand-cu12 10.3.10.19 (scripts/fetch-nvidia-libs.sh:
# 167 MB, .nv_fatbin of 123.8 MB holding 11 fatbinaries, 153 entries: 143 uncompressed
# cubins, 10 LZ4 PTX). cuobjdump 13.5 comes from NVIDIA's wheel
# (scripts/fetch-nvidia-toolkit.sh). Needs a C compiler and jq.
#
# Every run is one process started by benches/runtime.c (wall time from a monotonic clock,
# peak RSS from wait4, as `/usr/bin/time -f %M`). Each round runs every command once,
# rotating which goes first; warm rounds follow one untimed run of each; cold rounds drop
# the library (only that file) from the page cache before every run. Checks: the images
# `list` finds are those cuobjdump lists (same count, same architectures in the same order)
# with the bytes cuobjdump extracts (tests/data/nvfatbin/libcurand.MANIFEST), and `select`
# chooses the sm_86 cubin of every fatbinary.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
cd "$here"
ROUNDS="${ROUNDS:-7}"
COLD_ROUNDS="${COLD_ROUNDS:-3}"
work="${BENCH_DIR:-$here/target/bench-nvfatbin}"
out="$work/out"
mkdir -p "$work" "$out" "$work/times"
rm -f "$work"/times/*

die() { echo "nvfatbin.sh: $*" >&2; exit 1; }
for t in cc jq sha256sum; do
  command -v "$t" >/dev/null || die "$t is missing (apt-get install gcc jq)"
done

echo "== data and tools"
lib="$(scripts/fetch-nvidia-libs.sh | tail -n1)"
cuda="$(scripts/fetch-nvidia-toolkit.sh | tail -n1)"
CUOBJDUMP="$cuda/bin/cuobjdump"
[ -e "$lib" ] || die "$lib is missing"
"$CUOBJDUMP" --version | tail -n1
section_size=$(readelf -SW "$lib" | sed -nE 's/.*\] \.nv_fatbin +[A-Z]+ +[0-9a-f]+ +[0-9a-f]+ +([0-9a-f]+) .*/\1/p')
echo "$lib: $(stat -c %s "$lib") bytes; .nv_fatbin: $((16#$section_size)) bytes"

echo "== binaries"
cargo build --release --locked -p loader-sim 2>&1 | tail -n1
LS="$here/target/release/loader-sim"
cc -O2 -Wall -o "$work/runtime" benches/runtime.c
RUN="$work/runtime"

declare -A CMD LABEL
CMD[select]="$LS select $lib --target sm_86"
LABEL[select]="loader-sim select --target sm_86"
CMD[select_sha]="$LS select $lib --target sm_86 --sha256"
LABEL[select_sha]="loader-sim select --target sm_86 --sha256"
CMD[list]="$LS list $lib"
LABEL[list]="loader-sim list (table; hashes every image)"
CMD[list_json]="$LS list --json $lib"
LABEL[list_json]="loader-sim list --json (hashes every image)"
CMD[list_nohash]="$LS list --no-sha256 $lib"
LABEL[list_nohash]="loader-sim list --no-sha256 (headers only)"
CMD[cuobjdump]="$CUOBJDUMP -lelf -lptx $lib"
LABEL[cuobjdump]="cuobjdump -lelf -lptx"
CMD[version]="$LS --version"
LABEL[version]="loader-sim --version (start-up)"
names=(select select_sha list_nohash list list_json cuobjdump version)

# run NAME MODE: one timed run, appended to times/NAME.MODE ("wall rss exit").
run() {
  local name=$1 mode=$2 evict=()
  [ "$mode" = cold ] && evict=(-e "$lib")
  # shellcheck disable=SC2086
  "$RUN" "${evict[@]}" -o "$out/$name.stdout" -- ${CMD[$name]} >> "$work/times/$name.$mode" 2>> "$out/$name.stderr"
}

# rounds MODE N: N rounds of every command, rotating the order.
rounds() {
  local mode=$1 n=$2 k r count=${#names[@]}
  if [ "$mode" = warm ]; then
    for c in "${names[@]}"; do run "$c" untimed; done
  fi
  for ((r = 0; r < n; r++)); do
    for ((k = 0; k < count; k++)); do
      run "${names[$(((k + r) % count))]}" "$mode"
    done
  done
}

echo "== load: $(uptime | sed 's/.*load average/load average/')"
echo "== warm page cache: $ROUNDS rounds"
rounds warm "$ROUNDS"
if [ "$COLD_ROUNDS" -gt 0 ]; then
  echo "== cold page cache (the library dropped before every run): $COLD_ROUNDS rounds"
  rounds cold "$COLD_ROUNDS"
fi
echo "== load: $(uptime | sed 's/.*load average/load average/')"

echo "== checks"
fail=0
for f in "$work"/times/*; do
  if awk '$3 != 0 { bad = 1 } END { exit !bad }' "$f"; then
    echo "FAILED: a run of $(basename "$f") exited with an error"; fail=1
  fi
done
# The same images as cuobjdump, in the same order, with the bytes it extracts.
"$CUOBJDUMP" -lelf -lptx "$lib" > "$work/cuobjdump.txt"
"$LS" list --json "$lib" > "$work/list.jsonl"
sed -nE 's/^ELF file +[0-9]+: .*\.(sm_[0-9]+[af]?)\.cubin$/\1/p' "$work/cuobjdump.txt" > "$work/elf.cuobjdump"
sed -nE 's/^PTX file +[0-9]+: .*\.(sm_[0-9]+[af]?)\.ptx$/\1/p' "$work/cuobjdump.txt" > "$work/ptx.cuobjdump"
jq -r 'select(.image_kind == "cubin") | .target_id' "$work/list.jsonl" > "$work/elf.ours"
jq -r 'select(.image_kind == "ptx") | .target_id' "$work/list.jsonl" > "$work/ptx.ours"
for k in elf ptx; do
  cmp -s "$work/$k.ours" "$work/$k.cuobjdump" \
    || { echo "FAILED: list's $k images differ from cuobjdump's listing"; fail=1; }
done
manifest="$here/tests/data/nvfatbin/libcurand.MANIFEST"
jq -r '"\(if .image_kind == "cubin" then "elf" else .image_kind end) \(.target_id) \(.sha256)"' \
  "$work/list.jsonl" | sort > "$work/sha.ours"
cut -d' ' -f2- "$manifest" | sort > "$work/sha.cuobjdump"
cmp -s "$work/sha.ours" "$work/sha.cuobjdump" \
  || { echo "FAILED: list's sha256s differ from cuobjdump -xelf/-xptx (libcurand.MANIFEST)"; fail=1; }
"$LS" select "$lib" --target sm_86 --json --sha256 > "$work/select.jsonl"
units=$(jq -s 'length' "$work/select.jsonl")
bad=0
while read -r sel sha; do
  [ "$sel" = "nvptx64-nvidia-cuda--sm_86" ] && grep -q "^libcurand.so.10 elf sm_86 $sha\$" "$manifest" \
    || bad=1
done < <(jq -r '"\(.selected) \(.sha256)"' "$work/select.jsonl")
[ "$bad" = 0 ] || { echo "FAILED: select did not choose cuobjdump's sm_86 cubin in every fatbinary"; fail=1; }
[ $fail = 0 ] && echo "list: $(wc -l < "$work/list.jsonl") images = cuobjdump's ($(wc -l < "$work/elf.cuobjdump") ELF, $(wc -l < "$work/ptx.cuobjdump") PTX), same order and bytes; select: the sm_86 cubin in all $units fatbinaries"

med() { # median of column $2 of file $1
  sort -g -k"$2","$2" "$1" | awk -v c="$2" '{ v[NR] = $c } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
echo
echo "Machine: $(nproc) vCPU $(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -n1 | sed 's/ [0-9]*-Core Processor//'), $(free -g | awk '/^Mem:/ { print $2 }') GiB, $(uname -r); $(date -u +%Y-%m-%d); $ROUNDS warm / $COLD_ROUNDS cold rounds, medians"
echo
echo "| command | cache | wall | peak RSS | wall / cuobjdump | RSS / cuobjdump |"
echo "|---|---|---|---|---|---|"
for mode in warm cold; do
  ref="$work/times/cuobjdump.$mode"
  [ -s "$ref" ] || continue
  rw=$(med "$ref" 1); rr=$(med "$ref" 2)
  for name in "${names[@]}"; do
    f="$work/times/$name.$mode"
    [ -s "$f" ] || continue
    awk -v l="${LABEL[$name]}" -v m="$mode" -v w="$(med "$f" 1)" -v r="$(med "$f" 2)" -v rw="$rw" -v rr="$rr" 'BEGIN {
      printf "| %s | %s | %.1f ms | %.1f MiB | %.3f | %.3f |\n", l, m, w * 1000, r / 1024, w / rw, r / rr }'
  done
done

# Large libraries: `select` reads entry headers only (compressed entries are decoded on
# demand, here only the chosen ones), so its time should not grow with what the library
# compresses. libcusolver.so.11 (302 MB) and libcusparse.so.12 (487 MB) of CUDA 12's wheels
# (scripts/fetch-nvidia-libs.sh --large), warm page cache, same rounds side by side.
LARGE_ROUNDS="${LARGE_ROUNDS:-5}"
if [ "$LARGE_ROUNDS" -gt 0 ]; then
  mapfile -t large < <(scripts/fetch-nvidia-libs.sh --large | tail -n2)
  echo
  echo "Large libraries ($LARGE_ROUNDS warm rounds, medians):"
  echo
  echo "| library | command | wall | peak RSS | wall / cuobjdump | RSS / cuobjdump |"
  echo "|---|---|---|---|---|---|"
  for big in "${large[@]}"; do
    b=$(basename "$big")
    CMD[big_select]="$LS select $big --target sm_86"
    CMD[big_sha]="$LS select $big --target sm_86 --sha256"
    CMD[big_cuobjdump]="$CUOBJDUMP -lelf -lptx $big"
    rm -f "$work"/times/big_*
    for c in big_select big_sha big_cuobjdump; do run "$c" untimed; done
    for ((r = 0; r < LARGE_ROUNDS; r++)); do
      for c in big_select big_sha big_cuobjdump; do run "$c" warm; done
    done
    # select exits 1 when some fatbinary has nothing for sm_86 (most of libcusolver's
    # have only newer code); 2 would be an error.
    for f in "$work"/times/big_*.warm; do
      if awk '$3 > 1 { bad = 1 } END { exit !bad }' "$f"; then
        echo "FAILED: a run of $(basename "$f") on $b exited with an error"; fail=1
      fi
    done
    # How many fatbinaries have an image for sm_86, beside cuobjdump's count of sm_86
    # cubins (the rules themselves are checked by tests/suite/nvfatbin.rs and the corpus tests).
    chosen=$({ "$LS" select "$big" --target sm_86 --json || true; } | jq -s '[.[] | select(.selected != null)] | length')
    units=$({ "$LS" select "$big" --target sm_86 --json || true; } | jq -s 'length')
    cubins=$("$CUOBJDUMP" -lelf "$big" | grep -c '\.sm_86\.cubin$' || true)
    echo "| $b | ($units fatbinaries, $chosen with an image for sm_86; cuobjdump lists $cubins sm_86 cubins) | | | | |"
    ref="$work/times/big_cuobjdump.warm"
    rw=$(med "$ref" 1); rr=$(med "$ref" 2)
    for c in big_select big_sha big_cuobjdump; do
      f="$work/times/$c.warm"
      label="${CMD[$c]#"$LS "}"
      [ "$c" = big_cuobjdump ] && label="cuobjdump -lelf -lptx $b"
      awk -v b="$b" -v l="$label" -v w="$(med "$f" 1)" -v r="$(med "$f" 2)" -v rw="$rw" -v rr="$rr" 'BEGIN {
        sub(/ \/[^ ]*\//, " ", l); printf "| %s | %s | %.1f ms | %.1f MiB | %.3f | %.3f |\n", b, l, w * 1000, r / 1024, w / rw, r / rr }'
    done
  done
fi
exit $fail
