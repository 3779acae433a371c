#!/usr/bin/env bash
# Regenerates the files of tests/data/real/ (see PROVENANCE.md beside this script).
# Needs the `zstd` command (Debian's zstd package) and python3.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
src="$here/../corpus/bundles/hip_6arch.bundle"
# A zstd frame compressed as a stream: `zstd` reading standard input writes no content
# size and states the window of its level (8 MiB at -19), whatever the input's size.
zstd -q -19 -c < "$src" > "$here/hip_6arch.stream.zst"
python3 - "$src" "$here/hip_6arch.stream.zst" "$here/ccob_v3_zstd_stream.ccob" <<'PY'
import hashlib, struct, sys
content = open(sys.argv[1], "rb").read()
payload = open(sys.argv[2], "rb").read()
h = hashlib.md5(content).digest()[:8]
out = b"CCOB" + struct.pack("<HHQQ", 3, 1, len(payload) + 32, len(content)) + h + payload
open(sys.argv[3], "wb").write(out)
PY
rm "$here/hip_6arch.stream.zst"
