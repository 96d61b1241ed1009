"""``make bench``: every benchmark, one after another, each printing its table.

``python -m benches [--quick] [core|verify|media|remotes|runs|report|lpips ...]``. Needs Debian's b3sum and
ffmpeg, and the AWS CLI for the remotes benchmark.
"""

from __future__ import annotations

import importlib
import sys

SUITES = ("core", "verify", "media", "remotes", "runs", "report", "lpips")


def main(argv: list[str]) -> int:
    quick = [a for a in argv if a == "--quick"]
    chosen = [a for a in argv if a in SUITES] or list(SUITES)
    for name in chosen:
        print(f"\n## {name}\n", flush=True)
        module = importlib.import_module(f"benches.bench_{name}")
        module.main(quick if name in ("core", "verify", "media") else [])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
