"""A reference video server for tests, ``make run`` and benches (aiohttp, 127.0.0.1, port 0).

It implements the Videos API shape vLLM-Omni serves: ``POST /v1/videos/sync`` (multipart
form; the body is the MP4), the job flow ``POST /v1/videos`` -> ``GET /v1/videos/{id}``
-> ``GET /v1/videos/{id}/content``, a generic JSON ``POST /v1/generate``, ``/health`` and
``/v1/models``. Outputs are H.264 + AAC MP4 encoded with PyAV from the request (``size``,
``seconds`` or ``num_frames`` with ``fps``, ``seed``): the same request gives the same
content.

Fault knobs are attributes of :class:`VideoServer`, changeable while it runs. Knobs that
apply to some requests take a set of 1-based generation request numbers (counted over
every generation request the server received) or ``True`` for all of them: ``fail_on``
(HTTP 500), ``drop_on`` (connection dropped mid-body), ``reset_on`` (connection closed
before any response), ``short_audio_on`` (half a second of audio missing),
``short_video_on`` (one frame missing). Others: ``latency`` (seconds
before answering), ``first_byte_delay`` (seconds between headers and the first body
byte), ``never_complete`` (jobs stay ``in_progress``), ``startup_error`` (``/health``
answers 503 with that message, as a server that failed to start), ``stream_bytes`` (the
body is that many filler bytes, streamed in 1 MiB chunks, instead of a video),
``redirect_to`` (generation requests are answered 302 to that base URL),
``audio_short_by`` (every output's audio that many samples short of the request),
``ignore_seed`` (the seed is ignored: requests differing only in it get the same
content), ``cache`` (while it is on, a request identical to one already answered is
served at once, without ``latency``: the output caching the run audits look for),
``encode_time`` (seconds every repeated request's encode takes; ``None``, the default,
repeats what its first encode took, which is the machine's load as much as the work: a
test whose verdict rests on ``latency`` sets it, so that ``latency`` alone sets the pace).
``arrivals_ns`` holds ``time.monotonic_ns()`` when each generation request arrived (also
served as JSON at ``GET /_reference/arrivals``, for benchmarks running the server in
another process); ``log_path`` (if set) receives the server log.

``python -m evidencestore.testing.video_server [--latency S] [--fail-on all|N,M] ...``
serves until stdin closes, printing the URL on its first line; every knob above is an
option (``--help`` lists them).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import tempfile
import time
from collections.abc import Iterator, Sequence
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .http import Knob, ReferenceServer, add_knob_arguments, applies, set_knobs

if TYPE_CHECKING:
    from aiohttp import web

__all__ = ["VideoServer", "sample_workload", "serve_video"]


class VideoServer(ReferenceServer):
    """A running reference server: its URL, fault knobs and what it saw."""

    client_max_size = 64 << 20

    def __init__(
        self, *, model: str = "reference-video", log_path: str | os.PathLike[str] | None = None
    ) -> None:
        self.model = model
        self.log_path = Path(log_path) if log_path is not None else None
        self.latency = 0.0
        self.first_byte_delay = 0.0
        self.fail_on: Knob = False
        self.drop_on: Knob = False
        self.reset_on: Knob = False
        self.short_audio_on: Knob = False
        self.short_video_on: Knob = False
        self.never_complete = False
        self.startup_error: str | None = None
        self.stream_bytes: int | None = None
        self.redirect_to: str | None = None
        self.audio_short_by = 0
        self.ignore_seed = False
        self.cache = False
        self.encode_time: float | None = None
        self._answered: set[str] = set()
        self.sample_rate = 48000
        self.channels = 2
        self.requests = 0
        self.arrivals_ns: list[int] = []
        self.log_lines: list[str] = []
        self.port = 0
        self._jobs: dict[str, dict[str, Any]] = {}
        self._cache: dict[tuple[Any, ...], tuple[bytes, float]] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._tmp = tempfile.mkdtemp(prefix="evstore-video-server-")

    def log(self, line: str) -> None:
        """Append a line to the server log."""
        stamped = f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())} {line}"
        self.log_lines.append(stamped)
        if self.log_path is not None:
            with open(self.log_path, "a", encoding="utf-8") as fh:
                fh.write(stamped + "\n")

    # -- content --------------------------------------------------------------------
    def render(self, fields: dict[str, str], number: int) -> bytes:
        """Encode the MP4 for a request. The bytes are kept by its parameters and faults,
        but a repeated request takes as long as its first encode (``encode_time`` if set)
        unless ``cache`` is on: only a server asked to cache shows output caching."""
        width, height = (int(v) for v in fields.get("size", "160x120").lower().split("x"))
        fps = int(fields.get("fps", "24"))
        if "num_frames" in fields:
            frames = int(fields["num_frames"])
            seconds = Fraction(frames, fps)
        else:
            seconds = Fraction(fields.get("seconds", "1"))
            frames = round(seconds * fps)
        seed = 0 if self.ignore_seed else int(fields.get("seed", "0"))
        samples = round(seconds * self.sample_rate) - self.audio_short_by
        if applies(self.short_audio_on, number):
            samples = max(1024, samples - self.sample_rate // 2)
        if applies(self.short_video_on, number):
            frames -= 1
        key = (width, height, fps, frames, seed, samples, self.sample_rate, self.channels)
        cached = self._cache.get(key)
        if cached is None:
            start = time.monotonic()
            body = self._encode(width, height, fps, frames, seed, samples)
            cached = self._cache[key] = (body, time.monotonic() - start)
        elif not self.cache:
            # Not a caching server: a repeated request costs what its first one did (the
            # bytes are kept only to spare the test machine the encode).
            time.sleep(cached[1] if self.encode_time is None else self.encode_time)
        return cached[0]

    def _encode(
        self, width: int, height: int, fps: int, frames: int, seed: int, samples: int
    ) -> bytes:
        import numpy as np

        from .synth import AudioSpec, VideoSpec, write_clip

        path = Path(self._tmp) / f"{os.urandom(6).hex()}.mp4"
        shift = seed % 97

        def tint(index: int, planes: np.ndarray) -> np.ndarray:
            return ((planes.astype(np.uint16) + shift) % 256).astype(np.uint8)

        write_clip(
            path,
            video=VideoSpec(
                width=width,
                height=height,
                rate=fps,
                frames=frames,
                options={"preset": "ultrafast", "threads": "1"},
            ),
            audio=AudioSpec(
                rate=self.sample_rate,
                layout="stereo" if self.channels == 2 else "mono",
                samples=samples,
                frequency=220.0 + 10 * (seed % 50),
            ),
            format="mp4",
            video_hook=tint if shift else None,
        )
        try:
            return path.read_bytes()
        finally:
            path.unlink()

    # -- handlers -------------------------------------------------------------------
    async def _fields(self, request: web.Request) -> dict[str, str]:
        if request.content_type == "application/json":
            body = await request.json()
            return {k: str(v) for k, v in body.items()}
        form = await request.post()
        return {k: v for k, v in form.items() if isinstance(v, str)}

    async def _work(self, fields: dict[str, str]) -> None:
        """The generation delay: ``latency``, skipped while ``cache`` is on for a request
        already answered while it was on."""
        key = json.dumps(fields, sort_keys=True)
        if self.cache and key in self._answered:
            self.log("served from cache")
            return
        if self.latency:
            await asyncio.sleep(self.latency)
        if self.cache:
            self._answered.add(key)

    def _number(self) -> int:
        self.arrivals_ns.append(time.monotonic_ns())
        self.requests += 1
        return self.requests

    async def _send(
        self, request: web.Request, number: int, body: bytes | None
    ) -> web.StreamResponse:
        from aiohttp import web

        size = (
            self.stream_bytes
            if body is None and self.stream_bytes is not None
            else len(body or b"")
        )
        resp = web.StreamResponse(status=200, headers={"Content-Type": "video/mp4"})
        resp.content_length = size
        await resp.prepare(request)
        if self.first_byte_delay:
            await asyncio.sleep(self.first_byte_delay)
        drop_at = size // 2 if applies(self.drop_on, number) else None
        sent = 0
        step = 1 << 20 if body is None else 64 << 10
        filler = bytes(range(256)) * (step // 256)
        while sent < size:
            n = min(step, size - sent)
            if drop_at is not None and sent + n > drop_at:
                n = drop_at - sent
                if n:
                    await resp.write(filler[:n] if body is None else body[sent : sent + n])
                self.log(f"request {number}: connection dropped after {drop_at} of {size} bytes")
                assert request.transport is not None
                request.transport.abort()
                raise asyncio.CancelledError
            await resp.write(filler[:n] if body is None else body[sent : sent + n])
            sent += n
        await resp.write_eof()
        self.log(f"request {number}: 200, {size} bytes")
        return resp

    async def _generate(self, request: web.Request) -> web.StreamResponse:
        from aiohttp import web

        number = self._number()
        fields = await self._fields(request)
        self.log(
            f"request {number}: {request.method} {request.path} {json.dumps(fields, sort_keys=True)}"
        )
        if self.redirect_to is not None:
            raise web.HTTPFound(self.redirect_to + request.path)
        if applies(self.reset_on, number):
            self.log(f"request {number}: connection closed before any response")
            assert request.transport is not None
            request.transport.abort()
            raise asyncio.CancelledError
        await self._work(fields)
        if applies(self.fail_on, number):
            self.log(f"request {number}: 500 injected failure")
            return web.json_response(
                {"error": {"message": "injected failure", "type": "server_error"}}, status=500
            )
        body = (
            None
            if self.stream_bytes is not None
            else await asyncio.to_thread(self.render, fields, number)
        )
        return await self._send(request, number, body)

    async def _create_job(self, request: web.Request) -> web.StreamResponse:
        from aiohttp import web

        number = self._number()
        fields = await self._fields(request)
        job = f"video_{number:06d}"
        self._jobs[job] = {"status": "in_progress", "number": number, "body": None}
        self.log(f"request {number}: job {job} created {json.dumps(fields, sort_keys=True)}")
        if applies(self.fail_on, number):
            self._jobs[job]["status"] = "failed"
        elif not self.never_complete:

            async def work() -> None:
                await self._work(fields)
                self._jobs[job]["body"] = await asyncio.to_thread(self.render, fields, number)
                self._jobs[job]["status"] = "completed"

            self._jobs[job]["task"] = asyncio.ensure_future(work())
        return web.json_response({"id": job, "object": "video", "status": "queued"})

    async def _job(self, request: web.Request) -> web.StreamResponse:
        from aiohttp import web

        job = self._jobs.get(request.match_info["id"])
        if job is None:
            return web.json_response({"error": {"message": "no such video"}}, status=404)
        return web.json_response(
            {"id": request.match_info["id"], "object": "video", "status": job["status"]}
        )

    async def _content(self, request: web.Request) -> web.StreamResponse:
        from aiohttp import web

        job = self._jobs.get(request.match_info["id"])
        if job is None or job["status"] != "completed":
            return web.json_response({"error": {"message": "video not ready"}}, status=404)
        return await self._send(request, job["number"], job["body"])

    async def _health(self, request: web.Request) -> web.StreamResponse:
        from aiohttp import web

        if self.startup_error:
            self.log(f"startup failed: {self.startup_error}")
            return web.Response(status=503, text=f"server failed to start: {self.startup_error}")
        return await super()._health(request)

    async def _arrivals(self, request: web.Request) -> web.StreamResponse:
        from aiohttp import web

        return web.json_response({"arrivals_ns": self.arrivals_ns})

    def _routes(self, router: web.UrlDispatcher) -> None:
        router.add_post("/v1/videos/sync", self._generate)
        router.add_post("/v1/generate", self._generate)
        router.add_post("/v1/videos", self._create_job)
        router.add_get("/v1/videos/{id}", self._job)
        router.add_get("/v1/videos/{id}/content", self._content)
        router.add_get("/_reference/arrivals", self._arrivals)


@contextlib.contextmanager
def serve_video(**knobs: Any) -> Iterator[VideoServer]:
    """Run a :class:`VideoServer` in a background thread; yield it (``url`` is set)."""
    log_path = knobs.pop("log_path", None)
    model = knobs.pop("model", "reference-video")
    port = knobs.pop("port", 0)
    server = VideoServer(model=model, log_path=log_path)
    set_knobs(server, knobs, "video server")
    try:
        with server.running(port, name="evstore-video-server"):
            server.log(f"listening on {server.url}, model {server.model}")
            yield server
    finally:
        import shutil

        shutil.rmtree(server._tmp, ignore_errors=True)


def sample_workload(
    *,
    kind: str = "videos-sync",
    path: str = "/v1/videos/sync",
    warmup: int = 1,
    measured: int = 3,
    timeout: float = 120,
    seconds: Sequence[float] = (5,),
    size: str = "320x240",
    fps: int = 30,
    seed: int = 42,
    extra: str = "",
) -> str:
    """The text of a ``workload.toml`` with one request per entry of ``seconds``."""
    lines = [
        "[endpoint]",
        f'kind = "{kind}"',
        f'path = "{path}"',
        "poll_interval = 0.05" if kind == "videos-job" else "",
        "",
        "[run]",
        f"warmup = {warmup}",
        f"measured = {measured}",
        f"timeout = {timeout}",
        "",
        "[audio]",
        "sample_rate = 48000",
        "channels = 2",
        extra,
    ]
    for s in seconds:
        lines += [
            "",
            "[[request]]",
            'prompt = "a red fox running through snow"',
            f'size = "{size}"',
            f"seconds = {s}",
            f"fps = {fps}",
            f"seed = {seed}",
        ]
    return "\n".join(lines) + "\n"


_VALUE_KNOBS: dict[str, tuple[type, str]] = {
    "latency": (float, "seconds before answering"),
    "first_byte_delay": (float, "seconds between the headers and the first body byte"),
    "startup_error": (str, "/health answers 503 with this message"),
    "stream_bytes": (int, "bodies are this many filler bytes (1 MiB chunks)"),
    "redirect_to": (str, "answer generation requests 302 to this base URL"),
    "audio_short_by": (int, "every output's audio this many samples short"),
    "encode_time": (float, "seconds every repeated request's encode takes"),
}
_SET_KNOBS = {
    "fail_on": "HTTP 500",
    "drop_on": "connection dropped mid-body",
    "reset_on": "connection closed before any response",
    "short_audio_on": "half a second of audio missing",
    "short_video_on": "one frame missing",
}
_FLAGS = {
    "never_complete": "jobs stay in_progress",
    "ignore_seed": "the seed is ignored",
    "cache": "repeated requests answered at once from a cache",
}


def _numbers(text: str) -> Knob:
    """``all`` or a comma-separated list of 1-based request numbers."""
    if text == "all":
        return True
    try:
        return {int(v) for v in text.split(",") if v.strip()}
    except ValueError:
        raise SystemExit(f"expected `all` or request numbers such as 1,3: {text!r}") from None


def _main(argv: Sequence[str] | None = None) -> int:
    import argparse
    import sys

    parser = argparse.ArgumentParser(
        description="Serve the reference video server until stdin closes (prints its URL)."
    )
    parser.add_argument("--model", default="reference-video")
    parser.add_argument("--log", help="append the server log to this file")
    parser.add_argument("--port", type=int, default=0, help="the port (default: any free one)")
    for name, help_ in _SET_KNOBS.items():
        parser.add_argument(
            "--" + name.replace("_", "-"),
            type=_numbers,
            metavar="all|N,M",
            help=f"{help_} for these 1-based generation requests",
        )
    add_knob_arguments(parser, _VALUE_KNOBS, _FLAGS)
    args = parser.parse_args(argv)
    knobs: dict[str, Any] = {
        k: getattr(args, k) for k in (*_VALUE_KNOBS, *_SET_KNOBS) if getattr(args, k) is not None
    }
    knobs.update({k: True for k in _FLAGS if getattr(args, k)})
    with serve_video(model=args.model, log_path=args.log, port=args.port, **knobs) as server:
        print(server.url, flush=True)
        sys.stdin.read()
    return 0


if __name__ == "__main__":
    raise SystemExit(_main())
