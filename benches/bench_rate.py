"""The runner at high request rates (issue 28 item 1): request rate and client CPU per
request against a bare aiohttp client, 1 KiB bodies, concurrency 1, 8, 32, 256.

The reference video server runs in its own process (``--stream-bytes 1024``: every
``POST /v1/generate`` is answered with 1 KiB at once). Each client runs in a fresh
process of its own, rounds interleaved (bare, evstore, bare, evstore, ...):

* bare: an ``aiohttp.ClientSession`` with N workers POSTing the same JSON and reading
  each body whole; nothing is kept;
* evstore: ``run_workload`` of a ``json`` workload with ``check_media = false``, which
  records every request and stores every body by digest.

Both are measured over their request phase only: rate = requests / (last response's end
- first send), CPU = process CPU time over the same phase / requests (``time.
process_time`` in the bare client; the run record's ``load.cpu_s`` for evstore). The
ratios (evstore rate / bare rate, evstore CPU / bare CPU) are within one run; medians of
the rounds. The whole ``evstore run`` time (server check, publishing, registration) is
shown beside.

With ``--kind llm`` the same for streamed LLM responses: the reference LLM server
(``python -m evidencestore.testing.llm_server --ttft 0 --itl 0``) in its own process,
16-token chat completions of distinct synthetic prompts (``[prompts]``, as the LLM
benchmark's workloads) streamed as server-sent events (16 token events, the finish
event, usage and ``[DONE]``):

* bare: an ``aiohttp.ClientSession`` POSTing the same chat requests' bytes (built by the
  chat endpoint) and reading the SSE stream chunk by chunk, timestamping every chunk
  (``time.monotonic_ns``) and keeping it: the least a client that measures TTFT and ITL
  must do;
* evstore: ``run_workload`` of the ``chat`` workload, which records every event's arrival
  and every stream by digest (read back, and the completion stored, after the timed
  requests).

Run: ``python -m benches.bench_rate [--quick] [--kind json|llm] [--requests N]
[--rounds R] [--concurrency C ...]``.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SERVER = [sys.executable, "-m", "evidencestore.testing.video_server", "--stream-bytes", "1024"]
LLM_SERVER = [
    sys.executable,
    *("-m", "evidencestore.testing.llm_server", "--ttft", "0", "--itl", "0"),
]
LLM_TOKENS = 16

WORKLOAD = """\
[endpoint]
kind = "json"
path = "/v1/generate"

[run]
measured = {measured}
concurrency = {concurrency}
check_media = false
timeout = 60

[[request]]
prompt = "bench"
seed = 1
"""

LLM_WORKLOAD = """\
[endpoint]
kind = "chat"
path = "/v1/chat/completions"
model = "reference-llm"

[run]
measured = 1
concurrency = {concurrency}
check_media = false
timeout = 60

[prompts]
count = {measured}
input_tokens = 8
max_tokens = {tokens}
seed = 7
request_seed = 1
"""

BARE = r"""
import asyncio, json, sys, time
import aiohttp

async def main(url, n, c):
    payload = json.dumps({"prompt": "bench", "seed": 1}).encode()
    conn = aiohttp.TCPConnector(limit=c, ssl=False)
    async with aiohttp.ClientSession(connector=conn, auto_decompress=False) as s:
        async with s.get(url + "/health") as r:
            await r.read()
        left = [n]
        async def worker():
            while left[0] > 0:
                left[0] -= 1
                async with s.post(url + "/v1/generate", data=payload,
                                  headers={"Content-Type": "application/json"}) as r:
                    await r.read()
        cpu0, t0 = time.process_time(), time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(min(c, n))))
        cpu, wall = time.process_time() - cpu0, time.perf_counter() - t0
    print(json.dumps({"wall": wall, "cpu": cpu}))

asyncio.run(main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3])))
"""

BARE_LLM = r"""
import asyncio, json, sys, time
import aiohttp

async def main(url, c, payloads, events_each):
    n = len(payloads)
    conn = aiohttp.TCPConnector(limit=c, ssl=False)
    kept = []
    async with aiohttp.ClientSession(connector=conn, auto_decompress=False) as s:
        async with s.get(url + "/health") as r:
            await r.read()
        left = list(reversed(payloads))
        async def worker():
            while left:
                payload = left.pop()
                times, chunks = [], []
                async with s.post(url + "/v1/chat/completions", data=payload,
                                  headers={"Content-Type": "application/json"}) as r:
                    async for chunk in r.content.iter_any():
                        times.append(time.monotonic_ns())
                        chunks.append(chunk)
                kept.append((times, chunks))
        cpu0, t0 = time.process_time(), time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(min(c, n))))
        cpu, wall = time.process_time() - cpu0, time.perf_counter() - t0
    events = sum(b"".join(ch).count(b"\n\n") for _, ch in kept)
    assert events == n * events_each, events
    print(json.dumps({"wall": wall, "cpu": cpu,
                      "chunks": sum(len(t) for t, _ in kept) / n}))

