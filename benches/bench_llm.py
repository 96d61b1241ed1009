"""LLM serving (issue 25): TTFT and ITL as the runner records them against the reference
LLM server's own log of when it wrote each token, and the runner's send lag and CPU at
high concurrency.

The server runs in its own process (``python -m evidencestore.testing.llm_server``) with
``--ttft``, ``--itl`` and ``--jitter``; every request has its own prompt (``[prompts]``,
synthetic), so the server's log (``GET /_reference/log``: request number, token
position, ``time.monotonic_ns()`` just before the token's event was written, and each
request's prompt) is matched to the runner's requests by prompt. Both clocks are
CLOCK_MONOTONIC on one host, so:

* TTFT error = the runner's arrival of the first content event - the server's write of
  token 0 (what the runner adds: loopback hop, event loop, its own work);
* ITL error = the runner's per-token inter-token latency - the server's gap between the
  same two tokens' writes.

Medians and p99 of the absolute errors, at concurrency 1 and 64 (``--concurrency``).
Then concurrency 256 with 256-token outputs: the run's median send lag and CPU fraction,
and whether it flagged itself client-bound.

Run: ``python -m benches.bench_llm [--quick]``.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

WORKLOAD = """\
[endpoint]
kind = "chat"
path = "/v1/chat/completions"
model = "reference-llm"

[run]
measured = 1
concurrency = {concurrency}
check_media = false
timeout = 600

[prompts]
count = {count}
input_tokens = 8
max_tokens = {tokens}
seed = {seed}
request_seed = 1
"""


def _server(*args: str) -> tuple[subprocess.Popen[str], str]:
    cmd = [sys.executable, "-m", "evidencestore.testing.llm_server", *args]
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    return proc, proc.stdout.readline().strip()


def _p(values: list[float], q: float) -> float:
    xs = sorted(values)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def accuracy(root: Path, concurrency: int, count: int, tokens: int) -> dict[str, float]:
    from evidencestore.runs import run_workload
    from evidencestore.runs.streams import token_times
    from evidencestore.runs.workload import load_workload

    proc, url = _server("--ttft", "0.02", "--itl", "0.005", "--jitter", "0.002")
    try:
        wl = root / f"acc-{concurrency}.toml"
        wl.write_text(
            WORKLOAD.format(concurrency=concurrency, count=count, tokens=tokens, seed=concurrency)
        )
        prompts = [r.prompt for r in load_workload(wl).workload.request]
        _, rec = run_workload(root, wl, arm="bench", server=url, name=f"acc-{concurrency}")
        with urllib.request.urlopen(url + "/_reference/log", timeout=60) as resp:
            served = json.loads(resp.read())
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(timeout=30)
    number_of = {p: int(n) for n, p in served["prompts"].items()}
    written: dict[int, dict[int, int]] = {}
    for n, pos, t in served["log"]:
        written.setdefault(n, {})[pos] = t
    ttft_err: list[float] = []
    itl_err: list[float] = []
    for r in rec.requests:
        assert r.failure is None and r.events is not None, r.message
        server = written[number_of[prompts[r.request]]]
        times = [r.sent_ns / 1e9 + t for t in token_times(r.events)]
        ttft_err.append(abs(times[0] - server[0] / 1e9))
        for i in range(1, len(times)):
            client_gap = times[i] - times[i - 1]
            server_gap = (server[i] - server[i - 1]) / 1e9
            itl_err.append(abs(client_gap - server_gap))
    assert rec.load is not None
    return {
        "concurrency": concurrency,
        "requests": len(rec.requests),
        "ttft_median_ms": statistics.median(ttft_err) * 1e3,
        "ttft_p99_ms": _p(ttft_err, 0.99) * 1e3,
        "itl_median_ms": statistics.median(itl_err) * 1e3,
        "itl_p99_ms": _p(itl_err, 0.99) * 1e3,
        "cpu_ms_per_request": rec.load.cpu_s / len(rec.requests) * 1e3,
        "send_lag_median_ms": (rec.load.send_lag_median_s or 0.0) * 1e3,
        "client_bound": float(rec.load.client_bound),
    }


def load(root: Path, concurrency: int, count: int, tokens: int) -> dict[str, object]:
    from evidencestore.runs import run_workload

    proc, url = _server("--ttft", "0.05", "--itl", "0.01")
    try:
        wl = root / f"load-{concurrency}.toml"
        wl.write_text(WORKLOAD.format(concurrency=concurrency, count=count, tokens=tokens, seed=7))
        t0 = time.perf_counter()
        _, rec = run_workload(root, wl, arm="bench", server=url, name=f"load-{concurrency}")
        total = time.perf_counter() - t0
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(timeout=30)
    assert rec.load is not None
    return {
        "concurrency": concurrency,
        "requests": len(rec.requests),
        "tokens": tokens,
        "outcome": rec.outcome,
        "send_lag_median_ms": (rec.load.send_lag_median_s or 0.0) * 1e3,
        "cpu_fraction": rec.load.cpu_fraction,
        "client_bound": rec.load.client_bound,
        "reasons": list(rec.load.reasons),
        "run_s": total,
    }


def main(argv: list[str]) -> None:
    quick = "--quick" in argv
    with tempfile.TemporaryDirectory(prefix="evstore-bench-llm-") as tmp:
        root = Path(tmp)
        (root / "evidence").mkdir()
        print("TTFT / ITL error against the server's log (ms; |runner - server|)")
        print(
            f"{'conc':>5} {'n':>5} {'ttft med':>9} {'ttft p99':>9} {'itl med':>8} {'itl p99':>8} {'cpu ms/req':>10}"
        )
        for c in (1, 64):
            count = (16 if quick else 64) if c == 1 else (64 if quick else 256)
            r = accuracy(root, c, count, 32)
            print(
                f"{c:>5} {r['requests']:>5} {r['ttft_median_ms']:>9.3f} {r['ttft_p99_ms']:>9.3f} "
                f"{r['itl_median_ms']:>8.3f} {r['itl_p99_ms']:>8.3f} {r['cpu_ms_per_request']:>10.3f}"
            )
        c = 256
        r2 = load(root, c, 256 if quick else 512, 256)
        print(
            f"concurrency {c}, {r2['requests']} requests x {r2['tokens']} tokens: "
            f"median send lag {r2['send_lag_median_ms']:.3f} ms, client CPU "
            f"{r2['cpu_fraction']:.0%} of a core, client-bound {r2['client_bound']} "
            f"{r2['reasons']}, outcome {r2['outcome']}, {r2['run_s']:.1f} s"
        )


if __name__ == "__main__":
    main(sys.argv[1:])
