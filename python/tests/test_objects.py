"""The objects over the library (issue 44): open a path or a buffer, the images' bytes
(views where stored in place, decoded bytes otherwise) against what ``loader-sim select -o``
writes, Python's exceptions with nothing on standard error, typed records."""

from __future__ import annotations

import builtins
import dataclasses
import errno
import hashlib
import json
import mmap
import os
import pathlib
import shutil
import subprocess
import warnings
from typing import Any, Dict, List, Tuple

import pytest

import offload_image
from conftest import CORPUS

BUNDLE = CORPUS / "bundles" / "hip_6arch.bundle"
CCOB = CORPUS / "compressed" / "hip_6arch.zstd.ccob"
NVFATBIN = CORPUS.parent / "nvfatbin" / "files" / "mixed.size.fatbin"
MALFORMED = sorted((CORPUS / "malformed").iterdir())


def command(*args: str) -> Tuple[int, List[Any]]:
    """The installed loader-sim command's JSON records and exit status."""
    exe = shutil.which("loader-sim")
    assert exe is not None, "the wheel puts loader-sim on PATH"
    p = subprocess.run([exe, *args], capture_output=True, text=True)
    return p.returncode, [json.loads(line) for line in p.stdout.splitlines() if line.strip()]


def selected_bytes(tmp_path: pathlib.Path, path: pathlib.Path, target: str) -> bytes:
    """What ``loader-sim select -o`` writes for ``target``."""
    out = tmp_path / f"{path.name}.{target}.out"
    exe = shutil.which("loader-sim")
    assert exe is not None
    subprocess.run([exe, "select", str(path), "--target", target, "-o", str(out)], check=True, capture_output=True)
    return out.read_bytes()


def sha(data: Any) -> str:
    return hashlib.sha256(data).hexdigest()


def test_open_a_path_bytes_and_a_memoryview(manifest: List[Any]) -> None:
    want = {
        m["entry_id"]: m["sha256"] for m in manifest if m["file"] == "bundles/hip_6arch.bundle" and m["record"] == "entry"
    }
    assert len(want) == 7
    raw = BUNDLE.read_bytes()
    for source in (BUNDLE, str(BUNDLE), raw, memoryview(raw), bytearray(raw)):
        with offload_image.open(source) as f:
            assert [u.format for u in f.units] == ["clang-offload-bundle"]
            # Every entry with the sha256 clang-offload-bundler's -unbundle gave.
            assert {i.entry_id: i.sha256 for i in f.images} == want
            # The same images, offsets and sizes as `loader-sim list --json`.
            listed = command("list", "--json", str(BUNDLE))[1]
            assert [(i.entry_id, i.offset, i.size) for i in f.images] == [
                (r["entry_id"], r["offset"], r["size"]) for r in listed
            ]
    # A path given as bytes is open_path's (bytes given to open are the content).
    with offload_image.open_path(os.fsencode(str(BUNDLE))) as f:
        assert len(f.images) == 7


def test_in_place_bytes_are_a_view_of_the_mapping_or_the_buffer(tmp_path: pathlib.Path) -> None:
    raw = BUNDLE.read_bytes()
    with offload_image.open(BUNDLE) as f:
        assert isinstance(f.mapping, mmap.mmap)
        image = f.units[0].choose("gfx90a:xnack-")[0].image
        assert image is not None and image.in_place and image.offset is not None
        data = image.data
        assert isinstance(data, memoryview) and data.readonly
        assert data.obj is f.mapping  # the file's mapping itself: no copy
        assert bytes(data) == raw[image.offset : image.offset + image.size]
        assert sha(data) == sha(selected_bytes(tmp_path, BUNDLE, "gfx90a:xnack-"))
        del data
    for source in (raw, memoryview(raw)):
        with offload_image.open(source) as f:
            data = f.images[2].data
            assert isinstance(data, memoryview)
            assert data.obj is raw  # the caller's bytes (a memoryview's own object)
            del data


def test_chosen_bytes_of_a_compressed_bundle(tmp_path: pathlib.Path) -> None:
    with offload_image.open(CCOB) as f:
        (unit,) = f.units
        assert unit.compressed and unit.format == "clang-offload-bundle"
        choice = unit.choose("gfx90a:xnack-")[0]
        assert choice.image is not None and not choice.image.in_place
        assert choice.image.offset is None
        data = choice.image.data
        assert isinstance(data, bytes) and len(data) == choice.image.size
        assert sha(data) == sha(selected_bytes(tmp_path, CCOB, "gfx90a:xnack-"))
        # The same code object as the uncompressed bundle's entry.
        with offload_image.open(BUNDLE) as g:
            plain = g.units[0].choose("gfx90a:xnack-")[0].image
            assert plain is not None and plain.sha256 == choice.image.sha256


