"""``evstore gc``: dry run by default, grace period, git revisions, temporaries,
local store and remotes (directory, memory, S3)."""

from __future__ import annotations

import datetime as dt
import os
import shutil
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import fsspec
import pytest
from helpers.remotes import blob_path, blobs, digest_of, make_repo, run, set_remotes, store_files
from helpers.repos import git

from evidencestore.config import Config, LpipsConfig, load_config, save_config
from evidencestore.gc import collect_garbage
from evidencestore.models import Descriptor
from evidencestore.remotes import local_store
from evidencestore.storage import LocalBlobStore, LocalUpkeep, blob_key
from evidencestore.testing.s3 import s3_options

OLD = 7 * 24 * 3600  # seconds in the past: well beyond the default grace


def _age(path: Path, seconds: float = OLD) -> None:
    when = time.time() - seconds
    os.utime(path, (when, when))


@pytest.fixture
def three_blob_repo(tmp_path: Path) -> tuple[Path, dict[str, bytes]]:
    root = tmp_path / "repo"
    files = blobs(3)
    make_repo(root, files)
    return root, files


def test_local_gc_dry_run_then_delete(three_blob_repo: tuple[Path, dict[str, bytes]]) -> None:
    root, files = three_blob_repo
    cache = local_store(root)
    stale = cache.put(b"unreferenced and old").digest
    fresh = cache.put(b"unreferenced, written just now by a concurrent push").digest
    _age(cache.path_of(stale))
    for data in files.values():
        _age(cache.path_of(digest_of(data)))

    code, out, err = run("gc", "--root", str(root))
    assert code == 0, err
    assert f"would remove\t{stale}\t20" in out
    assert fresh not in out
    assert "would remove 1 unreferenced blob(s)" in out
    assert "kept 3 referenced, 1 unreferenced within the grace period" in out
    assert "dry run: nothing was deleted" in err
    assert cache.has(stale) and cache.has(fresh)

    code, out, err = run("gc", "--yes", "--root", str(root))
    assert code == 0, err
    assert "removed 1 unreferenced blob(s)" in out
    assert not cache.has(stale)
    assert cache.has(fresh)  # within the grace period: never deleted
    for data in files.values():
        cache.verify(digest_of(data), len(data))

    code, out, _ = run("gc", "--yes", "--grace", "0", "--root", str(root))
    assert code == 0 and not cache.has(fresh)
    assert sorted(cache.iter_digests()) == sorted(digest_of(d) for d in files.values())


def test_gc_removes_old_temporaries_only(three_blob_repo: tuple[Path, dict[str, bytes]]) -> None:
    root, files = three_blob_repo
    cache = local_store(root)
    digest = digest_of(next(iter(files.values())))
    folder = cache.path_of(digest).parent
    old_tmp = folder / ".tmp-0123456789abcdef-1-deadbeef"
    new_tmp = folder / ".tmp-0123456789abcdef-2-feedface"
    old_tmp.write_bytes(b"half a blob")
    new_tmp.write_bytes(b"being written")
    _age(old_tmp)
    code, out, _ = run("gc", "--root", str(root))
    assert code == 0 and f"would remove\t{old_tmp}" in out and str(new_tmp) not in out
    assert old_tmp.exists()
    code, out, _ = run("gc", "--yes", "--root", str(root))
    assert code == 0 and "1 leftover temporary file(s)" in out
    assert not old_tmp.exists() and new_tmp.exists()


