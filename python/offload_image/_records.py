"""The typed records of :func:`doctor`, :func:`validate` and :func:`prune`: dataclasses
whose fields are those of the ``loader-sim`` command's ``--json`` records (docs/CLI.md),
with the same names and values."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Type, TypeVar

T = TypeVar("T")


def _build(cls: Type[T], d: Dict[str, Any]) -> T:
    """``cls`` from a JSON record: nested records typed, keys the class does not know
    (a newer command's) left out."""
    names = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    nested = getattr(cls, "_nested", {})
    values: Dict[str, Any] = {}
    for k, v in d.items():
        if k not in names:
            continue
        sub = nested.get(k)
        if sub is not None and isinstance(v, list):
            v = [_build(sub, x) for x in v]
        elif sub is not None and isinstance(v, dict):
            v = _build(sub, v)
        values[k] = v
    return cls(**values)


def as_dict(record: Any) -> Dict[str, Any]:
    """A record as the command's JSON object: the fields the command leaves out when they
    are None (``package``, ``error``, ``closest``, ``note``) left out too."""
    optional = getattr(type(record), "_optional", ())
    d: Dict[str, Any] = {}
    for f in dataclasses.fields(record):
        v = getattr(record, f.name)
        if v is None and f.name in optional:
            continue
        if dataclasses.is_dataclass(v):
            v = as_dict(v)
        elif isinstance(v, list):
            v = [as_dict(x) if dataclasses.is_dataclass(x) else x for x in v]
        d[f.name] = v
    return d


@dataclass(frozen=True)
class Hint:
    """What would make a library run on a device (``doctor``'s ``hints``)."""

    kind: str
    """``xnack``, ``rebuild``, ``driver``, ``install``, ``env``, ..."""
    env: Optional[str]
    """The environment variable to set, if any."""
    value: Optional[str]
    """Its value, the driver version needed, or the package to install."""
    offload_arch: Optional[str]
    """The ``--offload-arch`` to rebuild with."""
    safe: bool
    """Whether following it changes nothing else."""


@dataclass(frozen=True)
class Gap:
    """Units of a library that do not load on a device, for one reason."""

    reason: str
    units: int
    closest: Optional[str] = None
    _optional = ("closest",)


@dataclass(frozen=True)
class SetAside:
    """Units not judged: built for other GPUs only, or without kernels."""

    other_gpus: int
    no_kernels: int


@dataclass(frozen=True)
class SetAsideUnit:
    """One unit set aside, and why."""

    unit: str
    why: str


@dataclass(frozen=True)
class DoctorRecord:
    """One library (or wheel member) on one device (``loader-sim doctor --json``)."""

    file: str
    member: Optional[str]
    device: str
    units: int
    units_covered: int
    status: str
    """``ok``, ``partial``, ``none`` or ``damaged`` (then ``error``)."""
    reason: Optional[str]
    gaps: List[Gap]
    set_aside: SetAside
    set_aside_units: List[SetAsideUnit]
    hints: List[Hint]
    package: Optional[str] = None
    """The distribution that installed it (``doctor(python=...)``): name and version."""
    error: Optional[str] = None
    _nested = {"gaps": Gap, "set_aside": SetAside, "set_aside_units": SetAsideUnit, "hints": Hint}
    _optional = ("package", "error")


@dataclass(frozen=True)
class DoctorSummary:
    """The closing record of ``doctor``: the counts of libraries by status."""

    files_scanned: int
    libraries: int
    devices: int
    ok: int
    partial: int
    none: int
    no_kernels: int
    outside: int
    damaged: int
    seconds: float
    summary: bool = True


@dataclass(frozen=True)
class DoctorReport:
    """What :func:`doctor` returns: the per-library records and, apart, the summary."""

    records: List[DoctorRecord]
    summary: DoctorSummary


@dataclass(frozen=True)
class Finding:
    """One problem :func:`validate` found (``loader-sim validate --json``)."""

    file: str
    container: str
    offset: int
    severity: str
    """``error`` or ``warning``."""
    code: str
    """Stable: ``truncated``, ``hash-mismatch``, ``ptx-too-new-for-driver``, ... (VALIDATE.md)."""
    message: str


@dataclass(frozen=True)
class PrunedUnit:
    """What :func:`prune` did to one unit (``loader-sim prune --json``)."""

    unit: str
    index: int
    format: str
    offset: int
    kept: List[str]
    dropped: List[str]
    missing: List[str]
    whole: bool
    emptied: bool
    bytes_before: int
    bytes_after: int
    note: Optional[str] = None
    _optional = ("note",)


@dataclass(frozen=True)
class PruneSummary:
    """The closing record of ``prune``: sizes before and after."""

    file: str
    layout: str
    keep: List[str]
    units: int
    units_emptied: int
    images_kept: int
    images_dropped: int
    size_before: int
    size_after: int
    saved: int
    dry_run: bool


@dataclass(frozen=True)
class PruneReport:
    """What :func:`prune` returns: the per-unit records and, apart, the summary."""

    units: List[PrunedUnit]
    summary: PruneSummary
