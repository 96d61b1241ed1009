"""A conformance suite every ``BlobStore`` must pass; subclass it per backend.

It lives in ``storage/`` because :meth:`BlobStoreSuite.corrupt` writes through the raw
primitives, which nothing outside this package calls. Importing it imports pytest;
``evidencestore.testing.store_suite`` is the same suite under its public name.

```python
class TestMyStore(BlobStoreSuite):
    @pytest.fixture
    def store(self, tmp_path):
        return MyStore(tmp_path)
```
Override :meth:`corrupt` when the backend cannot be corrupted through ``delete`` and
the raw write primitive, and :meth:`age` when a backend whose blobs have modification
times can set them some other way. The capabilities gc's safety argument rests on
(``SupportsLeases``, ``SupportsQuarantine``, ``SupportsKeepAlive``, on the store's
``upkeep``) are tested on every backend that claims them, and skipped elsewhere.
"""

from __future__ import annotations

import os
import time

import pytest

from ..digest import digest_from_hex, hash_bytes
from ..errors import BlobNotFoundError, IntegrityError, InvalidDigestError, ReadOnlyStoreError
from . import leases
from ._base import (
    BlobStore,
    SupportsKeepAlive,
    SupportsLeases,
    SupportsLocalPaths,
    SupportsQuarantine,
)

__all__ = ["BlobStoreSuite"]

_ABSENT = digest_from_hex("0" * 64)


