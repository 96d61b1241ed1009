"""A real OCI distribution registry for tests: Debian's ``docker-registry``
(distribution 2.8) serving a storage directory under the test's tmp_path over plain HTTP
on 127.0.0.1, started and stopped by the fixture (the Debian service is never used)."""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

BINARY = "/usr/bin/docker-registry"


@dataclass(frozen=True)
class Registry:
    """A running registry: its ``host:port`` and its storage directory on disk."""

    host: str
    storage: Path

    def url(self, repo: str = "evidence/store") -> str:
        """The remote URL of repository ``repo`` on this registry."""
        return f"oci+http://{self.host}/{repo}"

    def blob_file(self, sha256: str) -> Path:
        """Where the registry keeps blob ``sha256:<hex>`` on disk."""
        hexd = sha256.removeprefix("sha256:")
        return self.storage / "docker/registry/v2/blobs/sha256" / hexd[:2] / hexd / "data"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _binary() -> str:
    found = shutil.which("docker-registry") or (BINARY if Path(BINARY).exists() else None)
    if found is None:
        pytest.skip(
            "docker-registry (distribution 2.8) is not installed: "
            "apt-get install docker-registry (CI installs it in .ci/run)"
        )
    return found


@contextlib.contextmanager
def running_registry(base: Path) -> Iterator[Registry]:
    """Start ``docker-registry serve`` on a free port with filesystem storage (deletes
    enabled) under ``base``; stop it on exit."""
    binary = _binary()
    storage = base / "registry-storage"
    storage.mkdir(parents=True)
    port = _free_port()
    config = base / "registry.yml"
    config.write_text(
        "version: 0.1\n"
        "log:\n  level: warn\n"
        "storage:\n"
        f"  filesystem:\n    rootdirectory: {storage}\n"
        "  delete:\n    enabled: true\n"
        f"http:\n  addr: 127.0.0.1:{port}\n"
    )
    log = (base / "registry.log").open("wb")
    proc = subprocess.Popen([binary, "serve", str(config)], stdout=log, stderr=log)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/v2/", timeout=1):
                    break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(
                        "docker-registry did not start: "
                        + (base / "registry.log").read_text(errors="replace")[-2000:]
                    ) from None
                time.sleep(0.05)
        yield Registry(f"127.0.0.1:{port}", storage)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


@pytest.fixture
def oci_registry(tmp_path: Path) -> Iterator[Registry]:
    """A fresh registry for one test."""
    with running_registry(tmp_path) as registry:
        yield registry


TOKEN = "evstore-test-token"


@contextlib.contextmanager
def token_auth_proxy(
    upstream: str, user: str, password: str, *, trickle: float = 0.0
) -> Iterator[str]:
    """A front for the registry at ``upstream`` that demands what public registries do:
    every ``/v2/`` request needs ``Bearer`` :data:`TOKEN` (else 401 with a ``Bearer``
    challenge naming the token service), and the token service at ``/token`` hands the
    token out only for basic credentials ``user``:``password``. With ``trickle``, a blob's
    body is sent 100 bytes at a time, ``trickle`` seconds apart. Yields ``host:port``."""
    import base64
    import http.client
    import json
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from evidencestore.testing.http import serving

    basic = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: object) -> None:
            pass

        def _answer(self, status: int, body: bytes, headers: dict[str, str]) -> None:
            self.send_response(status)
            for key, value in headers.items():
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command == "HEAD":
                return
            if trickle and "/blobs/sha256:" in self.path and status == 200:
                for i in range(0, len(body), 100):
                    self.wfile.write(body[i : i + 100])
                    self.wfile.flush()
                    time.sleep(trickle)
            else:
                self.wfile.write(body)

        def _handle(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            if self.path.startswith("/token"):
                if self.headers.get("Authorization") != basic:
                    self._answer(401, b"{}", {"Content-Type": "application/json"})
                else:
                    token = json.dumps({"token": TOKEN}).encode()
                    self._answer(200, token, {"Content-Type": "application/json"})
                return
            if self.headers.get("Authorization") != f"Bearer {TOKEN}":
                host = self.headers["Host"]
                challenge = (
                    f'Bearer realm="http://{host}/token",service="test",scope="repository:*"'
                )
                self._answer(401, b"{}", {"WWW-Authenticate": challenge})
                return
            conn = http.client.HTTPConnection(upstream, timeout=30)
            headers = {k: v for k, v in self.headers.items() if k.lower() != "authorization"}
            conn.request(self.command, self.path, body=body, headers=headers)
            response = conn.getresponse()
            data = response.read()
            keep = {
                k: v
                for k, v in response.getheaders()
                if k.lower() not in ("content-length", "transfer-encoding", "connection")
            }
            conn.close()
            self._answer(response.status, data, keep)

        do_GET = do_HEAD = do_PUT = do_POST = do_DELETE = do_PATCH = _handle

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    with serving(server, threading.Event()):
        yield f"127.0.0.1:{server.server_address[1]}"
