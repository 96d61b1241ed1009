"""pytest fixtures for a real S3 protocol server: moto's ``ThreadedMotoServer``.

Load them with ``pytest_plugins = ["evidencestore.testing.s3"]``. The server listens
on 127.0.0.1 on a free port for the whole session; every test that asks for
``s3_endpoint`` (or ``s3_bucket``) gets dummy credentials in its environment and a
server reset to empty. Nothing reaches the network.
"""

from __future__ import annotations

import logging
import os
import urllib.request
from collections.abc import Iterator
from typing import Any, NamedTuple

import pytest

__all__ = [
    "DUMMY_AWS_ENV",
    "S3Server",
    "s3_bucket",
    "s3_endpoint",
    "s3_options",
    "s3_server",
]

DUMMY_AWS_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SECURITY_TOKEN": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_EC2_METADATA_DISABLED": "true",
    "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
    "AWS_CONFIG_FILE": os.devnull,
}
BUCKET = "evstore-test"


class S3Server(NamedTuple):
    """A running S3 protocol server."""

    endpoint: str
    host: str
    port: int

    def reset(self) -> None:
        """Drop every bucket and object (moto's reset endpoint)."""
        request = urllib.request.Request(f"{self.endpoint}/moto-api/reset", method="POST")
        with urllib.request.urlopen(request, timeout=30) as response:
            response.read()


def s3_options(endpoint: str) -> dict[str, Any]:
    """Storage options for a remote on the test server (no credentials: env only)."""
    return {"endpoint_url": endpoint, "client_kwargs": {"region_name": "us-east-1"}}


@pytest.fixture(scope="session")
def s3_server() -> Iterator[S3Server]:
    """Start moto's S3 server on 127.0.0.1, port 0, for the session."""
    server_mod = pytest.importorskip("moto.server", reason="moto[server] is not installed")
    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # no line per request
    saved = {k: os.environ.get(k) for k in DUMMY_AWS_ENV}
    os.environ.update(DUMMY_AWS_ENV)
    server = server_mod.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    try:
        yield S3Server(f"http://{host}:{port}", host, port)
    finally:
        server.stop()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@pytest.fixture
def s3_endpoint(s3_server: S3Server, monkeypatch: pytest.MonkeyPatch) -> str:
    """The endpoint URL of an emptied server, with dummy credentials in the environment."""
    for key, value in DUMMY_AWS_ENV.items():
        monkeypatch.setenv(key, value)
    s3_server.reset()
    return s3_server.endpoint


@pytest.fixture
def s3_bucket(s3_endpoint: str) -> str:
    """An empty bucket on the server; returns its name."""
    boto3 = pytest.importorskip("boto3")
    client = boto3.client("s3", endpoint_url=s3_endpoint, region_name="us-east-1")
    client.create_bucket(Bucket=BUCKET)
    return BUCKET
