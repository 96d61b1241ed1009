"""Regressions from the remotes/gc review: push leases against gc, what gc may touch,
credentials in options, errors instead of tracebacks, lazily opened remotes, verified
pull, bounded reads, redirects."""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import fsspec
import pytest
from remotes_support import (
    FAST,
    blob_files,
    blob_path,
    blobs,
    digest_of,
    lease_files,
    make_repo,
    overwrite,
    run,
    set_remotes,
    store_files,
)

from evidencestore._cli import main
from evidencestore.config import RemoteConfig, load_config
from evidencestore.errors import StorageError
from evidencestore.gc import collect_garbage
from evidencestore.remotes import configured_remotes, local_store
from evidencestore.storage import LocalBlobStore, blob_key
from evidencestore.storage._fsspec import FsspecBlobStore, RetryPolicy, is_transient
from evidencestore.testing.http import serve_directory
from evidencestore.testing.s3 import s3_options

OLD = 7 * 24 * 3600


def _age(path: Path, seconds: float = OLD) -> None:
    when = time.time() - seconds
    os.utime(path, (when, when))


@pytest.fixture
def memory_base() -> Iterator[str]:
    base = f"/evstore-review-{uuid.uuid4().hex}"
    yield base
    fs = fsspec.filesystem("memory")
    if fs.exists(base):
        fs.rm(base, recursive=True)


# -- 1. a push's lease keeps the blobs it found present ------------------------------
def test_gc_keeps_old_blob_a_concurrent_push_found_present(tmp_path: Path) -> None:
    remote = tmp_path / "remote"
    shared = b"an old blob nobody referenced, until checkout B did"
    x = LocalBlobStore(remote).put(shared).digest
    _age(blob_path(remote, x))
    a, b = tmp_path / "a", tmp_path / "b"
    make_repo(a, blobs(1, seed="a"), "a-bundle")
    make_repo(b, {"ext/shared.bin": shared}, "b-bundle")
    for root in (a, b):
        set_remotes(root, origin={"url": str(remote)})
    code, out, err = run("push", "--root", str(b))
    assert code == 0, err
    assert "0 of 1 blobs transferred" in out and "1 already present" in out

    # Checkout A does not see B's registration yet.
    code, out, err = run(
        "gc", "--remote", "origin", "--yes", "--scope", "worktree", "--root", str(a)
    )
    assert code == 0, err
    assert LocalBlobStore(remote).has(x)
    code, _, err = run("verify", "--remote", "origin", "--deep", "--root", str(b))
    assert code == 0, err


def test_gc_honours_leases_on_object_stores(tmp_path: Path, memory_base: str) -> None:
    fs = fsspec.filesystem("memory")
    shared = b"old blob on memory://"
    x = digest_of(shared)
    key = f"{memory_base}/{blob_key(x)}"
    fs.pipe_file(key, shared)
    fs.store[key].created = dt.datetime.now(tz=dt.UTC) - dt.timedelta(seconds=OLD)
    a, b = tmp_path / "a", tmp_path / "b"
    make_repo(a, blobs(1, seed="a"), "a-bundle")
    make_repo(b, {"ext/shared.bin": shared}, "b-bundle")
    for root in (a, b):
        set_remotes(root, mem={"url": f"memory://{memory_base}"})
    code, out, err = run("push", "--remote", "mem", "--root", str(b))
    assert code == 0 and "1 already present" in out, err
    [lease] = fs.find(f"{memory_base}/leases")

    plan = collect_garbage(a, remote="mem", delete=True, scope="worktree")
    assert plan.garbage == [] and plan.leased == 1 and plan.leases == []
    assert fs.exists(key)

    # Once the lease is older than the grace period it protects nothing and goes too;
    # a dry run only lists it.
    later = time.time() + 2 * 3600
    plan = collect_garbage(a, remote="mem", now=later)
    assert plan.leases == [lease] and [g.digest for g in plan.garbage] == [x]
    assert fs.exists(lease)
    code, out, _ = run("gc", "--remote", "mem", "--root", str(a))
    assert code == 0 and "0 expired lease(s)" in out  # at the real time: still young
    plan = collect_garbage(a, remote="mem", now=later, delete=True, scope="worktree")
    assert not fs.exists(lease) and not fs.exists(key)


