"""An in-process blob store, for tests and ephemeral work."""

from __future__ import annotations

import io
import os
from collections.abc import Iterator
from typing import BinaryIO, cast

from ..errors import BlobNotFoundError
from ._base import BlobStore, Upkeep

__all__ = ["MemoryBlobStore", "MemoryUpkeep"]


class MemoryBlobStore(BlobStore):
    """Blobs in a dict; ``blobs`` is exposed so tests can corrupt them on purpose.
    Its :attr:`upkeep` holds leases and quarantines (``SupportsLeases``,
    ``SupportsQuarantine``)."""

    def __init__(self, *, read_only: bool = False) -> None:
        super().__init__(read_only=read_only)
        self.blobs: dict[str, bytes] = {}

    @property
    def location(self) -> str:
        return f"memory:{id(self):x}"

    def _exists(self, digest: str) -> bool:
        return digest in self.blobs

    def _size(self, digest: str) -> int | None:
        data = self.blobs.get(digest)
        return None if data is None else len(data)

    def _open_raw(self, digest: str) -> BinaryIO:
        try:
            return io.BytesIO(self.blobs[digest])
        except KeyError:
            raise BlobNotFoundError(f"{digest} is not in store {self.location}") from None

    def _write(self, digest: str, data: bytes) -> None:
        self.blobs[digest] = data

    def _delete(self, digest: str) -> None:
        self.blobs.pop(digest, None)

    def _iter(self) -> Iterator[str]:
        yield from sorted(self.blobs)

    @property
    def upkeep(self) -> MemoryUpkeep:
        """Transfers' and gc's methods (see :class:`MemoryUpkeep`)."""
        return cast(MemoryUpkeep, super().upkeep)

    def _make_upkeep(self) -> MemoryUpkeep:
        return MemoryUpkeep(self)


class MemoryUpkeep(Upkeep):
    """A memory store's upkeep: leases and quarantine in dicts of the store
    (``SupportsLeases``, ``SupportsQuarantine``)."""

    _store: MemoryBlobStore

    def __init__(self, store: MemoryBlobStore) -> None:
        super().__init__(store)
        self._leases: dict[str, bytes] = {}
        self._results: dict[str, bytes] = {}
        self._quarantined: dict[str, tuple[str, bytes]] = {}

    @property
    def supports_leases(self) -> bool:
        return not self._store.read_only

    def write_lease(self, name: str, data: bytes) -> str:
        self._store._check_writable()
        self._leases[name] = bytes(data)
        return name

    def iter_leases(self) -> Iterator[tuple[str, float | None]]:
        for name in sorted(self._leases):
            yield name, None

    def read_lease(self, key: str) -> bytes:
        try:
            return self._leases[key]
        except KeyError:
            raise FileNotFoundError(key) from None

    def remove_lease(self, key: str) -> None:
        self._store._check_writable()
        self._leases.pop(key, None)

    @property
    def supports_results(self) -> bool:
        return True

    def write_result(self, name: str, data: bytes) -> str:
        self._store._check_writable()
        self._results[name] = bytes(data)
        return name

    def iter_results(self, prefix: str = "") -> Iterator[str]:
        yield from (n for n in sorted(self._results) if n.startswith(prefix))

    def read_result(self, name: str) -> bytes:
        try:
            return self._results[name]
        except KeyError:
            raise FileNotFoundError(name) from None

    @property
    def supports_quarantine(self) -> bool:
        return not self._store.read_only

    def quarantine(self, digest: str) -> str | None:
        self._store._check_writable()
        data = self._store.blobs.pop(digest, None)
        if data is None:
            return None
        key = f"{digest}-{os.urandom(8).hex()}"
        self._quarantined[key] = (digest, data)
        return key

    def iter_quarantined(self) -> Iterator[tuple[str, str, float | None]]:
        for key in sorted(self._quarantined):
            yield key, self._quarantined[key][0], None

    def quarantined_mtime(self, key: str) -> float | None:
        return None  # no modification times here: a lease protects what a writer uses

    def restore(self, key: str) -> None:
        self._store._check_writable()
        item = self._quarantined.pop(key, None)
        if item is not None:
            self._store.blobs.setdefault(item[0], item[1])

    def purge(self, key: str) -> None:
        self._store._check_writable()
        self._quarantined.pop(key, None)
