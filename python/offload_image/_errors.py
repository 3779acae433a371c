"""The exceptions of offload_image: one base, :class:`Error`, and Python's own classes
where Python has one (``ValueError`` for a malformed file or a bad argument, ``OSError``
with its errno for a file that cannot be read), so that ``except ValueError`` and ``except
FileNotFoundError`` work as they do everywhere else."""

from __future__ import annotations

import errno as _errno
import os
import re
import warnings
from typing import Any, Dict, List, Optional, Type

#: One JSON record of a command, as a dict.
Record = Dict[str, Any]


class Error(Exception):
    """Base class of every exception offload_image raises.

    Attributes:
        message: one line: what went wrong, naming the file, and where the library located
            it ``at byte N``.
        kind: the library's error kind (``"truncated"``, ``"bad-magic"``,
            ``"out-of-bounds"``, ...; docs/CLI.md lists them), ``"usage"`` for arguments a
            command does not take, or None (a file that cannot be opened).
        offset: the byte offset of the problem in the file, or None.
        filename: the file, where one is concerned (a path, or None for a buffer).
        records: what a command reported before it failed (``list_images`` and ``select``
            on a damaged file: the images read, then the ``"damaged"`` records).
    """

    def __init__(
        self,
        message: str,
        kind: Optional[str] = None,
        offset: Optional[int] = None,
        records: Optional[List[Record]] = None,
        *,
        filename: Optional[str] = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.kind = kind
        self.offset = offset
        self.filename = filename
        self.records: List[Record] = records if records is not None else []

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.message!r}, kind={self.kind!r}, offset={self.offset!r})"


class MalformedError(Error, ValueError):
    """The bytes are not a valid offload container: ``kind`` and ``offset`` say what and
    where (``decompressed_offset``: the position inside the content decompressed from the
    compressed bundle at ``offset``, when the problem lies there)."""

    def __init__(
        self,
        message: str,
        kind: Optional[str] = None,
        offset: Optional[int] = None,
        records: Optional[List[Record]] = None,
        *,
        filename: Optional[str] = None,
        decompressed_offset: Optional[int] = None,
    ) -> None:
        super().__init__(message, kind, offset, records, filename=filename)
        self.decompressed_offset = decompressed_offset


class UsageError(Error, ValueError):
    """A command line the ``loader-sim`` command refuses (:func:`run`), or a command the
    module does not run in the process (``register --load``, the drop-in tools): ``kind``
    is ``"usage"``."""


class InterpreterError(Error, RuntimeError):
    """The interpreter :func:`doctor` asked for its site-packages (``python=``, default
    ``sys.executable``) failed: it exited with an error or a signal, was stopped by the
    command's bound on its time or output, or named no package directory. ``message`` says
    which; ``filename`` is the interpreter."""


class FileError(Error, OSError):
    """A file that cannot be opened or read: an ``OSError`` with ``errno``, ``strerror`` and
    ``filename``; the subclass is Python's for the errno (``FileNotFoundError``,
    ``PermissionError``, ``IsADirectoryError``) where there is one."""

    def __init__(
        self,
        errno: int,
        strerror: str,
        filename: Optional[str],
        message: Optional[str] = None,
        records: Optional[List[Record]] = None,
    ) -> None:
        OSError.__init__(self, errno, strerror, filename)
        self.message = message if message is not None else f"{filename}: {strerror}"
        self.kind = None
        self.offset = None
        self.records = records if records is not None else []

    def __str__(self) -> str:
        return OSError.__str__(self)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.errno!r}, {self.strerror!r}, {self.filename!r})"


class _NotFound(FileError, FileNotFoundError):
    __doc__ = FileError.__doc__


class _PermissionDenied(FileError, PermissionError):
    __doc__ = FileError.__doc__


class _IsADirectory(FileError, IsADirectoryError):
    __doc__ = FileError.__doc__


# Named as FileError's attributes (and found there by pickle): FileError.FileNotFound, ...
for _cls, _name in ((_NotFound, "FileNotFound"), (_PermissionDenied, "PermissionDenied"), (_IsADirectory, "IsADirectory")):
    _cls.__name__ = _name
    _cls.__qualname__ = f"FileError.{_name}"
    _cls.__module__ = "offload_image"
    setattr(FileError, _name, _cls)

_BY_ERRNO: Dict[int, Type[FileError]] = {
    _errno.ENOENT: _NotFound,
    _errno.EACCES: _PermissionDenied,
    _errno.EPERM: _PermissionDenied,
    _errno.EISDIR: _IsADirectory,
}


def file_error(
    code: int, filename: Optional[str], message: Optional[str] = None, records: Optional[List[Record]] = None
) -> FileError:
    """The :class:`FileError` of ``code`` (an errno) for ``filename``."""
    cls = _BY_ERRNO.get(code, FileError)
    return cls(code, os.strerror(code), filename, message, records)


def from_os_error(e: OSError, filename: Optional[str]) -> FileError:
    """Python's ``OSError`` as this module's (the same errno and class)."""
    code = e.errno if e.errno is not None else _errno.EIO
    return file_error(code, e.filename if e.filename is not None else filename, f"{filename}: {e.strerror}")


_OS_ERROR = re.compile(r"\(os error (\d+)\)")


def from_failure(
    message: str,
    kind: Optional[str],
    offset: Optional[int],
    records: Optional[List[Record]] = None,
    paths: Optional[List[str]] = None,
) -> Error:
    """A failure of a command (``message``, ``kind``, ``offset``) as the exception of its
    class: an OS error (the message ends ``(os error N)``) as a :class:`FileError`, a
    ``usage`` failure as a :class:`UsageError`, a located one as a
    :class:`MalformedError`."""
    filename = None
    for p in paths or ():
        if message.startswith(p + ":"):
            filename = p
    m = _OS_ERROR.search(message)
    if kind is None and m:
        return file_error(int(m.group(1)), filename, message, records)
    if kind == "usage":
        return UsageError(message, kind, offset, records, filename=filename)
    if kind is not None and offset is not None:
        return MalformedError(message, kind, offset, records, filename=filename)
    return Error(message, kind, offset, records, filename=filename)


class OffloadImageWarning(UserWarning):
    """What a command would have printed on standard error as a warning (a skipped
    region, a damaged container that did not stop it): issued with :mod:`warnings`, never
    written to standard error by the module."""


def warn(line: str) -> None:
    """Issues ``line`` as an :class:`OffloadImageWarning`."""
    warnings.warn(line, OffloadImageWarning, stacklevel=4)
