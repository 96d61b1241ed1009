"""An in-process blob store, for tests and ephemeral work."""

from __future__ import annotations

import io
from collections.abc import Iterator
from typing import BinaryIO

from ..errors import BlobNotFoundError
from ._base import BlobStore

__all__ = ["MemoryBlobStore"]


class MemoryBlobStore(BlobStore):
    """Blobs in a dict; ``blobs`` is exposed so tests can corrupt them on purpose."""

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
