"""Response bodies streamed into the local store, never held whole in memory.

Each body is written chunk by chunk to a temporary file under ``<store>/incoming/`` while
it is hashed (one pass), and published under its digest only when it is complete:
``publish`` hands it to the store's ``adopt`` (create-only; an intact blob already there
is kept, refreshed first so a concurrent gc keeps it). A dropped connection discards the
temporary, so nothing partial ever appears under a digest. Publishing is separate from
receiving so a runner can defer the fsync and link until after its timed requests.
The store's own ``put_file`` is not used because it hashes large files through a
memory map, whose pages count towards the process's resident memory.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from ..digest import digest_from_hex, new_hasher
from ..errors import StorageError
from ..models import Descriptor
from ..storage import LocalBlobStore

__all__ = ["BodySink"]


class BodySink:
    """One body on its way into a local store: ``write`` chunks, then ``finish``."""

    def __init__(self, store: LocalBlobStore) -> None:
        self.store = store
        self.tmp: Path | None = store.incoming_path()
        try:
            self._fh = open(self.tmp, "xb")  # noqa: SIM115 - closed by finish/discard
        except OSError as exc:
            raise StorageError(f"{self.tmp}: cannot write a response body: {exc.strerror}") from exc
        self._hasher = new_hasher()
        self.size = 0
        self.digest: str | None = None

    def write(self, chunk: bytes) -> None:
        """Hash and write one chunk."""
        self._hasher.update(chunk)
        self._fh.write(chunk)
        self.size += len(chunk)

    def finish(self) -> str:
        """Close the temporary (complete body); return its digest. Not yet published."""
        self._fh.close()
        self.digest = digest_from_hex(self._hasher.hexdigest())
        return self.digest

    def discard(self) -> None:
        """Drop the temporary (a body that was not complete, or not wanted)."""
        with contextlib.suppress(OSError):
            self._fh.close()
        if self.tmp is not None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.tmp)
            self.tmp = None

    def publish(self, media_type: str) -> Descriptor:
        """Put the finished body into the store under its digest; return its descriptor."""
        if self.digest is None or self.tmp is None:
            raise StorageError("a response body was published before it was finished")
        digest, tmp = self.digest, self.tmp
        try:
            self.store.adopt(tmp, digest, self.size)
        finally:
            self.discard()  # gone when adopted; removed when the store refused it
        return Descriptor(digest=digest, size=self.size, media_type=media_type)
