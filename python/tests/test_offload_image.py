"""The installed wheel: the offload_image module and the loader-sim command.

Run by scripts/test-python.sh in a fresh virtual environment with the wheel installed
(never against the source tree: `offload_image` must come from site-packages)."""

import hashlib
import json
import os
import pathlib
import shutil
import subprocess
import sys
import sysconfig
import venv
from typing import Any, List, Tuple

import pytest

import offload_image
from conftest import CORPUS, external_file

BUNDLE = CORPUS / "bundles" / "hip_6arch.bundle"


def command(*args: str) -> Tuple[int, List[Any]]:
    """The installed loader-sim command's JSON records and exit status."""
    exe = shutil.which("loader-sim")
    assert exe is not None, "the wheel puts loader-sim on PATH"
    p = subprocess.run([exe, *args], capture_output=True, text=True)
    return p.returncode, [json.loads(l) for l in p.stdout.splitlines() if l.strip()]


def test_installed_from_the_wheel() -> None:
    # The module and the command come from the environment the wheel was installed into.
    here = pathlib.Path(offload_image.__file__).resolve()
    assert pathlib.Path(sysconfig.get_paths()["purelib"]).resolve() in here.parents
    scripts = pathlib.Path(sysconfig.get_paths()["scripts"]).resolve()
    exe = shutil.which("loader-sim")
    assert exe is not None
    assert pathlib.Path(exe).resolve().parent == scripts
    assert (here.parent / "py.typed").exists()
    assert (here.parent / "_native.pyi").exists()
    assert offload_image.__version__ == subprocess.run(
        ["loader-sim", "--version"], capture_output=True, text=True
    ).stdout.split()[-1]


def test_list_gives_the_bytes_llvm_extracts(manifest: List[Any]) -> None:
    records = offload_image.list_images(BUNDLE)
    # The same records as the command's --json output.
    assert records == command("list", str(BUNDLE), "--json")[1]
    # Every entry, with the sha256 clang-offload-bundler's -unbundle gave (MANIFEST.jsonl).
    want = {
        m["entry_id"]: m["sha256"]
        for m in manifest
        if m["file"] == "bundles/hip_6arch.bundle" and m["record"] == "entry"
    }
    assert len(want) == 7
    assert {r["entry_id"]: r["sha256"] for r in records} == want
    # Without hashes: the same entries, sha256 null.
    bare = offload_image.list_images(BUNDLE, sha256=False)
    assert [r["entry_id"] for r in bare] == [r["entry_id"] for r in records]
    assert all(r["sha256"] is None for r in bare)


def test_select_chooses_as_the_rules_say(manifest: List[Any]) -> None:
    records = offload_image.select(BUNDLE, ["gfx90a:xnack-", "gfx90a:xnack+", "gfx1201"])
    assert records == command(
        "select", str(BUNDLE), "--json", "--policy", "best",
        "--target", "gfx90a:xnack-", "--target", "gfx90a:xnack+", "--target", "gfx1201",
    )[1]
    chosen = {r["target"]: r["selected"] for r in records}
    assert chosen == {
        "gfx90a:xnack-": "hipv4-amdgcn-amd-amdhsa--gfx90a:xnack-",
        "gfx90a:xnack+": "hipv4-amdgcn-amd-amdhsa--gfx90a:xnack+",
        "gfx1201": None,
    }
    # The chosen bytes are the ones LLVM extracts for that entry.
    r = offload_image.select(BUNDLE, "gfx90a:xnack-", sha256=True)[0]
    entry = next(
        m for m in manifest
        if m["file"] == "bundles/hip_6arch.bundle"
        and m.get("entry_id") == "hipv4-amdgcn-amd-amdhsa--gfx90a:xnack-"
    )
    assert (r["offset"], r["size"], r["sha256"]) == (entry["offset"], entry["size"], entry["sha256"])


