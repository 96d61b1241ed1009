"""Response bodies streamed into the local store, never held whole in memory.

Each body is written chunk by chunk to a temporary file under ``<store>/incoming/`` while
it is hashed (one pass), and published under its digest only when it is complete:
``publish`` makes the temporary read-only and hard-links it to the blob's name
(create-only; an intact blob already there is kept). A dropped connection discards the
temporary, so nothing partial ever appears under a digest. Publishing is separate from
receiving so a runner can defer the fsync and link until after its timed requests.
The store's own ``put_file`` is not used because it hashes large files through a
memory map, whose pages count towards the process's resident memory.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from ..digest import new_hasher
from ..errors import BlobNotFoundError, IntegrityError, StorageError
from ..models import Descriptor
from ..storage import LocalBlobStore

__all__ = ["INCOMING_DIR", "BodySink"]

INCOMING_DIR = "incoming"


class BodySink:
    """One body on its way into a local store: ``write`` chunks, then ``finish``."""

    def __init__(self, store: LocalBlobStore) -> None:
        self.store = store
        folder = store.root / INCOMING_DIR
        try:
            folder.mkdir(parents=True, exist_ok=True)
            self.tmp: Path | None = folder / f".tmp-body-{os.getpid()}-{os.urandom(6).hex()}"
            self._fh = open(self.tmp, "xb")  # noqa: SIM115 - closed by finish/discard
        except OSError as exc:
            raise StorageError(f"{folder}: cannot write a response body: {exc.strerror}") from exc
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
        self.digest = "blake3:" + self._hasher.hexdigest()
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
        final = self.store.path_of(digest)
        try:
            with open(tmp, "rb") as fh:
                os.fsync(fh.fileno())
            final.parent.mkdir(parents=True, exist_ok=True)
            os.chmod(tmp, 0o444)
            if self.store.size(digest) == self.size and self._intact(digest):
                pass  # the same content is already stored
            else:
                try:
                    os.link(tmp, final)
                except FileExistsError:
                    os.replace(tmp, final)  # a corrupt copy sat there
                except OSError:
                    os.replace(tmp, final)  # no hard links on this filesystem
        except OSError as exc:
            raise StorageError(f"{final}: cannot store a response body: {exc.strerror}") from exc
        finally:
            self.discard()
        return Descriptor(digest=digest, size=self.size, media_type=media_type)

    def _intact(self, digest: str) -> bool:
        try:
            self.store.verify(digest, self.size)
        except (IntegrityError, BlobNotFoundError):
            return False
        return True
