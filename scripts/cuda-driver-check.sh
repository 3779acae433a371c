#!/usr/bin/env bash
# On a machine with an NVIDIA GPU: records what the CUDA driver loads from the driver oracle's
# fatbinaries (tests/data/cuda-driver and a case set made by scripts/cuda-driver-cases.py),
# in every run of scripts/cuda-driver-record.py, and runs `doctor --python` on the machine's own
# Python environment beside a short check that its CUDA libraries run (torch).
#
#   scripts/cuda-driver-check.sh LOADER_SIM NEW_CASES_DIR     # results under $OUT
set -uo pipefail
cd "$(dirname "$0")/.."
LS="$1" NEW="$2"
OUT="${OUT:-$PWD/driver-check}"
mkdir -p "$OUT"
W=$(mktemp -d)
exec > >(tee "$OUT/log.txt") 2>&1
nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv
cp -r tests/data/cuda-driver "$W/old"
cp -r "$NEW" "$W/new"
time python3 scripts/cuda-driver-record.py "$W/new" && cp "$W/new/records.jsonl" "$OUT/new_records.jsonl"
time python3 scripts/cuda-driver-record.py "$W/old" && cp "$W/old/records.jsonl" "$OUT/old_records.jsonl"
# doctor on the environment's own libraries, the GPU and driver detected through NVML.
python3 -c 'import sys, torch; print(sys.executable, torch.__version__, torch.version.cuda)'
time "$LS" doctor --python python3 > "$OUT/doctor_python.txt" 2> "$OUT/doctor_python.stderr"
echo "doctor exit $?"
"$LS" doctor --python python3 --json > "$OUT/doctor_python.jsonl" 2>/dev/null
tail -n 3 "$OUT/doctor_python.stderr"; tail -n 1 "$OUT/doctor_python.jsonl"
# What the libraries do when they are used: each line says the library and whether it ran.
PYTHONUNBUFFERED=1 timeout 240 python3 - <<'PY' > "$OUT/torch_ran.txt" 2>&1
import torch, torch.nn.functional as F
d = "cuda"
def run(name, f):
    try:
        f(); torch.cuda.synchronize(); print(name, "ran")
    except Exception as e:
        print(name, "FAILED", type(e).__name__, str(e)[:200])
x = torch.randn(256, 256, device=d)
run("cublas matmul", lambda: x @ x)
run("cublasLt bf16 linear", lambda: F.linear(x.bfloat16(), x.bfloat16(), x[0].bfloat16()))
run("cufft fft", lambda: torch.fft.fft(x))
run("cudnn conv2d", lambda: F.conv2d(torch.randn(8, 16, 32, 32, device=d), torch.randn(32, 16, 3, 3, device=d)))
run("cudnn sdpa", lambda: F.scaled_dot_product_attention(*(torch.randn(2, 4, 128, 64, device=d, dtype=torch.half) for _ in range(3))))
run("cusolver svd", lambda: torch.linalg.svd(x))
run("cusolver eigh", lambda: torch.linalg.eigh(x @ x.T))
run("cusparse spmm", lambda: torch.sparse.mm(x.to_sparse(), x))
run("curand", lambda: torch.rand(1000, device=d))
PY
cat "$OUT/torch_ran.txt"
echo done