def test_errors_carry_kind_and_offset(tmp_path: pathlib.Path) -> None:
    # A bundle cut inside its entry table: the library's kind and the byte offset.
    cut = tmp_path / "cut.bundle"
    cut.write_bytes(BUNDLE.read_bytes()[:100])
    with pytest.raises(offload_image.Error) as e:
        offload_image.list_images(cut)
    assert e.value.kind == "truncated"
    assert e.value.offset is not None and 24 <= e.value.offset <= 100
    assert f"at byte {e.value.offset}" in e.value.message
    # The command says the same on standard error, and exits 2.
    p = subprocess.run(["loader-sim", "list", str(cut)], capture_output=True, text=True)
    assert p.returncode == 2 and f"at byte {e.value.offset}" in p.stderr
    # Not an offload file at all.
    junk = tmp_path / "junk.bin"
    junk.write_bytes(b"\x7fNOPE" * 100)
    with pytest.raises(offload_image.Error) as e:
        offload_image.select(junk, "gfx90a")
    assert (e.value.kind, e.value.offset) == ("bad-magic", 0)
    # A target the grammar refuses, and a missing file.
    with pytest.raises(offload_image.Error) as e:
        offload_image.select(BUNDLE, "gfx90a:xnack*")
    assert e.value.kind == "invalid-id"
    with pytest.raises(offload_image.Error) as e:
        offload_image.list_images(tmp_path / "absent")
    assert e.value.kind is None and "cannot open" in e.value.message
    # Arguments the command does not take.
    with pytest.raises(offload_image.Error) as e:
        offload_image.run(["list", "--no-such-option"])
    assert e.value.kind == "usage"
    # register --load starts a process of its own: the command does that, not the module.
    with pytest.raises(offload_image.Error) as e:
        offload_image.run(["register", "--load", str(BUNDLE), "--device", "gfx90a"])
    assert e.value.kind == "usage" and "loader-sim command" in e.value.message
    with pytest.raises(offload_image.Error) as e:
        offload_image.run(["offload-bundler", "-list", "-type=o", f"-input={BUNDLE}"])
    assert e.value.kind == "usage"
    # A host file whose reader error the command quotes keeps the library's kind.
    with pytest.raises(offload_image.Error) as e:
        offload_image.run(["register", str(BUNDLE), "--device", "gfx90a"])
    assert e.value.kind is not None and e.value.offset is not None, e.value


def test_register_load_uses_the_shim_the_wheel_installed() -> None:
    # librocrand's constructor registers its fat binary with the shim the wheel put in
    # <prefix>/lib: the code objects chosen at run time are those found statically.
    lib = external_file("unpacked", "usr", "lib", "x86_64-linux-gnu", "librocrand.so.1")
    shim = pathlib.Path(sys.prefix) / "lib" / "libloader_sim_rt.so"
    assert shim.exists()
    devices = ["--device", "gfx90a:xnack-", "--device", "gfx1030"]
    code_s, static = command("register", str(lib), "--json", *devices)
    code_d, loaded = command("register", "--load", str(lib), "--json", *devices)
    assert (code_s, code_d) == (0, 0)
    def pick(rs: List[Any]) -> List[Any]:
        return sorted((r["device"], r["selected"], r["sha256"]) for r in rs)

    assert pick(loaded) == pick(static)
    assert {r["selected"] for r in loaded} == {
        "hipv4-amdgcn-amd-amdhsa--gfx90a:xnack-",
        "hipv4-amdgcn-amd-amdhsa--gfx1030",
    }


def test_validate_reports_findings_with_offsets() -> None:
    damaged = CORPUS / "malformed" / "bundle_trunc_data.bundle"
    findings = offload_image.validate(damaged)
    assert [offload_image.as_dict(f) for f in findings] == command("validate", "--json", str(damaged))[1]
    errors = [f for f in findings if f.severity == "error"]
    # The last entry runs past the end of the 21,368-byte file (MANIFEST.jsonl's mutation).
    assert errors and errors[0].code == "truncated"
    assert offload_image.validate(BUNDLE) == []


def test_prune_writes_what_llvm_reads(tmp_path: pathlib.Path) -> None:
    out = tmp_path / "pruned.bundle"
    report = offload_image.prune(BUNDLE, "gfx90a:xnack-", out)
    summary = report.summary
    assert summary.size_after == out.stat().st_size < BUNDLE.stat().st_size
    # LLVM's bundler lists the kept entries, and gives back the original bytes.
    bundler = shutil.which("clang-offload-bundler-22")
    assert bundler, "clang-offload-bundler-22 (scripts/setup.sh installs it)"
    listed = subprocess.run(
        [bundler, "-list", "-type=o", f"-input={out}"], capture_output=True, text=True, check=True
    ).stdout.split()
    assert sorted(listed) == ["hipv4-amdgcn-amd-amdhsa--gfx90a:xnack-", "host-x86_64-unknown-linux-gnu-"]
    got = tmp_path / "got.co"
    subprocess.run(
        [bundler, "-unbundle", "-type=o", f"-input={out}", f"-output={got}",
         "-targets=hipv4-amdgcn-amd-amdhsa--gfx90a:xnack-"],
        check=True,
    )
    want = offload_image.select(BUNDLE, "gfx90a:xnack-", sha256=True)[0]["sha256"]
    assert hashlib.sha256(got.read_bytes()).hexdigest() == want
    # A dry run writes nothing and reports the same sizes.
    dry = offload_image.prune(BUNDLE, ["gfx90a:xnack-"], dry_run=True)
    assert dry.summary.size_after == summary.size_after and dry.summary.dry_run is True


