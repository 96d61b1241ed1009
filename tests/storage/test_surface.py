"""A store's public surface is what a user needs; upkeep (what transfers and gc use) is
on ``store.upkeep``, whose capabilities the ``Supports*`` protocols describe. The
names are pinned so the surface cannot grow again without this test changing."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from helpers import paths

from evidencestore.storage import (
    BlobStore,
    FsspecBlobStore,
    FsspecUpkeep,
    LocalBlobStore,
    LocalUpkeep,
    MemoryBlobStore,
    MemoryUpkeep,
    ReadThroughStore,
    SupportsBatchRead,
    SupportsIncoming,
    SupportsKeepAlive,
    SupportsLeases,
    SupportsLocalPaths,
    SupportsQuarantine,
    SupportsResults,
    Upkeep,
    leases,
)

# What every store offers a user: store, read (verified), check, list, delete.
USER_SURFACE = {
    "delete",
    "get",
    "has",
    "iter_digests",
    "location",
    "location_of",
    "open",
    "put",
    "put_file",
    "read_only",
    "size",
    "supports_listing",
    "supports_writes",
    "upkeep",
    "verify",
}

UPKEEP_NAMES = {
    "adopt",
    "blob_info",
    "deferred_sync",
    "incoming_path",
    "iter_blobs",
    "iter_leases",
    "iter_quarantined",
    "iter_temporaries",
    "keep_alive",
    "purge",
    "quarantine",
    "quarantined_mtime",
    "iter_results",
    "read_lease",
    "read_result",
    "remove_lease",
    "remove_temporary",
    "restore",
    "sizes",
    "supports_batch_read",
    "supports_leases",
    "supports_quarantine",
    "supports_results",
    "upload_file",
    "write_lease",
    "write_result",
    "write_verified",
}

CAPABILITIES = (
    SupportsBatchRead,
    SupportsIncoming,
    SupportsKeepAlive,
    SupportsLeases,
    SupportsQuarantine,
    SupportsResults,
)


def _public(obj: object) -> set[str]:
    return {name for name in dir(obj) if not name.startswith("_")}


def _stores(tmp_path: Path) -> dict[str, BlobStore]:
    local = LocalBlobStore(tmp_path / "local")
    return {
        "local": local,
        "memory": MemoryBlobStore(),
        "fsspec": FsspecBlobStore(f"memory://surface-{uuid.uuid4().hex}"),
        "read-through": ReadThroughStore(local, fill=lambda *a: "nowhere"),
    }


def test_local_store_public_names_are_pinned(tmp_path: Path) -> None:
    # The class (methods and properties) and an instance (its attributes).
    assert _public(LocalBlobStore) == USER_SURFACE | {"path_of"}
    assert _public(LocalBlobStore(tmp_path)) == USER_SURFACE | {"path_of", "root", "link"}
    assert len(_public(LocalBlobStore)) == 16  # was 36 before upkeep moved out


def test_every_backend_shows_the_user_surface_and_no_upkeep(tmp_path: Path) -> None:
    extras = {
        "local": {"path_of", "root", "link"},
        "memory": {"blobs"},
        "fsspec": {"atomic_put", "fs", "retry", "url"},
        "read-through": {"fetch", "cache", "remotes"},
    }
    for name, store in _stores(tmp_path).items():
        assert _public(store) == USER_SURFACE | extras[name], name
        assert not UPKEEP_NAMES & _public(store), name
        # the capability protocols describe the upkeep, never the store
        assert not any(isinstance(store, cap) for cap in CAPABILITIES), name
        assert isinstance(store.upkeep, Upkeep) and store.upkeep is store.upkeep, name


def test_each_backend_upkeep_claims_its_capabilities(tmp_path: Path) -> None:
    stores = _stores(tmp_path)
    claimed = {
        name: {cap.__name__ for cap in CAPABILITIES if isinstance(store.upkeep, cap)}
        for name, store in stores.items()
    }
    assert claimed == {
        "local": {
            "SupportsIncoming",
            "SupportsKeepAlive",
            "SupportsLeases",
            "SupportsQuarantine",
            "SupportsResults",
        },
        "memory": {"SupportsLeases", "SupportsQuarantine", "SupportsResults"},
        "fsspec": {"SupportsBatchRead", "SupportsLeases", "SupportsQuarantine", "SupportsResults"},
        "read-through": set(),
    }
    assert type(stores["local"].upkeep) is LocalUpkeep
    assert type(stores["memory"].upkeep) is MemoryUpkeep
    assert type(stores["fsspec"].upkeep) is FsspecUpkeep
    assert type(stores["read-through"].upkeep) is Upkeep
    assert isinstance(stores["local"], SupportsLocalPaths)  # a store's own shape
    # upkeep's public names are the upkeep vocabulary, nothing a user reads by
    for name, store in stores.items():
        assert _public(store.upkeep) <= UPKEEP_NAMES, name


def test_upkeep_sees_what_the_store_holds(tmp_path: Path) -> None:
    for name, store in _stores(tmp_path).items():
        if name == "read-through":
            continue  # its cache is the local store above
        put = store.put(b"kept " + name.encode())
        infos = {info.digest: info.size for info in store.upkeep.iter_blobs()}
        assert infos == {put.digest: put.size}, name
        assert store.upkeep.sizes([put.digest]) == {put.digest: put.size}, name
        info = store.upkeep.blob_info(put.digest)
        assert info is not None and info.size == put.size, name
        key = leases.write_lease(store, [put.digest])
        assert key and [lease.key for lease in leases.iter_leases(store)] == [key], name
        assert leases.read_lease(store, key) == [put.digest], name


def test_read_only_store_offers_no_gc_capability(tmp_path: Path) -> None:
    LocalBlobStore(tmp_path).put(b"x")
    upkeep = LocalBlobStore(tmp_path, read_only=True).upkeep
    assert isinstance(upkeep, SupportsLeases) and not upkeep.supports_leases
    assert isinstance(upkeep, SupportsQuarantine) and not upkeep.supports_quarantine
    with pytest.raises(Exception, match="read-only"):
        upkeep.quarantine(next(iter(LocalBlobStore(tmp_path).iter_digests())))


def test_readme_and_architecture_name_the_surface() -> None:
    readme = (paths.DOCS / "library.md").read_text()
    architecture = (paths.DOCS / "architecture.md").read_text()
    for name in USER_SURFACE - {"upkeep"}:
        assert f"`{name}`" in readme or f"store.{name}(" in readme, name
        assert f"`{name}`" in architecture or f"`{name}`/" in architecture, name
    assert "`store.upkeep`" in readme and "`store.upkeep`" in architecture
