"""docs/PYTHON.md's examples run as they are written (doctest), from the repository's top
directory, where their paths are."""

from __future__ import annotations

import doctest
import os
import pathlib
import subprocess
import sys

import pytest

from conftest import ROOT

EXAMPLES = ROOT / "python" / "examples"


def test_python_md_examples_run(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    result = doctest.testfile(
        str(ROOT / "docs" / "PYTHON.md"),
        module_relative=False,
        optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE,
        verbose=False,
        report=True,
    )
    assert result.failed == 0, result
    # Every example is there to be run: a page without them would pass vacuously.
    assert result.attempted >= 29, result


def test_examples_run() -> None:
    bundle = ROOT / "tests" / "data" / "corpus" / "compressed" / "hip_6arch.zstd.ccob"
    out = subprocess.run(
        [sys.executable, str(EXAMPLES / "choose.py"), str(bundle), "gfx90a:xnack-", "gfx1201"],
        capture_output=True, text=True, check=True,
    )
    lines = out.stdout.splitlines()
    assert lines[0].startswith("file unit 0 gfx90a:xnack-: hipv4-amdgcn-amd-amdhsa--gfx90a:xnack- native 4048 bytes sha256 ab8b73c9")
    assert lines[1].startswith("file unit 0 gfx1201: nothing loads: processor: gfx906 code does not run on gfx1201")
    assert out.stderr == ""
    fatbin = ROOT / "tests" / "data" / "nvfatbin" / "files" / "mixed.size.fatbin"
    out = subprocess.run(
        [sys.executable, str(EXAMPLES / "will_it_run.py"), str(fatbin), "sm_86", "--nvidia-driver", "535.183.01"],
        capture_output=True, text=True,
    )
    assert out.returncode == 1 and out.stderr == ""
    assert "none" in out.stdout and "driver 550.54.14" in out.stdout, out.stdout
