"""A hostile HTTP server for tests: one mode per misbehaviour, raw sockets.

Every byte on the wire is written by hand (asyncio streams, no HTTP library), so a mode
can send what no well-behaved server would: a header that is not a media type, control
characters, a Content-Length that lies, a 204 with a body, endless or huge bodies,
deeply nested JSON, job ids that are paths, a status line that is not HTTP::

    with serve_hostile("endless-output") as server:
        run_workload(root, hostile_workload(tmp, "endless-output"), server=server.url, ...)

Routes (as the reference server's): ``GET /health``, ``GET /v1/models``,
``POST /v1/videos/sync`` (the body is the output), ``POST /v1/generate`` (JSON in, the
body is the output), ``POST /v1/videos`` (a job), ``GET /v1/videos/{id}`` (its status),
``GET /v1/videos/{id}/content``. A mode changes one route's answer; the others answer
as a well-behaved server would. :data:`MODES` maps each mode to the endpoint kind whose
workload exercises it. ``sent`` counts the body bytes the server wrote.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["MODES", "HostileServer", "hostile_workload", "serve_hostile"]

GOOD_BODY = b"\x00\x00\x00\x18ftypmp42" + bytes(range(256)) * 16
_CHUNK = b"\x00" * (1 << 20)


@dataclass
class _Request:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


Writer = asyncio.StreamWriter
Handler = Callable[["HostileServer", _Request, Writer], Awaitable[bool]]


def _head(status: str, headers: Sequence[tuple[str, str | bytes]]) -> bytes:
    out = f"HTTP/1.1 {status}\r\n".encode()
    for k, v in headers:
        out += k.encode() + b": " + (v if isinstance(v, bytes) else v.encode()) + b"\r\n"
    return out + b"\r\n"


async def _answer(
    w: Writer,
    status: str,
    body: bytes,
    ctype: str | bytes = "application/json",
    extra: list[tuple[str, str | bytes]] | None = None,
) -> None:
    headers = [("Content-Type", ctype), ("Content-Length", str(len(body)))]
    w.write(_head(status, headers + (extra or [])) + body)
    await w.drain()


def _nested(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


async def _stream(server: HostileServer, w: Writer, total: int | None) -> None:
    """Write ``total`` body bytes (None: for ever) as fast as the client reads them."""
    sent = 0
    while total is None or sent < total:
        chunk = _CHUNK if total is None else _CHUNK[: min(len(_CHUNK), total - sent)]
        w.write(chunk)
        await w.drain()
        sent += len(chunk)
        server.sent += len(chunk)


async def _default(server: HostileServer, req: _Request, w: Writer) -> bool:
    """A well-behaved answer; returns whether the connection stays open."""
    path = req.path
    if path == "/health":
        await _answer(w, "200 OK", b'{"status":"ok"}')
    elif path == "/v1/models":
        await _answer(w, "200 OK", b'{"data":[{"id":"hostile"}]}')
    elif req.method == "POST" and path in ("/v1/videos/sync", "/v1/generate"):
        await _answer(w, "200 OK", GOOD_BODY, "video/mp4")
    elif req.method == "POST" and path == "/v1/videos":
        await _answer(w, "200 OK", b'{"id":"job1","status":"queued"}')
    elif path == "/v1/videos/job1":
        await _answer(w, "200 OK", b'{"id":"job1","status":"completed"}')
    elif path == "/v1/videos/job1/content":
        await _answer(w, "200 OK", GOOD_BODY, "video/mp4")
    else:
        await _answer(w, "404 Not Found", b'{"error":"no such route"}')
    return True


def _output(path: str) -> bool:
    return path in ("/v1/videos/sync", "/v1/generate", "/v1/videos/job1/content")


def _on(route: Callable[[_Request], bool], act: Handler) -> Handler:
    async def handler(server: HostileServer, req: _Request, w: Writer) -> bool:
        if route(req):
            return await act(server, req, w)
        return await _default(server, req, w)

    return handler


def _output_route(req: _Request) -> bool:
    return _output(req.path)


def _content_type(value: bytes) -> Handler:
    async def act(server: HostileServer, req: _Request, w: Writer) -> bool:
        body = GOOD_BODY if _output(req.path) else b'{"status":"ok","data":[]}'
        await _answer(w, "200 OK", body, value)
        return True

    return _on(lambda r: True, act)


def _raw(
    data: bytes, *, keep: bool = False, route: Callable[[_Request], bool] = _output_route
) -> Handler:
    async def act(server: HostileServer, req: _Request, w: Writer) -> bool:
        w.write(data)
        await w.drain()
        return keep

    return _on(route, act)


_E500 = "500 Internal Server Error"


def _big(
    route: Callable[[_Request], bool], ctype: str, total: int | None = None, status: str = "200 OK"
) -> Handler:
    """A body of the server's ``size`` bytes, else ``total`` (None: endless); its length
    is declared only where ``total`` is given."""

    async def act(server: HostileServer, req: _Request, w: Writer) -> bool:
        size = server.size if server.size is not None else total
        headers: list[tuple[str, str | bytes]] = [("Content-Type", ctype)]
        if total is not None and size is not None:
            headers.append(("Content-Length", str(size)))
        headers.append(("Connection", "close"))
        w.write(_head(status, headers))
        await _stream(server, w, size)
        return False

    return _on(route, act)


def _json_at(route: Callable[[_Request], bool], body: bytes, status: str = "200 OK") -> Handler:
    async def act(server: HostileServer, req: _Request, w: Writer) -> bool:
        await _answer(w, status, body)
        return True

    return _on(route, act)


def _path(p: str, method: str | None = None) -> Callable[[_Request], bool]:
    return lambda r: r.path == p and (method is None or r.method == method)


_DEEP = 200_000
_CREATE = _path("/v1/videos", "POST")
_POLL = _path("/v1/videos/job1")

#: mode -> (endpoint kind of the workload that exercises it, handler)
MODES: dict[str, tuple[str, Handler]] = {
    "well-behaved": ("videos-sync", _default),
    "content-type-script": ("videos-sync", _content_type(b"<script>alert(1)</script>")),
    "content-type-bare": ("videos-sync", _content_type(b"video")),
    "content-type-control": ("videos-sync", _content_type(b"video/mp4 bogus\x01")),
    "content-type-unicode": ("videos-sync", _content_type("vidéo/mp4".encode())),
    "content-type-long": ("videos-sync", _content_type(b"video/" + b"x" * 4000)),
    "health-type-json": ("videos-sync", _on(_path("/health"), _content_type(b"json"))),
    "output-type-script": ("videos-sync", _on(_output_route, _content_type(b"<script>"))),
    "models-type-script": (
        "videos-sync",
        _on(_path("/v1/models"), _content_type(b"<script>")),
    ),
    "models-nested": (
        "videos-sync",
        _json_at(_path("/v1/models"), b'{"data":' + _nested(_DEEP) + b"}"),
    ),
    "models-ids-odd": (
        "videos-sync",
        _json_at(_path("/v1/models"), b'{"data":[{"id":[[1]]},{"id":"ok\\u0000\\n"},7,null]}'),
    ),
    "job-created-nested": ("videos-job", _json_at(_CREATE, _nested(_DEEP))),
    "job-created-nested-field": (
        "videos-job",
        _json_at(_CREATE, b'{"x":' + _nested(_DEEP) + b',"id":"job1"}'),
    ),
    "models-surrogate": (
        "videos-sync",
        _json_at(_path("/v1/models"), b'{"data":[{"id":"\\ud800x"}]}'),
    ),
    "job-poll-nested": ("videos-job", _json_at(_POLL, b'{"status":' + _nested(_DEEP) + b"}")),
    "job-id-path": ("videos-job", _json_at(_CREATE, b'{"id":"../../etc/passwd"}')),
    "job-id-query": ("videos-job", _json_at(_CREATE, b'{"id":"a?b=c#d"}')),
    "job-id-object": ("videos-job", _json_at(_CREATE, b'{"id":{"x":1}}')),
    "job-id-missing": ("videos-job", _json_at(_CREATE, b'{"status":"queued"}')),
    "job-id-control": ("videos-job", _json_at(_CREATE, b'{"id":"a\\r\\nX-Evil: 1"}')),
    "job-created-not-json": ("videos-job", _json_at(_CREATE, b"<html>hello</html>")),
    "job-status-missing": ("videos-job", _json_at(_POLL, b'{"id":"job1"}')),
    "job-status-failed": ("videos-job", _json_at(_POLL, b'{"id":"job1","status":"failed"}')),
    "job-created-huge": ("videos-job", _big(_CREATE, "application/json")),
    "job-created-huge-declared": ("videos-job", _big(_CREATE, "application/json", 1 << 30)),
    "job-poll-huge": ("videos-job", _big(_POLL, "application/json")),
    "health-huge": ("videos-sync", _big(_path("/health"), "application/json")),
    "models-huge": ("videos-sync", _big(_path("/v1/models"), "application/json")),
    "output-endless": ("videos-sync", _big(_output_route, "video/mp4")),
    "output-huge-declared": ("videos-sync", _big(_output_route, "video/mp4", 3 << 30)),
    "error-500-huge": ("videos-sync", _big(_output_route, "text/plain", 3 << 30, _E500)),
    "error-500-endless": ("videos-sync", _big(_output_route, "text/plain", status=_E500)),
    "job-content-endless": ("videos-job", _big(_path("/v1/videos/job1/content"), "video/mp4")),
    "json-cut": (
        "json",
        _raw(
            _head("200 OK", [("Content-Type", "application/json"), ("Connection", "close")])
            + b'{"video": [1, 2, 3'
        ),
    ),
    "json-nested-output": (
        "json",
        _raw(
            _head(
                "200 OK",
                [("Content-Type", "application/json"), ("Content-Length", str(2 * _DEEP))],
            )
            + _nested(_DEEP),
            keep=True,
        ),
    ),
    "content-length-short": (
        "videos-sync",
        _raw(
            _head("200 OK", [("Content-Type", "video/mp4"), ("Content-Length", "10")]) + GOOD_BODY,
            keep=True,
        ),
    ),
    "content-length-long": (
        "videos-sync",
        _raw(
            _head("200 OK", [("Content-Type", "video/mp4"), ("Content-Length", "100000")])
            + GOOD_BODY
        ),
    ),
    "content-length-negative": (
        "videos-sync",
        _raw(
            _head("200 OK", [("Content-Type", "video/mp4"), ("Content-Length", "-5")]) + GOOD_BODY
        ),
    ),
    "content-length-twice": (
        "videos-sync",
        _raw(
            _head(
                "200 OK",
                [("Content-Length", "4"), ("Content-Length", "8"), ("Content-Type", "video/mp4")],
            )
            + b"abcdefgh"
        ),
    ),
    "no-content-with-body": (
        "videos-sync",
        _raw(_head("204 No Content", [("Content-Type", "video/mp4")]) + GOOD_BODY, keep=True),
    ),
    "status-line-garbage": ("videos-sync", _raw(b"HTTP/1.1 abc\r\n\r\n")),
    "status-line-not-http": ("videos-sync", _raw(b"SSH-2.0-OpenSSH_9.0\r\n")),
    "status-999": ("videos-sync", _raw(_head("999 Whatever", [("Content-Length", "0")]))),
    "header-huge": (
        "videos-sync",
        _raw(_head("200 OK", [("X-Big", "a" * 200_000), ("Content-Length", "0")])),
    ),
    "header-control": (
        "videos-sync",
        _raw(
            _head("200 OK", [("X-Request-Id", b"abc\x01\x7fdef"), ("Content-Length", "0")]),
            keep=True,
        ),
    ),
    "headers-many": (
        "videos-sync",
        _raw(_head("200 OK", [(f"X-H{i}", "v") for i in range(5000)] + [("Content-Length", "0")])),
    ),
    "chunked-bad": (
        "videos-sync",
        _raw(_head("200 OK", [("Transfer-Encoding", "chunked")]) + b"zz\r\nhello\r\n0\r\n\r\n"),
    ),
    "close-before-headers": ("videos-sync", _raw(b"")),
    "close-mid-body": (
        "videos-sync",
        _raw(
            _head("200 OK", [("Content-Type", "video/mp4"), ("Content-Length", "1000000")])
            + b"x" * 100
        ),
    ),
    "redirect-away": (
        "videos-sync",
        _raw(
            _head(
                "302 Found",
                [("Location", "http://169.254.169.254/latest"), ("Content-Length", "0")],
            ),
            keep=True,
        ),
    ),
    "gzip-bomb": (
        "videos-sync",
        _raw(
            _head(
                "200 OK",
                [
                    ("Content-Type", "video/mp4"),
                    ("Content-Encoding", "gzip"),
                    ("Content-Length", "0"),
                ],
            ),
            keep=True,
        ),
    ),
    "server-header-odd": (
        "videos-sync",
        _on(
            _path("/health"),
            _raw(
                _head("200 OK", [("Server", b"\xff\xfe evil"), ("Content-Length", "2")]) + b"{}",
                keep=True,
                route=_path("/health"),
            ),
        ),
    ),
    "health-500": (
        "videos-sync",
        _json_at(_path("/health"), b'{"error":"boom"}', "500 Internal Server Error"),
    ),
}


class HostileServer:
    """The server running in a thread: ``url``, ``mode``, ``sent`` (body bytes written)."""

    def __init__(self, mode: str, size: int | None = None) -> None:
        if mode not in MODES:
            raise ValueError(f"no hostile mode {mode!r}")
        self.mode = mode
        self.size = size
        self.sent = 0
        self.requests: list[tuple[str, str]] = []
        self.url = ""
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._server: asyncio.AbstractServer | None = None

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._server = self._loop.run_until_complete(
            asyncio.start_server(self._client, "127.0.0.1", 0)
        )
        port = self._server.sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"
        self._ready.set()
        self._loop.run_forever()

    async def _client(self, r: asyncio.StreamReader, w: Writer) -> None:
        handler = MODES[self.mode][1]
        try:
            while True:
                try:
                    head = await r.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, asyncio.LimitOverrunError):
                    return
                lines = head.decode("latin-1").split("\r\n")
                method, path = lines[0].split(" ")[:2]
                headers = {}
                for line in lines[1:]:
                    if ":" in line:
                        k, v = line.split(":", 1)
                        headers[k.strip().lower()] = v.strip()
                body = await r.readexactly(int(headers.get("content-length", "0") or 0))
                self.requests.append((method, path))
                if not await handler(self, _Request(method, path, headers, body), w):
                    return
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
            return
        finally:
            with contextlib.suppress(Exception):
                w.close()

    def start(self) -> HostileServer:
        self._thread.start()
        self._ready.wait(30)
        return self

    def stop(self) -> None:
        async def close() -> None:
            if self._server is not None:
                self._server.close()
            for task in asyncio.all_tasks():
                if task is not asyncio.current_task():
                    task.cancel()

        with contextlib.suppress(RuntimeError):
            asyncio.run_coroutine_threadsafe(close(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)


@contextlib.contextmanager
def serve_hostile(mode: str, size: int | None = None) -> Iterator[HostileServer]:
    """Run a hostile server in ``mode`` for the duration of the block (``size``: the
    body size of modes that send a large body; None sends it for ever)."""
    server = HostileServer(mode, size).start()
    try:
        yield server
    finally:
        server.stop()


_PATHS = {"videos-sync": "/v1/videos/sync", "videos-job": "/v1/videos", "json": "/v1/generate"}


def hostile_workload(
    folder: str | Path,
    mode: str,
    *,
    max_output_size: int = 1 << 20,
    timeout: float = 20.0,
    measured: int = 2,
) -> Path:
    """Write a workload for ``mode`` (its endpoint kind, outputs not checked as media,
    a small output limit); return its path."""
    kind = MODES[mode][0]
    path = Path(folder) / f"{mode}.toml"
    path.write_text(
        f'[endpoint]\nkind = "{kind}"\npath = "{_PATHS[kind]}"\npoll_interval = 0.01\n\n'
        f"[run]\nwarmup = 0\nmeasured = {measured}\ntimeout = {timeout}\n"
        f"check_media = false\nmax_output_size = {max_output_size}\n\n"
        '[[request]]\nprompt = "a fox"\nsize = "64x48"\nseconds = 1\nfps = 8\n'
    )
    return path
