"""User strings are data (issue 38): paths never become options, option values stay the
option's, and paths are ``str``, ``bytes`` or ``os.PathLike`` (names that are not UTF-8
too, on POSIX)."""

import os
import pathlib
import random
import shutil
import sys
from typing import Any, List, Optional, Tuple

import pytest

import offload_image
from conftest import CORPUS

BUNDLE = CORPUS / "bundles" / "hip_6arch.bundle"


@pytest.fixture
def evil(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> pathlib.Path:
    """A working directory holding ./evil.sh, which would leave ./ran if it ever ran."""
    script = tmp_path / "evil.sh"
    script.write_text("#!/bin/sh\ntouch \"$(dirname \"$0\")/ran\"\n")
    script.chmod(0o755)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_a_path_that_looks_like_an_option_is_a_path(evil: pathlib.Path) -> None:
    # Before: `doctor(["--python=./evil.sh"])` ran ./evil.sh as the interpreter to ask.
    with pytest.raises(offload_image.Error) as e:
        offload_image.doctor(["--python=./evil.sh"], ["gfx90a"])
    assert e.value.message.startswith("--python=./evil.sh: cannot read")
    assert not (evil / "ran").exists()


def test_an_option_value_that_looks_like_an_option_is_a_value(evil: pathlib.Path) -> None:
    with pytest.raises(offload_image.Error) as e:
        offload_image.select(BUNDLE, ["--python=./evil.sh"])
    assert e.value.message == "invalid --target '--python=./evil.sh': unknown AMDGPU processor"
    with pytest.raises(offload_image.Error) as e:
        offload_image.doctor([BUNDLE], ["gfx90a"], nvidia_driver="--python=./evil.sh")
    assert "--python=./evil.sh" in e.value.message
    assert not (evil / "ran").exists()


def test_files_named_like_options(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Before: a file named -x.so or --help could not be listed.
    monkeypatch.chdir(tmp_path)
    shutil.copy(BUNDLE, tmp_path / "-x.so")
    shutil.copy(BUNDLE, tmp_path / "--help")
    want = offload_image.list_images(BUNDLE)
    assert len(want) == 7
    assert offload_image.list_images("-x.so") == want
    assert offload_image.list_images("--help") == want
    assert offload_image.validate(["-x.so", "--help"]) == []
    chosen = offload_image.select("-x.so", "gfx90a:xnack-")
    assert [r["selected"] for r in chosen] == ["hipv4-amdgcn-amd-amdhsa--gfx90a:xnack-"]
    report = offload_image.prune("-x.so", "gfx906", "-y.out")
    assert report.summary.images_dropped == 5
    assert (tmp_path / "-y.out").stat().st_size < BUNDLE.stat().st_size


def test_paths_as_bytes_and_path_objects() -> None:
    want = offload_image.list_images(BUNDLE)
    assert offload_image.list_images(os.fsencode(str(BUNDLE))) == want
    assert offload_image.list_images(pathlib.PurePath(BUNDLE)) == want
    assert offload_image.validate([os.fsencode(str(BUNDLE)), BUNDLE]) == []


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX file names are bytes")
def test_a_file_name_that_is_not_utf8(tmp_path: pathlib.Path) -> None:
    # Before: bytes were refused, and the str form raised UnicodeEncodeError.
    name = os.path.join(os.fsencode(str(tmp_path)), b"lib\xff\xfe.bundle")
    try:
        with open(name, "wb") as f:
            f.write(BUNDLE.read_bytes())
    except OSError:
        pytest.skip("this file system refuses names that are not UTF-8")
    want = offload_image.list_images(BUNDLE)
    assert offload_image.list_images(name) == want
    assert offload_image.list_images(os.fsdecode(name)) == want
    assert offload_image.list_images(pathlib.Path(os.fsdecode(name))) == want
    out = os.path.join(os.fsencode(str(tmp_path)), b"out\xff.bundle")
    offload_image.prune(name, "gfx906", out)
    assert os.path.getsize(out) < BUNDLE.stat().st_size


def test_arguments_of_the_wrong_type_are_refused() -> None:
    with pytest.raises(TypeError):
        offload_image.list_images(7)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        offload_image.select(BUNDLE, [b"gfx90a"])  # type: ignore[list-item]


# A property test of the argument builder (issue 38: "the fuzz targets gain the Python
# argument builder"; the builder is Python code, so it is tested here, without Hypothesis):
# random strings as paths and option values, the command line the module would run
# captured instead of run. Every path lands after one `--`, exactly; every option value is
# one `--name=value` argument before it; nothing else appears.

_PIECES = [
    "-", "--", "=", "-o", "--python=./evil.sh", "--help", "--target", " ", "\t", "\n",
    "a", "x.so", "é", "∂", "\U0001f600", "/", "./", "..", "'", '"', "$HOME", "*", "@",
    "\udcff", "\udc80",  # bytes that are not UTF-8, as the file-system encoding escapes them
]


def _random_text(rng: random.Random) -> str:
    return "".join(rng.choice(_PIECES) for _ in range(rng.randint(0, 6)))


def _random_path(rng: random.Random) -> Tuple[Any, str]:
    s = _random_text(rng) or "-"
    kind = rng.randrange(3)
    if kind == 0:
        return s, s
    if kind == 1:
        return os.fsencode(s), s
    # A path object normalises its spelling ("./x" is "x"); the module passes that.
    return pathlib.PurePosixPath(s), os.fspath(pathlib.PurePosixPath(s))


FLAGS = {
    "list", "select", "validate", "doctor", "prune", "--json", "--no-sha256", "--strict",
    "--no-jit", "--explain", "--sha256", "--no-verify-hash", "--deep", "--dry-run",
    "--no-shrink", "--refuse-signed",
}


def _check(argv: List[str], paths: Optional[List[str]], options: List[Tuple[str, str]]) -> None:
    """`paths` after the one `--`; `options` ((name, value) pairs, in order) as
    `name=value` arguments before it; flags only besides."""
    assert all(isinstance(a, str) for a in argv), argv
    if paths is None:
        assert "--" not in argv, argv
        before, after = argv, []
    else:
        sep = argv.index("--")
        before, after = argv[:sep], argv[sep + 1:]
        assert after == paths, (argv, paths)
    names = {n for n, _ in options}
    got = [a for a in before if a not in FLAGS]
    assert got == [f"{n}={v}" for n, v in options], (argv, options)
    for a in got:
        assert any(a.startswith(n + "=") for n in names), a


def test_every_user_string_is_data_property(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: List[List[str]] = []
    # The command's closing records, which doctor and prune return apart.
    closing = {
        "doctor": '{"summary":true,"files_scanned":0,"libraries":0,"devices":0,"ok":0,"partial":0,'
        '"none":0,"no_kernels":0,"outside":0,"damaged":0,"seconds":0.0}',
        "prune": '{"file":"x","layout":"standalone","keep":[],"units":0,"units_emptied":0,'
        '"images_kept":0,"images_dropped":0,"size_before":0,"size_after":0,"saved":0,"dry_run":false}',
    }
    def fake(argv: List[str]) -> Tuple[int, str]:
        calls.append(list(argv))
        return 0, closing.get(argv[0], "")

    monkeypatch.setattr(offload_image._native, "run", fake)
    rng = random.Random(38)
    for _ in range(400):
        calls.clear()
        (p, ps) = _random_path(rng)
        targets = [_random_text(rng) for _ in range(rng.randint(1, 3))]
        policy = _random_text(rng)
        offload_image.list_images(p, sha256=rng.random() < 0.5, strict=rng.random() < 0.5)
        _check(calls[-1], [ps], [])
        offload_image.select(p, targets, policy=policy, kind=None, explain=rng.random() < 0.5)
        _check(calls[-1], [ps], [("--policy", policy)] + [("--target", t) for t in targets])
        many = [_random_path(rng) for _ in range(rng.randint(1, 4))]
        driver = _random_text(rng)
        offload_image.validate([q for q, _ in many], verify_hash=rng.random() < 0.5)
        _check(calls[-1], [s for _, s in many], [])
        offload_image.doctor([q for q, _ in many], targets, nvidia_driver=driver, deep=True)
        _check(
            calls[-1],
            [s for _, s in many],
            [("--target", t) for t in targets] + [("--nvidia-driver", driver)],
        )
        (py, pys) = _random_path(rng)
        offload_image.doctor(None, targets, python=py)
        _check(calls[-1], None, [("--python", pys)] + [("--target", t) for t in targets])
        (out, outs) = _random_path(rng)
        offload_image.prune(p, targets, out, shrink=rng.random() < 0.5)
        _check(calls[-1], [ps], [("--keep", t) for t in targets] + [("-o", outs)])
