"""Whether the libraries of FILE (a library, a wheel, a directory) load on DEVICE, and the
hints for those that do not; exit status 1 when one does not.

    python will_it_run.py FILE DEVICE [--nvidia-driver VERSION]
"""

from __future__ import annotations

import argparse
import sys

import offload_image


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("file")
    ap.add_argument("device")
    ap.add_argument("--nvidia-driver")
    args = ap.parse_args(argv)
    report = offload_image.doctor(args.file, [args.device], nvidia_driver=args.nvidia_driver)
    for r in report.records:
        print(f"{r.member or r.file} on {r.device}: {r.status}" + (f" ({r.reason})" if r.reason else ""))
        for h in r.hints:
            what = " ".join(x for x in (h.env, h.value, h.offload_arch) if x)
            print(f"  hint: {h.kind} {what}")
    s = report.summary
    print(f"{s.libraries} libraries, {s.ok} load, {s.partial} partly, {s.none} not")
    return 0 if s.none == 0 and s.partial == 0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
