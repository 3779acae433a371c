"""The objects over the library: :func:`open` gives a :class:`File` of :class:`Unit` s of
:class:`Image` s, read in place by the Rust library in this process (no command runs), and
:class:`Device` s to choose for (:meth:`Unit.choose`, :meth:`File.choose`)."""

from __future__ import annotations

import builtins
import hashlib
import mmap
import os
from typing import Any, Dict, Iterable, Iterator, List, Optional, Tuple, Union

from . import _native
from ._errors import MalformedError, from_os_error

#: A path: ``str``, ``bytes`` (any bytes on POSIX, names that are not UTF-8 too) or an
#: ``os.PathLike`` of either.
PathLike = Union[str, bytes, "os.PathLike[str]", "os.PathLike[bytes]"]

#: What :func:`open` reads: a path, or a buffer (``bytes``, ``bytearray``, ``memoryview``,
#: ``mmap.mmap``, anything with the buffer protocol that is one contiguous run of bytes).
Source = Union[str, bytes, "os.PathLike[str]", "os.PathLike[bytes]", bytearray, memoryview, mmap.mmap, Any]

#: One device or several: a :class:`Device` or a string :class:`Device` parses.
Devices = Union["Device", str, Iterable[Union["Device", str]]]


class Device:
    """A GPU to choose images for, parsed from its name: an AMDGPU target ID with its
    feature states (``"gfx90a:sramecc+:xnack-"``, with or without ``amdgcn-amd-amdhsa--``)
    or an NVIDIA architecture (``"sm_86"``). A name that does not parse raises
    ``ValueError``.

    >>> Device("gfx90a:xnack-")
    Device('gfx90a:xnack-')
    >>> Device("sm_86").vendor
    'cuda'
    """

    __slots__ = ("name", "vendor")

    name: str
    vendor: str

    def __init__(self, name: Union[str, "Device"]) -> None:
        if isinstance(name, Device):
            name = name.name
        if not isinstance(name, str):
            raise TypeError(f"a device must be str or Device, not {type(name).__name__}")
        #: The canonical name (``gfx90a:xnack-``, ``sm_86``).
        self.name, self.vendor = _native.parse_device(name)

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return f"Device({self.name!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Device) and other.name == self.name

    def __hash__(self) -> int:
        return hash(self.name)


def _devices(devices: Devices, keyword: str = "devices") -> List[Device]:
    if isinstance(devices, (str, Device)):
        devices = [devices]
    out = []
    try:
        items = builtins.list(devices)
    except TypeError:
        raise TypeError(f"{keyword} must be a Device, a str or an iterable of them, not {type(devices).__name__}") from None
    for d in items:
        if not isinstance(d, (str, Device)):
            raise TypeError(f"{keyword} must hold Device or str, not {type(d).__name__}")
        try:
            out.append(Device(d))
        except ValueError as e:
            raise ValueError(f"{keyword}: {e}") from None
    if not out:
        raise ValueError(f"{keyword} is empty")
    return out


