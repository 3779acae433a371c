"""Find, choose and check the GPU device code inside host binaries, in place.

Each function runs the ``loader-sim`` command of the same name inside this process and
returns its ``--json`` records as dicts (docs/CLI.md gives every field). Failures raise
:class:`Error`, which carries the error kind and the byte offset where the library
located the problem.

>>> import offload_image
>>> images = offload_image.list("libfoo.so")            # doctest: +SKIP
>>> offload_image.select("libfoo.so", ["gfx90a:xnack-"])  # doctest: +SKIP
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any, Dict, Iterable, List, Optional, Sequence, Union

from . import _native

__all__ = [
    "Error",
    "Record",
    "list",
    "select",
    "validate",
    "doctor",
    "prune",
    "run",
    "__version__",
]

__version__: str = _native.__version__

#: One JSON record of a command, as a dict.
Record = Dict[str, Any]

#: A path: ``str``, ``bytes`` (any bytes on POSIX, names that are not UTF-8 too) or an
#: ``os.PathLike`` of either.
PathLike = Union[str, bytes, "os.PathLike[str]", "os.PathLike[bytes]"]

_list = list  # `list` below is the module's function


class Error(Exception):
    """A command failed.

    Attributes:
        message: the command's one-line error (``FILE: what, at byte N``); for a damaged
            container met by ``list`` or ``select``, that record's ``message``.
        kind: the library's error kind (``"truncated"``, ``"bad-magic"``,
            ``"out-of-bounds"``, ...; docs/CLI.md lists them), ``"usage"`` for arguments
            the command does not take, or None (a file that cannot be opened, for example).
        offset: the byte offset of the problem in the file, or None.
        records: what the command reported before it failed (``list`` and ``select`` on
            a damaged file: the images read, then the ``"damaged"`` records).
    """

    def __init__(
        self,
        message: str,
        kind: Optional[str] = None,
        offset: Optional[int] = None,
        records: Optional[List[Record]] = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.kind = kind
        self.offset = offset
        self.records: List[Record] = records if records is not None else []

    def __repr__(self) -> str:
        return f"Error({self.message!r}, kind={self.kind!r}, offset={self.offset!r})"


def run(args: Sequence[Union[str, bytes, "os.PathLike[str]", "os.PathLike[bytes]"]]) -> "tuple[int, str]":
    """Runs a ``loader-sim`` command line (without the program name) in this process.

    Returns the exit status the command would have (0 ok, 1 no compatible image for a
    requested target, 2 problems reported in its output) and what it printed. Arguments
    the command refuses, and ``--help``/``--version``, raise :class:`Error` of kind
    ``"usage"`` (with clap's text); so do ``register --load`` and the drop-in tools, which
    the ``loader-sim`` command runs. Warnings go to the process's standard error.
    """
    try:
        return _native.run([_arg(a) for a in args])
    except _native.Failure as e:
        message, kind, offset = e.args
        raise Error(message, kind, offset) from None


def _records(args: Sequence[str]) -> "tuple[int, List[Record]]":
    status, out = run(args)
    return status, [json.loads(line) for line in out.splitlines() if line.strip()]


def _images(args: Sequence[str]) -> List[Record]:
    """The records of ``list`` or ``select``, which exit 2 when a container is damaged:
    the first damaged record then becomes the exception."""
    status, records = _records(args)
    if status != 2:
        return records
    for r in records:
        if r.get("note") == "damaged":
            raise Error(r.get("message", "damaged"), r.get("error"), r.get("offset"), records)
    raise Error("the command reported a problem", None, None, records)


def _arg(a: Any) -> str:
    """One command-line argument as the native module takes it: a ``str``, where bytes
    that are not UTF-8 are carried as the file-system encoding's surrogate escapes (they
    reach the command as the original bytes)."""
    a = os.fspath(a)
    if isinstance(a, bytes):
        return os.fsdecode(a)
    if isinstance(a, str):
        return a
    raise TypeError(f"an argument must be str, bytes or os.PathLike, not {type(a).__name__}")


def _path(p: PathLike) -> str:
    """A path given by the caller: data, never an option (it goes after ``--``)."""
    if not isinstance(p, (str, bytes, os.PathLike)):
        raise TypeError(f"a path must be str, bytes or os.PathLike, not {type(p).__name__}")
    return _arg(p)


def _option(name: str, value: Any) -> str:
    """``--name=value``: the value is the option's, whatever it starts with (a value of
    ``"--python=x"`` is a bad target, not another option)."""
    return f"{name}={_arg(value)}"


def _text(value: Any, what: str) -> str:
    """A typed string argument (a target, a policy)."""
    if not isinstance(value, str):
        raise TypeError(f"{what} must be str, not {type(value).__name__}")
    return value


def _many(values: Union[str, bytes, "os.PathLike[str]", Iterable[Any]]) -> List[Any]:
    """One value (a string, bytes or a path) or several, as a list."""
    if isinstance(values, (str, bytes, os.PathLike)):
        return [values]
    return _list(values)


def list(path: PathLike, *, sha256: bool = True, strict: bool = False) -> List[Record]:  # noqa: A001
    """Every device image in ``path``, in discovery order (``loader-sim list --json``).

    With ``sha256=False`` the images are not hashed (compressed cubins are not decoded).
    A damaged container raises :class:`Error`; what was read before it is in
    ``Error.records``.
    """
    args = ["list", "--json"]
    if not sha256:
        args.append("--no-sha256")
    if strict:
        args.append("--strict")
    return _images(args + ["--", _path(path)])


def select(
    path: PathLike,
    targets: Union[str, Iterable[str]],
    *,
    kind: Optional[str] = None,
    policy: str = "best",
    jit: bool = True,
    explain: bool = False,
    sha256: bool = False,
    nvidia_driver: Optional[str] = None,
) -> List[Record]:
    """The image a runtime would load for each target, per unit (``loader-sim select
    --json``): one record per unit and target; ``selected`` is None where no image is
    compatible.

    ``targets`` are AMDGPU target IDs (``"gfx90a:sramecc+:xnack-"``) or NVPTX
    architectures (``"sm_86"``); ``kind`` is ``"hip"``, ``"openmp"`` or ``"cuda"``;
    ``policy`` is ``"best"``, ``"first"`` or ``"first-by-class"``. ``nvidia_driver``
    (``"580.159.04"``) is the NVIDIA targets' driver: PTX it cannot compile is refused, as
    the driver refuses it (``CUDA_FORCE_PTX_JIT``, ``CUDA_DISABLE_PTX_JIT`` and
    ``CUDA_CACHE_DISABLE`` are read from the environment).
    """
    args = ["select", "--json", _option("--policy", _text(policy, "policy"))]
    for t in _many(targets):
        args.append(_option("--target", _text(t, "a target")))
    if kind is not None:
        args.append(_option("--kind", _text(kind, "kind")))
    if not jit:
        args.append("--no-jit")
    if explain:
        args.append("--explain")
    if sha256:
        args.append("--sha256")
    if nvidia_driver is not None:
        args.append(_option("--nvidia-driver", _text(nvidia_driver, "nvidia_driver")))
    return _images(args + ["--", _path(path)])


def validate(
    paths: Union[PathLike, Iterable[PathLike]],
    *,
    verify_hash: bool = True,
    nvidia_driver: Optional[str] = None,
) -> List[Record]:
    """Every problem in the offload containers of ``paths`` (``loader-sim validate
    --json``): one finding per record, with severity, code and byte offset. An empty list
    means no problem was found. With ``nvidia_driver``, PTX that driver cannot compile is a
    finding (``ptx-too-new-for-driver``)."""
    args = ["validate", "--json"]
    if not verify_hash:
        args.append("--no-verify-hash")
    if nvidia_driver is not None:
        args.append(_option("--nvidia-driver", _text(nvidia_driver, "nvidia_driver")))
    return _records(args + ["--"] + [_path(p) for p in _many(paths)])[1]


def doctor(
    paths: Union[None, PathLike, Iterable[PathLike]] = None,
    targets: Union[None, str, Iterable[str]] = None,
    *,
    python: Optional[PathLike] = None,
    nvidia_driver: Optional[str] = None,
    deep: bool = False,
) -> List[Record]:
    """For every library with device code and every device: which units load, why the
    others do not, and what would make them run (``loader-sim doctor --json``). The last
    record is the summary.

    With no ``paths``, the site-packages of ``python`` are scanned (default: this
    interpreter, ``sys.executable``), and each library names the distribution that owns
    it. With no ``targets``, the GPUs of this machine are detected (KFD, NVML); without a
    GPU this raises :class:`Error` asking for targets. ``nvidia_driver`` (``"535.183.01"``)
    judges compressed NVIDIA entries against that driver (default: NVML's, when the GPUs
    are detected): zstd needs 550.54.14.
    """
    args = ["doctor", "--json"]
    if paths is None:
        args.append(_option("--python", _path(python) if python is not None else sys.executable))
    for t in _many(targets) if targets is not None else ():
        args.append(_option("--target", _text(t, "a target")))
    if nvidia_driver is not None:
        args.append(_option("--nvidia-driver", _text(nvidia_driver, "nvidia_driver")))
    if deep:
        args.append("--deep")
    if paths is not None:
        args += ["--"] + [_path(p) for p in _many(paths)]
    return _records(args)[1]


def prune(
    path: PathLike,
    keep: Union[str, Iterable[str]],
    output: Optional[PathLike] = None,
    *,
    dry_run: bool = False,
    shrink: bool = True,
    refuse_signed: bool = False,
) -> List[Record]:
    """Writes ``path`` to ``output`` without the device images no ``keep`` device can
    load (``loader-sim prune --json``), and returns the report: what was kept and dropped,
    and the bytes saved. ``path`` is never modified. With ``dry_run=True`` nothing is
    written and ``output`` may be None."""
    args = ["prune", "--json"]
    for k in _many(keep):
        args.append(_option("--keep", _text(k, "a kept target")))
    if dry_run:
        args.append("--dry-run")
    elif output is None:
        raise Error("prune needs an output path (or dry_run=True)", "usage", None)
    if output is not None:
        args.append(_option("-o", _path(output)))
    if not shrink:
        args.append("--no-shrink")
    if refuse_signed:
        args.append("--refuse-signed")
    return _records(args + ["--", _path(path)])[1]
