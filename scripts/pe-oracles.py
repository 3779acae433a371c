#!/usr/bin/env python3
"""Records what LLVM 22's and NVIDIA's tools extract from the device code of PE images and
COFF objects (and archives of them), as JSON on standard output. scripts/make-pe-corpus.sh
runs it on tests/data/pe/ and on the fetched Windows wheels; tests/suite/pe.rs compares the
library with its answers.

    pe-oracles.py --cuda CUDA_TREE FILE...

No tool reads device code in a COFF file in place (LLVM 22's objdump and readobj refuse
COFF, Linux cuobjdump refuses the DLLs), so the containers are cut out first:
`llvm-objcopy-22 --dump-section` writes a section's data (an image's VirtualSize bytes, an
object's SizeOfRawData), the containers in it are cut by the sizes their headers give
(zero padding skipped), and each piece is read by the tool of its format:
  bundle / CCOB      clang-offload-bundler-22 -list and -unbundle (-type=o)
  OffloadBinary      llvm-objdump-22 --offloading on the object, clang-offload-packager-22
                     to extract each image
  fatbinary          cuobjdump -lelf -lptx, -xelf all -xptx all (also on the whole section)
  -type=o object     clang-offload-bundler-22 -list / -unbundle on the object itself, and the
                     __CLANG_OFFLOAD_BUNDLE__ sections as dumped
Wrapper records (.hipFatB / .nvFatBi and the objects' segment sections), ImageBase, the
DIR64 base relocations and the objects' relocations of the wrapper sections are recorded
from llvm-readobj-22 as well.
"""
import hashlib
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile

CONTAINER_SECTIONS = {".hip_fat", ".nv_fatb", ".hip_fatbin", ".nv_fatbin", ".llvm.offloading"}
WRAPPER_SECTIONS = {".hipFatB", ".nvFatBi", ".hipFatBinSegment", ".nvFatBinSegment"}
BUNDLE_PREFIX = "__CLANG_OFFLOAD_BUNDLE__"


def sha(b):
    return hashlib.sha256(b).hexdigest()


def run(*args, cwd=None, check=True):
    return subprocess.run(args, cwd=cwd, check=check, capture_output=True, text=True)


def readobj_sections(path):
    """(name, virtual size, raw size, file offset, virtual address) of every section."""
    text = run("llvm-readobj-22", "--sections", path).stdout
    out = []
    for block in text.split("Section {")[1:]:
        def field(k):
            return re.search(r"^\s*%s: (.*)$" % k, block, re.M).group(1)
        name = field("Name").rsplit(" (", 1)[0]
        out.append({
            "name": name,
            "virtual_size": int(field("VirtualSize"), 0),
            "raw_size": int(field("RawDataSize")),
            "file_offset": int(field("PointerToRawData"), 0),
            "virtual_address": int(field("VirtualAddress"), 0),
        })
    return out


def image_base(path):
    m = re.search(r"ImageBase: (0x[0-9A-Fa-f]+)", run("llvm-readobj-22", "--file-headers", path).stdout)
    return int(m.group(1), 16) if m else None


def base_relocs(path):
    text = run("llvm-readobj-22", "--coff-basereloc", path).stdout
    return [(t, int(a, 16)) for t, a in re.findall(r"Type: (\w+)\s+Address: (0x[0-9A-Fa-f]+)", text)]


def object_relocs(path, section):
    text = run("llvm-readobj-22", "-r", path).stdout
    m = re.search(r"Section \(\d+\) %s \{\n(.*?)\n\s*\}" % re.escape(section), text, re.S)
    if not m:
        return []
    out = []
    for line in m.group(1).splitlines():
        off, ty, sym = line.split()[:3]
        out.append({"offset": int(off, 16), "type": ty, "symbol": sym})
    return out


def dump(path, name, tmp):
    dst = os.path.join(tmp, "section.bin")
    run("llvm-objcopy-22", "--dump-section", "%s=%s" % (name, dst), path, os.path.join(tmp, "scratch"))
    return open(dst, "rb").read()


