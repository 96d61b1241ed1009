"""gc against concurrent writers, every order of their steps, on every backend.

Each schedule pauses one side at a named step (``evidencestore._steps``), runs the
other side to a step or to its end, then lets both finish: no sleeps decide the
order. The invariant checked after each: every blob a writer reported as stored or
already present is in the store, intact, and nothing is left in quarantine.
"""

from __future__ import annotations

import itertools
import os
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import fsspec
import pytest
from helpers.remotes import blobs, digest_of, make_repo, set_remotes

from evidencestore.bundle import create_bundle
from evidencestore.gc import collect_garbage
from evidencestore.remotes import local_store, open_remote, push
from evidencestore.storage import BlobStore, LocalBlobStore, leases
from evidencestore.testing.interleave import Interleaving
from evidencestore.testing.s3 import s3_options

GC_STEPS = ("gc:marked", "gc:quarantined", "gc:reread")
PUSH_STEPS = ("push:leased", "push:checked")
SHIFT = 100.0  # writers' clock runs this far ahead of the blobs' upload times
GRACE = 50.0

# (gc pause, push pause, who is started first)
SCHEDULES = [
    *[(g, None, "gc") for g in GC_STEPS],
    *[(None, p, "push") for p in PUSH_STEPS],
    *[
        (g, p, first)
        for g, p in itertools.product(GC_STEPS, PUSH_STEPS)
        for first in ("gc", "push")
    ],
]


class _Clock:
    """``time`` for the leases module, SHIFT seconds ahead: on S3 the blobs' ages
    cannot be set back, so the writers' leases are dated forward instead."""

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)

    def time(self) -> float:
        return time.time() + SHIFT


@pytest.fixture(params=["directory", "memory", "s3"])
def remote_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[dict[str, Any]]:
    if request.param == "directory":
        yield {"url": str(tmp_path / "remote")}
    elif request.param == "memory":
        base = f"/gc-interleave-{uuid.uuid4().hex}"
        yield {"url": f"memory://{base}"}
        fsspec.filesystem("memory").rm(base, recursive=True)
    else:
        pytest.importorskip("s3fs")
        endpoint = request.getfixturevalue("s3_endpoint")
        bucket = request.getfixturevalue("s3_bucket")
        yield {"url": f"s3://{bucket}/ev", "options": s3_options(endpoint)}


def _run_schedule(
    il: Interleaving,
    gc_fn: Callable[[], Any],
    writer: str,
    writer_fn: Callable[[], Any],
    gc_pause: str | None,
    writer_pause: str | None,
    first: str,
) -> None:
    if first == "gc":
        il.start("gc", gc_fn, pause_at=gc_pause or ())
        if gc_pause:
            il.wait_paused("gc")
        il.start(writer, writer_fn, pause_at=writer_pause or ())
        if writer_pause:
            il.wait_paused(writer)
            il.resume("gc")
            il.join("gc")
            il.resume(writer)
        else:
            il.join(writer)
            il.resume("gc")
        il.join(writer)
        il.join("gc")
    else:
        il.start(writer, writer_fn, pause_at=writer_pause or ())
        if writer_pause:
            il.wait_paused(writer)
        il.start("gc", gc_fn, pause_at=gc_pause or ())
        if gc_pause:
            il.wait_paused("gc")
            il.resume(writer)
            il.join(writer)
            il.resume("gc")
        else:
            il.join("gc")
            il.resume(writer)
        il.join("gc")
        il.join(writer)


def _assert_intact(store: BlobStore, wanted: dict[str, bytes]) -> None:
    for digest, data in wanted.items():
        assert store.get(digest, len(data)) == data, f"{digest} lost"
    assert list(store.upkeep.iter_quarantined()) == []


