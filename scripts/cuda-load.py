"""Loads images with the CUDA driver (libcuda.so.1 through ctypes) and says what it did.

    python3 scripts/cuda-load.py FILE...   one JSON line per file: cuModuleLoadData's result and,
                                          when it loaded, the module's function count
"""
import ctypes
import json
import sys

cuda = ctypes.CDLL("libcuda.so.1")


def ok(r, what):
    if r != 0:
        raise SystemExit(f"{what}: CUresult {r}")


ok(cuda.cuInit(0), "cuInit")
dev = ctypes.c_int()
ok(cuda.cuDeviceGet(ctypes.byref(dev), 0), "cuDeviceGet")
major, minor, version = ctypes.c_int(), ctypes.c_int(), ctypes.c_int()
ok(cuda.cuDeviceGetAttribute(ctypes.byref(major), 75, dev), "major")
ok(cuda.cuDeviceGetAttribute(ctypes.byref(minor), 76, dev), "minor")
ok(cuda.cuDriverGetVersion(ctypes.byref(version)), "cuDriverGetVersion")
name = ctypes.create_string_buffer(256)
ok(cuda.cuDeviceGetName(name, 256, dev), "cuDeviceGetName")
ctx = ctypes.c_void_p()
ok(cuda.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev), "cuDevicePrimaryCtxRetain")
ok(cuda.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
print(json.dumps({"device": name.value.decode(), "cc": f"{major.value}.{minor.value}",
                  "cuda_driver_api": version.value}), flush=True)

for path in sys.argv[1:]:
    data = open(path, "rb").read()
    buf = ctypes.create_string_buffer(data, len(data) + 1)  # PTX must end in NUL
    mod = ctypes.c_void_p()
    r = cuda.cuModuleLoadData(ctypes.byref(mod), buf)
    rec = {"file": path, "bytes": len(data), "result": r}
    if r == 0:
        count = ctypes.c_uint()
        if cuda.cuModuleGetFunctionCount(ctypes.byref(count), mod) == 0:
            rec["functions"] = count.value
        cuda.cuModuleUnload(mod)
    print(json.dumps(rec), flush=True)
