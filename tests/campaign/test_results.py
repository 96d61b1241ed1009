"""Results by key on every kind of remote: published create-only (the same result twice
is one entry), found bound to their key, signatures judged against the pinned keys, and
anything else that sits under results/ is no result."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

pytest.importorskip("cryptography")

from evidencestore.campaign.memo import kept_bytes
from evidencestore.campaign.results import find, publish
from evidencestore.digest import digest_hex, hash_bytes
from evidencestore.dsse import generate_key, key_id, load_private_key, load_public_key
from evidencestore.storage import BlobStore, LocalBlobStore, MemoryBlobStore, SupportsResults

KEY = "blake3:" + "1f" * 32
OTHER = "blake3:" + "2e" * 32


def _stores() -> dict[str, Callable[..., BlobStore]]:
    def fsspec_memory(tmp_path: Path, request: pytest.FixtureRequest) -> BlobStore:
        from evidencestore.storage import FsspecBlobStore

        return FsspecBlobStore(f"memory://{request.getfixturevalue('memory_base')}")

    def s3(tmp_path: Path, request: pytest.FixtureRequest) -> BlobStore:
        pytest.importorskip("s3fs")
        from evidencestore.storage import FsspecBlobStore
        from evidencestore.testing.s3 import s3_options

        endpoint = request.getfixturevalue("s3_endpoint")
        bucket = request.getfixturevalue("s3_bucket")
        return FsspecBlobStore(f"s3://{bucket}/ev", storage_options=s3_options(endpoint))

    return {
        "local": lambda tmp_path, request: LocalBlobStore(tmp_path / "remote"),
        "memory": lambda tmp_path, request: MemoryBlobStore(),
        "fsspec-memory": fsspec_memory,
        "s3": s3,
    }


@pytest.fixture(params=sorted(_stores()))
def store(request: pytest.FixtureRequest, tmp_path: Path) -> BlobStore:
    return _stores()[request.param](tmp_path, request)


def test_published_twice_is_one_entry_found_bound_to_its_key(store: BlobStore) -> None:
    data = kept_bytes(KEY, {"verdict": "PASS"})
    first = publish(store, KEY, data)
    assert publish(store, KEY, data) == first
    upkeep = store.upkeep
    assert isinstance(upkeep, SupportsResults)
    assert list(upkeep.iter_results()) == [first]
    assert first.startswith(digest_hex(KEY) + "/")
    found, skipped = find(store, {KEY: dict, OTHER: dict}, {})
    assert skipped == [] and list(found) == [KEY]
    (hit,) = found[KEY]
    assert (hit.data, hit.signer, hit.digest) == (data, None, hash_bytes(data).digest)


def test_signatures_count_only_for_pinned_keys(store: BlobStore, tmp_path: Path) -> None:
    mine, _ = generate_key(tmp_path / "worker")
    theirs, _ = generate_key(tmp_path / "other")
    pub = load_public_key(mine)
    pinned = {key_id(pub): pub}
    data = kept_bytes(KEY, {"verdict": "PASS"})
    publish(store, KEY, data, load_private_key(mine))
    publish(store, KEY, data, load_private_key(theirs))
    found, _ = find(store, {KEY: dict}, pinned)
    assert sorted(str(f.signer) for f in found[KEY]) == sorted([key_id(pub), "None"])
    # the same worker, the same result: the same (deterministic) signature, one entry
    publish(store, KEY, data, load_private_key(mine))
    upkeep = store.upkeep
    assert isinstance(upkeep, SupportsResults)
    assert len(list(upkeep.iter_results())) == 2


def test_what_is_not_a_result_is_skipped_with_its_reason(store: BlobStore) -> None:
    upkeep = store.upkeep
    assert isinstance(upkeep, SupportsResults)
    # an entry whose bytes are not its name
    upkeep.write_result(f"{digest_hex(KEY)}/{'0' * 64}.json", b"{}")
    # a record stored under another key, named for this one
    publish(store, OTHER, kept_bytes(OTHER, {"verdict": "FAIL"}))
    (name,) = [n for n in upkeep.iter_results() if n.startswith(digest_hex(OTHER))]
    raw = upkeep.read_result(name).replace(OTHER.encode(), KEY.encode())
    upkeep.write_result(f"{digest_hex(KEY)}/{digest_hex(hash_bytes(raw).digest)}.json", raw)
    found, skipped = find(store, {KEY: dict}, {})
    assert found == {}
    assert len(skipped) == 2
    assert any("its bytes are not its name" in s for s in skipped)
    assert any(f"its record is not bound to key {KEY}" in s for s in skipped)
