"""Remotes on a real S3 protocol server (moto, 127.0.0.1, session fixture)."""

from __future__ import annotations

import os
import socket
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers.remotes import (
    FAST,
    blob_path,
    blobs,
    digest_of,
    make_repo,
    run,
    set_remotes,
    store_files,
)

from evidencestore.errors import StorageError
from evidencestore.inventory import load_inventory
from evidencestore.remotes import local_store, repository_store, verify_remote
from evidencestore.storage import BlobStore, blob_key
from evidencestore.storage._fsspec import FsspecBlobStore, RetryPolicy
from evidencestore.testing.s3 import s3_options
from evidencestore.testing.store_suite import BlobStoreSuite

boto3 = pytest.importorskip("boto3")
pytest.importorskip("s3fs")

FAST_POLICY = RetryPolicy(**FAST)  # type: ignore[arg-type]


def _client(endpoint: str) -> Any:
    return boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")


def _keys(endpoint: str, bucket: str, prefix: str = "") -> dict[str, int]:
    out: dict[str, int] = {}
    paginator = _client(endpoint).get_paginator("list_objects_v2")
    for page in paginator.paginate(Bucket=bucket, Prefix=prefix):
        for obj in page.get("Contents", []):
            out[obj["Key"]] = obj["Size"]
    return out


def _get(endpoint: str, bucket: str, key: str) -> bytes:
    return _client(endpoint).get_object(Bucket=bucket, Key=key)["Body"].read()  # type: ignore[no-any-return]


def _put(endpoint: str, bucket: str, key: str, data: bytes) -> None:
    _client(endpoint).put_object(Bucket=bucket, Key=key, Body=data)


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class TestS3Store(BlobStoreSuite):
    @pytest.fixture
    def store(self, s3_endpoint: str, s3_bucket: str) -> BlobStore:
        return FsspecBlobStore(
            f"s3://{s3_bucket}/store", storage_options=s3_options(s3_endpoint), retry=FAST_POLICY
        )


@pytest.fixture
def s3_repo(tmp_path: Path, s3_endpoint: str, s3_bucket: str) -> tuple[Path, dict[str, bytes]]:
    root = tmp_path / "repo"
    files = blobs(40, size=2000)
    make_repo(root, files)
    set_remotes(root, s3={"url": f"s3://{s3_bucket}/evidence", "options": s3_options(s3_endpoint)})
    return root, files


@pytest.fixture
def s3_calls(s3_endpoint: str) -> Iterator[Counter[str]]:
    """Count the S3 operations evidencestore's (aiobotocore) clients send."""
    from aiobotocore.hooks import AioHierarchicalEmitter

    calls: Counter[str] = Counter()
    original = AioHierarchicalEmitter._emit

    async def _emit(self: Any, event_name: str, kwargs: Any, stop_on_response: bool = False) -> Any:
        if event_name.startswith("before-call.s3."):
            calls[event_name.rsplit(".", 1)[1]] += 1
        return await original(self, event_name, kwargs, stop_on_response)

    AioHierarchicalEmitter._emit = _emit  # type: ignore[method-assign]
    try:
        yield calls
    finally:
        AioHierarchicalEmitter._emit = original  # type: ignore[method-assign]