def test_gc_rechecks_each_blob_before_deleting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "repo"
    make_repo(root, blobs(1))
    cache = local_store(root)
    digest = cache.put(b"listed as old, rewritten since").digest
    from evidencestore.storage._base import BlobInfo

    stale = BlobInfo(digest, cache.size(digest) or 0, time.time() - OLD)
    original = LocalBlobStore.iter_blobs

    def listing(store: Any) -> Iterator[BlobInfo]:
        for info in original(store):
            yield stale if info.digest == digest else info

    # A listing taken before a push touched it.
    monkeypatch.setattr(LocalBlobStore, "iter_blobs", listing)
    plan = collect_garbage(root, delete=True)
    assert plan.garbage == [] and [y.digest for y in plan.young] == [digest]
    assert cache.has(digest)


# -- 2. gc only touches what evstore wrote ------------------------------------------
def test_gc_s3_bucket_root_leaves_other_objects_alone(
    tmp_path: Path, s3_endpoint: str, s3_bucket: str
) -> None:
    boto3 = pytest.importorskip("boto3")
    pytest.importorskip("s3fs")
    root = tmp_path / "repo"
    files = blobs(2)
    make_repo(root, files)
    set_remotes(root, s3={"url": f"s3://{s3_bucket}", "options": s3_options(s3_endpoint)})
    assert run("push", "--root", str(root))[0] == 0
    client = boto3.client("s3", endpoint_url=s3_endpoint, region_name="us-east-1")
    client.put_object(Bucket=s3_bucket, Key="tmp/theirs", Body=b"another tool's file")
    theirs = client.create_multipart_upload(Bucket=s3_bucket, Key="videos/big.mp4")
    stray = digest_of(b"stray")
    ours = client.create_multipart_upload(Bucket=s3_bucket, Key=blob_key(stray))

    plan = collect_garbage(root, remote="s3", grace=0)
    assert plan.temporaries == [f"upload:{ours['UploadId']}:{s3_bucket}/{blob_key(stray)}"]
    code, _, err = run(
        "gc", "--remote", "s3", "--yes", "--scope", "worktree", "--grace", "0", "--root", str(root)
    )
    assert code == 0, err
    keys = {o["Key"] for o in client.list_objects_v2(Bucket=s3_bucket)["Contents"]}
    assert "tmp/theirs" in keys
    uploads = client.list_multipart_uploads(Bucket=s3_bucket).get("Uploads", [])
    assert [u["UploadId"] for u in uploads] == [theirs["UploadId"]]


def test_non_atomic_backend_temporaries(tmp_path: Path) -> None:
    from fsspec.implementations.local import LocalFileSystem

    base = tmp_path / "remote"
    base.mkdir()
    store = FsspecBlobStore(str(base), fs=LocalFileSystem())
    assert not store.atomic_put
    desc = store.put(b"via a temporary")
    assert (base / blob_key(desc.digest)).read_bytes() == b"via a temporary"
    assert not [p for p in (base / "blobs" / ".tmp").iterdir()]  # cleaned up
    ours = base / "blobs" / ".tmp" / ("0f" * 16)
    ours.write_bytes(b"half")
    (base / "blobs" / ".tmp" / "notes.txt").write_text("not ours")
    (base / "tmp").mkdir()
    (base / "tmp" / ("0f" * 16)).write_text("not ours either")
    assert [k for k, _ in store.iter_temporaries()] == [str(ours)]


