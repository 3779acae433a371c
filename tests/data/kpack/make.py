"""Picks the committed files out of rocm-kpack's split outputs (called by regen.sh).

usage: make.py WORK DEST

WORK holds the splitter's outputs (out-none, out-zstd: librocrand; outjax-zstd: the JAX
plugin) and the unsplit originals (orig/); DEST is tests/data/kpack. Runs with
PYTHONPATH=<rocm-kpack>/python in a venv with msgpack and zstandard: the trimmed JAX
archives are written by rocm-kpack's own PackedKernelArchive, as its splitter does.
"""
import hashlib
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

from rocm_kpack.compression import NoOpCompressor, ZstdCompressor
from rocm_kpack.kpack import PackedKernelArchive

work, dest = Path(sys.argv[1]), Path(sys.argv[2])
# LLVM 22's bundler stops at librocrand's three-field host ID (`host-x86_64-unknown-linux`,
# "invalid bundle id read from the bundle") before the entries that follow it; LLVM 19's
# reads them.
bundlers = ["clang-offload-bundler-22", "clang-offload-bundler-19"]


def sha(b):
    return hashlib.sha256(b).hexdigest()


def section(path, name):
    with tempfile.NamedTemporaryFile() as t:
        subprocess.run(["objcopy", "-O", "binary", f"--only-section={name}", str(path), t.name], check=True)
        return Path(t.name).read_bytes()


def unbundle(bundle_bytes, target):
    """The code object of `target` in a (compressed or plain) bundle, by LLVM's own tool."""
    with tempfile.TemporaryDirectory() as d:
        i, o = Path(d) / "in", Path(d) / "out"
        i.write_bytes(bundle_bytes)
        for bundler in bundlers:
            r = subprocess.run([bundler, "--unbundle", "--type=o", f"--input={i}", f"--output={o}",
                                f"--targets=hipv4-amdgcn-amd-amdhsa--{target}"], capture_output=True)
            if r.returncode == 0:
                return o.read_bytes()
        raise RuntimeError(f"no bundler extracts {target}: {r.stderr}")


def bundles(fatbin):
    """The bundles of a .hip_fatbin in order: CCOB v3 by its total size, plain ones to the end."""
    out, at = [], 0
    while at < len(fatbin):
        if fatbin[at:at + 4] == b"CCOB":
            version, = struct.unpack_from("<H", fatbin, at + 4)
            assert version == 3, version
            total, = struct.unpack_from("<Q", fatbin, at + 8)
            out.append(fatbin[at:at + total])
            at += total
        elif fatbin[at:at + 24] == b"__CLANG_OFFLOAD_BUNDLE__":
            out.append(fatbin[at:])
            break
        else:
            at += 1  # zero padding between bundles
    return out


def describe(path, originals):
    """Header, TOC and every entry of an archive, read by rocm-kpack's reader, with the
    sha256 of the unsplit original's code object for the same key and architecture."""
    data = path.read_bytes()
    archive = PackedKernelArchive.read(path)
    _, _, toc_offset = struct.unpack_from("<4sIQ", data)
    import msgpack
    toc = msgpack.unpackb(data[toc_offset:])
    entries = []
    for key, by_arch in toc["toc"].items():
        for arch, meta in by_arch.items():
            code = archive.get_kernel(key, arch)
            entries.append({
                "binary_key": key, "arch": arch, "ordinal": meta["ordinal"],
                "original_size": meta["original_size"], "sha256": sha(code),
                "original_sha256": originals(key, arch),
            })
    return {
        "file": str(path.relative_to(dest)), "size": len(data), "sha256": sha(data),
        "toc_offset": toc_offset, "compression_scheme": toc["compression_scheme"],
        "gfx_arches": toc["gfx_arches"], "group_name": toc["group_name"], "entries": entries,
    }


expected = {"archives": [], "hosts": {}}