@pytest.mark.parametrize("whole_listing", [True, False], ids=["small-remote", "large-remote"])
def test_push_pull_s3(
    s3_repo: tuple[Path, dict[str, bytes]],
    s3_endpoint: str,
    s3_bucket: str,
    s3_calls: Counter[str],
    monkeypatch: pytest.MonkeyPatch,
    whole_listing: bool,
) -> None:
    root, files = s3_repo
    # The calls are counted: a request retried because it outlasted the helpers' 2 s
    # timeout would count twice, and in-process moto under CPU load can stall that long.
    # The library's default timeout leaves a retry to a real failure.
    set_remotes(root, s3={"url": f"s3://{s3_bucket}/evidence", "options": s3_options(s3_endpoint),
                          "timeout": RetryPolicy().timeout})  # fmt: skip
    if not whole_listing:  # as if the remote held too many blobs to list whole
        monkeypatch.setattr("evidencestore.storage._fsspec._FULL_LISTING_PAGES", 0)
    code, out, err = run("push", "--root", str(root))
    assert code == 0, err
    assert "push remote 's3': 40 of 40 blobs transferred" in out
    expected = {f"evidence/{blob_key(digest_of(d))}": len(d) for d in files.values()}
    assert _keys(s3_endpoint, s3_bucket, "evidence/blobs/") == expected
    assert len(_keys(s3_endpoint, s3_bucket, "evidence/leases/")) == 1  # the push's lease
    for data in list(files.values())[:5]:
        assert _get(s3_endpoint, s3_bucket, f"evidence/{blob_key(digest_of(data))}") == data
    # The missing-blob query is batched: one listing of a small remote, or one per key
    # prefix of a large one; never one HEAD per blob.
    assert s3_calls["PutObject"] == 40 + 1  # the blobs and the push's one lease
    assert s3_calls["HeadObject"] == 0
    prefixes = {digest_of(d)[7:9] for d in files.values()}
    assert s3_calls["ListObjectsV2"] == 1  # the remote is empty either way

    s3_calls.clear()
    code, out, err = run("push", "--root", str(root))
    assert code == 0, err
    assert "0 of 40 blobs transferred" in out and "40 already present" in out
    queries = 1 if whole_listing else 1 + len(prefixes)  # the aborted whole listing, then prefixes
    # Only the queries and the push's one lease (what keeps a concurrent gc from
    # deleting the blobs just found present); no per-blob upload.
    assert dict(s3_calls) == {"ListObjectsV2": queries, "PutObject": 1}

    for path in store_files(local_store(root).root):
        os.unlink(path)
    s3_calls.clear()
    code, out, err = run("pull", "--root", str(root))
    assert code == 0, err
    assert "40 of 40 blobs transferred" in out
    assert s3_calls["GetObject"] == 40 and s3_calls["HeadObject"] == 0
    cache = local_store(root)
    for data in files.values():
        assert cache.get(digest_of(data), len(data)) == data


def test_s3_repairs_wrong_size_copy_on_push(
    s3_repo: tuple[Path, dict[str, bytes]], s3_endpoint: str, s3_bucket: str
) -> None:
    root, files = s3_repo
    assert run("push", "--root", str(root))[0] == 0
    data = next(iter(files.values()))
    key = f"evidence/{blob_key(digest_of(data))}"
    _put(s3_endpoint, s3_bucket, key, data[:7])
    code, out, err = run("push", "--root", str(root))
    assert code == 0, err
    assert "1 of 40 blobs transferred" in out
    assert _get(s3_endpoint, s3_bucket, key) == data


def test_s3_corrupt_copy_refused_and_next_remote_used(
    s3_repo: tuple[Path, dict[str, bytes]], s3_endpoint: str, s3_bucket: str, tmp_path: Path
) -> None:
    root, files = s3_repo
    assert run("push", "--root", str(root))[0] == 0
    data = next(iter(files.values()))
    digest = digest_of(data)
    bad = data[:-1] + b"!"
    _put(s3_endpoint, s3_bucket, f"evidence/{blob_key(digest)}", bad)
    for path in store_files(local_store(root).root):
        os.unlink(path)
    code, _, err = run("fetch", digest, "--root", str(root))
    assert code == 2
    assert f"remote 's3' (s3://{s3_bucket}/evidence): {digest}: content hashes to" in err
    assert f"{digest_of(bad)} ({len(data)} bytes), expected {digest}" in err
    assert store_files(local_store(root).root) == []

    mirror = tmp_path / "mirror"
    from evidencestore.storage import LocalBlobStore

    LocalBlobStore(mirror).put(data)
    set_remotes(
        root,
        s3={"url": f"s3://{s3_bucket}/evidence", "options": s3_options(s3_endpoint)},
        mirror={"url": str(mirror)},
    )
    code, _out, err = run("fetch", digest, "--root", str(root))
    assert code == 0, err
    assert blob_path(local_store(root).root, digest).read_bytes() == data
    assert repository_store(root).get(digest, len(data)) == data