# -- 3. credentials never in evstore.toml -------------------------------------------
@pytest.mark.parametrize(
    "option",
    [
        "headers.Authorization=Bearer X",
        "headers.X-Auth-Token=t",
        "client_kwargs.headers.Cookie=session=1",
        "headers.X-Goog-Api-Key=k",
        "cookies.session=1",
        "proxy_auth=u:p",
        "api_key=k",
        "session_token=t",
        "private_key=k",
        "endpoint_url=http://user:pw@127.0.0.1:9000",
        'endpoints=["https://u:p@h/x"]',
    ],
)
def test_remote_add_refuses_more_credentials(tmp_path: Path, option: str) -> None:
    code, _, err = run(
        "remote", "add", "origin", "s3://bkt", "--option", option, "--root", str(tmp_path)
    )
    assert code == 2, err
    assert "credential in evstore.toml" in err
    assert not (tmp_path / "evstore.toml").exists()


def test_remote_url_with_userinfo_refused(tmp_path: Path) -> None:
    code, _, err = run("remote", "add", "w", "https://u:secret@h/x", "--root", str(tmp_path))
    assert code == 2 and "embeds a user name or password" in err and "secret" not in err
    (tmp_path / "evstore.toml").write_text(
        '[remotes.o]\nurl = "s3://b"\noptions = { list = [ { api_key = "x" } ] }\n'
    )
    code, _, err = run("remote", "list", "--root", str(tmp_path))
    assert code == 2 and "option 'list.0.api_key' would store a credential" in err, err


def test_headers_without_secrets_are_fine(tmp_path: Path) -> None:
    code, _, err = run(
        "remote", "add", "w", "https://h/x", "--option", "headers.Accept=*/*",
        "--root", str(tmp_path),
    )  # fmt: skip
    assert code == 0, err
    assert load_config(tmp_path).remotes["w"].options == {"headers": {"Accept": "*/*"}}


# -- 4. errors, never tracebacks ----------------------------------------------------
def _evstore_limited(root: Path, *argv: str, max_file_bytes: int) -> tuple[int, str]:
    """Run ``python -m evidencestore`` where no file may grow past ``max_file_bytes``
    (RLIMIT_FSIZE): every larger write fails with EFBIG, as on a full or read-only
    disk. Returns (exit code, stderr)."""
    resource = pytest.importorskip("resource")
    import signal

    def limit() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (max_file_bytes, max_file_bytes))

    done = subprocess.run(
        [sys.executable, "-m", "evidencestore", *argv, "--root", str(root)],
        capture_output=True,
        text=True,
        preexec_fn=limit,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
        check=False,
    )
    return done.returncode, done.stderr


