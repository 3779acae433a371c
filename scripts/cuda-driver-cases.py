"""Makes a set of fatbinaries for the CUDA driver oracle (tests/data/cuda-driver*/README.md).

    python3 scripts/cuda-driver-cases.py POOL_DIR OUT_DIR [--cases N] [--seed S]

POOL_DIR holds pool.json and pool/ (tests/data/cuda-driver/): one image per label, each with a
kernel of its own name. This script adds variants made with the CUDA toolkit on PATH (ptxas,
fatbinary; scripts/fetch-nvidia-toolkit.sh): PTX texts with another `.version` or `.target`
line and the kernel renamed, and cubins compiled by ptxas from renamed PTX. It then writes
OUT_DIR/pool.json, OUT_DIR/pool/, and N fatbinaries OUT_DIR/fatbin/NNNN.fatbin whose entries,
their order and the compression are drawn at random (seeded), with OUT_DIR/cases.jsonl
listing each case's `entries_in_order` and `compress_mode`. The driver's answers are added by
scripts/cuda-driver-record.py on a machine with the GPU.
"""
import argparse
import json
import os
import random
import re
import shutil
import subprocess
import sys

# (new label, from label, .version or None, .target or None, kind of the result)
VARIANTS = [
    ("compute_90+isa90", "compute_90", "9.0", None, "ptx"),
    ("compute_90+isa78", "compute_90", "7.8", None, "ptx"),
    ("compute_90a+isa91", "compute_90a", "9.1", None, "ptx"),
    ("compute_90a+isa90", "compute_90a", "9.0", None, "ptx"),
    ("compute_80+isa90", "compute_80", "9.0", None, "ptx"),
    ("compute_75+isa78", "compute_75", "7.8", None, "ptx"),
    ("compute_89+isa90", "compute_89", "9.0", None, "ptx"),
    ("compute_100a", "compute_100", None, "sm_100a", "ptx"),
    ("compute_100f", "compute_100", None, "sm_100f", "ptx"),
    ("sm_90+c", "compute_90", None, None, "cubin"),
    ("sm_90a+c", "compute_90a", None, None, "cubin"),
    ("sm_87", "compute_86", None, "sm_87", "cubin"),
]

# How likely a label is drawn: the ones a sm_90 device can load, or that are close, more often.
def weight(label):
    base = label.split("+")[0]
    if base in ("sm_90", "sm_90a", "compute_90", "compute_90a"):
        return 4
    if base.startswith("compute_") and int(re.sub(r"\D", "", base)) < 90:
        return 3
    return 1


def kernel(label):
    return "k_" + label.replace("+", "_")


def arch_of(label):
    return label.split("+")[0]


def rename(text, old, new):
    return re.sub(re.escape(old) + r"(?=_param|\b)", new, text)


def make_variants(pool, src_dir, out_dir):
    for label, base, version, target, kind in VARIANTS:
        text = open(os.path.join(src_dir, pool[base]["file"])).read()
        text = rename(text, pool[base]["kernel"], kernel(label))
        if version:
            text = re.sub(r"^\.version [0-9.]+", ".version " + version, text, count=1, flags=re.M)
        if target:
            text = re.sub(r"^\.target \S+", ".target " + target, text, count=1, flags=re.M)
        arch = target.replace("sm_", "compute_") if target else arch_of(base)
        ptx = os.path.join(out_dir, "pool", label.replace("+", "_") + ".ptx")
        with open(ptx, "w") as f:
            f.write(text)
        if kind == "ptx":
            pool[label] = {"kind": "ptx", "arch": arch, "file": os.path.relpath(ptx, out_dir),
                           "kernel": kernel(label)}
        else:
            sm = arch.replace("compute_", "sm_")
            cubin = ptx[:-4] + ".cubin"
            subprocess.run(["ptxas", "-arch=" + sm, ptx, "-o", cubin], check=True)
            os.remove(ptx)
            pool[label] = {"kind": "cubin", "arch": sm, "file": os.path.relpath(cubin, out_dir),
                           "kernel": kernel(label)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("pool_dir")
    ap.add_argument("out_dir")
    ap.add_argument("--cases", type=int, default=300)
    ap.add_argument("--seed", type=int, default=20261128)
    a = ap.parse_args()
    pool = json.load(open(os.path.join(a.pool_dir, "pool.json")))
    os.makedirs(os.path.join(a.out_dir, "pool"), exist_ok=True)
    os.makedirs(os.path.join(a.out_dir, "fatbin"), exist_ok=True)
    for label, e in pool.items():
        shutil.copy(os.path.join(a.pool_dir, e["file"]), os.path.join(a.out_dir, e["file"]))
    make_variants(pool, a.pool_dir, a.out_dir)
    with open(os.path.join(a.out_dir, "pool.json"), "w") as f:
        json.dump(pool, f, indent=1, sort_keys=True)
    rng = random.Random(a.seed)
    labels = sorted(pool)
    weights = [weight(l) for l in labels]
    seen = set()
    with open(os.path.join(a.out_dir, "cases.jsonl"), "w") as out:
        case = 0
        while case < a.cases:
            n = rng.choice([1, 2, 2, 3, 3, 3, 4, 4, 5, 6])
            chosen = []
            while len(chosen) < n:
                l = rng.choices(labels, weights)[0]
                if l not in chosen:
                    chosen.append(l)
            mode = rng.choice([None, None, "size", "speed"])
            key = (tuple(chosen), mode)
            if key in seen:
                continue
            seen.add(key)
            name = "fatbin/%04d.fatbin" % case
            cmd = ["fatbinary", "--64", "--create", os.path.join(a.out_dir, name)]
            if mode:
                cmd += ["--compress-all", "--compress-mode=" + mode]
            for l in chosen:
                e = pool[l]
                sm = e["arch"].split("_")[1]
                cmd.append("--image3=kind=%s,sm=%s,file=%s" % (
                    "elf" if e["kind"] == "cubin" else "ptx", sm, os.path.join(a.out_dir, e["file"])))
            subprocess.run(cmd, check=True)
            out.write(json.dumps({"case": case, "file": name, "entries_in_order": chosen,
                                  "compress_mode": mode}) + "\n")
            case += 1


if __name__ == "__main__":
    sys.exit(main())
