"""The extension module (Rust, PyO3, stable ABI): the library over Python buffers
(``Reader``) and the ``loader-sim`` command in the process (``run``)."""

from typing import Any, Dict, List, Optional, Tuple

__version__: str

class Failure(Exception):
    """A command failed: args are (message, kind, offset)."""

    args: Tuple[str, Optional[str], Optional[int]]

class ReadError(Exception):
    """The library refused the bytes: args are (kind, offset, message, decompressed_offset)."""

    args: Tuple[str, int, str, Optional[int]]

def run(argv: List[str]) -> Tuple[int, str]:
    """Runs a loader-sim command line (no program name): (exit status, output). Each
    argument reaches the command as ``os.fsencode`` gives its bytes."""
    ...

def parse_device(text: str) -> Tuple[str, str]:
    """A device's canonical name and vendor (``"amdgpu"``, ``"cuda"``); ValueError if it
    does not parse."""
    ...

class Reader:
    """The library's units of one buffer, held until ``close``."""

    def __init__(self, source: Any, *, strict: bool = False, verify_hash: bool = True) -> None: ...
    @property
    def closed(self) -> bool: ...
    def units(self) -> List[Dict[str, Any]]:
        """One dict per unit: index, location, section, offset, format, compressed,
        skipped, error, images (dicts: index, entry_id, format, kind, triple, target_id,
        image_kind, code, arch, name, offset, size, encoded, data)."""
        ...
    def decode(self, unit: int, image: int) -> bytes: ...
    def choose(
        self,
        unit: int,
        devices: List[str],
        *,
        policy: str,
        kind: Optional[str],
        jit: bool,
        generic: bool,
        spirv: bool,
        strict: bool,
        clr: bool,
        hip_openmp_compatible: bool,
        nvidia_driver: Optional[str],
    ) -> List[Dict[str, Any]]:
        """Per device: device, chosen, rank, tie, compatible, candidates, losses
        ((index, reason, kind) tuples), rejection, refused, from_jit_cache."""
        ...
    def close(self) -> None: ...