class BlobStoreSuite:
    """Behaviour shared by every blob store. Not collected itself (no ``Test`` prefix)."""

    writable = True

    @pytest.fixture
    def store(self) -> BlobStore:
        raise NotImplementedError("subclasses provide a `store` fixture")

    def corrupt(self, store: BlobStore, digest: str, data: bytes) -> None:
        """Replace the bytes stored under ``digest`` without any check."""
        store._delete(digest)
        store._write(digest, data)

    def age(self, store: BlobStore, digest: str, when: float) -> bool:
        """Set a blob's modification time to ``when``; False where the backend cannot
        (the keep-alive checks are then skipped)."""
        if not isinstance(store, SupportsLocalPaths):
            return False
        os.utime(store.path_of(digest), (when, when))
        return True

    def seed(self, store: BlobStore, data: bytes) -> str:
        """Put ``data`` into ``store`` (read-only stores override this) and return its digest."""
        return store.put(data).digest

    # -- reads ----------------------------------------------------------------
    def test_roundtrip(self, store: BlobStore) -> None:
        data = b"evidence " * 1000
        digest = self.seed(store, data)
        assert digest == hash_bytes(data).digest
        assert store.has(digest)
        assert digest in store
        assert store.size(digest) == len(data)
        assert store.get(digest) == data
        assert store.get(digest, len(data)) == data

    def test_empty_blob(self, store: BlobStore) -> None:
        digest = self.seed(store, b"")
        assert store.get(digest) == b""

    def test_absent(self, store: BlobStore) -> None:
        assert not store.has(_ABSENT)
        assert store.size(_ABSENT) is None
        with pytest.raises(BlobNotFoundError, match=_ABSENT):
            store.get(_ABSENT)

    def test_invalid_digest(self, store: BlobStore) -> None:
        for bad in [
            "sha256:" + "0" * 64,
            "blake3:" + "A" * 64,
            "blake3:abc",
            "",
            "blake3:" + "0" * 65,
        ]:
            with pytest.raises(InvalidDigestError, match="expected 'blake3:'"):
                store.has(bad)

    def test_streaming_read_verifies(self, store: BlobStore) -> None:
        data = bytes(range(256)) * 4096
        digest = self.seed(store, data)
        with store.open(digest, len(data)) as reader:
            chunks = []
            while chunk := reader.read(65536):
                chunks.append(chunk)
        assert b"".join(chunks) == data

    def test_wrong_expected_size(self, store: BlobStore) -> None:
        digest = self.seed(store, b"12345")
        with pytest.raises(IntegrityError, match="expected 4"):
            store.get(digest, 4)
        with pytest.raises(IntegrityError, match="expected 6"):
            store.get(digest, 6)

    def test_corrupt_blob_never_returned(self, store: BlobStore) -> None:
        data = b"a" * 10000
        digest = self.seed(store, data)
        self.corrupt(store, digest, b"a" * 9999 + b"b")
        with pytest.raises(IntegrityError, match=f"{digest}.*hashes to blake3:"):
            store.get(digest)
        with pytest.raises(IntegrityError):
            store.verify(digest, len(data))

    def test_truncated_blob_never_returned(self, store: BlobStore) -> None:
        data = b"b" * 5000
        digest = self.seed(store, data)
        self.corrupt(store, digest, data[:100])
        with pytest.raises(IntegrityError, match="got 100 bytes, expected 5000") as caught:
            store.get(digest, len(data))
        assert (caught.value.digest, caught.value.observed_size) == (digest, 100)
        assert caught.value.expected_size == 5000 and caught.value.where == store.location
        with pytest.raises(IntegrityError, match="hashes to"):
            store.get(digest)

    def test_listing(self, store: BlobStore) -> None:
        if not store.supports_listing:
            pytest.skip("backend cannot list")
        digests = {self.seed(store, f"blob {i}".encode()) for i in range(5)}
        assert digests <= set(store.iter_digests())

    # -- writes ---------------------------------------------------------------
    def test_put_idempotent(self, store: BlobStore) -> None:
        if not self.writable:
            pytest.skip("read-only backend")
        first = store.put(b"same", "text/plain")
        second = store.put(b"same", "text/plain")
        assert first == second
        assert first.media_type == "text/plain"
        assert first.size == 4
        if store.supports_listing:
            assert list(store.iter_digests()).count(first.digest) == 1

    def test_put_expected_digest(self, store: BlobStore) -> None:
        if not self.writable:
            pytest.skip("read-only backend")
        with pytest.raises(IntegrityError, match="hash to"):
            store.put(b"x", expected=hash_bytes(b"y").digest)
        assert not store.has(hash_bytes(b"x").digest)

    def test_put_repairs_corrupt_blob(self, store: BlobStore) -> None:
        if not self.writable:
            pytest.skip("read-only backend")
        data = b"repair me" * 100
        digest = store.put(data).digest
        self.corrupt(store, digest, b"garbage")
        store.put(data)
        assert store.get(digest) == data

    def test_put_file(self, store: BlobStore, tmp_path_factory: pytest.TempPathFactory) -> None:
        if not self.writable:
            pytest.skip("read-only backend")
        path = tmp_path_factory.mktemp("src") / "f.bin"
        data = bytes(range(256)) * 1000
        path.write_bytes(data)
        desc = store.put_file(path)
        assert desc.digest == hash_bytes(data).digest and desc.size == len(data)
        assert store.get(desc.digest) == data

    def test_delete(self, store: BlobStore) -> None:
        if not self.writable:
            pytest.skip("read-only backend")
        digest = store.put(b"gone").digest
        store.delete(digest)
        assert not store.has(digest)
        store.delete(digest)  # absent: no error

    def test_read_only_guard(self, store: BlobStore) -> None:
        if self.writable and not store.read_only:
            pytest.skip("writable backend")
        assert store.read_only and not store.supports_writes
        with pytest.raises(ReadOnlyStoreError, match="read-only"):
            store.put(b"nope")
        with pytest.raises(ReadOnlyStoreError):
            store.delete(_ABSENT)
        # nothing gc deletes by is offered where nothing may be written
        assert not (isinstance(store.upkeep, SupportsLeases) and store.upkeep.supports_leases)
        assert not (
            isinstance(store.upkeep, SupportsQuarantine) and store.upkeep.supports_quarantine
        )
        assert leases.write_lease(store, [_ABSENT]) == ""

    # -- what gc's safety argument rests on, on every backend that claims it ---------
    def test_leases(self, store: BlobStore) -> None:
        if not (isinstance(store.upkeep, SupportsLeases) and store.upkeep.supports_leases):
            pytest.skip("backend holds no leases")
        digest = hash_bytes(b"relied on").digest
        key = leases.write_lease(store, [digest, digest, _ABSENT])
        found = [lease for lease in leases.iter_leases(store) if lease.key == key]
        assert len(found) == 1 and found[0].created is not None
        assert leases.read_lease(store, key) == sorted({digest, _ABSENT})
        assert store.upkeep.read_lease(key).startswith(b"{")
        other = leases.write_lease(store, [digest])
        assert other != key and {key, other} <= {k for k, _ in store.upkeep.iter_leases()}
        store.upkeep.remove_lease(key)
        assert key not in {k for k, _ in store.upkeep.iter_leases()}
        with pytest.raises(FileNotFoundError):
            store.upkeep.read_lease(key)
        assert leases.read_lease(store, key) == []  # gone: it protects nothing
        store.upkeep.remove_lease(key)  # absent: no error
        assert other in {k for k, _ in store.upkeep.iter_leases()}

    def _quarantined(self, store: BlobStore, data: bytes) -> tuple[SupportsQuarantine, str, str]:
        """``data`` stored then quarantined: ``(upkeep, digest, key)``; a backend that
        cannot quarantine skips the test."""
        upkeep = store.upkeep
        if not (isinstance(upkeep, SupportsQuarantine) and upkeep.supports_quarantine):
            pytest.skip("backend cannot quarantine")
        digest = store.put(data).digest
        key = upkeep.quarantine(digest)
        assert key is not None
        return upkeep, digest, key

    def test_quarantine_restore_and_purge(self, store: BlobStore) -> None:
        data = b"quarantined " * 100
        upkeep, digest, key = self._quarantined(store, data)
        assert not store.has(digest)
        assert (key, digest) in [(k, d) for k, d, _ in upkeep.iter_quarantined()]
        upkeep.restore(key)
        assert store.get(digest, len(data)) == data
        assert key not in [k for k, _, _ in upkeep.iter_quarantined()]
        again = upkeep.quarantine(digest)
        assert again is not None
        upkeep.purge(again)
        assert not store.has(digest)
        assert again not in [k for k, _, _ in upkeep.iter_quarantined()]
        upkeep.purge(again)  # absent: no error
        assert upkeep.quarantine(digest) is None  # nothing under its name

    def test_restore_keeps_a_copy_written_meanwhile(self, store: BlobStore) -> None:
        data = b"written again " * 100
        upkeep, digest, key = self._quarantined(store, data)
        store.put(data)  # a writer stores the blob again while it is quarantined
        upkeep.restore(key)
        assert store.get(digest, len(data)) == data
        assert key not in [k for k, _, _ in upkeep.iter_quarantined()]

    def test_keep_alive_makes_a_blob_young_and_quarantine_keeps_its_age(
        self, store: BlobStore
    ) -> None:
        if not isinstance(store.upkeep, SupportsKeepAlive):
            pytest.skip("backend has no keep-alive (a lease protects its blobs)")
        if not self.writable or store.read_only:
            pytest.skip("read-only: no writer to keep a blob alive")
        digest = store.put(b"kept alive").digest
        old = time.time() - 3600
        if not self.age(store, digest, old):
            pytest.skip("cannot set a blob's age on this backend")
        info = store.upkeep.blob_info(digest)
        assert info is not None and info.mtime is not None and abs(info.mtime - old) < 2
        store.upkeep.keep_alive(digest)
        info = store.upkeep.blob_info(digest)
        assert info is not None and info.mtime is not None and info.mtime > old + 3000
        if not (isinstance(store.upkeep, SupportsQuarantine) and store.upkeep.supports_quarantine):
            return
        key = store.upkeep.quarantine(digest)  # gc reads the age the writer left
        assert key is not None
        mtime = store.upkeep.quarantined_mtime(key)
        assert mtime is not None and mtime > old + 3000
        store.upkeep.restore(key)
        assert self.age(store, digest, old)
        key = store.upkeep.quarantine(digest)
        assert key is not None
        mtime = store.upkeep.quarantined_mtime(key)
        assert mtime is not None and abs(mtime - old) < 2
        store.upkeep.restore(key)
        assert store.get(digest) == b"kept alive"
