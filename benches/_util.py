"""Shared timing helpers: interleaved repeats, medians, a table printer."""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

EVSTORE = [sys.executable, "-m", "evidencestore"]


def run_quiet(cmd: Sequence[str], cwd: Path | None = None) -> None:
    """Run a command, discarding its output; raise if it fails."""
    subprocess.run(cmd, cwd=cwd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def interleaved(cases: dict[str, Callable[[], None]], repeats: int) -> dict[str, float]:
    """Run each case ``repeats`` times, interleaved, after one warm-up; return medians (s)."""
    for fn in cases.values():
        fn()
    samples: dict[str, list[float]] = {k: [] for k in cases}
    for _ in range(repeats):
        for name, fn in cases.items():
            t0 = time.perf_counter()
            fn()
            samples[name].append(time.perf_counter() - t0)
    return {k: statistics.median(v) for k, v in samples.items()}


def table(title: str, header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """Format a Markdown table."""
    lines = [f"### {title}", "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"
