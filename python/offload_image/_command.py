"""The functions that run a ``loader-sim`` command inside this process (``--json``) and
return its records: :func:`doctor`, :func:`validate`, :func:`prune` as typed records
(:mod:`offload_image._records`), :func:`list_images` and :func:`select` as dicts, and
:func:`run` for any command line. What the command would print on standard error comes
back as :class:`~offload_image.OffloadImageWarning` s or in the exception raised."""

from __future__ import annotations

import contextlib
import json
import os
import sys
import tempfile
import warnings
from typing import Any, Iterable, Iterator, List, Optional, Sequence, Tuple, Union

from . import _native
from ._errors import _OS_ERROR, Error, FileError, InterpreterError, Record, UsageError, file_error, from_failure, warn
from ._objects import PathLike
from ._records import DoctorRecord, DoctorReport, DoctorSummary, Finding, PrunedUnit, PruneReport, PruneSummary, _build

_builtin_list = list


class _Captured:
    text = ""


@contextlib.contextmanager
def _stderr_captured() -> Iterator[_Captured]:
    """Standard error (file descriptor 2) into a temporary file while the command runs: the
    command writes its warnings there, and the module hands them on as warnings instead.
    (Another thread's writes to descriptor 2 meanwhile are caught too.)"""
    captured = _Captured()
    try:
        saved = os.dup(2)
    except OSError:  # no standard error at all
        yield captured
        return
    try:
        if sys.stderr is not None:
            sys.stderr.flush()
    except (OSError, ValueError):
        pass
    with tempfile.TemporaryFile() as tmp:
        os.dup2(tmp.fileno(), 2)
        try:
            yield captured
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            tmp.seek(0)
            captured.text = tmp.read().decode("utf-8", errors="replace")


def _run(args: Sequence[Any], paths: Optional[List[str]] = None) -> Tuple[int, str]:
    argv = [_arg(a) for a in args]
    with _stderr_captured() as err:
        try:
            result: Optional[Tuple[int, str]] = _native.run(argv)
            failure = None
        except _native.Failure as e:
            result, failure = None, e.args
    lines = [line for line in err.text.splitlines() if line.strip()]
    if failure is not None:
        message, kind, offset = failure
        for line in lines:
            if not line.startswith("loader-sim: error:"):
                warn(line)
        raise from_failure(message, kind, offset, None, paths) from None
    for line in lines:
        if not line.startswith("loader-sim: error:"):
            warn(line)
    assert result is not None
    return result


def run(args: Sequence[Union[str, bytes, "os.PathLike[str]", "os.PathLike[bytes]"]]) -> Tuple[int, str]:
    """Runs a ``loader-sim`` command line (without the program name) in this process.

    Returns the exit status the command would have (0 ok, 1 no compatible image for a
    requested target, 2 problems reported in its output) and what it printed. Arguments
    the command refuses, and ``--help``/``--version``, raise :class:`UsageError` (clap's
    text); so do ``register --load`` and the drop-in tools, which need a process of their
    own: run the ``loader-sim`` command for them. Its warnings are issued as
    :class:`OffloadImageWarning` s.
    """
    return _run(args)


def _records(args: Sequence[Any], paths: Optional[List[str]] = None) -> Tuple[int, List[Record]]:
    status, out = _run(args, paths)
    return status, [json.loads(line) for line in out.splitlines() if line.strip()]


def _images(args: Sequence[Any], paths: List[str]) -> List[Record]:
    """The records of ``list`` or ``select``, which exit 2 when a container is damaged:
    the first damaged record then becomes the exception."""
    status, records = _records(args, paths)
    if status != 2:
        return records
    for r in records:
        if r.get("note") == "damaged":
            # The message names the file, as the command's error line does.
            message = r.get("message", "damaged")
            if paths:
                message = f"{paths[0]}: {message}"
            e = from_failure(message, r.get("error"), r.get("offset"), records, paths)
            raise e
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


def _path(p: Any, keyword: str = "path") -> str:
    """A path given by the caller: data, never an option (it goes after ``--``)."""
    if not isinstance(p, (str, bytes, os.PathLike)):
        raise TypeError(f"{keyword} must be str, bytes or os.PathLike, not {type(p).__name__}")
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


def _many(values: Any) -> List[Any]:
    """One value (a string, bytes or a path) or several, as a list."""
    if isinstance(values, (str, bytes, os.PathLike)):
        return [values]
    return _builtin_list(values)


def list_images(path: PathLike, *, sha256: bool = True, strict: bool = False) -> List[Record]:
    """Every device image in ``path``, in discovery order, as the records of ``loader-sim
    list --json`` (dicts; :func:`open` gives the images as objects, with their bytes).

    With ``sha256=False`` the images are not hashed (compressed cubins are not decoded).
    A damaged container raises :class:`MalformedError`; what was read before it is in
    ``Error.records``.
    """
    args = ["list", "--json"]
    if not sha256:
        args.append("--no-sha256")
    if strict:
        args.append("--strict")
    p = _path(path)
    return _images(args + ["--", p], [p])