def container_end(data, pos):
    """Kind and end of the container at pos, by its header's sizes."""
    head = data[pos:pos + 64]
    if head.startswith(b"__CLANG_OFFLOAD_BUNDLE__"):
        (n,) = struct.unpack_from("<Q", data, pos + 24)
        at, end = pos + 32, 0
        for _ in range(n):
            off, size, idlen = struct.unpack_from("<QQQ", data, at)
            at += 24 + idlen
            end = max(end, off + size)
        return "bundle", pos + end
    if head.startswith(b"CCOB"):
        version = struct.unpack_from("<H", data, pos + 4)[0]
        total = struct.unpack_from("<Q" if version >= 3 else "<I", data, pos + 8)[0]
        return "ccob", pos + total
    if head.startswith(b"\x10\xff\x10\xad"):
        (size,) = struct.unpack_from("<Q", data, pos + 8)
        return "offload-binary", pos + size
    if head.startswith(struct.pack("<I", 0xBA55ED50)):
        hsize, size = struct.unpack_from("<HQ", data, pos + 6)
        return "fatbin", pos + hsize + size
    raise SystemExit("unknown container at section offset %#x" % pos)


def pieces(data):
    pos, out = 0, []
    while True:
        while pos < len(data) and data[pos] == 0:
            pos += 1
        if pos >= len(data):
            return out
        kind, end = container_end(data, pos)
        out.append((kind, pos, data[pos:end]))
        pos = end


def bundler_entries(path, tmp, type_="o"):
    ids = run("clang-offload-bundler-22", "-list", "-type=" + type_, "-input=" + path).stdout.split()
    outs = [os.path.join(tmp, "e%d" % i) for i in range(len(ids))]
    if ids:
        run("clang-offload-bundler-22", "-unbundle", "-type=" + type_, "-input=" + path,
            "-targets=" + ",".join(ids), *["-output=" + o for o in outs])
    return [{"id": i, "bytes": os.path.getsize(o), "sha256": sha(open(o, "rb").read())}
            for i, o in zip(ids, outs)]


def cuobjdump_entries(cuda, path, tmp):
    x = os.path.join(tmp, "x")
    shutil.rmtree(x, ignore_errors=True)
    os.makedirs(x)
    run(os.path.join(cuda, "bin/cuobjdump"), "-xelf", "all", "-xptx", "all", os.path.abspath(path), cwd=x)
    names = []
    for n in os.listdir(x):
        m = re.match(r".*\.(\d+)\.(sm_\w+)\.(cubin|ptx)$", n)
        names.append((int(m.group(1)), m.group(3), m.group(2), n))
    # cuobjdump numbers cubins and PTX separately, each in file order.
    names.sort(key=lambda t: (t[1], t[0]))
    return [{"kind": "elf" if k == "cubin" else "ptx", "arch": a,
             "bytes": os.path.getsize(os.path.join(x, n)),
             "sha256": sha(open(os.path.join(x, n), "rb").read())} for _, k, a, n in names]


def offload_binaries(path, tmp):
    """Images of the OffloadBinaries of an object's .llvm.offloading, as LLVM lists them."""
    text = run("llvm-objdump-22", "--offloading", path).stdout
    out = []
    for block in text.split("OFFLOADING IMAGE")[1:]:
        f = dict(re.findall(r"^(\w+)\s+(.*\S)\s*$", block, re.M))
        out.append({"kind": f["kind"], "arch": f["arch"], "triple": f["triple"],
                    "producer": f["producer"], "path": os.path.join(tmp, "img")})
    return out


