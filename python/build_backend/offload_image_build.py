"""The PEP 517 build backend of the offload-image Python package: maturin's, plus the
``loader-sim`` command and its runtime shim in every wheel it builds.

maturin builds one crate per wheel, the ``offload_image._native`` extension module. The
wheel also carries the ``loader-sim`` command (installed on ``PATH``) and the runtime shim
``libloader_sim_rt.so`` (installed in ``<prefix>/lib``, where ``register --load`` looks for it
beside ``<prefix>/bin/loader-sim``). This backend hands every hook to maturin; for a wheel it
first builds the command and the shim with cargo (``cargo build --release -p loader-sim -p
loader-sim-rt``, in the same target directory as maturin's build, so the two share what they
compile) and afterwards adds them to the wheel maturin made, as wheel data
(``<name>.data/scripts/loader-sim`` and ``<name>.data/data/lib/libloader_sim_rt.so``) with
their ``RECORD`` lines. Nothing is written into the source tree, so ``pip wheel python/``,
``pip install ./python``, ``python -m build`` (sdist and wheel) and an sdist's ``pip install``
all make the same wheel, and the metadata step needs no build.

``maturin build`` run by hand builds the module alone; ``add-data`` adds the command and the
shim to such a wheel (``scripts/build-wheel.sh`` does, with its manylinux builds)::

    python3 python/build_backend/offload_image_build.py add-data WHEEL LOADER_SIM SHIM
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
from pathlib import Path
from typing import Any, Mapping, Optional

try:
    import maturin
    from maturin import (  # noqa: F401  (the hooks this backend hands on as they are)
        get_requires_for_build_editable,
        get_requires_for_build_sdist,
        get_requires_for_build_wheel,
        prepare_metadata_for_build_editable,
        prepare_metadata_for_build_wheel,
    )
except ImportError:  # run as a script (add-data) where maturin is not installed
    maturin = None

# The directory of pyproject.toml: python/ in the repository, the top of an sdist.
PROJECT = Path(__file__).resolve().parent.parent

COMMAND = "loader-sim"
SHIM = "libloader_sim_rt.so"


def _loader_sim_manifest() -> Path:
    """loader-sim's Cargo.toml: ``loader-sim/`` at the top of an sdist (maturin copies the
    path dependencies there), ``../loader-sim/`` beside ``python/`` in the repository."""
    for manifest in (PROJECT / "loader-sim" / "Cargo.toml", PROJECT.parent / "loader-sim" / "Cargo.toml"):
        if manifest.is_file():
            return manifest
    raise RuntimeError(f"offload-image build: loader-sim's Cargo.toml is neither in {PROJECT} nor beside it")


def build_binaries(tty: Optional[Any] = None) -> tuple[Path, Path]:
    """Builds the command and the shim (release) and returns their paths; cargo's progress
    goes to ``tty`` when given (the terminal pip does not capture), else to standard
    error."""
    env = getattr(maturin, "_get_env", lambda: None)() or dict(os.environ)
    cargo = env.get("CARGO", "cargo")
    command = [
        cargo,
        "build",
        "--release",
        "--manifest-path",
        str(_loader_sim_manifest()),
        "-p",
        "loader-sim",
        "-p",
        "loader-sim-rt",
        "--message-format=json-render-diagnostics",
    ]
    print("Running `{}`".format(" ".join(command)), file=sys.stderr)
    sys.stderr.flush()
    result = subprocess.run(command, stdout=subprocess.PIPE, stderr=tty, env=env, check=False)
    if result.returncode != 0:
        raise RuntimeError(f"offload-image build: {' '.join(command)} exited with {result.returncode}")
    exe: Optional[Path] = None
    shim: Optional[Path] = None
    for line in result.stdout.decode(errors="replace").splitlines():
        if not line.startswith("{"):
            continue
        msg = json.loads(line)
        if msg.get("reason") != "compiler-artifact":
            continue
        target = msg["target"]
        if target["name"] == COMMAND and "bin" in target["kind"] and msg.get("executable"):
            exe = Path(msg["executable"])
        if target["name"] == "loader_sim_rt" or target["name"] == "loader-sim-rt":
            for f in msg["filenames"]:
                if Path(f).name == SHIM:
                    shim = Path(f)
    if exe is None or shim is None:
        raise RuntimeError(f"offload-image build: cargo built no {COMMAND} or no {SHIM}")
    return exe, shim


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def add_data(wheel: Path, exe: Path, shim: Path) -> None:
    """Adds the command and the shim to ``wheel`` as wheel data, with their RECORD lines."""
    with zipfile.ZipFile(wheel) as zin:
        record = next(n for n in zin.namelist() if n.endswith(".dist-info/RECORD"))
        data_dir = record[: -len(".dist-info/RECORD")] + ".data"
        added = {
            f"{data_dir}/scripts/{COMMAND}": exe.read_bytes(),
            f"{data_dir}/data/lib/{SHIM}": shim.read_bytes(),
        }
        # RECORD without lines for the added files, which go before its own line (last).
        lines = [
            line
            for line in zin.read(record).decode().splitlines()
            if line and line.split(",", 1)[0] not in added
        ]
        own = [line for line in lines if line.split(",", 1)[0] == record]
        lines = [line for line in lines if line.split(",", 1)[0] != record]
        lines += [_record_line(name, data) for name, data in added.items()] + own
        fd, tmp = tempfile.mkstemp(suffix=".whl", dir=wheel.parent)
        os.close(fd)
        try:
            with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as zout:
                for info in zin.infolist():
                    if info.filename not in added and info.filename != record:
                        zout.writestr(info, zin.read(info))
                for name, data in added.items():
                    info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
                    info.compress_type = zipfile.ZIP_DEFLATED
                    info.external_attr = 0o100755 << 16
                    zout.writestr(info, data)
                zout.writestr(zin.getinfo(record), "\n".join(lines) + "\n")
        except BaseException:
            os.unlink(tmp)
            raise
    shutil.copymode(wheel, tmp)
    os.replace(tmp, wheel)


#: What the build says before it compiles: pip hides a build backend's output (its
#: spinner, "Building wheel for offload-image (pyproject.toml) ...", is all a user sees
#: unless ``pip install -v``), so the line also goes to the controlling terminal, which
#: pip does not capture. The figures are docs/PYTHON.md's ("Build and install").
NOTICE = (
    "offload-image: compiling Rust (cargo build --release: the loader-sim command and its "
    "runtime shim, then the offload_image module). This takes about {minutes}; cargo's "
    "progress follows."
)
BUILD_MINUTES = "3 minutes on 2 idle cores, 10 or more on a busy machine"


def _terminal() -> Optional[Any]:
    """The controlling terminal, opened for writing, when pip hides standard error from the
    user (it captures a build backend's output and shows it only with ``-v``); None when
    standard error is the terminal already or there is none (a build log, CI)."""
    if sys.stderr.isatty():
        return None
    try:
        return open("/dev/tty", "w")
    except OSError:
        return None


def _tell(message: str, tty: Optional[Any]) -> None:
    """Writes ``message`` where the user sees it while pip runs the build: the terminal
    (``tty``) when pip hides standard error, else standard error."""
    if tty is not None:
        tty.write("\n" + message + "\n")
        tty.flush()
    else:
        print(message, file=sys.stderr, flush=True)


def _with_binaries(wheel_directory: str, build) -> str:
    tty = _terminal()
    start = time.monotonic()
    _tell(NOTICE.format(minutes=BUILD_MINUTES), tty)
    # No debug information and no symbol table in the wheel (the dynamic symbols stay), as in
    # scripts/build-wheel.sh's; for cargo here and for maturin's cargo after it.
    os.environ.setdefault("CARGO_PROFILE_RELEASE_DEBUG", "false")
    os.environ.setdefault("CARGO_PROFILE_RELEASE_STRIP", "symbols")
    try:
        exe, shim = build_binaries(tty)
        _tell("offload-image: now the offload_image module (maturin; pip shows its output only with -v) ...", tty)
        filename = build()
        add_data(Path(wheel_directory) / filename, exe, shim)
        _tell(f"offload-image: built in {time.monotonic() - start:.0f} s", tty)
    finally:
        if tty is not None:
            tty.close()
    return filename


def build_wheel(
    wheel_directory: str,
    config_settings: Optional[Mapping[str, Any]] = None,
    metadata_directory: Optional[str] = None,
) -> str:
    return _with_binaries(
        wheel_directory,
        lambda: maturin.build_wheel(wheel_directory, config_settings, metadata_directory),
    )


def build_editable(
    wheel_directory: str,
    config_settings: Optional[Mapping[str, Any]] = None,
    metadata_directory: Optional[str] = None,
) -> str:
    return _with_binaries(
        wheel_directory,
        lambda: maturin.build_editable(wheel_directory, config_settings, metadata_directory),
    )


def _without_missing_targets(manifest: str, present: set[str]) -> str:
    """``manifest`` (a Cargo.toml) without its ``[[test]]``, ``[[bench]]`` and ``[[example]]``
    tables whose source file is not in ``present``: the workspace root's manifest in the
    sdist names test and bench files that its package (and so the sdist) leaves out, and
    cargo refuses a manifest whose target has no file (``cargo package`` drops such tables as
    well)."""
    dirs = {"test": "tests", "bench": "benches", "example": "examples"}
    out: list[str] = []
    table: Optional[list[str]] = None
    kind = ""

    def flush() -> None:
        if table is None:
            return
        text = "".join(table)
        name = re.search(r'^name\s*=\s*"([^"]+)"', text, re.M)
        path = re.search(r'^path\s*=\s*"([^"]+)"', text, re.M)
        if path:
            paths = [path.group(1)]
        elif name:
            paths = [f"{dirs[kind]}/{name.group(1)}.rs", f"{dirs[kind]}/{name.group(1)}/main.rs"]
        else:
            paths = []
        if not paths or any(p in present for p in paths):
            out.append(text)

    for line in manifest.splitlines(keepends=True):
        header = re.match(r"^\[\[(test|bench|example)\]\]\s*$", line)
        if header or line.startswith("["):
            flush()
            table = None
            if header:
                kind, table = header.group(1), [line]
                continue
        if table is not None:
            table.append(line)
        else:
            out.append(line)
    flush()
    return "".join(out)


def build_sdist(sdist_directory: str, config_settings: Optional[Mapping[str, Any]] = None) -> str:
    """maturin's sdist, with the workspace root's Cargo.toml cut to the targets it holds."""
    filename = maturin.build_sdist(sdist_directory, config_settings)
    sdist = Path(sdist_directory) / filename
    with tarfile.open(sdist, "r:gz") as tin:
        members = tin.getmembers()
        top = members[0].name.split("/", 1)[0]
        present = {m.name[len(top) + 1 :] for m in members if m.isfile()}
        fd, tmp = tempfile.mkstemp(suffix=".tar.gz", dir=sdist_directory)
        os.close(fd)
        try:
            with tarfile.open(tmp, "w:gz", format=tarfile.PAX_FORMAT) as tout:
                for m in members:
                    data = tin.extractfile(m).read() if m.isfile() else None
                    if m.name == f"{top}/Cargo.toml" and data is not None:
                        data = _without_missing_targets(data.decode(), present).encode()
                        m.size = len(data)
                    tout.addfile(m, io.BytesIO(data) if data is not None else None)
        except BaseException:
            os.unlink(tmp)
            raise
    shutil.copymode(sdist, tmp)
    os.replace(tmp, sdist)
    return filename


def _main(argv: list[str]) -> int:
    if len(argv) == 4 and argv[0] == "add-data":
        add_data(Path(argv[1]), Path(argv[2]), Path(argv[3]))
        return 0
    print(__doc__.split("::")[-1].strip(), file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