def test_gc_keeps_blobs_referenced_at_revisions(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    old_files = blobs(2, seed="old")
    make_repo(root, old_files, "old")
    git(root, "add", "evidence")
    git(root, "commit", "-q", "-m", "old bundle")
    shutil.rmtree(root / "evidence" / "old")
    make_repo(root, blobs(1, seed="new"), "new")
    old_digests = {digest_of(d) for d in old_files.values()}

    plan = collect_garbage(root, grace=0, scope="worktree")
    assert {b.digest for b in plan.garbage} == old_digests
    plan = collect_garbage(root, grace=0, scope="worktree", revs=["HEAD"])
    assert plan.garbage == [] and plan.kept == 3
    plan = collect_garbage(root, grace=0)  # the default scope reads every ref
    assert plan.garbage == [] and plan.kept == 3 and plan.kept_by_ref == {"refs/heads/main": 2}
    code, _out, err = run(
        "gc", "--grace", "0", "--yes", "--scope", "worktree", "--rev", "main", "--root", str(root)
    )
    assert code == 0, err
    assert all(local_store(root).has(d) for d in old_digests)
    code, _, err = run("gc", "--rev", "no-such-rev", "--root", str(root))
    assert code == 2 and "--rev no-such-rev: not a git revision" in err


def test_gc_keeps_pinned_weights(three_blob_repo: tuple[Path, dict[str, bytes]]) -> None:
    root, _ = three_blob_repo
    cache = local_store(root)
    weights = cache.put(b"pretend lpips weights")
    config = load_config(root)
    save_config(
        root,
        Config(
            store=config.store,
            remotes=config.remotes,
            lpips=LpipsConfig(backbone=Descriptor(digest=weights.digest, size=weights.size)),
        ),
    )
    plan = collect_garbage(root, grace=0, delete=True)
    assert plan.garbage == [] and cache.has(weights.digest)


def test_gc_refuses_unreadable_inventory(three_blob_repo: tuple[Path, dict[str, bytes]]) -> None:
    root, files = three_blob_repo
    (root / "evidence" / "broken").mkdir()
    (root / "evidence" / "broken" / "bundle.json").write_text("{not json")
    code, _, err = run("gc", "--yes", "--grace", "0", "--root", str(root))
    assert code == 2 and "gc refused" in err and "broken" in err
    for data in files.values():
        assert local_store(root).has(digest_of(data))


def test_gc_directory_remote(
    three_blob_repo: tuple[Path, dict[str, bytes]], tmp_path: Path
) -> None:
    root, files = three_blob_repo
    remote = tmp_path / "remote"
    set_remotes(root, origin={"url": str(remote)})
    assert run("push", "--root", str(root))[0] == 0
    store = LocalBlobStore(remote)
    stray = store.put(b"stray blob on the remote").digest
    _age(store.path_of(stray))
    code, out, err = run(
        "gc", "--remote", "origin", "--yes", "--scope", "worktree", "--root", str(root)
    )
    assert code == 0, err
    assert f"gc remote 'origin' ({remote}): removed 1 unreferenced blob(s)" in out
    assert not store.has(stray)
    assert sorted(p.name for p in store_files(remote / "blobs")) == sorted(
        digest_of(d)[7:] for d in files.values()
    )


def test_gc_memory_remote(three_blob_repo: tuple[Path, dict[str, bytes]]) -> None:
    root, files = three_blob_repo
    base = f"/evstore-gc-{uuid.uuid4().hex}"
    set_remotes(root, mem={"url": f"memory://{base}"})
    try:
        assert run("push", "--root", str(root))[0] == 0
        fs = fsspec.filesystem("memory")
        stray = digest_of(b"stray")
        fs.pipe_file(f"{base}/{blob_key(stray)}", b"stray")
        # Not evstore's: memory:// PUTs are atomic, so evstore never writes temporaries
        # there, and gc touches nothing but blob keys and leases.
        fs.pipe_file(f"{base}/tmp/0123abcd", b"someone else's")
        fs.pipe_file(f"{base}/blobs/.tmp/{'ab' * 16}", b"someone else's")
        plan = collect_garbage(root, remote="mem", grace=3600)
        assert plan.garbage == [] and len(plan.young) == 1  # just written: kept
        plan = collect_garbage(root, remote="mem", grace=0, delete=True, scope="worktree")
        assert [b.digest for b in plan.garbage] == [stray]
        assert plan.temporaries == []
        assert not fs.exists(f"{base}/{blob_key(stray)}")
        assert fs.cat_file(f"{base}/tmp/0123abcd") == b"someone else's"
        assert fs.exists(f"{base}/blobs/.tmp/{'ab' * 16}")
        for data in files.values():
            assert fs.cat_file(f"{base}/{blob_key(digest_of(data))}") == data
    finally:
        fsspec.filesystem("memory").rm(base, recursive=True)


def test_gc_s3_remote(
    three_blob_repo: tuple[Path, dict[str, bytes]], s3_endpoint: str, s3_bucket: str
) -> None:
    boto3 = pytest.importorskip("boto3")
    pytest.importorskip("s3fs")
    root, files = three_blob_repo
    set_remotes(root, s3={"url": f"s3://{s3_bucket}/ev", "options": s3_options(s3_endpoint)})
    assert run("push", "--root", str(root))[0] == 0
    client = boto3.client("s3", endpoint_url=s3_endpoint, region_name="us-east-1")
    stray = digest_of(b"stray on s3")
    client.put_object(Bucket=s3_bucket, Key=f"ev/{blob_key(stray)}", Body=b"stray on s3")
    upload = client.create_multipart_upload(Bucket=s3_bucket, Key=f"ev/{blob_key(stray)}")

    # Just written: the default grace period protects the blob. (moto dates every
    # multipart upload in 2010, so the abandoned upload is already old enough.)
    plan = collect_garbage(root, remote="s3")
    assert plan.garbage == [] and [b.digest for b in plan.young] == [stray]
    assert plan.temporaries == [f"upload:{upload['UploadId']}:{s3_bucket}/ev/{blob_key(stray)}"]
    code, out, err = run("gc", "--remote", "s3", "--root", str(root))
    assert code == 0, err
    assert (
        "would remove 0 unreferenced blob(s)" in out
        and "1 unreferenced within the grace period" in out
    )
    assert client.list_multipart_uploads(Bucket=s3_bucket).get("Uploads")  # dry run

    plan = collect_garbage(root, remote="s3", grace=0)
    assert [b.digest for b in plan.garbage] == [stray]
    code, out, err = run(
        "gc", "--remote", "s3", "--yes", "--scope", "worktree", "--grace", "0", "--root", str(root)
    )
    assert code == 0, err
    keys = {o["Key"] for o in client.list_objects_v2(Bucket=s3_bucket).get("Contents", [])}
    assert keys == {f"ev/{blob_key(digest_of(d))}" for d in files.values()}
    assert client.list_multipart_uploads(Bucket=s3_bucket).get("Uploads", []) == []


def test_gc_negative_grace(three_blob_repo: tuple[Path, dict[str, bytes]]) -> None:
    root, _ = three_blob_repo
    code, _, err = run("gc", "--grace", "-1", "--root", str(root))
    assert code == 2 and "--grace must be 0 or more" in err


def test_gc_on_main_keeps_the_evidence_of_unmerged_branches(tmp_path: Path) -> None:
    from helpers.repos import add_bundle, init_repo

    origin = init_repo(tmp_path / "origin")
    remote = tmp_path / "mirror"
    set_remotes(origin, mirror={"url": str(remote)})
    add_bundle(origin, "base", blobs(1, seed="base"), external=("ext/*",))
    git(origin, "add", "-A")
    git(origin, "commit", "-q", "-m", "base")
    git(origin, "checkout", "-q", "-b", "feature")
    branch_files = blobs(2, seed="feature")
    add_bundle(origin, "feature-run", branch_files, external=("ext/*",))
    git(origin, "add", "-A")
    git(origin, "commit", "-q", "-m", "feature run")
    git(origin, "tag", "-a", "v1", "-m", "tagged")
    assert run("push", "--root", str(origin))[0] == 0
    git(origin, "checkout", "-q", "main")
    shutil.rmtree(origin / "evidence" / "feature-run", ignore_errors=True)
    for path in store_files(remote):
        _age(path)
    branch_digests = {digest_of(d) for d in branch_files.values()}

    # A clone that has fetched the branch (as refs/remotes/origin/feature) runs gc.
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(origin), str(clone))
    code, out, err = run("gc", "--remote", "mirror", "--yes", "--root", str(clone))
    assert code == 0, err
    # Each ref's count covers its registrations (the base bundle's blob, and the
    # branch's two).
    assert "kept by refs/remotes/origin/feature\t3" in out
    assert "kept by refs/tags/v1\t3" in out  # an annotated tag, peeled to its commit
    assert "kept by refs/heads/main\t1" in out
    mirror = LocalBlobStore(remote)
    assert all(mirror.has(d) for d in branch_digests)

    # The worktree-only scope is the explicit, narrower choice: it would remove them
    # once the push's lease has expired.
    later = time.time() + 2 * 3600
    plan = collect_garbage(clone, remote="mirror", scope="worktree", now=later)
    assert {b.digest for b in plan.garbage} == branch_digests

    # Without git refs to read, a remote gc refuses to delete at all.
    plain = tmp_path / "plain"
    make_repo(plain, blobs(1, seed="plain"))
    set_remotes(plain, mirror={"url": str(remote)})
    code, _, err = run("gc", "--remote", "mirror", "--yes", "--root", str(plain))
    assert code == 2 and "not a git repository" in err and "--scope worktree" in err
    assert all(mirror.has(d) for d in branch_digests)


