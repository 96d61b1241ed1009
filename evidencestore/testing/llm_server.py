"""A reference LLM server for tests and benches (aiohttp, 127.0.0.1, port 0).

OpenAI-compatible ``POST /v1/chat/completions`` and ``POST /v1/completions``, streamed as
server-sent events (``"stream": true``, with ``stream_options.include_usage``) or as one
JSON answer, plus ``/health``, ``/v1/models`` and ``GET /_reference/log``.

Tokens are deterministic: token ``i`` of a request is a hash of its prompt, seed and
position (its text the word ``w<id>``), ``max_tokens`` (or ``max_completion_tokens``) of
them (finish reason ``length``). Every event carries the token ids it holds (``token_ids``) and, when asked
(``logprobs``), a logprob per token.

Knobs are attributes of :class:`LlmServer`, changeable while it runs (and options of
``python -m evidencestore.testing.llm_server``): ``ttft`` (seconds before the first
token), ``itl`` (seconds per token), ``jitter`` (uniform extra seconds per event, seeded),
``tokens_per_event``, ``role_chunk`` (a role-only first chunk with empty content, sent at
once, as vLLM's chat path does), ``diverge_at`` (tokens from this position on differ:
a lossy candidate), ``logprob_shift`` (every logprob shifted by this much: same tokens,
different logprobs), ``nondeterministic`` (tokens from ``diverge_at`` (or 0) differ per
request), ``batch_dependent`` (tokens depend on how many requests are in flight),
``error_at`` (an ``event: error`` after that many tokens), ``stall_at`` / ``stall``
(a pause of ``stall`` seconds after that many tokens), ``drop_at`` (the stream ends after
that many tokens without a finish reason or ``[DONE]``), ``fail_on`` (a set of 1-based
request numbers, or True for all, answered ``fail_status``), ``cache`` (a request equal
to one already answered is served at once, the same tokens in fresh events with a new
``id`` and ``created``, as a real caching server would), ``ignore_seed`` (the seed is not
used: requests differing only in their seed get the same tokens), ``usage`` (whether
usage is sent when asked), ``continuous_usage`` (usage in every chunk, when asked with
``stream_options.continuous_usage_stats``), ``token_ids`` (``"always"``, or
``"asked"``: ids only when the request sets ``return_token_ids``, otherwise
``"token_ids": null`` as vLLM sends), ``reasoning`` (the first that many tokens are sent
as reasoning, in ``reasoning_field``, before the visible ones), ``diverge_until``
(``diverge_at`` applies to the positions before this one only), ``diverge_on`` (a set
of prompts: ``diverge_at`` applies to their requests only; None, every request).

Every response has its own ``id`` (``chatcmpl-<h>-<n>`` / ``cmpl-<h>-<n>``: a hash of the
request and how many times this server was asked it) and ``created``.

``log`` holds, for every token written, ``(request number, position, monotonic ns)``
taken just before its event was written: the truth a client's TTFT and ITL are measured
against (``GET /_reference/log`` serves it, with each request's prompt, arrival and
``X-Request-ID`` by number and the offset of the wall clock from the monotonic one, to a
client in another process).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import random
import time
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from .http import Knob, ReferenceServer, add_knob_arguments, applies, set_knobs

if TYPE_CHECKING:
    from aiohttp import web

__all__ = ["LlmServer", "chat_workload", "serve_llm"]

#: ``created`` of the ``n``-th answer to one request is ``_EPOCH + n``: per response, yet
#: the same in every run (a wall-clock stamp would make equal runs' bytes differ).
_EPOCH = 1_700_000_000


class LlmServer(ReferenceServer):
    """A running reference LLM server: its URL, knobs and what it wrote when."""

    def __init__(self, *, model: str = "reference-llm", vocab: int = 32000) -> None:
        self.model = model
        self.vocab = vocab
        self.ttft = 0.0
        self.itl = 0.0
        self.jitter = 0.0
        self.tokens_per_event = 1
        self.role_chunk = False
        self.diverge_at: int | None = None
        self.logprob_shift = 0.0
        self.nondeterministic = False
        self.batch_dependent = False
        self.error_at: int | None = None
        self.stall_at: int | None = None
        self.stall = 0.0
        self.drop_at: int | None = None
        self.fail_on: Knob = False
        self.fail_status = 500
        self.cache = False
        self.ignore_seed = False
        self.usage = True
        self.continuous_usage = False
        self.token_ids = "always"
        self.reasoning = 0
        self.reasoning_field = "reasoning_content"
        self.diverge_until: int | None = None
        self.diverge_on: set[str] | None = None
        self.port = 0
        self.requests = 0
        self.in_flight = 0
        self.log: list[tuple[int, int, int]] = []
        self.prompts: dict[int, str] = {}
        self.request_ids: dict[int, str] = {}
        self.arrivals: dict[int, int] = {}
        self._rng = random.Random(0)
        self._cache: dict[str, list[int]] = {}
        self._asked: dict[str, int] = {}

    def token(self, prompt: str, seed: int, position: int, salt: str = "") -> int:
        """Token ``position`` of a request (deterministic unless ``salt`` differs)."""
        key = f"{prompt}\x00{seed}\x00{position}\x00{salt}".encode()
        return int.from_bytes(hashlib.blake2b(key, digest_size=8).digest(), "big") % self.vocab

    def tokens(self, prompt: str, seed: int, count: int, number: int) -> list[int]:
        """The tokens a request gets under the current knobs."""
        out = []
        start = self.diverge_at if self.diverge_at is not None else 0
        for i in range(count):
            salt = ""
            if (
                self.diverge_at is not None
                and (self.diverge_on is None or prompt in self.diverge_on)
                and i >= self.diverge_at
                and (self.diverge_until is None or i < self.diverge_until)
            ):
                salt = "diverged"
            if self.nondeterministic and i >= start:
                salt += f"run{number}"
            if self.batch_dependent and self.in_flight > 1:
                salt += "batched"
            out.append(self.token(prompt, seed, i, salt))
        return out

    def logprob(self, token: int) -> float:
        """The logprob the server reports for ``token``."""
        return -((token % 997) / 997.0) - 0.001 + self.logprob_shift

    # -- the exchange ----------------------------------------------------------------
    def _chunk(
        self,
        chat: bool,
        ids: list[int],
        logprobs: bool,
        finish: str | None,
        *,
        with_ids: bool = True,
        start: int = 0,
        rid: tuple[str, int] = ("0", 0),
        as_ids: bool = False,
    ) -> dict[str, Any]:
        text = "".join(f" w{t}" for t in ids)
        choice: dict[str, Any] = {"index": 0, "finish_reason": finish}
        if chat:
            if not ids:
                choice["delta"] = {}
            elif start < self.reasoning:
                # one event holds one channel: the caller splits at the boundary
                choice["delta"] = {self.reasoning_field: text}
            else:
                choice["delta"] = {"content": text}
        else:
            choice["text"] = text
        if ids:
            choice["token_ids"] = ids if with_ids else None
        if logprobs and ids:
            lps = [self.logprob(t) for t in ids]
            names = [f"token_id:{t}" if as_ids else f" w{t}" for t in ids]
            choice["logprobs"] = (
                {"content": [{"token": t, "logprob": v} for t, v in zip(names, lps, strict=True)]}
                if chat
                else {"tokens": names, "token_logprobs": lps}
            )
        return {
            "id": f"{'chatcmpl' if chat else 'cmpl'}-{rid[0]}-{rid[1]}",
            "object": "chat.completion.chunk" if chat else "text_completion",
            "created": _EPOCH + rid[1],
            "model": self.model,
            "choices": [choice],
        }

    async def _serve(self, request: web.Request, chat: bool) -> web.StreamResponse:
        from aiohttp import web

        arrived = time.monotonic_ns()
        self.requests += 1
        number = self.requests
        try:
            body = await request.json()
        except ValueError:
            return web.json_response({"error": {"message": "not JSON"}}, status=400)
        if applies(self.fail_on, number):
            return web.json_response(
                {"error": {"message": "injected failure", "type": "server_error"}},
                status=self.fail_status,
            )
        if chat:
            prompt = "\n".join(str(m.get("content", "")) for m in body.get("messages", []))
        else:
            prompt = str(body.get("prompt", ""))
        self.prompts[number] = prompt
        self.arrivals[number] = arrived
        if "X-Request-ID" in request.headers:
            self.request_ids[number] = request.headers["X-Request-ID"]
        seed = 0 if self.ignore_seed else int(body.get("seed") or 0)
        count = int(body.get("max_tokens") or body.get("max_completion_tokens") or 16)
        stream = bool(body.get("stream", False))
        logprobs = bool(body.get("logprobs"))
        options = body.get("stream_options") or {}
        usage = self.usage and bool(options.get("include_usage"))
        continuous = usage and self.continuous_usage and bool(options.get("continuous_usage_stats"))
        with_ids = self.token_ids == "always" or bool(body.get("return_token_ids"))
        as_ids = bool(body.get("return_tokens_as_token_ids"))
        key = json.dumps(body, sort_keys=True)
        # A response id of the request's content and how many times it was asked: its
        # own per response, as a real server's, yet independent of arrival order.
        self._asked[key] = self._asked.get(key, 0) + 1
        rid = (hashlib.blake2b(key.encode(), digest_size=6).hexdigest(), self._asked[key])
        self.in_flight += 1
        try:
            cached = self._cache.get(key) if self.cache else None
            ids = cached if cached is not None else self.tokens(prompt, seed, count, number)
            if self.cache:
                self._cache.setdefault(key, ids)
            if not stream:
                if cached is None:
                    await asyncio.sleep(self.ttft + self.itl * count)
                one = self._chunk(
                    chat, ids, logprobs, "length", with_ids=with_ids, rid=rid, as_ids=as_ids
                )
                choice = one["choices"][0]
                if chat:
                    choice["message"] = {
                        "role": "assistant",
                        "content": choice.pop("delta")["content"],
                    }
                one["usage"] = {"prompt_tokens": len(prompt.split()), "completion_tokens": count}
                return web.json_response(one)
            return await self._stream(
                request, chat, ids, logprobs, (usage, continuous, with_ids, as_ids), number,
                arrived if cached is None else None, rid,
            )  # fmt: skip
        finally:
            self.in_flight -= 1

    async def _stream(
        self,
        request: web.Request,
        chat: bool,
        ids: list[int],
        logprobs: bool,
        modes: tuple[bool, bool, bool, bool],
        number: int,
        arrived: int | None,
        rid: tuple[str, int],
    ) -> web.StreamResponse:
        """Stream ``ids`` on the schedule of the knobs (``arrived`` None: a cache hit,
        sent at once)."""
        from aiohttp import web

        usage, continuous, with_ids, as_ids = modes
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)

        async def send(obj: dict[str, Any] | str, event: str | None = None) -> None:
            data = obj if isinstance(obj, str) else json.dumps(obj, separators=(",", ":"))
            part = (f"event: {event}\n" if event else "") + f"data: {data}\n\n"
            await resp.write(part.encode())

        def chunk(part: list[int], finish: str | None, start: int, lp: bool) -> dict[str, Any]:
            out = self._chunk(
                chat, part, lp, finish, with_ids=with_ids, start=start, rid=rid,
                as_ids=as_ids,
            )  # fmt: skip
            if continuous:
                out["usage"] = {"prompt_tokens": 1, "completion_tokens": start + len(part)}
            return out

        if self.role_chunk and chat:
            first = self._chunk(chat, [], False, None, rid=rid)
            first["choices"][0]["delta"] = {"role": "assistant", "content": ""}
            await send(first)
        due = (arrived if arrived is not None else time.monotonic_ns()) + int(self.ttft * 1e9)
        step = max(1, self.tokens_per_event)
        pos = 0
        while pos < len(ids):
            if self.error_at is not None and pos >= self.error_at:
                await send(
                    {"error": {"message": "injected error mid-stream", "code": 500}}, "error"
                )
                await resp.write_eof()
                return resp
            if self.drop_at is not None and pos >= self.drop_at:
                await resp.write_eof()  # closed without a finish reason or [DONE]
                return resp
            if self.stall_at is not None and pos == self.stall_at:
                due += int(self.stall * 1e9)
            end = pos + step
            if chat and pos < self.reasoning < end:
                end = self.reasoning  # an event holds one channel
            part = ids[pos:end]
            if arrived is not None:
                if pos:
                    due += int(self.itl * len(part) * 1e9)
                if self.jitter:
                    due += int(self._rng.uniform(0, self.jitter) * 1e9)
                wait = (due - time.monotonic_ns()) / 1e9
                if wait > 0:
                    await asyncio.sleep(wait)
            finish = "length" if pos + len(part) >= len(ids) else None
            now = time.monotonic_ns()
            for j in range(len(part)):
                self.log.append((number, pos + j, now))
            await send(chunk(part, None, pos, logprobs))
            pos += len(part)
            if finish is not None:
                await send(chunk([], finish, pos, False))
        if usage:
            await send(
                {
                    "id": f"{'chatcmpl' if chat else 'cmpl'}-{rid[0]}-{rid[1]}",
                    "object": "chat.completion.chunk" if chat else "text_completion",
                    "created": _EPOCH + rid[1],
                    "model": self.model,
                    "choices": [],
                    "usage": {"prompt_tokens": 1, "completion_tokens": len(ids)},
                }
            )
        await send("[DONE]")
        await resp.write_eof()
        return resp

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        return await self._serve(request, True)

    async def _completions(self, request: web.Request) -> web.StreamResponse:
        return await self._serve(request, False)

    async def _metrics(self, request: web.Request) -> web.StreamResponse:
        from aiohttp import web

        text = (
            "# HELP reference_requests_total Requests answered.\n"
            "# TYPE reference_requests_total counter\n"
            f"reference_requests_total {self.requests}\n"
            "# HELP reference_tokens_total Tokens written.\n"
            "# TYPE reference_tokens_total counter\n"
            f"reference_tokens_total {len(self.log)}\n"
        )
        return web.Response(text=text, content_type="text/plain", charset="utf-8")

    async def _version(self, request: web.Request) -> web.StreamResponse:
        from aiohttp import web

        from .._version import __version__

        return web.json_response({"version": __version__, "server": "evidencestore-reference-llm"})

    async def _log(self, request: web.Request) -> web.StreamResponse:
        from aiohttp import web

        return web.json_response(
            {
                "log": self.log,
                "prompts": self.prompts,
                "request_ids": self.request_ids,
                "arrivals": self.arrivals,
                # time.time_ns() - time.monotonic_ns(), for clients stamping wall time
                "clock_offset_ns": time.time_ns() - time.monotonic_ns(),
            }
        )

    def _routes(self, router: web.UrlDispatcher) -> None:
        router.add_post("/v1/chat/completions", self._chat)
        router.add_post("/v1/completions", self._completions)
        router.add_get("/_reference/log", self._log)
        router.add_get("/metrics", self._metrics)
        router.add_get("/version", self._version)


@contextlib.contextmanager
def serve_llm(**knobs: Any) -> Iterator[LlmServer]:
    """Run an :class:`LlmServer` in a background thread; yield it (``url`` is set)."""
    server = LlmServer(model=knobs.pop("model", "reference-llm"), vocab=knobs.pop("vocab", 32000))
    set_knobs(server, knobs, "LLM server")
    with server.running(server.port, name="evstore-llm-server"):
        yield server


def chat_workload(
    prompts: Sequence[str] = ("Hello there", "Tell me a story"),
    *,
    kind: str = "chat",
    max_tokens: int = 32,
    seed: int = 7,
    measured: int = 1,
    warmup: int = 0,
    concurrency: int = 1,
    logprobs: bool = True,
    stream: bool = True,
) -> str:
    """The text of a ``workload.toml`` for the reference LLM server."""
    path = "/v1/chat/completions" if kind == "chat" else "/v1/completions"
    lines = [
        "[endpoint]",
        f'kind = "{kind}"',
        f'path = "{path}"',
        'model = "reference-llm"',
        f"stream = {'true' if stream else 'false'}",
        "",
        "[run]",
        f"warmup = {warmup}",
        f"measured = {measured}",
        f"concurrency = {concurrency}",
        "check_media = false",
        "timeout = 60",
    ]
    for p in prompts:
        lines += [
            "",
            "[[request]]",
            f"prompt = {json.dumps(p)}",
            f"max_tokens = {max_tokens}",
            f"seed = {seed}",
            "temperature = 0.0",
        ]
        if logprobs:
            lines.append("logprobs = true")
    return "\n".join(lines) + "\n"


_KNOBS: dict[str, tuple[type, str]] = {
    "ttft": (float, "seconds before the first token"),
    "itl": (float, "seconds per token"),
    "jitter": (float, "uniform extra seconds per event (seeded)"),
    "tokens_per_event": (int, "tokens per SSE event"),
    "diverge_at": (int, "tokens from this position differ (a lossy candidate)"),
    "logprob_shift": (float, "shift every logprob (same tokens, other logprobs)"),
    "error_at": (int, "an `event: error` after this many tokens"),
    "stall_at": (int, "pause --stall seconds after this many tokens"),
    "stall": (float, "seconds of the stall"),
    "drop_at": (int, "end the stream after this many tokens, without [DONE]"),
    "fail_status": (int, "the HTTP status of --fail-all"),
    "reasoning": (int, "the first this many tokens are reasoning (chat)"),
    "token_ids": (str, "'always', or 'asked' (only with return_token_ids)"),
    "reasoning_field": (str, "the delta field of reasoning: reasoning_content or reasoning"),
    "diverge_until": (int, "--diverge-at applies before this position only"),
}


def _main(argv: Sequence[str] | None = None) -> int:
    import argparse
    import sys

    parser = argparse.ArgumentParser(
        description="Serve the reference LLM server until stdin closes (prints its URL)."
    )
    parser.add_argument("--model", default="reference-llm")
    parser.add_argument("--vocab", type=int, default=32000)
    parser.add_argument("--port", type=int, default=0, help="the port (default: any free one)")
    flags = {
        "role_chunk": "send a role-only first chunk",
        "nondeterministic": "tokens differ per request",
        "batch_dependent": "tokens depend on the requests in flight",
        "cache": "serve repeated requests from a cache",
        "ignore_seed": "ignore the request's seed",
        "continuous_usage": "usage in every chunk when asked",
        "no_usage": "never send usage",
        "fail_all": "answer every request with --fail-status",
    }
    add_knob_arguments(parser, _KNOBS, flags)
    args = parser.parse_args(argv)
    if args.error_at is not None and args.drop_at is not None:
        # Refused at start-up, as a real server refuses conflicting settings.
        parser.error("--error-at and --drop-at conflict: a stream ends one way, not both")
    knobs: dict[str, Any] = {k: getattr(args, k) for k in _KNOBS if getattr(args, k) is not None}
    for flag in (
        "role_chunk",
        "nondeterministic",
        "batch_dependent",
        "cache",
        "ignore_seed",
        "continuous_usage",
    ):
        if getattr(args, flag):
            knobs[flag] = True
    if args.no_usage:
        knobs["usage"] = False
    if args.fail_all:
        knobs["fail_on"] = True
    knobs["port"] = args.port
    with serve_llm(model=args.model, vocab=args.vocab, **knobs) as server:
        print(server.url, flush=True)
        print(f"reference LLM server {args.model} on {server.url}", file=sys.stderr, flush=True)
        sys.stdin.read()
    return 0


if __name__ == "__main__":
    raise SystemExit(_main())
