"""Find, choose and check the GPU device code inside host binaries and wheels, in place.

:func:`open` reads a file (mapped, not copied) or a buffer with the Rust library in this
process and gives its units and images as objects: entry ID, kind, target, offset, sha256
and the image's bytes (a ``memoryview`` of the mapping where stored in place, ``bytes``
where decoded), and the choice a runtime makes for a :class:`Device`, with why every
other image lost::

    with offload_image.open("libfoo.so") as f:
        for choice in f.choose("gfx90a:xnack-"):
            print(choice.image.name, choice.image.sha256)

:func:`doctor`, :func:`validate` and :func:`prune` run the ``loader-sim`` command of that
name in this process and return its ``--json`` records as dataclasses;
:func:`list_images` and :func:`select` return its records as dicts. Errors are
:class:`Error` s: a malformed file a :class:`MalformedError` (also a ``ValueError``, with
``kind`` and ``offset``), a file that cannot be read a :class:`FileError` (also an
``OSError``: ``FileNotFoundError``, ``PermissionError``). Nothing is written to standard
error: warnings are :class:`OffloadImageWarning` s. docs/PYTHON.md has the whole API.
"""

from __future__ import annotations

from . import _native
from ._command import doctor, list, list_images, prune, run, select, validate
from ._errors import Error, FileError, InterpreterError, MalformedError, OffloadImageWarning, Record, UsageError
from ._objects import Choice, Device, File, Image, Loss, PathLike, Unit, open, open_path
from ._records import (
    DoctorRecord,
    DoctorReport,
    DoctorSummary,
    Finding,
    Gap,
    Hint,
    PrunedUnit,
    PruneReport,
    PruneSummary,
    SetAside,
    SetAsideUnit,
    as_dict,
)

__all__ = [
    # objects
    "open",
    "open_path",
    "File",
    "Unit",
    "Image",
    "Device",
    "Choice",
    "Loss",
    # commands
    "doctor",
    "validate",
    "prune",
    "list_images",
    "select",
    "run",
    # records
    "DoctorReport",
    "DoctorRecord",
    "DoctorSummary",
    "Hint",
    "Gap",
    "SetAside",
    "SetAsideUnit",
    "Finding",
    "PruneReport",
    "PrunedUnit",
    "PruneSummary",
    "Record",
    "as_dict",
    # errors
    "Error",
    "MalformedError",
    "FileError",
    "UsageError",
    "InterpreterError",
    "OffloadImageWarning",
    "PathLike",
    "__version__",
]

__version__: str = _native.__version__

# Objects defined in the private modules present themselves as offload_image's.
for _name in __all__:
    _obj = globals().get(_name)
    if getattr(_obj, "__module__", "").startswith("offload_image._") and _name != "__version__":
        try:
            _obj.__module__ = "offload_image"
        except (AttributeError, TypeError):
            pass
del _name, _obj
