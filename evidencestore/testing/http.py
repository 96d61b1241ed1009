"""A local HTTP server for tests: serves a directory (a store), optionally faulty.

``serve_directory(path)`` is a context manager yielding a :class:`StoreServer` on
127.0.0.1 and a free port. Its ``fail``, ``status`` and ``delay`` attributes can be
changed while it runs: the next ``fail`` requests get ``status`` (``fail=-1``: all of
them), and each request first waits ``delay`` seconds. With ``redirect`` set to a base
URL, every request is answered ``302`` to that base plus the request's path.
``requests`` records ``(method, path)`` of every request received.
"""

from __future__ import annotations

import contextlib
import functools
import os
import threading
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["StoreServer", "serve_directory", "serving"]


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
