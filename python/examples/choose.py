"""Which image each device loads from each unit of a file, and its SHA-256.

    python choose.py FILE DEVICE...
"""

from __future__ import annotations

import sys

import offload_image


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print(__doc__.strip() if __doc__ else "", file=sys.stderr)
        return 2
    path, devices = argv[0], argv[1:]
    with offload_image.open(path) as f:
        for choice in f.choose(devices):
            where = f"{choice.unit.location} unit {choice.unit.index} {choice.device}"
            image = choice.image
            if image is None:
                why = choice.reason
                print(f"{where}: nothing loads" + (f": {why.kind}: {why.reason}" if why else ""))
            else:
                print(f"{where}: {image.name} {choice.rank} {len(image.data)} bytes sha256 {image.sha256}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