def list(path: PathLike, *, sha256: bool = True, strict: bool = False) -> List[Record]:  # noqa: A001
    """Deprecated alias of :func:`list_images` (it shadowed the builtin ``list``; it is not
    in ``__all__``)."""
    warnings.warn(
        "offload_image.list is deprecated: use offload_image.list_images (or offload_image.open)",
        DeprecationWarning,
        stacklevel=2,
    )
    return list_images(path, sha256=sha256, strict=strict)


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
    """The image a runtime would load for each target, per unit, as the records of
    ``loader-sim select --json`` (dicts): one record per unit and target; ``selected`` is
    None where no image is compatible. :meth:`File.choose` gives the same choice as
    objects, with the chosen image's bytes.

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
    p = _path(path)
    return _images(args + ["--", p], [p])


def validate(
    paths: Union[PathLike, Iterable[PathLike]],
    *,
    verify_hash: bool = True,
    nvidia_driver: Optional[str] = None,
) -> List[Finding]:
    """Every problem in the offload containers of ``paths`` (``loader-sim validate
    --json``): one :class:`Finding` each, with severity, code and byte offset. An empty list
    means no problem was found. With ``nvidia_driver``, PTX that driver cannot compile is a
    finding (``ptx-too-new-for-driver``). A file that cannot be read raises
    :class:`FileError`."""
    args = ["validate", "--json"]
    if not verify_hash:
        args.append("--no-verify-hash")
    if nvidia_driver is not None:
        args.append(_option("--nvidia-driver", _text(nvidia_driver, "nvidia_driver")))
    ps = [_path(p, "paths") for p in _many(paths)]
    findings = [_build(Finding, r) for r in _records(args + ["--"] + ps, ps)[1]]
    for f in findings:
        # A file the command could not open is its finding; here it is Python's OSError.
        m = _OS_ERROR.search(f.message)
        if f.code == "bad-container" and f.message.startswith("cannot ") and m:
            raise file_error(int(m.group(1)), f.file, f"{f.file}: {f.message}")
    return findings


def doctor(
    paths: Union[None, PathLike, Iterable[PathLike]] = None,
    targets: Union[None, str, Iterable[str]] = None,
    *,
    python: Optional[PathLike] = None,
    nvidia_driver: Optional[str] = None,
    deep: bool = False,
) -> DoctorReport:
    """For every library with device code and every device: which units load, why the
    others do not, and what would make them run (``loader-sim doctor --json``). Returns a
    :class:`DoctorReport`: ``records`` (one :class:`DoctorRecord` per library and device)
    and, apart, ``summary`` (:class:`DoctorSummary`).

    With no ``paths``, the site-packages of ``python`` are scanned (default: this
    interpreter, ``sys.executable``), and each library names the distribution that owns
    it. With no ``targets``, the GPUs of this machine are detected (KFD, NVML); without a
    GPU this raises :class:`UsageError` asking for ``targets=``; an interpreter that fails
    (or that the command stops: it bounds the probe's time and output) raises
    :class:`InterpreterError`, one that cannot be started a :class:`FileError`. ``nvidia_driver``
    (``"535.183.01"``) judges compressed NVIDIA entries against that driver (default:
    NVML's, when the GPUs are detected): zstd needs 550.54.14. Asking the interpreter
    ``python`` for its site-packages runs it (bounded in time and output by the command).
    """
    args = ["doctor", "--json"]
    if paths is None:
        args.append(_option("--python", _path(python, "python") if python is not None else sys.executable))
    for t in _many(targets) if targets is not None else ():
        args.append(_option("--target", _text(t, "a target")))
    if nvidia_driver is not None:
        args.append(_option("--nvidia-driver", _text(nvidia_driver, "nvidia_driver")))
    if deep:
        args.append("--deep")
    ps: List[str] = []
    if paths is not None:
        ps = [_path(p, "paths") for p in _many(paths)]
        args += ["--"] + ps
    interpreter = None if paths is not None else _arg(python) if python is not None else sys.executable
    try:
        records = _records(args, ps + ([interpreter] if interpreter else []))[1]
    except UsageError as e:
        if targets is None and "give --target" in e.message:
            e.message = e.message.replace("give --target TARGET", "give targets= (the command's --target TARGET)")
            e.args = (e.message,)
        raise
    except FileError:
        raise
    except Error as e:
        # The interpreter asked for its site-packages failed (not: could not be started,
        # which is the FileError above).
        if interpreter is not None and e.message.startswith(interpreter + ": ") and e.offset is None:
            raise InterpreterError(e.message, e.kind, None, e.records, filename=interpreter) from None
        raise
    body = [r for r in records if not r.get("summary")]
    summary = [r for r in records if r.get("summary")]
    if not summary:
        raise Error("doctor printed no summary", None, None, records)
    return DoctorReport([_build(DoctorRecord, r) for r in body], _build(DoctorSummary, summary[-1]))


def prune(
    path: PathLike,
    keep: Union[str, Iterable[str]],
    output: Optional[PathLike] = None,
    *,
    dry_run: bool = False,
    shrink: bool = True,
    refuse_signed: bool = False,
) -> PruneReport:
    """Writes ``path`` to ``output`` without the device images no ``keep`` device can
    load (``loader-sim prune --json``), and returns a :class:`PruneReport`: one
    :class:`PrunedUnit` per unit (kept and dropped images) and the :class:`PruneSummary`
    (the bytes saved). ``path`` is never modified. With ``dry_run=True`` nothing is
    written and ``output`` may be None; without it, ``output`` is required
    (``ValueError``)."""
    args = ["prune", "--json"]
    for k in _many(keep):
        args.append(_option("--keep", _text(k, "a kept target")))
    if dry_run:
        args.append("--dry-run")
    elif output is None:
        raise UsageError("prune needs output= (or dry_run=True)", "usage", None)
    if output is not None:
        args.append(_option("-o", _path(output, "output")))
    if not shrink:
        args.append("--no-shrink")
    if refuse_signed:
        args.append("--refuse-signed")
    p = _path(path)
    records = _records(args + ["--", p], [p])[1]
    units = [_build(PrunedUnit, r) for r in records if "unit" in r]
    summary = [r for r in records if "unit" not in r]
    if not summary:
        raise Error("prune printed no summary", None, None, records)
    return PruneReport(units, _build(PruneSummary, summary[-1]))
