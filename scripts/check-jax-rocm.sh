#!/usr/bin/env bash
# Cross-checks the reader on real compressed bundles: JAX's ROCm 7 PJRT plugin (a PyPI wheel)
# carries a .hip_fatbin section of 45 CCOB v3 zstd bundles back to back. For every bundle,
# `loader-sim list` must give the IDs `clang-offload-bundler-22 -list` gives and, for every
# device entry, the bytes `clang-offload-bundler-22 -unbundle` extracts (sha256).
#
#   scripts/check-jax-rocm.sh            # downloads the wheel (133 MB) into target/external/
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
work="${OFFLOAD_IMAGE_EXTERNAL:-$here/target/external}/jax-rocm7"
mkdir -p "$work"
cd "$work"
ls jax_rocm7_pjrt-*.whl >/dev/null 2>&1 || pip download --quiet --no-deps jax-rocm7-pjrt==0.12.0 -d .
[ -d wheel ] || { mkdir wheel && (cd wheel && python3 -m zipfile -e ../jax_rocm7_pjrt-*.whl .); }
lib=$(find wheel -name 'xla_rocm_plugin.so' | head -n1)
cargo build --quiet --release -p loader-sim --manifest-path "$here/Cargo.toml"
"$here/target/release/loader-sim" list "$lib" --json > list.jsonl
llvm-objcopy-22 --dump-section=.hip_fatbin=fatbin.bin "$lib" discard.so
python3 - <<'PY'
import hashlib, json, struct, subprocess
recs = [json.loads(l) for l in open("list.jsonl")]
data = open("fatbin.bin", "rb").read()
pos, units = 0, []
while pos < len(data):
    while pos < len(data) and data[pos] == 0:
        pos += 1
    if pos >= len(data):
        break
    assert data[pos:pos + 4] == b"CCOB", pos
    total = struct.unpack_from("<Q", data, pos + 8)[0]
    units.append((pos, total))
    pos += total
assert len(units) == len({r["bundle_index"] for r in recs}), "same number of bundles"
compared = 0
for index, (off, total) in enumerate(units):
    open("unit.ccob", "wb").write(data[off:off + total])
    ids = subprocess.run(["clang-offload-bundler-22", "-list", "-type=o", "-input=unit.ccob"],
                         capture_output=True, text=True, check=True).stdout.split()
    ours = {r["entry_id"]: r for r in recs if r["bundle_index"] == index}
    assert set(ids) == set(ours), (index, ids)
    for i in ids:
        if i.startswith("host"):
            continue
        subprocess.run(["clang-offload-bundler-22", "-unbundle", "-type=o", "-targets=" + i,
                        "-input=unit.ccob", "-output=unit.out"], check=True)
        assert hashlib.sha256(open("unit.out", "rb").read()).hexdigest() == ours[i]["sha256"], (index, i)
        compared += 1
print(f"{len(units)} CCOB bundles, {compared} device images identical to clang-offload-bundler-22")
PY
