"""Runs rocm-kpack's C loader (through kpack_probe) on every case below and writes what it
did to tests/data/kpack/oracle.json (called by regen.sh).

usage: run.py PROBE WORK DEST

PROBE is target/external/kpack-loader/kpack_probe (scripts/build-kpack-loader.sh), WORK the
directory with the splitter's outputs (the split host libraries are taken from there), DEST
tests/data/kpack. Each case lays out a fresh install tree under WORK/oracle-root (the split
host library, hard-linked, and the committed archives it names, copied or patched), runs the
probe there with ROCM_KPACK_DEBUG=1 and the case's environment, and records the archive paths
the loader tried in order (its "archive not found" / "opened and cached archive" / "failed
to open archive" lines), the archive and architecture it matched, and its answer: the code
object's size and sha256, or the kpack error code. Paths under the tree are written as
$ROOT/...; relative paths in the environment are relative to $ROOT, the probe's working
directory.
"""
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

probe, work, dest = Path(sys.argv[1]).resolve(), Path(sys.argv[2]).resolve(), Path(sys.argv[3]).resolve()
root = work / "oracle-root"

HOSTS = {
    "rocrand": ("out-zstd/rand_lib_generic/math-libs/rocRAND/stage/lib/librocrand.so.1.1",
                "math-libs/rocRAND/stage/lib/librocrand.so.1.1"),
    "jax": ("outjax-zstd/jax_lib_generic/jax_plugins/xla_rocm7/xla_rocm_plugin.so",
            "jax_plugins/xla_rocm7/xla_rocm_plugin.so"),
}
R = "rocrand/math-libs/rocRAND/stage/.kpack/"
RAND = {R + f"rand_lib_{a}.kpack": f"rocrand/.kpack/rand_lib_{a}.kpack"
        for a in ["gfx1030", "gfx90a:xnack+", "gfx90a:xnack-"]}
J = "jax/jax_plugins/xla_rocm7/.kpack/"
JAX = {J + f"jax_lib_{a}.kpack": f"jax/.kpack/jax_lib_{a}.kpack" for a in ["gfx90a", "gfx1100"]}
JAX.update({f"jax/none/{n}": f"jax/none/{n}" for n in
            ["jax_lib_gfx90a.kpack", "jax_lib_gfx1100.kpack", "jax_lib_gfx110X.kpack"]})
GFX1030 = "$ROOT/" + R + "rand_lib_gfx1030.kpack"
XP = "$ROOT/" + R + "rand_lib_gfx90a:xnack+.kpack"
# ROCM_KPACK_PATH and ROCM_KPACK_PATH_PREFIX are split at ':', so an archive whose name has a
# ':' (every xnack archive) cannot be named there on Linux: the cases use copies.
COPY_XP = {"other/xnack_plus.kpack": ("rocrand/.kpack/rand_lib_gfx90a:xnack+.kpack", [])}
COPY_XM = {"other/xnack_minus.kpack": ("rocrand/.kpack/rand_lib_gfx90a:xnack-.kpack", [])}


def relabel(committed, old, new):
    """Patches that rename architecture `old` to `new` (same length) in an archive's TOC."""
    data = (dest / committed).read_bytes()
    toc = int.from_bytes(data[8:16], "little")
    out, at = [], data.find(old, toc)
    while at >= 0:
        out.append((at, new.hex()))
        at = data.find(old, at + 1)
    return out


# An archive that claims gfx90a:xnack+ but holds the xnack- code object: shows that the
# prefix archive is matched before the embedded ones.
FAKE_XP = {"other/fake_xnack_plus.kpack": ("rocrand/.kpack/rand_lib_gfx90a:xnack-.kpack",
                                          relabel("rocrand/.kpack/rand_lib_gfx90a:xnack-.kpack",
                                                  b"gfx90a:xnack-", b"gfx90a:xnack+"))}

