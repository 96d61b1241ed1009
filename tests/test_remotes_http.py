"""A read-only HTTP remote: a store directory served by a local ``http.server``,
read through fsspec's HTTP filesystem; and a remote that is down, slow or failing."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.remotes import (
    FAST,
    blob_path,
    blobs,
    digest_of,
    make_repo,
    overwrite,
    run,
    set_remotes,
    store_files,
)

from evidencestore.errors import ReadOnlyStoreError, StorageError
from evidencestore.inventory import load_inventory
from evidencestore.remotes import configured_remotes, local_store, repository_store, verify_remote
from evidencestore.storage import BlobStore, LocalBlobStore
from evidencestore.storage._fsspec import FsspecBlobStore, RetryPolicy, is_transient
from evidencestore.testing.http import StoreServer, serve_directory
from evidencestore.testing.store_suite import BlobStoreSuite

pytest.importorskip("aiohttp")


class TestHTTPStore(BlobStoreSuite):
    writable = False

    @pytest.fixture
    def store(self, tmp_path: Path) -> Iterator[BlobStore]:
        with serve_directory(tmp_path / "served") as server:
            (tmp_path / "served").mkdir(exist_ok=True)
            store = FsspecBlobStore(server.url, retry=RetryPolicy(attempts=2, backoff=0.001))
            store.backing = LocalBlobStore(tmp_path / "served")  # type: ignore[attr-defined]
            yield store

    def seed(self, store: BlobStore, data: bytes) -> str:
        return store.backing.put(data).digest  # type: ignore[attr-defined,no-any-return]

    def corrupt(self, store: BlobStore, digest: str, data: bytes) -> None:
        overwrite(store.backing.path_of(digest), data)  # type: ignore[attr-defined]


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[Path, dict[str, bytes], StoreServer]]:
    """A repository whose store entries sit (only) in a directory served over HTTP."""
    root = tmp_path / "repo"
    files = blobs(6, size=3000)
    make_repo(root, files)
    served_dir = tmp_path / "served"
    mirror = LocalBlobStore(served_dir)
    for data in files.values():
        mirror.put(data)
    for path in store_files(local_store(root).root):
        os.unlink(path)
    with serve_directory(served_dir) as server:
        set_remotes(root, web={"url": server.url + "/"})
        yield root, files, server


def test_pull_and_fetch_over_http(served: tuple[Path, dict[str, bytes], StoreServer]) -> None:
    root, files, server = served
    code, out, err = run("pull", "--root", str(root))
    assert code == 0, err
    assert "pull remotes: 6 of 6 blobs transferred" in out
    cache = local_store(root)
    for data in files.values():
        assert cache.get(digest_of(data), len(data)) == data
    # Sizes were known from the registrations: one GET per blob, no HEAD.
    assert sorted(m for m, _ in server.requests) == ["GET"] * 6


def test_http_remote_is_read_only(served: tuple[Path, dict[str, bytes], StoreServer]) -> None:
    root, _files, _ = served
    code, _, err = run("push", "--remote", "web", "--root", str(root))
    assert code == 2 and "remote 'web'" in err and "is read-only" in err
    code, _, err = run("gc", "--remote", "web", "--root", str(root))
    assert code == 2 and "cannot list its blobs" in err
    store = repository_store(root).remotes[0].store
    with pytest.raises(ReadOnlyStoreError):
        store.put(b"x")


def test_http_check_remote(
    served: tuple[Path, dict[str, bytes], StoreServer], tmp_path: Path
) -> None:
    root, files, server = served
    regs = load_inventory(root).registrations
    assert verify_remote(root, regs, "web", deep=True) == {"run1": []}
    (p1, d1), (p2, d2) = list(files.items())[:2]
    os.unlink(blob_path(tmp_path / "served", d1))
    overwrite(blob_path(tmp_path / "served", d2), d2[::-1])
    found = verify_remote(root, regs, "web", deep=True)["run1"]
    assert sorted((f.code, f.path) for f in found) == sorted(
        [("remote-missing", p1), ("remote-corrupt", p2)]
    )
    missing = next(f for f in found if f.code == "remote-missing")
    assert f"{server.url}/blobs/blake3/" in missing.message


def test_http_errors_retried_then_clear_error(
    served: tuple[Path, dict[str, bytes], StoreServer],
) -> None:
    root, files, server = served
    server.fail = -1
    server.status = 503
    data = next(iter(files.values()))
    digest = digest_of(data)
    code, _, err = run("fetch", digest, "--root", str(root))
    assert code == 2
    assert f"remote 'web' ({server.url})" in err
    assert f"GET {digest} failed after {FAST['attempts']} attempts" in err
    assert "503" in err
    assert len(server.requests) == FAST["attempts"]  # bounded
    assert store_files(local_store(root).root) == []  # nothing partial left locally


def test_http_transient_errors_recovered(
    served: tuple[Path, dict[str, bytes], StoreServer],
) -> None:
    root, files, server = served
    server.fail = 2
    data = next(iter(files.values()))
    code, _, err = run("fetch", digest_of(data), "--root", str(root))
    assert code == 0, err
    assert len(server.requests) == 3
    assert local_store(root).get(digest_of(data), len(data)) == data


def test_http_not_found_is_not_an_error_to_retry(
    served: tuple[Path, dict[str, bytes], StoreServer],
) -> None:
    root, _, server = served
    absent = "blake3:" + "5" * 64
    code, _, err = run("fetch", absent, "--root", str(root))
    assert code == 2
    assert f"remote 'web' ({server.url}): absent" in err
    assert server.requests == [("HEAD", f"/blobs/blake3/55/{'5' * 64}")]


def test_http_slow_remote_times_out(served: tuple[Path, dict[str, bytes], StoreServer]) -> None:
    root, files, server = served
    set_remotes(root, web={"url": server.url, "timeout": 0.2})
    server.delay = 30  # far beyond the timeout; released when the server stops
    data = next(iter(files.values()))
    code, _, err = run("fetch", digest_of(data), "--root", str(root))
    assert code == 2
    assert f"failed after {FAST['attempts']} attempts" in err
    assert "Timeout" in err
    assert store_files(local_store(root).root) == []


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_down_remote_then_next_remote(served: tuple[Path, dict[str, bytes], StoreServer]) -> None:
    root, files, server = served
    dead = f"http://127.0.0.1:{_closed_port()}"
    set_remotes(root, dead={"url": dead}, web={"url": server.url})
    data = next(iter(files.values()))
    code, _, err = run("fetch", digest_of(data), "--root", str(root))
    assert code == 0, err
    assert local_store(root).get(digest_of(data)) == data
    # Only the dead one: a clear error after bounded retries.
    set_remotes(root, dead={"url": dead})
    other = list(files.values())[1]
    with pytest.raises(StorageError) as info:
        repository_store(root).get(digest_of(other), len(other))
    message = str(info.value)
    assert f"remote 'dead' ({dead})" in message and "failed after 3 attempts" in message
    assert "Cannot connect" in message


# never more than one byte past the expected size is read
def test_oversized_http_object_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    files = blobs(1, size=3000)
    make_repo(root, files)
    data = next(iter(files.values()))
    digest = digest_of(data)
    served = tmp_path / "served"
    path = blob_path(served, digest)
    path.parent.mkdir(parents=True)
    path.write_bytes(data + b"y" * 100_000)
    os.chmod(local_store(root).path_of(digest), 0o644)
    local_store(root).delete(digest)
    with serve_directory(served) as server:
        set_remotes(root, web={"url": server.url})
        store = configured_remotes(root)[0].store
        assert isinstance(store, FsspecBlobStore)
        assert len(store._read_raw(digest, limit=3001)) == 3001
        code, _, err = run("fetch", digest, "--root", str(root))
    assert code == 2 and "holds more than the expected 3000 bytes" in err


# minor
@pytest.mark.parametrize(
    "exc", [AttributeError("x"), NameError("x"), AssertionError(), TypeError(), ImportError()]
)
def test_programming_errors_are_not_retried(exc: BaseException) -> None:
    assert not is_transient(exc)


def test_redirect_to_another_host_refused(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    files = blobs(1)
    make_repo(root, files)
    data = next(iter(files.values()))
    mirror = tmp_path / "other"
    LocalBlobStore(mirror).put(data)
    os.chmod(local_store(root).path_of(digest_of(data)), 0o644)
    local_store(root).delete(digest_of(data))
    with serve_directory(mirror) as other, serve_directory(tmp_path / "empty") as web:
        web.redirect = other.url
        set_remotes(root, web={"url": web.url})
        code, _, err = run("fetch", digest_of(data), "--root", str(root))
        assert code == 2
        assert f"redirects to {other.url}/blobs/blake3/" in err and "another host; refused" in err
        assert other.requests == []
        assert len(web.requests) == 1  # refused, not retried