def test_chosen_bytes_of_a_compressed_fatbinary_entry(tmp_path: pathlib.Path) -> None:
    with offload_image.open(NVFATBIN) as f:
        choice = f.choose("sm_86")[0]
        image = choice.image
        assert image is not None
        assert (image.code, image.target, image.offset) == ("cubin", "sm_86", None)
        assert isinstance(image.data, bytes) and len(image.data) == image.size == 4840
        assert image.sha256 == sha(selected_bytes(tmp_path, NVFATBIN, "sm_86"))
        # cuobjdump's names: the PTX of the same architecture is compute_86.
        ptx = [i for i in f.images if i.code == "ptx"]
        assert [i.target for i in ptx] == ["compute_86"]
        # Every image that lost, with why: `loader-sim select --explain` says the same.
        record = command("select", "--json", "--explain", str(NVFATBIN), "--target", "sm_86")[1][0]
        assert [(loss.image.name, loss.reason) for loss in choice.rejected] == [
            (r["image"], r["reason"]) for r in record["rejected"]
        ]
        # The other cubins are for other compute capabilities; the PTX of sm_86 ranks below.
        assert [(loss.image.target, loss.kind) for loss in choice.rejected] == [
            ("sm_75", "nvptx"), ("compute_86", "outranked"), ("sm_90a", "nvptx")
        ]
        # Every image's bytes, decoded, as `loader-sim list` hashes them.
        listed = command("list", "--json", str(NVFATBIN))[1]
        assert [(i.sha256, len(i.data)) for i in f.images] == [(r["sha256"], r["size"]) for r in listed]


def test_choice_for_many_devices_and_why_nothing_loads() -> None:
    with offload_image.open(BUNDLE) as f:
        choices = f.choose(["gfx90a:xnack-", offload_image.Device("gfx90a:xnack+"), "gfx1201", "sm_86"])
        records = command(
            "select", "--json", str(BUNDLE),
            "--target", "gfx90a:xnack-", "--target", "gfx90a:xnack+", "--target", "gfx1201", "--target", "sm_86",
        )[1]
        assert [c.image.entry_id if c.image else None for c in choices] == [r["selected"] for r in records]
        nothing = choices[2]
        assert nothing.image is None and nothing.reason is not None
        assert nothing.reason.kind == "processor"
        assert len(nothing.rejected) == 7  # every image, the host entry too
        assert {loss.kind for loss in choices[3].rejected} == {"host", "arch"}
        # The policy keyword is checked by name.
        with pytest.raises(ValueError, match="policy"):
            f.choose("gfx90a", policy="fastest")
        with pytest.raises(ValueError, match="nvidia_driver"):
            f.choose("sm_86", nvidia_driver="r550")
        with pytest.raises(ValueError, match="devices"):
            f.choose("gfx90a:xnack*")


def test_device_parses_or_raises_value_error(capfd: pytest.CaptureFixture[str]) -> None:
    assert offload_image.Device("amdgcn-amd-amdhsa--gfx90a:xnack-") == offload_image.Device("gfx90a:xnack-")
    assert offload_image.Device("sm_86").vendor == "cuda"
    assert offload_image.Device("gfx942").vendor == "amdgpu"
    for bad in ("gfx90a:xnack*", "gfx9999", "sm_", ""):
        with pytest.raises(ValueError):
            offload_image.Device(bad)
    with pytest.raises(TypeError):
        offload_image.Device(86)  # type: ignore[arg-type]
    assert capfd.readouterr() == ("", "")


def test_missing_and_unreadable_files_are_os_errors(tmp_path: pathlib.Path, capfd: pytest.CaptureFixture[str]) -> None:
    absent = tmp_path / "absent.so"
    with pytest.raises(FileNotFoundError) as e:
        offload_image.open(absent)
    assert e.value.errno == errno.ENOENT and e.value.filename == str(absent)
    assert isinstance(e.value, offload_image.Error) and isinstance(e.value, offload_image.FileError)
    # The command-routed functions too.
    with pytest.raises(FileNotFoundError) as e:
        offload_image.validate(absent)
    assert e.value.errno == errno.ENOENT
    with pytest.raises(FileNotFoundError):
        offload_image.list_images(absent)
    with pytest.raises(IsADirectoryError):
        offload_image.open(tmp_path)
    if os.geteuid() != 0:  # root reads anything
        locked = tmp_path / "locked.so"
        locked.write_bytes(BUNDLE.read_bytes())
        locked.chmod(0)
        with pytest.raises(PermissionError) as e:
            offload_image.open(locked)
        assert e.value.errno == errno.EACCES
    assert capfd.readouterr() == ("", "")