def describe_coff(path, cuda, tmp):
    data = open(path, "rb").read()
    is_image = data[:2] == b"MZ"
    rec = {"bytes": len(data), "sha256": sha(data), "kind": "image" if is_image else "object",
           "sections": [], "wrappers": []}
    base = image_base(path) if is_image else None
    if is_image:
        rec["image_base"] = base
    secs = readobj_sections(path)
    relocs = base_relocs(path) if is_image else []
    for s in secs:
        name = s["name"]
        if name in CONTAINER_SECTIONS:
            content = dump(path, name, tmp)
            sec = dict(s, dumped_bytes=len(content), dumped_sha256=sha(content), containers=[])
            if name.startswith(".nv_fat"):
                p = os.path.join(tmp, "whole.fatbin")
                open(p, "wb").write(content)
                sec["cuobjdump_whole_section"] = len(cuobjdump_entries(cuda, p, tmp))
            for kind, off, piece in pieces(content):
                p = os.path.join(tmp, "piece")
                open(p, "wb").write(piece)
                c = {"kind": kind, "offset": off, "bytes": len(piece), "sha256": sha(piece)}
                if kind in ("bundle", "ccob"):
                    c["entries"] = bundler_entries(p, tmp)
                elif kind == "fatbin":
                    c["entries"] = cuobjdump_entries(cuda, p, tmp)
                sec["containers"].append(c)
            if name == ".llvm.offloading":
                # The OffloadBinaries laid out back to back: LLVM lists their images.
                images = []
                whole = os.path.join(tmp, "offloading.bin")
                open(whole, "wb").write(content)
                for img in offload_binaries(path, tmp):
                    run("clang-offload-packager-22", whole,
                        "--image=file=%s,triple=%s,arch=%s" % (img["path"], img["triple"], img["arch"]))
                    b = open(img["path"], "rb").read()
                    images.append({"kind": img["kind"], "arch": img["arch"], "triple": img["triple"],
                                   "producer": img["producer"], "bytes": len(b), "sha256": sha(b)})
                sec["images"] = images
            rec["sections"].append(sec)
        elif name in WRAPPER_SECTIONS:
            content = dump(path, name, tmp)
            for at in range(0, len(content) - 23, 24):
                magic, version, ptr, second = struct.unpack_from("<IIQQ", content, at)
                if magic == 0 and version == 0:
                    continue
                w = {"section": name, "offset": at, "magic": magic, "version": version,
                     "pointer": ptr, "second": second}
                if is_image:
                    rva = s["virtual_address"] + at
                    w["dir64_at_8"] = ("DIR64", rva + 8) in relocs
                    w["dir64_at_16"] = ("DIR64", rva + 16) in relocs
                    w["target_rva"] = ptr - base
                rec["wrappers"].append(w)
            if not is_image:
                rec.setdefault("wrapper_relocations", {})[name] = object_relocs(path, name)
    if any(s["name"].startswith(BUNDLE_PREFIX) for s in secs):
        rec["object_bundle"] = bundler_entries(path, tmp)
        rec["object_bundle_sections"] = []
        for s in secs:
            if s["name"].startswith(BUNDLE_PREFIX):
                content = dump(path, s["name"], tmp)
                rec["object_bundle_sections"].append({
                    "id": s["name"][len(BUNDLE_PREFIX):], "bytes": len(content), "sha256": sha(content)})
    if is_image:
        rec["dir64_relocations"] = sum(1 for t, _ in relocs if t == "DIR64")
    return rec


def describe(path, cuda):
    with tempfile.TemporaryDirectory() as tmp:
        data = open(path, "rb").read()
        if data.startswith(b"!<arch>\n"):
            names = run("llvm-ar-22", "t", os.path.abspath(path)).stdout.split()
            run("llvm-ar-22", "x", os.path.abspath(path), cwd=tmp)
            members = []
            for n in names:
                with tempfile.TemporaryDirectory() as t2:
                    m = describe_coff(os.path.join(tmp, n), cuda, t2)
                members.append(dict(m, name=n))
            return {"bytes": len(data), "sha256": sha(data), "kind": "archive", "members": members}
        return describe_coff(path, cuda, tmp)


def main():
    args = sys.argv[1:]
    if len(args) < 3 or args[0] != "--cuda":
        raise SystemExit(__doc__)
    cuda, files = args[1], args[2:]
    tools = {
        "llvm": run("llvm-readobj-22", "--version").stdout.split("version")[1].split()[0],
        "cuobjdump": run(os.path.join(cuda, "bin/cuobjdump"), "--version").stdout.strip().splitlines()[-1],
    }
    out = {"tools": tools, "files": {f: describe(f, cuda) for f in files}}
    json.dump(out, sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