def test_doctor_on_a_real_wheel() -> None:
    wheel = external_file("nvidia-wheels", pattern="nvidia_curand_cu12-*.whl")
    records = offload_image.doctor(wheel, ["sm_86", "sm_35"]).records
    # The command's records (the summary's timing aside).
    assert [offload_image.as_dict(r) for r in records] == command(
        "doctor", "--json", str(wheel), "--target", "sm_86", "--target", "sm_35"
    )[1][:-1]
    verdicts = {((r.member or "").split("/")[-1], r.device): r.status for r in records}
    # curand 10.3 has cubins from sm_50: everything loads on sm_86, nothing on sm_35.
    assert verdicts[("libcurand.so.10", "sm_86")] == "ok"
    assert verdicts[("libcurand.so.10", "sm_35")] == "none"


def test_doctor_judges_compressed_entries_against_the_driver() -> None:
    # NVIDIA's fatbinary --compress-mode=size stores zstd entries: driver 550.54.14 or later.
    fatbin = CORPUS.parent / "nvfatbin" / "files" / "mixed.size.fatbin"
    old = offload_image.doctor(fatbin, "sm_86", nvidia_driver="535.183.01").records[0]
    assert (old.status, offload_image.as_dict(old.hints[0])) == (
        "none",
        {"kind": "driver", "env": None, "value": "550.54.14", "offload_arch": None, "safe": True},
    )
    assert offload_image.doctor(fatbin, "sm_86", nvidia_driver="550.54.14").records[0].status == "ok"
    with pytest.raises(offload_image.Error) as e:
        offload_image.doctor(fatbin, "sm_86", nvidia_driver="r550")
    assert e.value.kind == "usage"


def test_select_and_validate_follow_the_cuda_driver() -> None:
    # A driver-oracle fatbinary: compute_90 PTX at ISA 9.1, then compute_86 at 8.8. Driver
    # 580.159.04 (CUDA 13.0) refused it with CUDA_ERROR_UNSUPPORTED_PTX_VERSION, and did not
    # fall back to the older PTX.
    fatbin = CORPUS.parent / "cuda-driver" / "fatbin" / "0020.fatbin"
    refused = offload_image.select(fatbin, "sm_90", nvidia_driver="580.159.04")[0]
    assert refused["selected"] is None
    assert "PTX ISA 9.1 needs a driver for CUDA 13.1 or later" in refused["runtime_note"]
    assert offload_image.select(fatbin, "sm_90")[0]["arch"] == "compute_90"
    findings = offload_image.validate(fatbin, nvidia_driver="580.159.04")
    assert [f.code for f in findings] == ["ptx-too-new-for-driver"]


def test_doctor_python_on_an_environment_with_a_gpu_wheel(tmp_path: pathlib.Path) -> None:
    # A fresh virtual environment with NVIDIA's curand wheel installed by pip.
    wheel = external_file("nvidia-wheels", pattern="nvidia_curand_cu12-*.whl")
    env = tmp_path / "env"
    venv.create(env, with_pip=True)
    python = env / "bin" / "python"
    subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)],
        check=True,
    )
    records = offload_image.doctor(targets=["sm_86", "sm_35"], python=python).records
    libs = [r for r in records if r.file.endswith("libcurand.so.10")]
    assert {r.device: r.status for r in libs} == {"sm_86": "ok", "sm_35": "none"}
    # Each library names the distribution whose RECORD lists it.
    version = wheel.name.split("-")[1]
    assert {r.package for r in libs} == {f"nvidia-curand-cu12 {version}"}
    # The hint for the device it does not run on names that package.
    failing = next(r for r in libs if r.device == "sm_35")
    assert "nvidia-curand-cu12" in json.dumps(offload_image.as_dict(failing)["hints"])
    # The command's table groups by distribution: PACKAGE is its first column.
    table = subprocess.run(
        ["loader-sim", "doctor", "--python", str(python), "--target", "sm_35"],
        capture_output=True, text=True,
    ).stdout.splitlines()
    # The headline counts packages first (then libraries); the table follows.
    assert table[0].startswith("sm_35: 0 of 1 packages run"), table
    at = next(i for i, l in enumerate(table) if l.split()[:1] == ["PACKAGE"])
    assert table[at].split()[:2] == ["PACKAGE", "LIBRARY"], table
    row = next(l for l in table[at:] if "libcurand.so.10" in l)
    assert row.startswith(f"nvidia-curand-cu12 {version} "), row
    # The command says the same.
    assert [offload_image.as_dict(r) for r in records] == command(
        "doctor", "--json", "--python", str(python), "--target", "sm_86", "--target", "sm_35"
    )[1][:-1]


def test_doctor_without_a_gpu_asks_for_targets(tmp_path: pathlib.Path) -> None:
    # No KFD topology and no NVML here: doctor says what it looked for.
    env = dict(os.environ, LD_LIBRARY_PATH=str(tmp_path))
    code = (
        "import offload_image\n"
        "try:\n"
        "    offload_image.doctor(%r)\n"
        "except offload_image.Error as e:\n"
        "    print(e.message)\n" % str(BUNDLE)
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    if "detected" in p.stderr:
        pytest.skip("this machine has a GPU")
    assert "--target" in p.stdout