# (name, host, wrapper index, arch list, environment, extra files {tree path: (committed
# file, [(offset, hex bytes)])}); every case also has the host's committed archives.
CASES = [
    ("rocrand_gfx1030", "rocrand", 0, ["amdgcn-amd-amdhsa--gfx1030"], {}, {}),
    ("rocrand_gfx1030_no_prefix", "rocrand", 0, ["gfx1030"], {}, {}),
    ("rocrand_xnack_plus_exact", "rocrand", 0, ["amdgcn-amd-amdhsa--gfx90a:sramecc+:xnack+"], {}, {}),
    ("rocrand_feature_fallback", "rocrand", 0, ["amdgcn-amd-amdhsa--gfx90a:sramecc+:xnack-"], {}, {}),
    ("rocrand_bare_agent_one_way", "rocrand", 0, ["amdgcn-amd-amdhsa--gfx90a"], {}, {}),
    ("rocrand_missing_archive", "rocrand", 0, ["amdgcn-amd-amdhsa--gfx1151"], {}, {}),
    ("rocrand_missing_archive_gfx942", "rocrand", 0, ["amdgcn-amd-amdhsa--gfx942:sramecc+:xnack-"], {}, {}),
    ("rocrand_second_arch", "rocrand", 0, ["amdgcn-amd-amdhsa--gfx1100", "amdgcn-amd-amdhsa--gfx1030"], {}, {}),
    ("rocrand_arch_order", "rocrand", 0, ["gfx90a:xnack-", "gfx1030"], {}, {}),
    ("rocrand_three_features", "rocrand", 0, ["gfx90a:sramecc+:xnack-:foo+"], {}, {}),
    ("rocrand_empty_feature", "rocrand", 0, ["gfx90a::xnack-:"], {}, {}),
    ("rocrand_prefix_only", "rocrand", 0, ["amdgcn-amd-amdhsa--"], {}, {}),
    ("rocrand_env_path_wrong_arch", "rocrand", 0, ["amdgcn-amd-amdhsa--gfx1030"],
     {"ROCM_KPACK_PATH": "$ROOT/other/xnack_plus.kpack"}, COPY_XP),
    ("rocrand_env_path_colon_in_name", "rocrand", 0, ["gfx90a:xnack+"], {"ROCM_KPACK_PATH": XP}, {}),
    ("rocrand_env_path_list", "rocrand", 0, ["gfx90a:sramecc-:xnack-"],
     {"ROCM_KPACK_PATH": "::$ROOT/missing.kpack::$ROOT/other/xnack_minus.kpack:"}, COPY_XM),
    ("rocrand_env_path_relative", "rocrand", 0, ["gfx1030"],
     {"ROCM_KPACK_PATH": R + "rand_lib_gfx1030.kpack"}, {}),
    ("rocrand_env_path_missing", "rocrand", 0, ["gfx1030"], {"ROCM_KPACK_PATH": "$ROOT/nowhere/x.kpack"}, {}),
    ("rocrand_env_prefix", "rocrand", 0, ["gfx90a:xnack-"],
     {"ROCM_KPACK_PATH_PREFIX": "$ROOT/other/xnack_plus.kpack"}, COPY_XP),
    ("rocrand_env_prefix_first", "rocrand", 0, ["gfx90a:xnack+"],
     {"ROCM_KPACK_PATH_PREFIX": "$ROOT/other/fake_xnack_plus.kpack"}, FAKE_XP),
    ("rocrand_env_prefix_other_key", "rocrand", 0, ["gfx1100"],
     {"ROCM_KPACK_PATH_PREFIX": "$ROOT/" + J + "jax_lib_gfx1100.kpack"}, {}),
    ("rocrand_env_path_over_prefix", "rocrand", 0, ["gfx1030"],
     {"ROCM_KPACK_PATH": GFX1030, "ROCM_KPACK_PATH_PREFIX": "$ROOT/other/xnack_plus.kpack"}, COPY_XP),
    ("rocrand_disabled", "rocrand", 0, ["gfx1030"], {"ROCM_KPACK_DISABLE": "1"}, {}),
    ("rocrand_disable_zero", "rocrand", 0, ["gfx1030"], {"ROCM_KPACK_DISABLE": "0"}, {}),
    ("rocrand_bad_version_skipped", "rocrand", 0, ["gfx1030"], {"ROCM_KPACK_PATH": "$ROOT/bad/v2.kpack"},
     {"bad/v2.kpack": ("rocrand/.kpack/rand_lib_gfx1030.kpack", [(4, "02")])}),
    ("rocrand_bad_frame", "rocrand", 0, ["gfx1030"], {"ROCM_KPACK_PATH": "$ROOT/bad/frame.kpack"},
     {"bad/frame.kpack": ("rocrand/.kpack/rand_lib_gfx1030.kpack", [(72, "00")])}),
    ("jax_gfx90a_co0", "jax", 0, ["amdgcn-amd-amdhsa--gfx90a:sramecc+:xnack-"], {}, {}),
    ("jax_gfx1100_co36", "jax", 36, ["amdgcn-amd-amdhsa--gfx1100"], {}, {}),
    ("jax_kernel_not_found", "jax", 1, ["amdgcn-amd-amdhsa--gfx90a"], {}, {}),
    ("jax_multi_arch_none", "jax", 42, ["gfx1101"], {"ROCM_KPACK_PATH": "$ROOT/jax/none/jax_lib_gfx110X.kpack"}, {}),
    ("jax_none_feature_fallback", "jax", 37, ["gfx90a:sramecc+:xnack-"],
     {"ROCM_KPACK_PATH": "$ROOT/jax/none/jax_lib_gfx90a.kpack"}, {}),
]