def test_unwritable_local_store_is_a_clear_error(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    files = blobs(1, size=8192)
    make_repo(root, files)
    remote = tmp_path / "remote"
    set_remotes(root, origin={"url": str(remote)})
    assert run("push", "--root", str(root))[0] == 0
    digest = digest_of(next(iter(files.values())))
    os.chmod(local_store(root).path_of(digest), 0o644)
    local_store(root).delete(digest)
    message = f"local store ({local_store(root).root}): {digest}: cannot write: File too large"
    for argv in (["fetch", digest], ["cat", digest]):
        code, err = _evstore_limited(root, *argv, max_file_bytes=1024)
        assert code == 2, err
        assert message in err and "Traceback" not in err and "internal error" not in err
        assert "could not be fetched" not in err  # not blamed on the remote
    assert blob_files(local_store(root).root) == []  # no temporary left behind


def test_remote_add_unwritable_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Replacing evstore.toml fails (as on a read-only directory): a ConfigError naming
    # the file, and no temporary left behind.
    set_remotes(tmp_path, origin={"url": "x"})

    def refuse(src: Any, dst: Any) -> None:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(os, "replace", refuse)
    for argv in (["remote", "add", "o2", "y"], ["remote", "remove", "origin"]):
        code, _, err = run(*argv, "--root", str(tmp_path))
        assert code == 2, argv
        assert f"{tmp_path / 'evstore.toml'}: cannot write: Permission denied" in err
        assert "Traceback" not in err
        assert sorted(p.name for p in tmp_path.iterdir()) == ["evstore.toml"]


def test_gc_missing_s3_bucket(tmp_path: Path, s3_endpoint: str) -> None:
    pytest.importorskip("s3fs")
    root = tmp_path / "repo"
    make_repo(root, blobs(1))
    set_remotes(root, s3={"url": "s3://no-such-bucket/ev", "options": s3_options(s3_endpoint)})
    code, _, err = run("gc", "--remote", "s3", "--root", str(root))
    assert code == 2, err
    assert "remote 's3' (s3://no-such-bucket/ev)" in err and "bucket or prefix not found" in err
    assert "Traceback" not in err


# -- 5. failures name the remote and the digest --------------------------------------
def test_push_failure_names_remote_and_digest(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    files = blobs(2, size=8192)
    make_repo(root, files)
    remote = tmp_path / "remote"
    set_remotes(root, origin={"url": str(remote)})
    code, err = _evstore_limited(root, "push", max_file_bytes=4096)  # the lease fits
    assert code == 2, err
    assert "0 of 2 blobs transferred" in err and "2 FAILED" in err
    for data in files.values():
        assert f"remote 'origin' ({remote}): {digest_of(data)}: cannot upload: " in err
    assert "File too large" in err and "Traceback" not in err


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


# -- 6. an unknown remote name is an error even when the blob is local ---------------
def test_fetch_unknown_remote_with_local_blob(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    files = blobs(1)
    make_repo(root, files)
    digest = digest_of(next(iter(files.values())))
    code, _, err = run("fetch", digest, "--remote", "nope", "--root", str(root))
    assert code == 2 and "unknown remote 'nope'" in err


# -- 7. pull re-hashes local copies ------------------------------------------------
def test_pull_repairs_same_size_corrupt_local_copy(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    files = blobs(3)
    make_repo(root, files)
    set_remotes(root, origin={"url": str(tmp_path / "remote")})
    assert run("push", "--root", str(root))[0] == 0
    data = next(iter(files.values()))
    overwrite(blob_path(local_store(root).root, data), b"Q" * len(data))
    code, out, err = run("pull", "--root", str(root))
    assert code == 0, err
    assert "1 of 3 blobs transferred" in out and "2 already present" in out
    assert local_store(root).get(digest_of(data), len(data)) == data


# -- 8. one unusable remote does not break the others --------------------------------
@pytest.mark.parametrize("url", ["foo://x", "gs://bucket/x"])
def test_unusable_remote_is_only_its_own_error(
    tmp_path: Path, url: str, capfdbinary: pytest.CaptureFixture[bytes]
) -> None:
    if url.startswith("gs://"):
        try:
            import gcsfs  # noqa: F401
        except ImportError:
            pass
        else:
            pytest.skip("gcsfs is installed")
    root = tmp_path / "repo"
    files = blobs(2)
    make_repo(root, files)
    good = tmp_path / "good"
    set_remotes(root, good={"url": str(good)})
    assert run("push", "--root", str(root))[0] == 0
    cached, fetched = (digest_of(d) for d in files.values())
    os.chmod(local_store(root).path_of(fetched), 0o644)
    local_store(root).delete(fetched)
    set_remotes(root, bad={"url": url}, good={"url": str(good)})

    capfdbinary.readouterr()
    assert main(["cat", cached, "--root", str(root)]) == 0  # cached: no remote touched
    assert capfdbinary.readouterr().out == next(iter(files.values()))
    code, _, err = run("fetch", fetched, "--root", str(root))
    assert code == 0, err  # the bad one failed, the next was tried
    os.chmod(local_store(root).path_of(fetched), 0o644)
    local_store(root).delete(fetched)
    set_remotes(root, bad={"url": url})
    code, _, err = run("fetch", fetched, "--root", str(root))
    assert code == 2 and f"remote 'bad' ({url}): cannot open this location" in err
    assert "Traceback" not in err


# -- 9. never more than one byte past the expected size is read --------------------
def test_oversized_remote_object_is_not_read_whole(
    tmp_path: Path, s3_endpoint: str, s3_bucket: str
) -> None:
    boto3 = pytest.importorskip("boto3")
    pytest.importorskip("s3fs")
    root = tmp_path / "repo"
    files = blobs(1, size=2000)
    make_repo(root, files)
    set_remotes(root, s3={"url": f"s3://{s3_bucket}/ev", "options": s3_options(s3_endpoint)})
    data = next(iter(files.values()))
    digest = digest_of(data)
    client = boto3.client("s3", endpoint_url=s3_endpoint, region_name="us-east-1")
    client.put_object(Bucket=s3_bucket, Key=f"ev/{blob_key(digest)}", Body=data + b"x" * 50_000)
    os.chmod(local_store(root).path_of(digest), 0o644)
    local_store(root).delete(digest)
    remote = configured_remotes(root)[0].store
    assert isinstance(remote, FsspecBlobStore)
    assert len(remote.read_bytes(digest, limit=2001)) == 2001
    code, _, err = run("fetch", digest, "--root", str(root))
    assert code == 2
    assert f"{digest}: holds more than the expected 2000 bytes; refused" in err
    assert store_files(local_store(root).root / "blobs") == []


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
        assert len(store.read_bytes(digest, limit=3001)) == 3001
        code, _, err = run("fetch", digest, "--root", str(root))
    assert code == 2 and "holds more than the expected 3000 bytes" in err


# -- 10. minor ----------------------------------------------------------------------
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


def test_attempts_bounded(tmp_path: Path) -> None:
    (tmp_path / "evstore.toml").write_text('[remotes.o]\nurl = "s3://b"\nattempts = 21\n')
    code, _, err = run("remote", "list", "--root", str(tmp_path))
    assert code == 2 and "attempts" in err
    assert RemoteConfig(url="x", attempts=20).attempts == 20


# -- test gaps ------------------------------------------------------------------
def test_configuring_s3_remote_does_not_import_s3fs(tmp_path: Path) -> None:
    pytest.importorskip("s3fs")
    set_remotes(
        tmp_path, s3={"url": "s3://bucket/x", "options": {"endpoint_url": "http://127.0.0.1:9"}}
    )
    code = (
        "import sys\n"
        "from evidencestore.remotes import configured_remotes, repository_store\n"
        f"remotes = configured_remotes({str(tmp_path)!r})\n"
        f"repository_store({str(tmp_path)!r})\n"
        "assert 's3fs' not in sys.modules, 'imported before use'\n"
        "assert remotes[0].store.atomic_put\n"
        "assert 's3fs' in sys.modules\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_cli_verify_remote_exit_codes(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    files = blobs(3)
    make_repo(root, files)
    remote = tmp_path / "remote"
    set_remotes(root, origin={"url": str(remote)})
    assert run("push", "--root", str(root))[0] == 0
    for deep in ([], ["--deep"]):
        code, _, err = run("verify", "--remote", "origin", *deep, "--root", str(root))
        assert code == 0, err
    (_, flipped), (_, gone) = list(files.items())[:2]
    overwrite(blob_path(remote, flipped), flipped[::-1])
    code, out, err = run("verify", "--remote", "origin", "--root", str(root))
    assert code == 0, out + err  # same size: only --deep can tell
    code, out, err = run("verify", "--remote", "origin", "--deep", "--root", str(root))
    assert code == 1 and "remote-corrupt" in out + err
    os.unlink(blob_path(remote, gone))
    code, out, err = run("verify", "--remote", "origin", "--root", str(root))
    assert code == 1 and "remote-missing" in out + err and digest_of(gone) in out + err
    code, _, err = run("verify", "--remote", "nope", "--root", str(root))
    assert code == 2 and "unknown remote 'nope'" in err
    assert len(blob_files(remote)) == 2 and len(lease_files(remote)) == 1