class Image:
    """One device image of a unit.

    Attributes:
        unit: the :class:`Unit` it belongs to.
        index: its discovery index in the unit.
        entry_id: the bundle entry ID as stored (``hipv4-amdgcn-amd-amdhsa--gfx90a:xnack-``),
            or None (OffloadBinary, fatbinary and ELF images have none).
        kind: the offload kind (``"hip"``, ``"openmp"``, ``"cuda"``, ``"host"``, ...).
        code: what it holds: ``"elf"`` (an AMDGPU code object), ``"cubin"``, ``"ptx"``,
            ``"bitcode"``, ``"spirv"``, ``"fatbinary"`` or ``"other"``.
        format: the container format it came from (``"clang-offload-bundle"``, ...).
        triple: the triple the container states, or None.
        target_id: the target the container states (entry ID target, OffloadBinary arch).
        target: the architecture as the toolchain names it: a cubin ``sm_86``, PTX
            ``compute_86`` (nvcc's virtual architecture), AMDGPU code its target ID; None
            when the image names none.
        name: how ``loader-sim list`` names it (the entry ID, or triple and target).
        offset: where its bytes are in the file, when stored there as they are; None
            when decoded (compressed bundle content, a compressed fatbinary entry).
        size: its size in bytes: stored, or for a compressed entry as its header declares
            (``loader-sim list --no-sha256``'s); ``len(data)`` is the decoded bytes' (a
            compressed PTX entry's declared size may count a NUL that decoding drops).
    """

    __slots__ = (
        "unit", "index", "entry_id", "kind", "code", "format", "triple", "target_id",
        "target", "name", "offset", "size", "image_kind", "_encoded", "_data", "_sha256",
    )

    unit: "Unit"
    index: int
    entry_id: Optional[str]
    kind: str
    code: str
    format: str
    triple: Optional[str]
    target_id: Optional[str]
    target: Optional[str]
    name: str
    offset: Optional[int]
    size: int
    image_kind: str

    def __init__(self, unit: "Unit", d: Dict[str, Any]) -> None:
        self.unit = unit
        self.index = d["index"]
        self.entry_id = d["entry_id"]
        self.kind = d["kind"]
        self.code = d["code"]
        self.format = d["format"]
        self.triple = d["triple"]
        self.target_id = d["target_id"]
        self.target = d["arch"]
        self.name = d["name"]
        self.offset = d["offset"]
        self.size = d["size"]
        self.image_kind = d["image_kind"]
        self._encoded: bool = d["encoded"]
        self._data: Optional[bytes] = d["data"]
        self._sha256: Optional[str] = None

    @property
    def in_place(self) -> bool:
        """Whether the image is stored in the file as it is (then :attr:`data` is a view)."""
        return self.offset is not None

    @property
    def data(self) -> Union[memoryview, bytes]:
        """The image's bytes: a ``memoryview`` of the file's mapping (or of the buffer
        given to :func:`open`) where stored in place, no copy; ``bytes`` where decoded
        (compressed bundle content, a compressed fatbinary entry, decoded on first use).
        A damaged compressed entry raises :class:`MalformedError`."""
        if self.offset is not None:
            return self.unit.file._view(self.offset, self.size)
        if self._data is None:
            self._data = self.unit.file._decode(self.unit._position, self.index)
        return self._data

    @property
    def sha256(self) -> str:
        """The SHA-256 of :attr:`data`, lowercase hex (as ``loader-sim list`` gives it)."""
        if self._sha256 is None:
            self._sha256 = hashlib.sha256(self.data).hexdigest()
        return self._sha256

    def __repr__(self) -> str:
        where = f"at byte {self.offset}" if self.offset is not None else "decoded"
        return f"<Image {self.index} {self.name!r} {self.code} {self.size} bytes {where}>"


class Loss:
    """Why an image was not chosen for a device.

    Attributes:
        image: the :class:`Image`.
        reason: a sentence for people.
        kind: ``"outranked"`` (compatible, but the chosen one ranks above it), or why it
            cannot be loaded: ``"processor"``, ``"feature"``, ``"arch"``, ``"host"``,
            ``"driver"``, ``"not-code"``, ... (docs/PYTHON.md lists them).
    """

    __slots__ = ("image", "reason", "kind")

    def __init__(self, image: Image, reason: str, kind: str) -> None:
        self.image = image
        self.reason = reason
        self.kind = kind

    def __repr__(self) -> str:
        return f"<Loss {self.image.name!r} {self.kind}: {self.reason}>"


