"""Peak memory of recording one huge streamed LLM event (issue 39: at most 1.5x the body).

A real HTTP server (aiohttp, a process of its own) answers a chat completion with one
server-sent event whose ``delta.content`` is S bytes of text (written in 1 MiB pieces),
then a finish event and ``data: [DONE]``. ``evstore run`` records it in a fresh process
(the body streamed to the store, then read back, decoded, its completion stored, the
audits reading the completion); its peak RSS (``ru_maxrss`` from ``wait4``) is measured
for S = 100 MB and for a 1 KB event in the same run, and the ratio is (peak at 100 MB -
peak at 1 KB) / body size.

The text has no JSON escapes, so it is kept as the stream's bytes and never decoded
(``streams.py``); ``--escapes`` puts a ``\\n`` escape in every line of it, so it is
decoded, a piece at a time, as its completion is stored.

Run: ``python -m benches.bench_llm_memory [--quick] [--mb N] [--escapes]``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

EVSTORE = [sys.executable, "-m", "evidencestore"]

SERVER = r"""
import asyncio, sys
from aiohttp import web

SIZE = int(sys.argv[1])
PIECE = 1 << 20
LINE = b"lorem ipsum dolor sit amet\\n" if sys.argv[2:] == ["escapes"] else b"lorem ipsum dolor sit amet "
TEXT = (LINE * (PIECE // len(LINE) + 1))[:PIECE]

async def chat(request):
    await request.read()
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await resp.prepare(request)
    await resp.write(b'data: {"choices":[{"index":0,"delta":{"role":"assistant","content":"')
    left = SIZE
    while left > 0:
        await resp.write(TEXT[: min(left, PIECE)])
        left -= PIECE
    await resp.write(b'"}}]}\n\n')
    await resp.write(
        b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}],'
        b'"usage":{"completion_tokens":1}}\n\ndata: [DONE]\n\n'
    )
    return resp

async def main():
    app = web.Application(client_max_size=1 << 20)
    app.router.add_post("/v1/chat/completions", chat)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]
    print(f"http://127.0.0.1:{port}", flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
    await runner.cleanup()

asyncio.run(main())
"""

WORKLOAD = """\
[endpoint]
kind = "chat"
path = "/v1/chat/completions"
model = "m"

[run]
measured = 1
check_media = false
timeout = 600

[[request]]
prompt = "one huge event"
max_tokens = 1
"""


def peak_rss_kib(tmp: Path, size: int, escapes: bool = False) -> int:
    """Peak RSS (KiB) of ``evstore run`` recording one event of ``size`` bytes of text."""
    server = subprocess.Popen(
        [sys.executable, "-c", SERVER, str(size), *(["escapes"] if escapes else [])],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert server.stdout is not None and server.stdin is not None
    url = server.stdout.readline().strip()
    root = tmp / f"repo-{size}"
    (root / "evidence").mkdir(parents=True)
    wl = tmp / "wl.toml"
    wl.write_text(WORKLOAD)
    try:
        cmd = [*EVSTORE, "run", str(wl), "--arm", "a", "--server", url]
        cmd += ["--name", f"r{size}", "--root", str(root)]
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        _, status, usage = os.wait4(proc.pid, 0)
        assert proc.stderr is not None
        err = proc.stderr.read()
    finally:
        server.stdin.close()
        server.wait(timeout=60)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"the run with a {size}-byte event failed: {err.decode()[-2000:]}")
    from evidencestore.runs import load_run

    [request] = load_run(root, f"r{size}").requests
    if request.failure is not None or request.body is None:
        raise SystemExit(f"the {size}-byte event was not recorded as valid: {request.message}")
    return usage.ru_maxrss


def main(argv: list[str] | None = None) -> str:
    """Run the benchmark; print and return its line."""
    args = argv if argv is not None else sys.argv[1:]
    mb = int(args[args.index("--mb") + 1]) if "--mb" in args else (25 if "--quick" in args else 100)
    size = mb * 1_000_000
    escapes = "--escapes" in args
    with tempfile.TemporaryDirectory(prefix="evstore-bench-llm-memory-") as t:
        tmp = Path(t)
        small = peak_rss_kib(tmp, 1000)
        big = peak_rss_kib(tmp, size, escapes)
    ratio = (big - small) * 1024 / size
    target = "ok" if ratio <= 1.5 else "MISSED"
    out = (
        f"peak RSS of `evstore run` recording one streamed event{' with escapes' * escapes}: "
        f"{small / 1024:.0f} MiB with 1 KB, {big / 1024:.0f} MiB with {mb} MB: "
        f"+{(big - small) / 1024:.0f} MiB = {ratio:.2f}x the body (target <= 1.5x: {target})"
    )
    print(out)
    return out


if __name__ == "__main__":
    main()