def test_gc_removes_staging_left_by_a_killed_create(
    three_blob_repo: tuple[Path, dict[str, bytes]],
) -> None:
    root, _ = three_blob_repo
    left = root / "evidence" / ".half-done.tmp-0badc0de"
    (left / "d").mkdir(parents=True)
    (left / "d" / "partial.bin").write_bytes(b"half of a file")
    code, out, _ = run("gc", "--root", str(root))
    assert code == 0 and f"would remove\t{left}" in out
    assert "would remove 1 staging directory(ies) of killed creates" in out
    assert left.exists()
    code, out, err = run("gc", "--yes", "--root", str(root))
    assert code == 0, err
    assert "removed 1 staging directory(ies)" in out and not left.exists()


# a push's lease keeps the blobs it found present
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
    original = LocalUpkeep.iter_blobs

    def listing(store: Any) -> Iterator[BlobInfo]:
        for info in original(store):
            yield stale if info.digest == digest else info

    # A listing taken before a push touched it.
    monkeypatch.setattr(LocalUpkeep, "iter_blobs", listing)
    plan = collect_garbage(root, delete=True)
    assert plan.garbage == [] and [y.digest for y in plan.young] == [digest]
    assert cache.has(digest)


# gc only touches what evstore wrote
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


# errors, never tracebacks
def test_gc_missing_s3_bucket(tmp_path: Path, s3_endpoint: str) -> None:
    pytest.importorskip("s3fs")
    root = tmp_path / "repo"
    make_repo(root, blobs(1))
    set_remotes(root, s3={"url": "s3://no-such-bucket/ev", "options": s3_options(s3_endpoint)})
    code, _, err = run("gc", "--remote", "s3", "--root", str(root))
    assert code == 2, err
    assert "remote 's3' (s3://no-such-bucket/ev)" in err and "bucket or prefix not found" in err
    assert "Traceback" not in err
