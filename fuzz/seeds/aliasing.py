#!/usr/bin/env python3
"""Aliasing shapes (issue 43): containers whose entries all name one image.

    fuzz/seeds/aliasing.py OUTDIR [--big] [--fatbin FILE]

Writes small seeds for the fuzz targets (every shape under 64 KiB): an OffloadBinary v2
whose entries name one image, a bundle whose entries name one image, the same bundle as a
CCOB (zlib, and zstd when the `zstd` command exists), an OffloadBinary whose entries
name one nested OffloadBinary of entries naming one image, with --fatbin an OffloadBinary
whose entries all name that NVIDIA fatbinary (walked as a unit once), and CCOBs whose zstd
payload is two frames or has skippable frames, and whose zlib stream has bytes after it. With --big it also writes
`ccob-65536x900m.ccob`: the 29 KB CCOB of docs/PERFORMANCE.md (65,535 device entries and a host entry
naming one 900 MB image, zstd --long=27; needs the `zstd` command and about 1 GB of disk
for a moment).
"""
import os
import shutil
import struct
import subprocess
import sys
import zlib
import hashlib


def offload_binary_v2(n, image, arch=b"gfx906", image_kind=1, offload_kind=4):
    """A v2 OffloadBinary of n entries, all naming one image (two strings each)."""
    strtab = b"\0triple\0amdgcn-amd-amdhsa\0arch\0" + arch + b"\0"
    k_triple, v_triple = 1, 8
    k_arch = strtab.index(b"arch\0")
    v_arch = strtab.index(arch + b"\0")
    header = 32
    entries_at = header
    records_at = entries_at + 40 * n
    strtab_at = records_at + 48 * n
    image_at = (strtab_at + len(strtab) + 7) // 8 * 8
    size = (image_at + len(image) + 7) // 8 * 8
    out = bytearray()
    out += b"\x10\xff\x10\xad" + struct.pack("<IQQQ", 2, size, entries_at, n)
    for i in range(n):
        out += struct.pack("<HHIQQQQ", image_kind, offload_kind, 0, records_at + 48 * i, 2, image_at, len(image))
    for _ in range(n):
        out += struct.pack("<QQQ", strtab_at + k_triple, strtab_at + v_triple, len(b"amdgcn-amd-amdhsa"))
        out += struct.pack("<QQQ", strtab_at + k_arch, strtab_at + v_arch, len(arch))
    out += strtab
    out += b"\0" * (image_at - len(out))
    out += image
    out += b"\0" * (size - len(out))
    return bytes(out)


def bundle_header(n, image_size, arch="gfx906"):
    """A bundle of a host entry and n device entries naming one image (returned without it)."""
    ids = [b"host-x86_64-unknown-linux-gnu-"]
    ids += [("hipv4-amdgcn-amd-amdhsa--%s" % arch).encode()] * n
    hdr = 24 + 8 + sum(24 + len(i) for i in ids)
    at = (hdr + 4095) // 4096 * 4096
    out = bytearray(b"__CLANG_OFFLOAD_BUNDLE__" + struct.pack("<Q", len(ids)))
    for k, i in enumerate(ids):
        out += struct.pack("<QQQ", at, 0 if k == 0 else image_size, len(i)) + i
    out += b"\0" * (at - len(out))
    return bytes(out)


def ccob_v3(content, method, payload):
    md5 = hashlib.md5(content).digest()[:8]
    return b"CCOB" + struct.pack("<HHQQ", 3, method, 32 + len(payload), len(content)) + md5 + payload


def elf_image(size, arch=b"gfx906"):
    """An AMDGPU code object header (e_machine 224, e_flags gfx906) padded to size."""
    e_flags = {b"gfx906": 0x2F, b"gfx90a": 0x3F}.get(arch, 0x2F)
    ident = b"\x7fELF\x02\x01\x01\x40\x02" + b"\0" * 7
    hdr = ident + struct.pack("<HHIQQQIHHHHHH", 3, 224, 1, 0, 0, 0, e_flags, 64, 56, 0, 64, 0, 0)
    return hdr + b"\0" * (size - len(hdr))


def main():
    out = sys.argv[1]
    big = "--big" in sys.argv[2:]
    os.makedirs(out, exist_ok=True)
    img = elf_image(4096)
    ob = offload_binary_v2(256, img)
    write(out, "ob-256x4k.bin", ob)
    nested = offload_binary_v2(64, offload_binary_v2(64, img))
    write(out, "ob-nested-64x64.bin", nested)
    b = bundle_header(256, len(img)) + img
    write(out, "bundle-256x4k.bundle", b)
    write(out, "ccob-zlib-256x4k.ccob", ccob_v3(b, 0, zlib.compress(b, 9)))
    skippable = struct.pack("<II", 0x184D2A50, 8) + b"\xa5" * 8
    write(out, "ccob-zlib-trailing.ccob", ccob_v3(b, 0, zlib.compress(b, 9) + b"JUNKJUNK"))
    if shutil.which("zstd"):
        zstd = lambda x: subprocess.run(["zstd", "-19", "-q", "-c"], input=x, stdout=subprocess.PIPE, check=True).stdout
        write(out, "ccob-zstd-256x4k.ccob", ccob_v3(b, 1, zstd(b)))
        half = len(b) // 2
        write(out, "ccob-zstd-two-frames.ccob", ccob_v3(b, 1, zstd(b[:half]) + zstd(b[half:])))
        write(out, "ccob-zstd-skippable.ccob", ccob_v3(b, 1, skippable + zstd(b) + skippable))
    if "--fatbin" in sys.argv:
        fatbin = open(sys.argv[sys.argv.index("--fatbin") + 1], "rb").read()
        write(out, "ob-fatbin-256.bin", offload_binary_v2(256, fatbin, b"sm_86", 4, 2))
    if big:
        big_ccob(out)


def big_ccob(out):
    """65,536 entries naming one 900 MB image, zstd --long=27: about 29 KB."""
    n, size = 65535, 900 * 1000 * 1000
    hdr = bundle_header(n, size)
    raw = os.path.join(out, "ccob-65536x900m.raw")
    md5 = hashlib.md5()
    with open(raw, "wb") as f:
        for chunk in (hdr, elf_image(4096)):
            f.write(chunk)
            md5.update(chunk)
        zero = b"\0" * (1 << 20)
        left = size - 4096
        while left:
            c = zero[: min(left, len(zero))]
            f.write(c)
            md5.update(c)
            left -= len(c)
    total = len(hdr) + size
    z = subprocess.run(["zstd", "-19", "--long=27", "-q", "-c", raw], stdout=subprocess.PIPE, check=True).stdout
    os.unlink(raw)
    blob = b"CCOB" + struct.pack("<HHQQ", 3, 1, 32 + len(z), total) + md5.digest()[:8] + z
    write(out, "ccob-65536x900m.ccob", blob)


def write(d, name, data):
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


if __name__ == "__main__":
    main()