class Choice:
    """What the runtime loads from one unit on one device.

    Attributes:
        device: the :class:`Device`.
        unit: the :class:`Unit`.
        image: the chosen :class:`Image`, or None when no image loads.
        rank: why it won: ``"native"``, ``"compatible"``, ``"container"``, ``"jit"``, ...;
            None when nothing was chosen.
        tie: another compatible image ties with the chosen one but for its position.
        compatible: how many images are compatible with the device.
        rejected: every other image with why it lost (:class:`Loss`), discovery order.
        reason: when nothing was chosen, the most telling loss (why), else None.
        refused: the image the runtime picks and then refuses (the CUDA driver and PTX too
            new for it), else None.
        from_jit_cache: the chosen PTX loads only from the driver's JIT cache
            (``CUDA_DISABLE_PTX_JIT``).
    """

    __slots__ = ("device", "unit", "image", "rank", "tie", "compatible", "rejected", "reason", "refused", "from_jit_cache")

    def __init__(self, device: Device, unit: "Unit", d: Dict[str, Any]) -> None:
        by_index = {i.index: i for i in unit.images}
        self.device = device
        self.unit = unit
        self.image: Optional[Image] = by_index[d["chosen"]] if d["chosen"] is not None else None
        self.rank: Optional[str] = d["rank"]
        self.tie: bool = d["tie"]
        self.compatible: int = d["compatible"]
        self.rejected: Tuple[Loss, ...] = tuple(Loss(by_index[i], r, k) for i, r, k in d["losses"])
        r = d["rejection"]
        self.reason: Optional[Loss] = Loss(by_index[r[0]], r[1], r[2]) if r is not None and self.image is None else None
        self.refused: Optional[Image] = by_index[d["refused"]] if d["refused"] is not None else None
        self.from_jit_cache: bool = d["from_jit_cache"]

    def __repr__(self) -> str:
        chosen = self.image.name if self.image is not None else None
        return f"<Choice {self.device.name}: {chosen!r}>"


class Unit:
    """One unit of a file: a bundle (compressed or not), a text bundle, the OffloadBinaries
    of one section, a fatbinary, a device ELF, a ``.kpack`` archive: what a runtime
    registers and chooses in as one.

    Attributes:
        file: the :class:`File`.
        index: its index within its container (the bundle's index in a ``.hip_fatbin``
            section).
        location: where it is, as ``loader-sim list`` says: ``"file"``, or the path such as
            ``"member libfoo.o / section .llvm.offloading"``.
        section: the innermost ELF section holding it, or None.
        offset: the offset of its first byte in the file.
        format: its container format.
        compressed: whether it is a compressed bundle (``CCOB``).
        skipped: bytes after it that are neither padding nor a container, skipped:
            ``(start, end)`` file offsets, or None.
        error: a :class:`MalformedError` when the unit does not read (only with
            ``open(..., damaged="keep")``; else :func:`open` raises it), else None.
        images: its :class:`Image` s, in discovery order.
    """

    __slots__ = ("file", "_position", "index", "location", "section", "offset", "format", "compressed", "skipped", "error", "images")

    def __init__(self, file: "File", position: int, d: Dict[str, Any]) -> None:
        self.file = file
        self._position = position
        self.index: int = d["index"]
        self.location: str = d["location"]
        self.section: Optional[str] = d["section"]
        self.offset: int = d["offset"]
        self.format: str = d["format"]
        self.compressed: bool = d["compressed"]
        self.skipped: Optional[Tuple[int, int]] = tuple(d["skipped"]) if d["skipped"] is not None else None
        self.error: Optional[MalformedError] = file._error(d["error"]) if d["error"] is not None else None
        self.images: Tuple[Image, ...] = tuple(Image(self, i) for i in d["images"])

    def choose(
        self,
        devices: Devices,
        *,
        policy: str = "best",
        kind: Optional[str] = None,
        jit: bool = True,
        generic: bool = True,
        spirv: bool = True,
        strict: bool = False,
        clr: bool = False,
        hip_openmp_compatible: bool = False,
        nvidia_driver: Optional[str] = None,
    ) -> List[Choice]:
        """The image the runtime loads from this unit on each of ``devices`` (one
        :class:`Choice` per device, in order), with why every other image lost.

        ``policy`` is ``"best"``, ``"first"`` or ``"first-by-class"``; ``kind`` limits
        the offload kind (``"hip"``, ``"openmp"``, ``"cuda"``); ``jit=False``,
        ``generic=False`` and ``spirv=False`` refuse code that needs a JIT, generic AMDGPU
        code objects and AMD SPIR-V; ``strict`` rejects images whose container and ELF
        header disagree; ``clr`` applies ROCm CLR's own rules; ``nvidia_driver``
        (``"580.159.04"``) is the NVIDIA driver, which refuses PTX newer than it compiles
        (``CUDA_FORCE_PTX_JIT`` and ``CUDA_DISABLE_PTX_JIT`` are read from the
        environment). A bad value raises ``ValueError`` naming its keyword.
        """
        chosen = _devices(devices)
        for name, value in (("policy", policy), ("kind", kind), ("nvidia_driver", nvidia_driver)):
            if value is not None and not isinstance(value, str):
                raise TypeError(f"{name} must be str, not {type(value).__name__}")
        if self.error is not None:
            raise self.error
        found = self.file._reader().choose(
            self._position,
            [d.name for d in chosen],
            policy=policy,
            kind=kind,
            jit=bool(jit),
            generic=bool(generic),
            spirv=bool(spirv),
            strict=bool(strict),
            clr=bool(clr),
            hip_openmp_compatible=bool(hip_openmp_compatible),
            nvidia_driver=nvidia_driver,
        )
        return [Choice(device, self, d) for device, d in zip(chosen, found)]

    def __repr__(self) -> str:
        return f"<Unit {self.format} at byte {self.offset} ({self.location}): {len(self.images)} images>"


