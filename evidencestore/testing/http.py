"""A local HTTP server for tests: serves a directory (a store), optionally faulty.

``serve_directory(path)`` is a context manager yielding a :class:`StoreServer` on
127.0.0.1 and a free port. Its ``fail``, ``status`` and ``delay`` attributes can be
changed while it runs: the next ``fail`` requests get ``status`` (``fail=-1``: all of
them), and each request first waits ``delay`` seconds. With ``redirect`` set to a base
URL, every request is answered ``302`` to that base plus the request's path.
``requests`` records ``(method, path)`` of every request received.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import threading
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from aiohttp import web

__all__ = [
    "Knob",
    "ReferenceServer",
    "StoreServer",
    "add_knob_arguments",
    "applies",
    "serve_app",
    "serve_directory",
    "serving",
    "set_knobs",
]


class StoreServer:
    """A running directory server and its fault settings."""

    def __init__(self, directory: str) -> None:
        self.directory = directory
        self.fail = 0
        self.status = 500
        self.delay = 0.0
        self.redirect: str | None = None
        self.requests: list[tuple[str, str]] = []
        self.stopping = threading.Event()
        self._lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        """The base URL, without a trailing slash."""
        assert self._httpd is not None
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    def _take_fault(self, method: str, path: str) -> int | None:
        with self._lock:
            self.requests.append((method, path))
            if self.fail == 0:
                return None
            if self.fail > 0:
                self.fail -= 1
            return self.status


class _Handler(SimpleHTTPRequestHandler):
    owner: StoreServer

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def _faulted(self) -> bool:
        owner = self.owner
        status = owner._take_fault(self.command, self.path)
        if owner.delay:
            owner.stopping.wait(owner.delay)
        if status is None and owner.redirect is not None:
            self.send_response(302)
            self.send_header("Location", owner.redirect.rstrip("/") + self.path)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return True
        if status is None:
            return False
        self.send_response(status)
        self.send_header("Content-Length", "0")
        self.end_headers()
        return True

    def do_GET(self) -> None:
        if not self._faulted():
            super().do_GET()

    def do_HEAD(self) -> None:
        if not self._faulted():
            super().do_HEAD()


@contextlib.contextmanager
def serve_directory(directory: str | os.PathLike[str]) -> Iterator[StoreServer]:
    """Serve ``directory`` over HTTP on 127.0.0.1 (free port) while the block runs."""
    owner = StoreServer(os.fspath(directory))
    handler = type("Handler", (_Handler,), {"owner": owner})
    httpd = ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(handler, directory=owner.directory)
    )
    owner._httpd = httpd
    with serving(httpd, owner.stopping):
        yield owner


@contextlib.contextmanager
def serving(httpd: ThreadingHTTPServer, stopping: threading.Event) -> Iterator[None]:
    """Serve ``httpd`` on a thread for the block; on leaving, set ``stopping`` (so slow
    handlers give up), shut the server down and join its thread."""
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield
    finally:
        stopping.set()
        httpd.shutdown()
        httpd.server_close()
        thread.join()


@contextlib.contextmanager
def serve_app(app: web.Application, port: int = 0, *, name: str) -> Iterator[int]:
    """Run an aiohttp ``app`` on 127.0.0.1:``port`` (0: a free one) in a daemon thread of
    its own event loop; yield the port bound. A failure to start is raised here; leaving
    the block stops the server and joins the thread (the reference servers use this)."""
    from aiohttp import web

    loop = asyncio.new_event_loop()
    started = threading.Event()
    stop = asyncio.Event()
    bound: list[int] = []
    errors: list[BaseException] = []

    async def main() -> None:
        runner = web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=0.5)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", port)
        await site.start()
        bound.append(int(runner.addresses[0][1]))
        started.set()
        await stop.wait()
        await runner.cleanup()

    def target() -> None:
        asyncio.set_event_loop(loop)
        try:
            loop.run_until_complete(main())
        except BaseException as exc:  # surfaced to the caller below
            errors.append(exc)
            started.set()
        finally:
            # Handlers still running past the shutdown timeout (a stalled answer) are
            # cancelled and finished, as asyncio.run does, never left pending.
            left = asyncio.all_tasks(loop)
            for task in left:
                task.cancel()
            if left:
                loop.run_until_complete(asyncio.gather(*left, return_exceptions=True))
            loop.close()

    thread = threading.Thread(target=target, name=name, daemon=True)
    thread.start()
    started.wait()
    if errors:
        raise errors[0]
    try:
        yield bound[0]
    finally:
        loop.call_soon_threadsafe(stop.set)
        thread.join(timeout=10)


class ReferenceServer:
    """What the reference servers share: the model they serve, the port they are bound
    to and their URL, ``/health`` and ``/v1/models`` as an OpenAI-style server answers
    them, and their aiohttp application (the routes of their own in :meth:`_routes`)."""

    model: str
    port: int
    #: The largest request body the application reads (aiohttp's default).
    client_max_size = 1024**2

    @property
    def url(self) -> str:
        """The base URL (``http://127.0.0.1:<port>``, no trailing slash)."""
        return f"http://127.0.0.1:{self.port}"

    def app(self) -> web.Application:
        """The aiohttp application."""
        from aiohttp import web

        app = web.Application(client_max_size=self.client_max_size)
        app.router.add_get("/health", self._health)
        app.router.add_get("/v1/models", self._models)
        self._routes(app.router)
        return app

    def _routes(self, router: web.UrlDispatcher) -> None:
        """Add the server's own routes."""

    @contextlib.contextmanager
    def running(self, port: int = 0, *, name: str) -> Iterator[None]:
        """Serve :meth:`app` on 127.0.0.1:``port`` (0: a free one) in a thread named
        ``name`` (:func:`serve_app`), ``port`` set to the port bound, until the block ends."""
        with serve_app(self.app(), port, name=name) as bound:
            self.port = bound
            yield

    async def _health(self, request: web.Request) -> web.StreamResponse:
        from aiohttp import web

        return web.json_response({"status": "ok"})

    async def _models(self, request: web.Request) -> web.StreamResponse:
        from aiohttp import web

        return web.json_response(
            {"object": "list", "data": [{"id": self.model, "object": "model"}]}
        )


Knob = set[int] | bool
"""A misbehaviour of a reference server: every request (True) or these 1-based ones."""


def applies(knob: Knob, number: int) -> bool:
    """Whether ``knob`` applies to request ``number``."""
    return knob is True or (isinstance(knob, set) and number in knob)


def set_knobs(server: object, knobs: dict[str, Any], what: str) -> None:
    """Set each knob on ``server``, refusing one it does not have."""
    for key, value in knobs.items():
        if not hasattr(server, key):
            raise TypeError(f"unknown {what} knob {key!r}")
        setattr(server, key, value)


def add_knob_arguments(
    parser: Any, values: dict[str, tuple[type, str]], flags: dict[str, str]
) -> None:
    """A reference server's command line: ``--name VALUE`` for each of ``values`` (its
    type and help) and ``--name`` for each of ``flags`` (its help)."""
    for name, (kind, help_) in values.items():
        parser.add_argument("--" + name.replace("_", "-"), type=kind, help=help_)
    for name, help_ in flags.items():
        parser.add_argument("--" + name.replace("_", "-"), action="store_true", help=help_)