payloads = [bytes.fromhex(h) for h in open(sys.argv[3]).read().split()]
asyncio.run(main(sys.argv[1], int(sys.argv[2]), payloads, int(sys.argv[4])))
"""

EVSTORE = r"""
import json, sys, time
t0 = time.perf_counter()
from evidencestore.runs import run_workload
root, wl, url, name = sys.argv[1:5]
reg, rec = run_workload(root, wl, arm="bench", server=url, name=name)
total = time.perf_counter() - t0
ok = [r for r in rec.requests if r.failure is None and r.body is not None]
assert len(ok) == len(rec.requests), rec.reason
assert rec.outcome == "complete", rec.reason
first = min(r.sent_ns for r in rec.requests)
last = max(r.end_ns for r in rec.requests)
print(json.dumps({"wall": (last - first) / 1e9, "cpu": rec.load.cpu_s, "total": total,
                  "bound": rec.load.client_bound, "lag": rec.load.send_lag_median_s}))
"""


def _server(cmd: list[str]) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    return proc, proc.stdout.readline().strip()


def _json(cmd: list[str]) -> dict[str, float]:
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    return dict(json.loads(out.strip().splitlines()[-1]))


def _payloads(wl: Path, out: Path) -> Path:
    """The exact bytes the runner sends for each of the workload's requests, in order (for
    the bare client; one hex line each)."""
    from evidencestore.runs.endpoints import build_payload
    from evidencestore.runs.workload import load_workload

    loaded = load_workload(wl)
    n = len(loaded.workload.request)
    out.write_text("\n".join(build_payload(loaded, i).data.hex() for i in range(n)))
    return out


def measure(
    requests: int, rounds: int, levels: tuple[int, ...], kind: str = "json"
) -> list[dict[str, float]]:
    llm = kind == "llm"
    proc, url = _server(LLM_SERVER if llm else SERVER)
    rows = []
    try:
        with tempfile.TemporaryDirectory(prefix="evstore-bench-rate-") as tmp:
            root = Path(tmp)
            (root / "evidence").mkdir()
            for c in levels:
                wl = root / f"w{c}.toml"
                text = LLM_WORKLOAD if llm else WORKLOAD
                wl.write_text(text.format(measured=requests, concurrency=c, tokens=LLM_TOKENS))
                if llm:
                    payloads = _payloads(wl, root / "payloads.hex")
                    bare_cmd = [sys.executable, "-c", BARE_LLM, url, str(c), str(payloads)]
                    bare_cmd.append(str(LLM_TOKENS + 3))
                else:
                    bare_cmd = [sys.executable, "-c", BARE, url, str(requests), str(c)]
                bare, ev = [], []
                for i in range(rounds):
                    bare.append(_json(bare_cmd))
                    ev.append(
                        _json([sys.executable, "-c", EVSTORE, str(root), str(wl), url, f"r{c}-{i}"])
                    )
                rate_ratio = statistics.median(
                    (requests / e["wall"]) / (requests / b["wall"])
                    for b, e in zip(bare, ev, strict=True)
                )
                cpu_ratio = statistics.median(
                    e["cpu"] / b["cpu"] for b, e in zip(bare, ev, strict=True)
                )
                rows.append(
                    {
                        "concurrency": c,
                        "bare_rps": statistics.median(requests / b["wall"] for b in bare),
                        "evstore_rps": statistics.median(requests / e["wall"] for e in ev),
                        "rate_ratio": rate_ratio,
                        "bare_cpu_ms": statistics.median(b["cpu"] for b in bare) / requests * 1e3,
                        "evstore_cpu_ms": statistics.median(e["cpu"] for e in ev) / requests * 1e3,
                        "cpu_ratio": cpu_ratio,
                        "evstore_total_s": statistics.median(e["total"] for e in ev),
                        "client_bound": any(bool(e["bound"]) for e in ev),
                        "send_lag_ms": statistics.median(e["lag"] for e in ev) * 1e3,
                    }
                )
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(timeout=10)
    return rows


def main(argv: list[str]) -> None:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--requests", type=int)
    parser.add_argument("--rounds", type=int)
    parser.add_argument("--concurrency", type=int, nargs="*")
    parser.add_argument(
        "--kind", choices=("json", "llm"), default="json", help="1 KiB JSON or streamed LLM"
    )
    args = parser.parse_args(argv)
    requests = args.requests or (512 if args.quick else 4096)
    rounds = args.rounds or (1 if args.quick else 3)
    levels = tuple(args.concurrency or (1, 8, 32, 256))
    t0 = time.perf_counter()
    rows = measure(requests, rounds, levels, args.kind)
    what = (
        f"streamed LLM responses ({LLM_TOKENS} tokens, {LLM_TOKENS + 3} events)"
        if args.kind == "llm"
        else "1 KiB bodies"
    )
    print(f"runner request rate, {what}, {requests} requests, {rounds} round(s)")
    print(
        f"{'conc':>5} {'bare req/s':>11} {'evstore':>9} {'rate x':>7} {'bare ms':>8} "
        f"{'ev ms':>7} {'cpu x':>6} {'run s':>6} {'lag ms':>7} bound"
    )
    for r in rows:
        print(
            f"{r['concurrency']:>5} {r['bare_rps']:>11.0f} {r['evstore_rps']:>9.0f} "
            f"{r['rate_ratio']:>7.2f} {r['bare_cpu_ms']:>8.3f} {r['evstore_cpu_ms']:>7.3f} "
            f"{r['cpu_ratio']:>6.2f} {r['evstore_total_s']:>6.2f} {r['send_lag_ms']:>7.3f} "
            f"{r['client_bound']}"
        )
    print(f"({time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    main(sys.argv[1:])
