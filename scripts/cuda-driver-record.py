"""Records what the CUDA driver loads from each fatbinary of a driver-oracle folder.

    python3 scripts/cuda-driver-record.py DIR          # all runs; writes DIR/records.jsonl
    python3 scripts/cuda-driver-record.py DIR --one    # one run in this process's environment

DIR holds pool.json, cases.jsonl and the fatbinaries (scripts/cuda-driver-cases.py). Each
fatbinary is loaded with cuModuleLoadData (libcuda.so.1 through ctypes); on success every
kernel name of the pool is looked up with cuModuleGetFunction (the one found names the entry
the driver took) and its CU_FUNC_ATTRIBUTE_BINARY_VERSION and PTX_VERSION read. The runs,
each a process of its own since the driver reads its variables once, and in this order:

  driver_CUDA_DISABLE_PTX_JIT_1_cold_cache   CUDA_DISABLE_PTX_JIT=1, an empty JIT cache
  driver_CUDA_DISABLE_PTX_JIT_1_no_cache     CUDA_DISABLE_PTX_JIT=1, CUDA_CACHE_DISABLE=1
  driver                                     no variable, the JIT cache of the next two runs
  driver_CUDA_FORCE_PTX_JIT_1                CUDA_FORCE_PTX_JIT=1
  driver_CUDA_DISABLE_PTX_JIT_1              CUDA_DISABLE_PTX_JIT=1 (the cache the runs above filled)
"""
import ctypes
import json
import os
import subprocess
import sys
import tempfile

RUNS = [
    ("driver_CUDA_DISABLE_PTX_JIT_1_cold_cache", {"CUDA_DISABLE_PTX_JIT": "1"}, "cold"),
    ("driver_CUDA_DISABLE_PTX_JIT_1_no_cache", {"CUDA_DISABLE_PTX_JIT": "1", "CUDA_CACHE_DISABLE": "1"}, "none"),
    ("driver", {}, "warm"),
    ("driver_CUDA_FORCE_PTX_JIT_1", {"CUDA_FORCE_PTX_JIT": "1"}, "warm"),
    ("driver_CUDA_DISABLE_PTX_JIT_1", {"CUDA_DISABLE_PTX_JIT": "1"}, "warm"),
]


def one(folder):
    cuda = ctypes.CDLL("libcuda.so.1")
    assert cuda.cuInit(0) == 0
    dev = ctypes.c_int()
    assert cuda.cuDeviceGet(ctypes.byref(dev), 0) == 0
    ctx = ctypes.c_void_p()
    assert cuda.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev) == 0
    assert cuda.cuCtxSetCurrent(ctx) == 0
    pool = json.load(open(os.path.join(folder, "pool.json")))
    for line in open(os.path.join(folder, "cases.jsonl")):
        case = json.loads(line)
        data = open(os.path.join(folder, case["file"]), "rb").read()
        buf = ctypes.create_string_buffer(data, len(data) + 1)
        mod = ctypes.c_void_p()
        r = cuda.cuModuleLoadData(ctypes.byref(mod), buf)
        if r != 0:
            rec = {"cuda_error": r}
        else:
            found = []
            for label in case["entries_in_order"]:
                fn = ctypes.c_void_p()
                if cuda.cuModuleGetFunction(ctypes.byref(fn), mod, pool[label]["kernel"].encode()) == 0:
                    b, p = ctypes.c_int(), ctypes.c_int()
                    cuda.cuFuncGetAttribute(ctypes.byref(b), 6, fn)
                    cuda.cuFuncGetAttribute(ctypes.byref(p), 5, fn)
                    found.append({"loaded": label, "binary_version": b.value, "ptx_version": p.value})
            cuda.cuModuleUnload(mod)
            rec = found[0] if len(found) == 1 else {"found": found}
        print(json.dumps({"case": case["case"], "result": rec}), flush=True)


def main():
    folder = sys.argv[1]
    if "--one" in sys.argv:
        return one(folder)
    cases = [json.loads(l) for l in open(os.path.join(folder, "cases.jsonl"))]
    by_case = {c["case"]: c for c in cases}
    cache = tempfile.mkdtemp(prefix="cuda-cache-")
    for key, env, kind in RUNS:
        e = {k: v for k, v in os.environ.items()
             if k not in ("CUDA_FORCE_PTX_JIT", "CUDA_DISABLE_PTX_JIT", "CUDA_CACHE_DISABLE", "CUDA_CACHE_PATH")}
        e.update(env)
        e["CUDA_CACHE_PATH"] = tempfile.mkdtemp(prefix="cuda-cold-") if kind == "cold" else cache
        out = subprocess.run([sys.executable, __file__, folder, "--one"], env=e,
                             capture_output=True, text=True)
        if out.returncode != 0:
            print(key, "failed:", out.stderr[-2000:], file=sys.stderr)
        for line in out.stdout.splitlines():
            r = json.loads(line)
            by_case[r["case"]][key] = r["result"]
    with open(os.path.join(folder, "records.jsonl"), "w") as f:
        for c in cases:
            f.write(json.dumps(c) + "\n")


if __name__ == "__main__":
    sys.exit(main())
