"""Remakes the Tile IR samples of this folder (README.md) with NVIDIA's own tools.

    pip download --no-deps cuda-tile==1.7.0 nvidia-nvfatbin==13.4.92 nvidia-cuda-cuobjdump==13.4.92
    (unzip the three wheels into one folder X)
    PYTHONPATH=X python3 make.py X

Writes empty_kernel.tileirbc (cuTile's exporter, bytecode version 13.1),
tile_only.fatbin (that bytecode alone, nvFatbinAddTileIR) and tile_ptx.fatbin (a PTX
entry, nvFatbinAddPTX, then the bytecode), and prints cuobjdump's listing of both.
"""
import ctypes
import io
import subprocess
import sys

import cuda.tile as ct
import cuda.tile._compile as compile_module
from cuda.tile.compilation import CallingConvention, KernelSignature, export_kernel

root = sys.argv[1]


@ct.kernel
def empty_kernel(x: ct.Constant[int]):
    pass


# The bytecode's debug information would name this script's folder; cuTile's own
# anonymised form (what it writes into crash dumps) names none.
original = compile_module._get_bytecode
compile_module._get_bytecode = lambda keeper, options, anonymize_debug_info: original(
    keeper, options, anonymize_debug_info=True
)

signature = KernelSignature([7], CallingConvention.cutile_python_v1()).with_mangled_symbol(
    "empty_kernel"
)
out = io.BytesIO()
export_kernel(empty_kernel, [signature], out, gpu_code="sm_100",
              output_format="tileir_bytecode", bytecode_version="13.1")
tile = out.getvalue()
open("empty_kernel.tileirbc", "wb").write(tile)

lib = ctypes.CDLL(f"{root}/nvidia/cu13/lib/libnvfatbin.so.13")


def check(result, what):
    if result != 0:
        raise SystemExit(f"{what} failed: {result}")


def fatbin(path, entries):
    handle = ctypes.c_void_p()
    options = (ctypes.c_char_p * 1)()
    check(lib.nvFatbinCreate(ctypes.byref(handle), options, ctypes.c_size_t(0)), "nvFatbinCreate")
    for kind, data, arch, name in entries:
        buf = ctypes.create_string_buffer(data, len(data))
        size = ctypes.c_size_t(len(data))
        if kind == "tileir":
            check(lib.nvFatbinAddTileIR(handle, buf, size, name, b""), "nvFatbinAddTileIR")
        else:
            check(lib.nvFatbinAddPTX(handle, buf, size, arch, name, b""), "nvFatbinAddPTX")
    n = ctypes.c_size_t()
    check(lib.nvFatbinSize(handle, ctypes.byref(n)), "nvFatbinSize")
    result = ctypes.create_string_buffer(n.value)
    check(lib.nvFatbinGet(handle, result), "nvFatbinGet")
    open(path, "wb").write(result.raw)
    lib.nvFatbinDestroy(ctypes.byref(handle))


ptx = b".version 8.7\n.target sm_100\n.address_size 64\n.visible .entry k() { ret; }\n\0"
fatbin("tile_only.fatbin", [("tileir", tile, b"", b"empty_kernel")])
fatbin("tile_ptx.fatbin", [("ptx", ptx, b"100", b"k"), ("tileir", tile, b"", b"empty_kernel")])
for path in ("tile_only.fatbin", "tile_ptx.fatbin"):
    subprocess.run([f"{root}/nvidia/cu13/bin/cuobjdump", path], check=True)