class File:
    """A file (or buffer) read by :func:`open`: its :attr:`units`, in discovery order.

    It holds the file's memory mapping (:attr:`mapping`), or the buffer it was given, for as
    long as it is open; the images stored in place are views of it. Use it as a context
    manager, or call :meth:`close`: a view still held keeps the mapping until it is
    released.

    Attributes:
        name: the path given to :func:`open`, or None for a buffer.
        mapping: the read-only ``mmap.mmap`` of the file, or the buffer (None once closed).
        units: the :class:`Unit` s.
    """

    def __init__(self, source: Any, name: Optional[str], mapping: Any, strict: bool, verify_hash: bool, damaged: str) -> None:
        self.name = name
        self.mapping = mapping
        self._owned = name is not None
        self._native: Optional[_native.Reader] = None
        self._memory: Optional[memoryview] = None
        try:
            self._native = _native.Reader(source, strict=strict, verify_hash=verify_hash)
        except _native.ReadError as e:
            self._close_mapping()
            raise self._error(e.args) from None
        self._memory = memoryview(source) if source is not None else None
        self.units: Tuple[Unit, ...] = tuple(Unit(self, i, d) for i, d in enumerate(self._native.units()))
        if damaged == "raise":
            for unit in self.units:
                if unit.error is not None:
                    self.close()
                    raise unit.error

    @property
    def images(self) -> List[Image]:
        """Every image of every unit, in discovery order."""
        return [i for u in self.units for i in u.images]

    def choose(self, devices: Devices, **options: Any) -> List[Choice]:
        """:meth:`Unit.choose` in every unit that reads: the choices of the first unit (one
        per device), then of the next, ..."""
        return [c for u in self.units if u.error is None for c in u.choose(devices, **options)]

    def _reader(self) -> "_native.Reader":
        if self._native is None:
            raise ValueError("I/O operation on a closed offload_image file")
        return self._native

    def _error(self, args: Any) -> MalformedError:
        kind, offset, message, inner = args
        where = self.name if self.name is not None else "<buffer>"
        return MalformedError(f"{where}: {message}", kind, offset, filename=self.name, decompressed_offset=inner)

    def _view(self, offset: int, size: int) -> memoryview:
        if self._memory is None:
            raise ValueError("I/O operation on a closed offload_image file")
        return self._memory[offset : offset + size]

    def _decode(self, unit: int, image: int) -> bytes:
        try:
            return self._reader().decode(unit, image)
        except _native.ReadError as e:
            raise self._error(e.args) from None

    def _close_mapping(self) -> None:
        m = self.mapping
        self.mapping = None
        if self._owned and isinstance(m, mmap.mmap):
            try:
                m.close()
            except BufferError:
                pass  # a view of an image is still held: the mapping goes with the last one

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._native is None

    def close(self) -> None:
        """Releases the buffer and, for a path, unmaps the file (once no view of it is
        held). The objects read stay; their bytes and choices raise ``ValueError``."""
        if self._native is not None:
            self._native.close()
            self._native = None
        if self._memory is not None:
            self._memory.release()
            self._memory = None
        self._close_mapping()

    def __enter__(self) -> "File":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __iter__(self) -> Iterator[Unit]:
        return iter(self.units)

    def __repr__(self) -> str:
        what = repr(self.name) if self.name is not None else "buffer"
        state = "closed" if self.closed else f"{len(self.units)} units"
        return f"<offload_image.File {what}: {state}>"


