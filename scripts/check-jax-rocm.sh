#!/usr/bin/env bash
# Cross-checks the reader on real bundles from PyPI wheels: JAX's ROCm PJRT plugins carry a
# .hip_fatbin section of bundles back to back, one per translation unit (ROCm 7: CCOB v3
# zstd; ROCm 6.0: uncompressed bundles). For every bundle, `loader-sim list` must give the IDs
# `clang-offload-bundler-22 -list` gives and, for every device entry, the bytes
# `clang-offload-bundler-22 -unbundle` extracts (sha256).
#
#   scripts/check-jax-rocm.sh                          # jax-rocm7-pjrt==0.12.0 (133 MB wheel)
#   scripts/check-jax-rocm.sh jax-rocm60-pjrt==0.5.0   # ROCm 6.0 build (123 MB wheel)
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
spec="${1:-jax-rocm7-pjrt==0.12.0}"
name="${spec%%==*}"
lib="$("$here/scripts/fetch-jax-rocm.sh" "$spec")"
cd "${OFFLOAD_IMAGE_EXTERNAL:-$here/target/external}/$name"
cargo build --quiet --release -p loader-sim --manifest-path "$here/Cargo.toml"
"$here/target/release/loader-sim" list "$lib" --json > list.jsonl
llvm-objcopy-22 --dump-section=.hip_fatbin=fatbin.bin "$lib" discard.so
python3 - <<'PY'
import hashlib, json, struct, subprocess
recs = [json.loads(l) for l in open("list.jsonl")]
data = open("fatbin.bin", "rb").read()
# Bundle boundaries from the headers (FORMATS.md), independently of the library: a CCOB v2/v3
# says its total size; an uncompressed bundle ends at its furthest entry (offset + size).
pos, units, kinds = 0, [], set()
while pos < len(data):
    while pos < len(data) and data[pos] == 0:
        pos += 1
    if pos >= len(data):
        break
    if data[pos:pos + 4] == b"CCOB":
        assert struct.unpack_from("<H", data, pos + 4)[0] >= 2, "CCOB v1 has no total size"
        total = struct.unpack_from("<Q" if struct.unpack_from("<H", data, pos + 4)[0] >= 3 else "<I", data, pos + 8)[0]
        kinds.add("CCOB")
    else:
        assert data[pos:pos + 24] == b"__CLANG_OFFLOAD_BUNDLE__", pos
        n = struct.unpack_from("<Q", data, pos + 24)[0]
        at, total = pos + 32, 32
        for _ in range(n):
            off, size, idlen = struct.unpack_from("<QQQ", data, at)
            at += 24 + idlen
            total = max(total, at - pos, off + size)
        kinds.add("uncompressed")
    units.append((pos, total))
    pos += total
assert len(units) == len({r["bundle_index"] for r in recs}), "same number of bundles"
compared = 0
for index, (off, total) in enumerate(units):
    open("unit.bin", "wb").write(data[off:off + total])
    ids = subprocess.run(["clang-offload-bundler-22", "-list", "-type=o", "-input=unit.bin"],
                         capture_output=True, text=True, check=True).stdout.split()
    ours = {r["entry_id"]: r for r in recs if r["bundle_index"] == index}
    assert set(ids) == set(ours), (index, ids)
    for i in ids:
        if i.startswith("host"):
            continue
        subprocess.run(["clang-offload-bundler-22", "-unbundle", "-type=o", "-targets=" + i,
                        "-input=unit.bin", "-output=unit.out"], check=True)
        assert hashlib.sha256(open("unit.out", "rb").read()).hexdigest() == ours[i]["sha256"], (index, i)
        compared += 1
print(f"{len(units)} bundles ({'/'.join(sorted(kinds))}), {compared} device images identical to clang-offload-bundler-22")
PY