@pytest.mark.parametrize("path", MALFORMED, ids=[p.name for p in MALFORMED])
def test_each_malformed_file_is_a_value_error_with_its_offset(path: pathlib.Path, capfd: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(ValueError) as e:
        offload_image.open(path)
    err = e.value
    assert isinstance(err, offload_image.MalformedError) and isinstance(err, offload_image.Error)
    assert isinstance(err.offset, int) and 0 <= err.offset <= path.stat().st_size
    assert err.kind is not None and str(path) in str(err) and err.filename == str(path)
    # The kind and offset `loader-sim validate` reports first.
    findings = command("validate", "--json", str(path))[1]
    assert (err.kind, err.offset) == (findings[0]["code"], findings[0]["offset"])
    # The same from a buffer (named as one).
    with pytest.raises(offload_image.MalformedError) as b:
        offload_image.open(path.read_bytes())
    assert (b.value.kind, b.value.offset, b.value.filename) == (err.kind, err.offset, None)
    # Kept instead of raised, on request, where a container does not read (the walk's
    # own errors, no container recognised at all, are raised still).
    try:
        with offload_image.open(path, damaged="keep") as f:
            errors = [u.error for u in f.units if u.error is not None]
            assert errors and (errors[0].kind, errors[0].offset) == (err.kind, err.offset)
    except offload_image.MalformedError as k:
        assert (k.kind, k.offset) == (err.kind, err.offset) == ("bad-magic", 0)
    assert capfd.readouterr() == ("", "")


def test_not_an_offload_file(tmp_path: pathlib.Path, capfd: pytest.CaptureFixture[str]) -> None:
    junk = tmp_path / "junk.bin"
    junk.write_bytes(b"\x7fNOPE" * 100)
    with pytest.raises(offload_image.MalformedError) as e:
        offload_image.open(junk)
    assert (e.value.kind, e.value.offset) == ("bad-magic", 0)
    # Before: the command-routed list raised and also printed `loader-sim: error: ...`.
    with pytest.raises(ValueError) as e2:
        offload_image.list_images(junk)
    assert (e2.value.kind, e2.value.offset) == ("bad-magic", 0)  # type: ignore[attr-defined]
    assert str(junk) in str(e2.value) and e2.value.filename == str(junk)  # type: ignore[attr-defined]
    empty = tmp_path / "empty"
    empty.write_bytes(b"")
    with pytest.raises(offload_image.MalformedError):
        offload_image.open(empty)
    assert capfd.readouterr() == ("", "")


def test_bad_arguments_name_their_keyword(capfd: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(TypeError, match="source"):
        offload_image.open(7)
    with pytest.raises(ValueError, match="damaged"):
        offload_image.open(BUNDLE, damaged="ignore")
    with pytest.raises(ValueError, match="output="):
        offload_image.prune(BUNDLE, "gfx906")
    with pytest.raises(TypeError, match="paths"):
        offload_image.validate([7])  # type: ignore[list-item]
    assert capfd.readouterr() == ("", "")


def test_closed_file() -> None:
    f = offload_image.open(BUNDLE)
    image = f.images[1]
    view = image.data
    want = image.sha256
    f.close()
    assert f.closed and f.mapping is None
    # The view still held keeps the mapping: its bytes are still readable.
    assert sha(view) == want
    with pytest.raises(ValueError, match="closed"):
        f.images[2].data
    with pytest.raises(ValueError, match="closed"):
        f.choose("gfx90a")


def test_doctor_returns_typed_records_and_a_summary_apart() -> None:
    fatbin = NVFATBIN
    report = offload_image.doctor(fatbin, ["sm_86", "sm_35"], nvidia_driver="535.183.01")
    assert isinstance(report, offload_image.DoctorReport)
    assert all(isinstance(r, offload_image.DoctorRecord) for r in report.records)
    assert isinstance(report.summary, offload_image.DoctorSummary)
    code, want = command(
        "doctor", "--json", str(fatbin), "--target", "sm_86", "--target", "sm_35", "--nvidia-driver", "535.183.01"
    )
    # The record fields are those of --json, with the same values (the timing aside).
    assert [offload_image.as_dict(r) for r in report.records] == want[:-1]
    assert set(offload_image.as_dict(report.summary)) == set(want[-1])
    fields = {f.name for f in dataclasses.fields(offload_image.DoctorRecord)}
    for r in want[:-1]:
        assert set(r) <= fields
    assert report.summary.libraries == want[-1]["libraries"] == 1
    first = report.records[0]
    assert (first.device, first.status) == ("sm_86", "none")
    assert first.hints[0] == offload_image.Hint("driver", None, "550.54.14", None, True)


def test_validate_and_prune_return_typed_records(tmp_path: pathlib.Path) -> None:
    bad = CORPUS / "malformed" / "bundle_trunc_data.bundle"
    findings = offload_image.validate(bad)
    assert findings and all(isinstance(f, offload_image.Finding) for f in findings)
    assert [dataclasses.asdict(f) for f in findings] == command("validate", "--json", str(bad))[1]
    report = offload_image.prune(BUNDLE, "gfx906", dry_run=True)
    want = command("prune", "--json", "--dry-run", "--keep", "gfx906", str(BUNDLE))[1]
    assert [offload_image.as_dict(u) for u in report.units] == want[:-1]
    assert offload_image.as_dict(report.summary) == want[-1]
    assert report.summary.images_dropped == 5


def test_star_import_leaves_the_builtins() -> None:
    namespace: Dict[str, Any] = {}
    exec("from offload_image import *", namespace)
    assert "list" not in namespace and "open" in namespace
    exec("from offload_image import *\nresult = list('ab')", namespace)
    assert namespace["result"] == ["a", "b"]
    for name in offload_image.__all__:
        assert not hasattr(builtins, name) or name == "open", name
        assert hasattr(offload_image, name), name
    # The old name still works, with a DeprecationWarning.
    with pytest.warns(DeprecationWarning):
        assert getattr(offload_image, "list")(BUNDLE) == offload_image.list_images(BUNDLE)


def test_warnings_go_through_warnings(tmp_path: pathlib.Path, capfd: pytest.CaptureFixture[str]) -> None:
    # A bundle followed by stray bytes: the command warns about what it skipped.
    odd = tmp_path / "stray.bundle"
    odd.write_bytes(BUNDLE.read_bytes() + b"\x01stray bytes" * 8)
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        offload_image.list_images(odd)
        offload_image.validate(odd)
    with offload_image.open(odd) as f:
        assert f.units[0].skipped is not None
    with pytest.raises(offload_image.MalformedError):
        offload_image.open(odd, strict=True)
    assert capfd.readouterr() == ("", "")


def test_mutated_files_raise_malformed_error_or_read(capfd: pytest.CaptureFixture[str]) -> None:
    # Random byte flips and cuts of corpus files: every outcome is a read or an Error of
    # the module (never another exception, a crash or output on standard error).
    import random

    rng = random.Random(44)
    seeds = [BUNDLE, CCOB, NVFATBIN, CORPUS / "compressed" / "hip_6arch.zlib.ccob"]
    outcomes = {"read": 0, "error": 0}
    for _ in range(300):
        data = bytearray(rng.choice(seeds).read_bytes())
        for _ in range(rng.randint(1, 4)):
            if rng.random() < 0.3:
                del data[rng.randrange(len(data)) :]
                if not data:
                    data.append(0)
            else:
                data[rng.randrange(len(data))] = rng.randrange(256)
        try:
            with offload_image.open(bytes(data), damaged="keep") as f:
                for image in f.images:
                    if image.unit.error is None:
                        hashlib.sha256(image.data).hexdigest()
                f.choose(["gfx90a:xnack-", "sm_86"])
            outcomes["read"] += 1
        except offload_image.Error as e:
            assert isinstance(e, ValueError) and e.offset is not None, repr(e)
            outcomes["error"] += 1
    assert outcomes["read"] > 0 and outcomes["error"] > 0, outcomes
    assert capfd.readouterr() == ("", "")


def test_choosing_in_threads_while_closing() -> None:
    import threading

    f = offload_image.open(CCOB)
    errors: List[BaseException] = []

    def work() -> None:
        try:
            for _ in range(200):
                f.choose(["gfx90a:xnack-", "gfx1100"])
        except ValueError as e:  # closed meanwhile
            assert "closed" in str(e)
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    f.close()
    for t in threads:
        t.join(timeout=60)
        assert not t.is_alive(), "a thread is stuck"
    assert errors == []


def test_doctor_on_an_interpreter_that_fails(tmp_path: pathlib.Path, capfd: pytest.CaptureFixture[str]) -> None:
    failing = tmp_path / "python"
    failing.write_text("#!/bin/sh\necho 'no such module' >&2\nexit 3\n")
    failing.chmod(0o755)
    with pytest.raises(offload_image.InterpreterError) as e:
        offload_image.doctor(targets="sm_86", python=failing)
    assert isinstance(e.value, RuntimeError) and e.value.filename == str(failing)
    assert e.value.message.startswith(f"{failing}: ") and "interpreter" in e.value.message
    # One that cannot be started is the OSError of why.
    with pytest.raises(FileNotFoundError):
        offload_image.doctor(targets="sm_86", python=tmp_path / "absent-python")
    assert capfd.readouterr() == ("", "")