# librocrand: one plain bundle; the zstd archives of three architectures are committed.
rand_orig = work / "orig/librocrand.so.1.1"
rand_fatbin = section(rand_orig, ".hip_fatbin")
rand_split = work / "out-zstd/rand_lib_generic/math-libs/rocRAND/stage/lib/librocrand.so.1.1"
rd = dest / "rocrand"
shutil.rmtree(rd, ignore_errors=True)
(rd / ".kpack").mkdir(parents=True)
(rd / "ref.msgpack").write_bytes(section(rand_split, ".rocm_kpack_ref"))
(rd / "wrappers.bin").write_bytes(section(rand_split, ".hipFatBinSegment"))
for arch in ["gfx1030", "gfx90a:xnack+", "gfx90a:xnack-"]:
    name = f"rand_lib_{arch}.kpack"
    shutil.copy(work / f"out-zstd/rand_lib_{arch}/math-libs/rocRAND/stage/.kpack/{name}", rd / ".kpack" / name)
    expected["archives"].append(describe(rd / ".kpack" / name, lambda k, a: sha(unbundle(rand_fatbin, a))))
# The `none` archives are not committed (1.6-1.8 MB each); every one of them, and every
# zstd one, holds the bundler's code object.
for scheme in ["none", "zstd"]:
    for kp in sorted((work / f"out-{scheme}").glob("*/math-libs/rocRAND/stage/.kpack/*.kpack")):
        a = PackedKernelArchive.read(kp)
        for key, by_arch in a.toc.items():
            for arch in by_arch:
                assert sha(a.get_kernel(key, arch)) == sha(unbundle(rand_fatbin, arch)), (kp, arch)
expected["hosts"]["rocrand"] = {
    "original_sha256": sha(rand_orig.read_bytes()), "original_size": rand_orig.stat().st_size,
    "split_sha256": sha(rand_split.read_bytes()), "split_size": rand_split.stat().st_size,
    "split_none_sha256": sha((work / "out-none/rand_lib_generic/math-libs/rocRAND/stage/lib/librocrand.so.1.1").read_bytes()),
    "lib_dir": "math-libs/rocRAND/stage/lib",
}

# The JAX ROCm plugin: 45 CCOB v3 bundles. Its archives are 3.4-4.3 MB per architecture, so
# rocm-kpack's PackedKernelArchive repacks four of their entries (#0, #36, #37, #42), as
# read from the real split archives, into smaller archives of the same form, once per scheme.
jax_orig = work / "orig/xla_rocm_plugin.so"
jax_bundles = bundles(section(jax_orig, ".hip_fatbin"))
jax_split = work / "outjax-zstd/jax_lib_generic/jax_plugins/xla_rocm7/xla_rocm_plugin.so"
jd = dest / "jax"
shutil.rmtree(jd, ignore_errors=True)
(jd / ".kpack").mkdir(parents=True)
(jd / "none").mkdir()
(jd / "ref.msgpack").write_bytes(section(jax_split, ".rocm_kpack_ref"))
(jd / "wrappers.bin").write_bytes(section(jax_split, ".hipFatBinSegment"))
keep = [0, 36, 37, 42]
kernel = "jax_plugins/xla_rocm7/xla_rocm_plugin.so"


def jax_original(key, arch):
    return sha(unbundle(jax_bundles[int(key.rsplit("#", 1)[1])], arch))


def repack(out, arches, compressor):
    a = PackedKernelArchive(group_name="jax_lib", gfx_arch_family=arches[0] if len(arches) == 1 else "gfx110X",
                            gfx_arches=arches, compressor=compressor)
    for arch in arches:
        real = PackedKernelArchive.read(work / f"outjax-zstd/jax_lib_{arch}/jax_plugins/xla_rocm7/.kpack/jax_lib_{arch}.kpack")
        for i in keep:
            key = f"{kernel}#{i}"
            meta = real.toc[key][arch].get("metadata")
            a.add_kernel(a.prepare_kernel(key, arch, real.get_kernel(key, arch), metadata=meta))
    a.finalize_archive()
    a.write(out)
    expected["archives"].append(describe(out, jax_original))


for arch in ["gfx90a", "gfx1100"]:
    repack(jd / ".kpack" / f"jax_lib_{arch}.kpack", [arch], ZstdCompressor())
    repack(jd / "none" / f"jax_lib_{arch}.kpack", [arch], NoOpCompressor())
repack(jd / "none" / "jax_lib_gfx110X.kpack", ["gfx1100", "gfx1101"], NoOpCompressor())
expected["hosts"]["jax"] = {
    "original_sha256": sha(jax_orig.read_bytes()), "original_size": jax_orig.stat().st_size,
    "split_sha256": sha(jax_split.read_bytes()), "split_size": jax_split.stat().st_size,
    "lib_dir": "jax_plugins/xla_rocm7",
}
(dest / "expected.json").write_text(json.dumps(expected, indent=1) + "\n")
