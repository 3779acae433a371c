"""User strings are data (issue 38): paths never become options, option values stay the
option's, and paths are ``str``, ``bytes`` or ``os.PathLike`` (names that are not UTF-8
too, on POSIX)."""

import os
import pathlib
import shutil
import sys

import pytest

import offload_image
from conftest import CORPUS

BUNDLE = CORPUS / "bundles" / "hip_6arch.bundle"


@pytest.fixture
def evil(tmp_path, monkeypatch):
    """A working directory holding ./evil.sh, which would leave ./ran if it ever ran."""
    script = tmp_path / "evil.sh"
    script.write_text("#!/bin/sh\ntouch \"$(dirname \"$0\")/ran\"\n")
    script.chmod(0o755)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_a_path_that_looks_like_an_option_is_a_path(evil):
    # Before: `doctor(["--python=./evil.sh"])` ran ./evil.sh as the interpreter to ask.
    with pytest.raises(offload_image.Error) as e:
        offload_image.doctor(["--python=./evil.sh"], ["gfx90a"])
    assert e.value.message.startswith("--python=./evil.sh: cannot read")
    assert not (evil / "ran").exists()


def test_an_option_value_that_looks_like_an_option_is_a_value(evil):
    with pytest.raises(offload_image.Error) as e:
        offload_image.select(BUNDLE, ["--python=./evil.sh"])
    assert e.value.message == "invalid --target '--python=./evil.sh': unknown AMDGPU processor"
    with pytest.raises(offload_image.Error) as e:
        offload_image.doctor([BUNDLE], ["gfx90a"], nvidia_driver="--python=./evil.sh")
    assert "--python=./evil.sh" in e.value.message
    assert not (evil / "ran").exists()


def test_files_named_like_options(tmp_path, monkeypatch):
    # Before: a file named -x.so or --help could not be listed.
    monkeypatch.chdir(tmp_path)
    shutil.copy(BUNDLE, tmp_path / "-x.so")
    shutil.copy(BUNDLE, tmp_path / "--help")
    want = offload_image.list(BUNDLE)
    assert len(want) == 7
    assert offload_image.list("-x.so") == want
    assert offload_image.list("--help") == want
    assert offload_image.validate(["-x.so", "--help"]) == []
    chosen = offload_image.select("-x.so", "gfx90a:xnack-")
    assert [r["selected"] for r in chosen] == ["hipv4-amdgcn-amd-amdhsa--gfx90a:xnack-"]
    report = offload_image.prune("-x.so", "gfx906", "-y.out")
    assert report[-1]["images_dropped"] == 5
    assert (tmp_path / "-y.out").stat().st_size < BUNDLE.stat().st_size


def test_paths_as_bytes_and_path_objects():
    want = offload_image.list(BUNDLE)
    assert offload_image.list(os.fsencode(str(BUNDLE))) == want
    assert offload_image.list(pathlib.PurePath(BUNDLE)) == want
    assert offload_image.validate([os.fsencode(str(BUNDLE)), BUNDLE]) == []


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX file names are bytes")
def test_a_file_name_that_is_not_utf8(tmp_path):
    # Before: bytes were refused, and the str form raised UnicodeEncodeError.
    name = os.path.join(os.fsencode(str(tmp_path)), b"lib\xff\xfe.bundle")
    try:
        with open(name, "wb") as f:
            f.write(BUNDLE.read_bytes())
    except OSError:
        pytest.skip("this file system refuses names that are not UTF-8")
    want = offload_image.list(BUNDLE)
    assert offload_image.list(name) == want
    assert offload_image.list(os.fsdecode(name)) == want
    assert offload_image.list(pathlib.Path(os.fsdecode(name))) == want
    out = os.path.join(os.fsencode(str(tmp_path)), b"out\xff.bundle")
    offload_image.prune(name, "gfx906", out)
    assert os.path.getsize(out) < BUNDLE.stat().st_size


def test_arguments_of_the_wrong_type_are_refused():
    with pytest.raises(TypeError):
        offload_image.list(7)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        offload_image.select(BUNDLE, [b"gfx90a"])  # type: ignore[list-item]