def open(  # noqa: A001 (offload_image.open, as gzip.open, tarfile.open)
    source: Source,
    *,
    strict: bool = False,
    verify_hash: bool = True,
    damaged: str = "raise",
) -> File:
    """Reads the offload containers of ``source``: a path (``str``, ``bytes``,
    ``os.PathLike``), mapped read-only, or a buffer (``bytes``, ``memoryview``,
    ``bytearray``, ``mmap``, anything with the buffer protocol; a writable one is copied for
    reading, its views stay on it). Returns a :class:`File`, a context manager.

    ``strict`` refuses bytes between containers that are neither padding nor a container
    (else they are skipped: :attr:`Unit.skipped`); ``verify_hash=False`` skips the MD5 check
    of compressed bundles. A container that does not read raises :class:`MalformedError`
    (a ``ValueError``: ``kind``, ``offset``, the file named); with ``damaged="keep"`` it is
    kept as a unit with :attr:`Unit.error` instead. A file that cannot be opened raises
    :class:`FileError` (``FileNotFoundError``, ``PermissionError``, with ``errno``).
    """
    if damaged not in ("raise", "keep"):
        raise ValueError(f"damaged must be 'raise' or 'keep', not {damaged!r}")
    if isinstance(source, (str, bytes, os.PathLike)) and not isinstance(source, bytes):
        return _open_path(source, strict, verify_hash, damaged)
    if isinstance(source, bytes):
        # bytes are a buffer: a path given as bytes is os.PathLike or str here.
        return File(source, None, source, strict, verify_hash, damaged)
    try:
        memoryview(source)
    except TypeError:
        raise TypeError(
            f"source must be a path (str, os.PathLike) or a buffer (bytes, memoryview, ...), not {type(source).__name__}"
        ) from None
    return File(source, None, source, strict, verify_hash, damaged)


def open_path(path: PathLike, **options: Any) -> File:
    """:func:`open` for a path given as ``bytes`` (which :func:`open` takes as the
    file's content)."""
    return _open_path(path, options.pop("strict", False), options.pop("verify_hash", True), options.pop("damaged", "raise"), **options)


def _open_path(path: PathLike, strict: bool, verify_hash: bool, damaged: str, **extra: Any) -> File:
    if extra:
        raise TypeError(f"unexpected keyword argument {next(iter(extra))!r}")
    if not isinstance(path, (str, bytes, os.PathLike)):
        raise TypeError(f"path must be str, bytes or os.PathLike, not {type(path).__name__}")
    name = os.fsdecode(os.fspath(path))
    try:
        with builtins.open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            mapping: Any = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if size else b""
    except OSError as e:
        raise from_os_error(e, name) from None
    return File(mapping, name, mapping, strict, verify_hash, damaged)
