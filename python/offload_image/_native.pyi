"""The extension module (Rust, PyO3, stable ABI)."""

from typing import List, Optional, Tuple

__version__: str

class Failure(Exception):
    """args: (message, kind, offset)."""

    args: Tuple[str, Optional[str], Optional[int]]

def run(argv: List[str]) -> Tuple[int, str]:
    """Runs a loader-sim command line (no program name): (exit status, output). Each
    argument reaches the command as ``os.fsencode`` gives its bytes."""
    ...