LINE = re.compile(r"^kpack: (archive not found|opened and cached archive|failed to open archive): (.*?)( \(error (\d+)\))?$")
MATCH = re.compile(r"^kpack:   archive (.*) has architecture (.*)$")


def rel(p):
    s = str(root)
    return "$ROOT" + p[len(s):] if p.startswith(s + "/") else p


out = []
for name, host, wrapper, arches, env, extra in CASES:
    shutil.rmtree(root, ignore_errors=True)
    src, lib = HOSTS[host]
    (root / host / lib).parent.mkdir(parents=True)
    os.link(work / src, root / host / lib)
    files = {}
    for tree, committed in (RAND if host == "rocrand" else JAX).items():
        files[tree] = {"from": committed, "patch": []}
    for tree, (committed, patch) in extra.items():
        files[tree] = {"from": committed, "patch": [[o, h] for o, h in patch]}
    if name == "rocrand_env_prefix_other_key":
        files.update({k: {"from": v, "patch": []} for k, v in JAX.items() if k.startswith("jax/")})
    for tree, f in files.items():
        data = bytearray((dest / f["from"]).read_bytes())
        for o, h in f["patch"]:
            b = bytes.fromhex(h)
            data[o:o + len(b)] = b
        (root / tree).parent.mkdir(parents=True, exist_ok=True)
        (root / tree).write_bytes(bytes(data))
    e = {k: v for k, v in os.environ.items() if not k.startswith("ROCM_KPACK")}
    e.update({k: v.replace("$ROOT", str(root)) for k, v in env.items()})
    e["ROCM_KPACK_DEBUG"] = "1"
    r = subprocess.run([str(probe), f"{host}/{lib}", str(wrapper), *arches], cwd=root, env=e,
                       capture_output=True, text=True, check=True)
    probed, matched = [], None
    for line in r.stderr.splitlines():
        m = LINE.match(line)
        if m:
            status = {"archive not found": "missing", "opened and cached archive": "opened"}.get(
                m.group(1), f"failed {m.group(4)}")
            probed.append([rel(m.group(2)), status])
        m = MATCH.match(line)
        if m:
            matched = {"archive": rel(m.group(1)), "arch": m.group(2)}
    words = r.stdout.split()
    result = ({"ok": {"size": int(words[1]), "sha256": words[2]}} if words[0] == "ok"
              else {"error": int(words[1])})
    out.append({"name": name, "host": host, "lib": f"$ROOT/{host}/{lib}", "wrapper": wrapper,
                "arches": arches, "env": env, "files": files, "probed": probed,
                "matched": matched, "result": result})
    print(name, result, file=sys.stderr)
shutil.rmtree(root, ignore_errors=True)
(dest / "oracle.json").write_text(json.dumps({"cases": out}, indent=1) + "\n")
