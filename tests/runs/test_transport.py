"""The transport's one-off control GET (``transport.get_once``: a launched server's
readiness, ``/metrics`` and ``/version``): no redirect followed, no proxy taken from the
environment, a body bounded while it arrives and refused past its limit."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator

import pytest

pytest.importorskip("aiohttp")

from evidencestore.runs.transport import ControlAnswer, get_once
from evidencestore.testing.http import serving

LIMIT = 1000


class _Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        if self.path == "/moved":  # a redirect to an answer that would be kept
            self.send_response(302)
            self.send_header("Location", "/small")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        size = {"/small": 10, "/exact": LIMIT, "/big": LIMIT + 1}.get(self.path)
        if size is None:
            self.send_error(404)
            return
        self.send_response(200)
        if self.path != "/big":  # the big one does not declare its length: read to learn it
            self.send_header("Content-Length", str(size))
        self.end_headers()
        self.wfile.write(b"x" * size)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[str]:
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    with serving(httpd, threading.Event()):
        yield f"http://127.0.0.1:{httpd.server_address[1]}"


def test_a_redirect_is_an_answer_not_followed(server: str) -> None:
    assert get_once(f"{server}/small", 5, LIMIT) == ControlAnswer(200, b"x" * 10)
    assert get_once(f"{server}/moved", 5, LIMIT) == ControlAnswer(302, error="HTTP 302")
    assert get_once(f"{server}/none", 5, LIMIT) == ControlAnswer(404, error="HTTP 404")


def test_a_body_past_its_limit_is_refused_naming_the_url_and_limit(server: str) -> None:
    assert get_once(f"{server}/exact", 5, LIMIT) == ControlAnswer(200, b"x" * LIMIT)
    assert get_once(f"{server}/big", 5, LIMIT) == ControlAnswer(
        200, error=f"the answer to {server}/big is larger than {LIMIT} bytes"
    )


def test_no_proxy_is_taken_from_the_environment(
    server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.setenv(name, "http://127.0.0.1:9")  # nothing listens there
    monkeypatch.delenv("no_proxy", raising=False)
    monkeypatch.delenv("NO_PROXY", raising=False)
    assert get_once(f"{server}/small", 5, LIMIT) == ControlAnswer(200, b"x" * 10)


def test_no_answer_is_an_error_not_a_raise() -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    got = get_once(f"http://127.0.0.1:{port}/health", 5)
    assert got.status is None and got.body is None
    assert got.error is not None and "ClientConnectorError" in got.error