@pytest.mark.parametrize(("gc_pause", "push_pause", "first"), SCHEDULES)
def test_gc_never_deletes_what_a_push_found_present(
    tmp_path: Path,
    remote_url: dict[str, Any],
    monkeypatch: pytest.MonkeyPatch,
    gc_pause: str | None,
    push_pause: str | None,
    first: str,
) -> None:
    # Checkout B references blobs the remote already holds; checkout A does not, and
    # collects the remote. The remote's copies are older than the grace period.
    shared = blobs(6, seed="shared")
    a, b = tmp_path / "a", tmp_path / "b"
    make_repo(a, blobs(1, seed="a"), "a-bundle")
    make_repo(b, shared, "b-bundle")
    for root in (a, b):
        set_remotes(root, mirror=remote_url)
    remote = open_remote(b, "mirror").store
    for data in shared.values():
        remote.put(data)
    if isinstance(remote, LocalBlobStore):
        old = time.time() - 7 * 24 * 3600
        for data in shared.values():
            os.utime(remote.path_of(digest_of(data)), (old, old))
    monkeypatch.setattr(leases, "time", _Clock())
    now = time.time() + SHIFT
    wanted = {digest_of(d): d for d in shared.values()}

    with Interleaving() as il:
        _run_schedule(
            il,
            lambda: collect_garbage(
                a, remote="mirror", scope="worktree", grace=GRACE, now=now, delete=True
            ),
            "push",
            lambda: push(b, remote="mirror"),
            gc_pause,
            push_pause,
            first,
        )
        summary = il.join("push")
        plan = il.join("gc")
    assert summary.present + summary.transferred == len(wanted)
    _assert_intact(open_remote(b, "mirror").store, wanted)
    # Whatever gc decided, it accounted for every shared blob it saw.
    assert {g.digest for g in plan.garbage}.isdisjoint(wanted) or summary.transferred


def test_without_the_protocol_gc_would_have_lost_blobs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The schedule the reliability campaign found: a push checks between gc's listing
    and its delete. With the re-read disabled, the blobs are lost; so the interleaving
    test above can fail."""
    from evidencestore import gc

    shared = blobs(3, seed="shared")
    a, b = tmp_path / "a", tmp_path / "b"
    make_repo(a, blobs(1, seed="a"), "a-bundle")
    make_repo(b, shared, "b-bundle")
    for root in (a, b):
        set_remotes(root, mirror={"url": str(tmp_path / "remote")})
    remote = LocalBlobStore(tmp_path / "remote")
    old = time.time() - 7 * 24 * 3600
    for data in shared.values():
        os.utime(remote.path_of(remote.put(data).digest), (old, old))
    monkeypatch.setattr(gc, "_leases", lambda store, cutoff, grace: (set(), []))
    with Interleaving() as il:
        il.start(
            "gc",
            lambda: collect_garbage(a, remote="mirror", scope="worktree", delete=True),
            pause_at="gc:marked",
        )
        il.wait_paused("gc")
        il.start("push", lambda: push(b, remote="mirror"))
        summary = il.join("push")
        il.resume("gc")
        il.join("gc")
    assert summary.present == 3
    assert not any(remote.has(digest_of(d)) for d in shared.values())


@pytest.mark.parametrize("gc_pause", GC_STEPS)
@pytest.mark.parametrize("first", ["gc", "create"])
def test_gc_never_deletes_what_bundle_create_reused(
    tmp_path: Path, gc_pause: str, first: str
) -> None:
    # An old, unreferenced blob in the local store; a new bundle re-uses it.
    root = tmp_path / "repo"
    make_repo(root, blobs(1, seed="kept"), "kept")
    cache = local_store(root)
    data = b"an old unreferenced copy that the new bundle reuses" * 100
    digest = cache.put(data).digest
    old = time.time() - 7 * 24 * 3600
    os.utime(cache.path_of(digest), (old, old))
    src = tmp_path / "src"
    src.mkdir()
    (src / "reused.bin").write_bytes(data)

    def create() -> Any:
        return create_bundle(root, "reuser", [src / "reused.bin"], store=cache, external=["*"])

    with Interleaving() as il:
        _run_schedule(
            il,
            lambda: collect_garbage(root, delete=True),
            "create",
            create,
            gc_pause,
            "put:kept-alive" if first == "create" else None,
            first,
        )
    assert cache.get(digest, len(data)) == data
    assert list(cache.upkeep.iter_quarantined()) == []


def test_interrupted_gc_leaves_nothing_lost(tmp_path: Path) -> None:
    """gc killed between quarantine and decision: the next gc restores first."""
    root = tmp_path / "repo"
    make_repo(root, blobs(1, seed="kept"), "kept")
    cache = local_store(root)
    digest = cache.put(b"garbage for now").digest
    old = time.time() - 7 * 24 * 3600
    os.utime(cache.path_of(digest), (old, old))
    key = cache.upkeep.quarantine(digest)  # what a gc killed after step 1 leaves behind
    assert key is not None and not cache.has(digest)
    # Meanwhile a bundle comes to reference it (e.g. merged from a branch).
    src = tmp_path / "garbage.bin"
    src.write_bytes(b"garbage for now")
    create_bundle(root, "late", [src], store=cache, external=["*"])
    plan = collect_garbage(root, delete=True)
    assert plan.recovered == 1 and plan.garbage == []
    assert cache.get(digest) == b"garbage for now"
    assert list(cache.upkeep.iter_quarantined()) == []
