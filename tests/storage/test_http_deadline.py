"""HTTP downloads under an overall deadline, and bounded fetches of unregistered digests.

A real HTTP server on 127.0.0.1 trickles bytes (one every 20 ms, far slower than the
remote's configured minimum rate, yet never slow enough to trip the per-read timeout),
or claims a 1 GiB blob and would stream zeros for ever.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from helpers.remotes import blobs, digest_of, make_repo, run, set_remotes, store_files

from evidencestore.config import load_config
from evidencestore.errors import ConfigError
from evidencestore.remotes import local_store
from evidencestore.storage import transfer as _transfer
from evidencestore.storage._fsspec import FsspecBlobStore, RetryPolicy, TransferDeadlineError
from evidencestore.testing.http import serving

pytest.importorskip("aiohttp")

GIB = 1 << 30


class Trickler:
    """A server answering every blob path with ``claimed`` bytes, ``per_write`` at a time
    every ``interval`` seconds (``body`` when given, zeros beyond it)."""

    def __init__(self, claimed: int, body: bytes = b"", interval: float = 0.02) -> None:
        self.claimed = claimed
        self.body = body
        self.interval = interval
        self.sent = 0
        self.requests: list[tuple[str, str]] = []
        self.stopping = threading.Event()
        self.url = ""


def _handler(owner: Trickler) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _headers(self) -> None:
            owner.requests.append((self.command, self.path))
            self.send_response(200)
            self.send_header("Content-Length", str(owner.claimed))
            self.end_headers()

        def do_HEAD(self) -> None:
            self._headers()

        def do_GET(self) -> None:
            self._headers()
            try:
                for i in range(owner.claimed):
                    if owner.stopping.wait(owner.interval):
                        return
                    self.wfile.write(owner.body[i : i + 1] or b"\0")
                    self.wfile.flush()
                    owner.sent += 1
            except (BrokenPipeError, ConnectionResetError):
                return

    return Handler


@pytest.fixture
def trickler() -> Iterator[Trickler]:
    owner = Trickler(claimed=0)
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(owner))
    host, port = httpd.server_address[:2]
    owner.url = f"http://{host!s}:{port}"
    with serving(httpd, owner.stopping):
        yield owner


def _repo_without_blobs(tmp_path: Path, size: int) -> tuple[Path, bytes]:
    root = tmp_path / "repo"
    files = blobs(1, size=size)
    make_repo(root, files)
    for path in store_files(local_store(root).root):
        path.chmod(0o644)
        path.unlink()
    return root, next(iter(files.values()))


def test_policy_deadline_from_size_and_rate() -> None:
    policy = RetryPolicy(min_rate=1000, deadline_floor=2.0)
    assert policy.deadline(5000) == 7.0
    assert policy.deadline(None) is None
    assert RetryPolicy(min_rate=None).deadline(10) is None


def test_trickled_pull_is_cut_at_the_deadline(tmp_path: Path, trickler: Trickler) -> None:
    root, data = _repo_without_blobs(tmp_path, 2000)
    trickler.claimed, trickler.body = len(data), data
    # 0.5 s + 2001 bytes at 2000 bytes/s: about 1.5 s; the trickle needs 40 s.
    set_remotes(root, web={"url": trickler.url, "min_rate": 2000.0, "deadline_floor": 0.5})
    code, _, err = run("pull", "--root", str(root))
    assert code == 2, err
    assert "not complete within its deadline of 1.5 s" in err
    assert "2001 bytes at a minimum rate of 2000 bytes/s" in err
    assert "internal error" not in err and "Traceback" not in err
    assert 0 < trickler.sent < len(data)
    assert store_files(local_store(root).root) == []  # nothing partial kept
    assert [m for m, _ in trickler.requests] == ["GET"]  # one transfer: not retried


def test_streamed_download_is_cut_and_its_temporary_removed(
    tmp_path: Path, trickler: Trickler, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Above the threshold a blob is streamed into a temporary of the local store.
    monkeypatch.setattr(_transfer, "STREAM_THRESHOLD", 100)
    root, data = _repo_without_blobs(tmp_path, 2000)
    trickler.claimed, trickler.body = len(data), data
    set_remotes(root, web={"url": trickler.url, "min_rate": 4000.0, "deadline_floor": 0.3})
    code, _, err = run("fetch", digest_of(data), "--root", str(root))
    assert code == 2, err
    assert "not complete within its deadline" in err
    assert trickler.sent > 0
    assert store_files(local_store(root).root) == []


def test_store_read_raises_the_deadline_error(trickler: Trickler) -> None:
    trickler.claimed, trickler.body = 500, b"x" * 500
    store = FsspecBlobStore(
        trickler.url, retry=RetryPolicy(attempts=3, min_rate=1000, deadline_floor=0.2)
    )
    digest = digest_of(b"x" * 500)
    with pytest.raises(TransferDeadlineError, match=r"deadline of 0\.7 s"):
        store._read_raw(digest, limit=501)
    assert [m for m, _ in trickler.requests] == ["GET"]


def test_fast_enough_download_completes(tmp_path: Path, trickler: Trickler) -> None:
    root, data = _repo_without_blobs(tmp_path, 40)
    trickler.claimed, trickler.body, trickler.interval = len(data), data, 0.001
    set_remotes(root, web={"url": trickler.url, "min_rate": 1000.0, "deadline_floor": 30.0})
    code, _, err = run("pull", "--root", str(root))
    assert code == 0, err
    assert local_store(root).get(digest_of(data), len(data)) == data


def test_unregistered_digest_claimed_1gib_refused_before_reading(
    tmp_path: Path, trickler: Trickler
) -> None:
    root, _ = _repo_without_blobs(tmp_path, 100)
    trickler.claimed = GIB
    set_remotes(root, web={"url": trickler.url})
    unregistered = "blake3:" + "7" * 64
    code, _, err = run("fetch", unregistered, "--root", str(root))
    assert code == 2, err
    assert f"stores {GIB} bytes, more than the {256 << 20} allowed" in err
    assert "no registration names" in err and "max_unregistered_size" in err
    assert [m for m, _ in trickler.requests] == ["HEAD"]  # no GET at all
    assert trickler.sent == 0
    assert store_files(local_store(root).root) == []


def test_unregistered_limit_is_per_remote(tmp_path: Path, trickler: Trickler) -> None:
    root, _ = _repo_without_blobs(tmp_path, 100)
    body = b"an unregistered log\n" * 5
    trickler.claimed, trickler.body, trickler.interval = len(body), body, 0.0
    digest = digest_of(body)
    set_remotes(root, web={"url": trickler.url, "max_unregistered_size": 99})
    code, _, err = run("fetch", digest, "--root", str(root))
    assert code == 2
    assert "stores 100 bytes, more than the 99 allowed" in err
    set_remotes(root, web={"url": trickler.url, "max_unregistered_size": 100})
    code, _, err = run("fetch", digest, "--root", str(root))
    assert code == 0, err
    assert local_store(root).get(digest, len(body)) == body


def test_registered_digest_is_not_bound_by_the_unregistered_limit(
    tmp_path: Path, trickler: Trickler
) -> None:
    root, data = _repo_without_blobs(tmp_path, 300)
    trickler.claimed, trickler.body, trickler.interval = len(data), data, 0.0
    set_remotes(root, web={"url": trickler.url, "max_unregistered_size": 10})
    code, _, err = run("fetch", digest_of(data), "--root", str(root))
    assert code == 0, err


@pytest.mark.parametrize(
    ("line", "field"),
    [("min_rate = 0", "min_rate"), ("deadline_floor = -1", "deadline_floor")],
)
def test_deadline_settings_are_validated(tmp_path: Path, line: str, field: str) -> None:
    (tmp_path / "evstore.toml").write_text(f'[remotes.web]\nurl = "http://x"\n{line}\n')
    with pytest.raises(ConfigError, match=field):
        load_config(tmp_path)


def test_stream_copy_from_other_backends_checks_the_deadline(tmp_path: Path) -> None:
    """The chunked copy of non-HTTP backends checks the deadline between reads: with a
    deadline of a nanosecond it is cut before the first chunk, and retries do not help."""
    pytest.importorskip("fsspec")
    url = f"memory://deadline-{tmp_path.name}"
    store = FsspecBlobStore(url, retry=RetryPolicy(attempts=3, min_rate=1e12, deadline_floor=0))
    digest = store.put(b"payload" * 100).digest
    dest = tmp_path / "copy"
    with pytest.raises(TransferDeadlineError, match="not complete within its deadline"):
        store._download_raw(digest, str(dest), limit=701)
    assert dest.read_bytes() == b""  # the caller removes its temporary
    relaxed = FsspecBlobStore(url, retry=RetryPolicy(min_rate=1e6, deadline_floor=30))
    relaxed._download_raw(digest, str(dest), limit=701)
    assert dest.read_bytes() == b"payload" * 100
