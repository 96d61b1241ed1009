"""Run records (issue 10): runner overhead per request and peak RSS against body size.

Both measurements run the reference video server in a separate process
(``python -m evidencestore.testing.video_server``), so its work never shares the
runner's interpreter.

* Overhead: ``evstore run`` sends 1 warmup + N measured requests (160x120, 1 s H.264 +
  AAC clips, cached by the server after the first; media checks off, as the bar
  excludes them). Per consecutive pair, overhead = the server's arrival time of request
  k+1 (``time.monotonic_ns()`` when its handler started, served at
  ``/_reference/arrivals``) minus the runner's ``last_byte_ns`` of request k. Both are
  CLOCK_MONOTONIC on one host, so the difference is valid across processes; it is an
  upper bound on the runner's own time (it includes the loopback hop and aiohttp's
  request parsing on the server side).
* Memory: ``evstore run`` in a fresh process against a server streaming a body of S
  bytes (filler, 1 MiB chunks); the child's peak RSS (``ru_maxrss`` from ``wait4``) for
  S = 1 MiB and S = 1 GiB (256 MiB with ``--quick``). The bar is +64 MiB at 1 GiB.

Run: ``python -m benches.bench_runs [--quick]``.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

EVSTORE = [sys.executable, "-m", "evidencestore"]
SERVER = [sys.executable, "-m", "evidencestore.testing.video_server"]

WORKLOAD = """\
[endpoint]
kind = "videos-sync"
path = "/v1/videos/sync"

[run]
warmup = 1
measured = {measured}
timeout = 600
check_media = false

[audio]
sample_rate = 48000
channels = 2

[[request]]
prompt = "bench"
size = "160x120"
seconds = 1
fps = 24
seed = 1
"""


class _Server:
    def __init__(self, *args: str) -> None:
        self.proc = subprocess.Popen(
            [*SERVER, *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        assert self.proc.stdout is not None
        self.url = self.proc.stdout.readline().strip()

    def arrivals(self) -> list[int]:
        with urllib.request.urlopen(self.url + "/_reference/arrivals") as resp:
            data: list[int] = json.load(resp)["arrivals_ns"]
        return data

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


def _repo(tmp: Path, name: str) -> Path:
    root = tmp / name
    (root / "evidence").mkdir(parents=True)
    return root


def _run(root: Path, workload: Path, url: str, name: str) -> tuple[int, int]:
    """Run ``evstore run`` in a fresh process; return its exit code and peak RSS (KiB)."""
    cmd = [
        *EVSTORE,
        "run",
        str(workload),
        "--arm",
        "bench",
        "--server",
        url,
        "--name",
        name,
        "--root",
        str(root),
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return proc.returncode, usage.ru_maxrss


def overhead(tmp: Path, measured: int) -> list[float]:
    """Per-request runner overhead in ms (next request's arrival minus last body byte)."""
    from evidencestore.runs import load_run

    root = _repo(tmp, "overhead")
    wl = tmp / "overhead.toml"
    wl.write_text(WORKLOAD.format(measured=measured))
    server = _Server()
    try:
        code, _ = _run(root, wl, server.url, "overhead")
        arrivals = server.arrivals()
    finally:
        server.close()
    if code != 0:
        raise SystemExit(f"overhead run failed (exit {code})")
    record = load_run(root, "overhead")
    last = [r.last_byte_ns for r in record.requests]
    assert len(arrivals) == len(last)
    return [(arrivals[k + 1] - last[k]) / 1e6 for k in range(len(last) - 1) if last[k] is not None]  # type: ignore[operator]


def peak_rss(tmp: Path, size: int) -> tuple[int, float]:
    """Peak RSS (MiB) of a one-request run receiving a ``size``-byte body; and its seconds."""
    root = _repo(tmp, f"rss-{size}")
    wl = tmp / "rss.toml"
    wl.write_text(WORKLOAD.format(measured=1).replace("warmup = 1", "warmup = 0"))
    server = _Server("--stream-bytes", str(size))
    try:
        t0 = time.perf_counter()
        code, rss = _run(root, wl, server.url, f"rss-{size}")
        elapsed = time.perf_counter() - t0
    finally:
        server.close()
    if code != 0:
        raise SystemExit(f"run with a {size}-byte body failed (exit {code})")
    return rss // 1024, elapsed


def main(argv: list[str]) -> None:
    quick = "--quick" in argv
    big = (256 if quick else 1024) << 20
    with tempfile.TemporaryDirectory(prefix="evstore-bench-runs-") as t:
        tmp = Path(t)
        values = overhead(tmp, 20 if quick else 100)
        print(
            f"runner overhead per request (n={len(values)}): median {statistics.median(values):.3f} ms, "
            f"min {min(values):.3f} ms, max {max(values):.3f} ms (bar: median <= 5 ms)"
        )
        small, t_small = peak_rss(tmp, 1 << 20)
        large, t_large = peak_rss(tmp, big)
        print(
            f"peak RSS of `evstore run`: {small} MiB with a 1 MiB body ({t_small:.1f} s), "
            f"{large} MiB with a {big >> 20} MiB body ({t_large:.1f} s): +{large - small} MiB "
            "(bar: +64 MiB at 1 GiB)"
        )


if __name__ == "__main__":
    main(sys.argv[1:])
