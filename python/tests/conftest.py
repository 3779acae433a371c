"""Paths the tests share: the repository's corpus and the files scripts/setup.sh fetches."""

import os
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "data" / "corpus"


def external_dir() -> pathlib.Path:
    """Where scripts/setup.sh put the real files (as the Rust tests find it)."""
    return pathlib.Path(os.environ.get("OFFLOAD_IMAGE_EXTERNAL", ROOT / "target" / "external"))


def external_file(*parts: str, pattern: str = "") -> pathlib.Path:
    """A file scripts/setup.sh fetches: missing is a failure under
    OFFLOAD_IMAGE_EXTERNAL_TESTS=1 (as in CI), a skip otherwise."""
    d = external_dir().joinpath(*parts)
    found = sorted(d.glob(pattern)) if pattern else ([d] if d.exists() else [])
    if not found:
        what = f"{d}/{pattern}" if pattern else str(d)
        if os.environ.get("OFFLOAD_IMAGE_EXTERNAL_TESTS") == "1":
            pytest.fail(f"missing {what}: run scripts/setup.sh")
        pytest.skip(f"missing {what} (scripts/setup.sh fetches it)")
    return found[0]


@pytest.fixture(scope="session")
def manifest() -> "list[dict[str, object]]":
    """The corpus manifest: what LLVM's tools extracted from each corpus file."""
    import json

    with open(CORPUS / "MANIFEST.jsonl") as f:
        return [json.loads(line) for line in f if line.strip()]