def test_s3_missing_credentials(
    s3_repo: tuple[Path, dict[str, bytes]],
    s3_bucket: str,
    s3_endpoint: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    root, _files = s3_repo
    for key in (
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AWS_SECURITY_TOKEN",
    ):
        monkeypatch.delenv(key, raising=False)
    options = {**s3_options(s3_endpoint), "skip_instance_cache": True}
    set_remotes(root, s3={"url": f"s3://{s3_bucket}/evidence", "options": options})
    code, _, err = run("push", "--root", str(root))
    assert code == 2
    assert f"remote 's3' (s3://{s3_bucket}/evidence)" in err
    assert "no usable credentials (NoCredentialsError" in err
    assert "never evstore.toml" in err
    assert "Traceback" not in err
    for path in store_files(local_store(root).root):
        os.unlink(path)
    code, _, err = run("pull", "--root", str(root))
    assert code == 2 and "no usable credentials" in err
    assert store_files(local_store(root).root) == []
    assert _keys(s3_endpoint, s3_bucket) == {}


def test_s3_down_bounded_retries(s3_repo: tuple[Path, dict[str, bytes]], s3_bucket: str) -> None:
    root, files = s3_repo
    port = _closed_port()
    options = {
        "endpoint_url": f"http://127.0.0.1:{port}",
        "client_kwargs": {"region_name": "us-east-1"},
    }
    set_remotes(root, s3={"url": f"s3://{s3_bucket}/evidence", "options": options})
    code, _, err = run("push", "--root", str(root))
    assert code == 2
    assert f"remote 's3' (s3://{s3_bucket}/evidence)" in err
    assert f"failed after {FAST['attempts']} attempts" in err
    assert "EndpointConnectionError" in err
    for path in store_files(local_store(root).root):
        os.unlink(path)
    data = next(iter(files.values()))
    code, _, err = run("fetch", digest_of(data), "--root", str(root))
    assert code == 2
    assert f"{digest_of(data)} could not be fetched" in err and "failed after 3 attempts" in err
    assert store_files(local_store(root).root) == []  # nothing partial left locally
    with pytest.raises(StorageError, match="failed after 3 attempts"):
        repository_store(root).get(digest_of(data), len(data))


def test_s3_check_remote(
    s3_repo: tuple[Path, dict[str, bytes]], s3_endpoint: str, s3_bucket: str
) -> None:
    root, files = s3_repo
    regs = load_inventory(root).registrations
    assert run("push", "--root", str(root))[0] == 0
    assert verify_remote(root, regs, "s3", deep=True) == {"run1": []}
    (p1, d1), (p2, d2) = list(files.items())[:2]
    client = _client(s3_endpoint)
    client.delete_object(Bucket=s3_bucket, Key=f"evidence/{blob_key(digest_of(d1))}")
    _put(s3_endpoint, s3_bucket, f"evidence/{blob_key(digest_of(d2))}", d2[::-1])
    shallow = verify_remote(root, regs, "s3")["run1"]
    assert [(f.code, f.path) for f in shallow] == [("remote-missing", p1)]
    assert f"s3://{s3_bucket}/evidence/{blob_key(digest_of(d1))}" in shallow[0].message
    deep = verify_remote(root, regs, "s3", deep=True)["run1"]
    assert sorted((f.code, f.path) for f in deep) == sorted(
        [("remote-missing", p1), ("remote-corrupt", p2)]
    )


# failures name the remote and the digest
def test_s3_write_to_missing_bucket_names_url_and_digest(s3_endpoint: str) -> None:
    pytest.importorskip("s3fs")
    store = FsspecBlobStore(
        "s3://no-such-bucket/ev",
        storage_options=s3_options(s3_endpoint),
        retry=RetryPolicy(**FAST),  # type: ignore[arg-type]
    )
    digest = digest_of(b"x")
    with pytest.raises(StorageError) as info:
        store.put(b"x")
    assert f"s3://no-such-bucket/ev: {digest}: cannot write: bucket or prefix not found" in str(
        info.value
    )


def test_s3_batched_pull_refuses_corrupt_and_lists_every_failure(
    s3_repo: tuple[Path, dict[str, bytes]], s3_endpoint: str, s3_bucket: str, tmp_path: Path
) -> None:
    # A pull reads many blobs on one event loop: each copy is still checked before it
    # is cached, one not delivered goes on to the next remote, and every failure is listed.
    root, files = s3_repo
    assert run("push", "--root", str(root))[0] == 0
    corrupt, missing, *_ = files.values()
    bad = corrupt[:-1] + b"!"
    _put(s3_endpoint, s3_bucket, f"evidence/{blob_key(digest_of(corrupt))}", bad)
    _client(s3_endpoint).delete_object(
        Bucket=s3_bucket, Key=f"evidence/{blob_key(digest_of(missing))}"
    )
    mirror = tmp_path / "mirror"
    from evidencestore.storage import LocalBlobStore

    LocalBlobStore(mirror).put(corrupt)
    set_remotes(
        root,
        s3={"url": f"s3://{s3_bucket}/evidence", "options": s3_options(s3_endpoint)},
        mirror={"url": str(mirror)},
    )
    for path in store_files(local_store(root).root):
        os.unlink(path)
    code, _out, err = run("pull", "--root", str(root))
    assert code != 0
    assert "39 of 40 blobs transferred" in err and "1 FAILED" in err
    assert f"{digest_of(missing)} could not be fetched" in err
    assert f"remote 's3' (s3://{s3_bucket}/evidence): absent" in err
    assert digest_of(corrupt) not in err  # refused on s3, then taken from the mirror
    cache = local_store(root)
    for data in files.values():
        if data is not missing:
            assert cache.get(digest_of(data), len(data)) == data
    assert cache.size(digest_of(missing)) is None
