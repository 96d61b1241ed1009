"""``make bench``: every benchmark, one after another, each printing its table.

``python -m benches [--quick] [core|verify|media|remotes|runs|rate|llm|llm_memory|report|lpips ...]``.
Needs Debian's b3sum and ffmpeg, and the AWS CLI for the remotes benchmark. The AIPerf
comparison (``python -m benches.bench_aiperf``) runs only when asked (``aiperf``), with
AIPerf installed in an environment of its own.
"""

from __future__ import annotations

import importlib
import sys

SUITES = (
    "core",
    "verify",
    "media",
    "remotes",
    "runs",
    "rate",
    "llm",
    "llm_memory",
    "report",
    "lpips",
)
ON_REQUEST = ("aiperf",)


def main(argv: list[str]) -> int:
    quick = [a for a in argv if a == "--quick"]
    chosen = [a for a in argv if a in SUITES + ON_REQUEST] or list(SUITES)
    for name in chosen:
        print(f"\n## {name}\n", flush=True)
        module = importlib.import_module(f"benches.bench_{name}")
        module.main(
            quick if name in ("core", "verify", "media", "rate", "llm", "llm_memory") else []
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
