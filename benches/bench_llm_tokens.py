"""Per-token ITL against server truth, and the open-loop schedule's slip (issue 34).

The reference LLM server runs in its own process with vLLM's framing (``--token-ids
asked``: no token ids unless asked, usage at the end) and ``--tokens-per-event`` 1 or 3.
Its log (``GET /_reference/log``) stamps every token just before its event is written
(CLOCK_MONOTONIC, the runner's clock too). Server truth per request is the per-token
ITL of the stamps, ``(last token - first token) / (tokens - 1)``; the runner's
``itl_s`` is ``(e2e - ttft) / (tokens - 1)`` with tokens counted from usage. Error =
runner - truth, per request: median and p99 of its absolute value, and the median signed
error, at concurrency 1, 8 and 32.

Open loop: ``[run] request_rate`` 10, 100 and 1,000 requests per second (Poisson,
seeded), up to 1,024 in flight, against a server answering at once; the schedule's slip
(actual minus intended send time) median, p99 and max, and the achieved rate.

Run: ``python -m benches.bench_llm_tokens [--quick]``.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
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
{extra}

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


def _stop(proc: subprocess.Popen[str]) -> None:
    assert proc.stdin is not None
    proc.stdin.close()
    proc.wait(timeout=30)


def _p(values: list[float], q: float) -> float:
    xs = sorted(values)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def itl_error(root: Path, concurrency: int, per_event: int, count: int) -> dict[str, object]:
    """The runner's per-token ITL against the server's stamps."""
    from evidencestore.runs import run_workload
    from evidencestore.runs.workload import load_workload

    tokens = 30
    proc, url = _server("--ttft", "0.02", "--itl", "0.005", "--tokens-per-event",
                        str(per_event), "--token-ids", "asked")  # fmt: skip
    try:
        wl = root / f"itl-{concurrency}-{per_event}.toml"
        wl.write_text(WORKLOAD.format(concurrency=concurrency, count=count, tokens=tokens,
                                      seed=concurrency, extra=""))  # fmt: skip
        prompts = [r.prompt for r in load_workload(wl).workload.request]
        name = f"itl-{concurrency}-{per_event}"
        _, rec = run_workload(root, wl, arm="bench", server=url, name=name)
        with urllib.request.urlopen(url + "/_reference/log", timeout=60) as resp:
            served = json.loads(resp.read())
    finally:
        _stop(proc)
    number_of = {p: int(n) for n, p in served["prompts"].items()}
    stamps: dict[int, list[int]] = {}
    for n, _pos, t in served["log"]:
        stamps.setdefault(n, []).append(t)
    errors: list[float] = []
    truths: list[float] = []
    for r in rec.requests:
        assert r.failure is None and r.itl_s is not None, r.message
        assert r.output_tokens == tokens and r.output_tokens_from == "usage"
        ts = stamps[number_of[prompts[r.request]]]
        truth = (max(ts) - min(ts)) / 1e9 / (len(ts) - 1)
        truths.append(truth)
        errors.append(r.itl_s - truth)
    absolute = [abs(e) for e in errors]
    return {
        "concurrency": concurrency,
        "tokens_per_event": per_event,
        "requests": len(errors),
        "truth_median_ms": statistics.median(truths) * 1e3,
        "abs_err_median_us": statistics.median(absolute) * 1e6,
        "abs_err_p99_us": _p(absolute, 0.99) * 1e6,
        "signed_err_median_us": statistics.median(errors) * 1e6,
        "rel_err_median": statistics.median(absolute) / statistics.median(truths),
    }


def slip(root: Path, rate: float, count: int) -> dict[str, object]:
    """The open-loop schedule's slip at ``rate`` requests per second."""
    from evidencestore.runs import run_workload

    proc, url = _server("--ttft", "0", "--itl", "0")
    try:
        wl = root / f"slip-{rate:g}.toml"
        extra = f"request_rate = {rate}\narrival_seed = 1\nmax_send_lag = 60"
        wl.write_text(WORKLOAD.format(concurrency=1024, count=count, tokens=4, seed=3,
                                      extra=extra))  # fmt: skip
        _, rec = run_workload(root, wl, arm="bench", server=url, name=f"slip-{rate:g}")
    finally:
        _stop(proc)
    load = rec.load
    assert load is not None and rec.outcome == "complete", rec.reason
    lags = sorted(r.send_lag_s for r in rec.requests if r.send_lag_s is not None)
    return {
        "rate": rate,
        "requests": len(lags),
        "achieved_rate": round(load.achieved_rate or 0.0, 1),
        "slip_median_ms": statistics.median(lags) * 1e3,
        "slip_p99_ms": _p(lags, 0.99) * 1e3,
        "slip_max_ms": lags[-1] * 1e3,
        "cpu_fraction": round(load.cpu_fraction, 2),
    }


def main(argv: list[str]) -> None:
    quick = "--quick" in argv
    with tempfile.TemporaryDirectory(prefix="evstore-bench-tokens-") as tmp:
        root = Path(tmp)
        (root / "evidence").mkdir()
        print("per-token ITL error against the server's stamps (itl 5 ms, 30 tokens)")
        for concurrency in (1, 8, 32):
            for per_event in (1, 3):
                count = max(16, concurrency * 2) if not quick else max(4, concurrency)
                print(json.dumps(itl_error(root, concurrency, per_event, count)), flush=True)
        print("open-loop schedule slip")
        for rate, count in ((10.0, 50), (100.0, 500), (1000.0, 2000)):
            print(json.dumps(slip(root, rate, count // (5 if quick else 1))), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
