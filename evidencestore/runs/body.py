"""Response bodies streamed into the local store, never held whole in memory past a bound.

A small body (at most :data:`SMALL` bytes, while the run's :class:`MemoryBudget` of
:data:`BUDGET` bytes of such bodies lasts) is hashed and kept in memory as it arrives, and stored by
digest when published: creating a temporary file per response on the event loop costs
more than the whole exchange of a small answer. Once the budget is spent, further small
bodies are appended to the run's one :class:`Spool` file as they arrive (still no file
per response), and read back from it when published. Any other body, and one that grows past
``SMALL``, is written chunk by chunk to a temporary file under ``<store>/incoming/``
while it is hashed (one pass), and published under its digest only when complete:
``publish`` hands it to the store's ``upkeep.adopt`` (create-only; an intact blob already there
is kept, refreshed first so a concurrent gc keeps it). A dropped connection discards the
temporary, so nothing partial ever appears under a digest. Publishing is separate from
receiving so a runner can defer the fsync and link until after its timed requests.
The store's own ``put_file`` is not used because it hashes large files through a
memory map, whose pages count towards the process's resident memory.

Every sink has a size limit: a chunk that would take the body past it is not written
(:class:`~evidencestore.errors.BodyTooLarge` is raised instead), so no byte past a limit ever reaches the disk.

While a sink's temporary (or the spool) exists it holds a shared ``flock`` on it, from before its first
byte until after it is published or unlinked; the local store lists and removes an
incoming temporary only while it can take the exclusive lock without waiting
(``LocalUpkeep.remove_temporary``), so ``gc --grace 0`` during a run never deletes a
body in flight. A cleaner that got in between creation and locking is seen (the file
has no link left) and the sink starts again under a new name, as ``staging.py`` does.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import BinaryIO

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

from .. import _steps
from ..digest import digest_from_hex, new_hasher
from ..errors import BodyTooLarge, StorageError
from ..models import Descriptor
from ..storage import LocalBlobStore

__all__ = ["BUDGET", "SMALL", "BodySink", "MemoryBudget", "Spool"]

#: The largest body kept in memory until published.
SMALL = 64 << 10
#: The most bytes of bodies one run keeps in memory at once (then they go to files).
BUDGET = 64 << 20


class MemoryBudget:
    """The bytes of unpublished bodies a run may keep in memory."""

    def __init__(self, limit: int = BUDGET) -> None:
        self.left = limit

    def take(self, size: int) -> bool:
        """Reserve ``size`` bytes; False (nothing reserved) when they are not left."""
        if size > self.left:
            return False
        self.left -= size
        return True

    def give(self, size: int) -> None:
        """Return ``size`` bytes reserved before."""
        self.left += size


def _locked_temporary(store: LocalBlobStore) -> tuple[Path, BinaryIO, int]:
    """Create a temporary under ``<store>/incoming/`` holding a shared lock on it (see
    module doc): its path, its file open for writing, and the locked read descriptor."""
    while True:
        tmp = store.upkeep.incoming_path()
        try:
            fh = open(tmp, "xb")  # noqa: SIM115 - closed by its owner
        except OSError as exc:
            raise StorageError(f"{tmp}: cannot write a response body: {exc.strerror}") from exc
        _steps.reached("incoming:created")
        try:
            # Held until the temporary is published or discarded: gc sees it is live.
            lock = os.open(tmp, os.O_RDONLY)
        except OSError:
            fh.close()
            continue  # removed before we could hold it: take a new name
        if fcntl is not None:
            fcntl.flock(lock, fcntl.LOCK_SH)
        if os.fstat(lock).st_nlink == 0:
            fh.close()
            os.close(lock)
            continue  # a cleaner removed it before we held it: take a new name
        return tmp, fh, lock


def _read_at(fd: int, offset: int, size: int) -> bytes:
    """``size`` bytes at ``offset`` of ``fd`` (fewer at its end)."""
    if hasattr(os, "pread"):
        return os.pread(fd, size, offset)
    os.lseek(fd, offset, os.SEEK_SET)  # pragma: no cover - Windows
    return os.read(fd, size)  # pragma: no cover


def _remove_temporary(fh: BinaryIO, tmp: Path | None, lock: int) -> None:
    """Close a locked temporary, unlink it, then release its lock: after the unlink, so
    gc never sees it present and unlocked."""
    with contextlib.suppress(OSError):
        fh.close()
    if tmp is not None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
    if lock >= 0:
        os.close(lock)


class Spool:
    """One run's shared temporary for the small bodies that arrive once its memory
    budget is spent: their chunks are appended as they arrive (interleaved, each body
    keeping its ``(offset, length)`` segments) to one locked incoming temporary created
    on first use, so a long run of small responses creates one file, not one per
    response, and keeps no more than its budget in memory. A body is read back by its
    segments when it is published (and hashed again by the store: what is stored is what
    was hashed as it arrived). :meth:`close` removes the file."""

    def __init__(self, store: LocalBlobStore) -> None:
        self.store = store
        self.size = 0
        self.tmp: Path | None = None
        self._fh: BinaryIO | None = None
        self._lock = -1

    def append(self, chunk: bytes | memoryview) -> int:
        """Append ``chunk``; return its offset."""
        if self._fh is None:
            self.tmp, self._fh, self._lock = _locked_temporary(self.store)
        offset = self.size
        self._fh.write(chunk)
        self.size += len(chunk)
        return offset

    def read(self, segments: list[tuple[int, int]]) -> bytes:
        """The bytes of ``segments`` (offset, length), in order."""
        if self._fh is None:
            return b""
        self._fh.flush()
        data = b"".join(_read_at(self._lock, offset, n) for offset, n in segments)
        if len(data) != sum(n for _, n in segments):
            raise StorageError(f"{self.tmp}: the spooled bodies were cut short")
        return data

    def close(self) -> None:
        """Remove the file (every body in it published or discarded)."""
        if self._fh is None:
            return
        _remove_temporary(self._fh, self.tmp, self._lock)
        self._fh, self.tmp, self._lock, self.size = None, None, -1, 0


class BodySink:
    """One body on its way into a local store: ``write`` chunks, then ``finish``."""

    def __init__(
        self,
        store: LocalBlobStore,
        limit: int | None = None,
        budget: MemoryBudget | None = None,
        spool: Spool | None = None,
    ) -> None:
        self.store = store
        self.limit = limit
        self._hasher = new_hasher()
        self.size = 0
        self.digest: str | None = None
        self.tmp: Path | None = None
        self._lock = -1
        self._budget = budget
        self._held = 0  # bytes reserved in the budget: those kept in memory
        self._memory: list[bytes | memoryview] | None = None
        self._spool = spool
        self._segments: list[tuple[int, int]] | None = None  # in the spool
        if budget is not None and budget.left > 0:
            self._memory = []
        elif spool is not None:
            self._segments = []
        else:
            self._open()

    def _open(self) -> None:
        """Create the locked temporary (see module doc)."""
        self.tmp, self._fh, self._lock = _locked_temporary(self.store)

    def _release(self) -> None:
        if self._budget is not None and self._held:
            self._budget.give(self._held)
        self._held = 0

    def write(self, chunk: bytes | memoryview) -> None:
        """Hash and write one chunk (a view must not change until the body is published:
        a small one is kept as it is); :class:`BodyTooLarge` (nothing written) past the
        limit."""
        if self.limit is not None and self.size + len(chunk) > self.limit:
            raise BodyTooLarge(self.limit)
        self._hasher.update(chunk)
        small = self.size + len(chunk) <= SMALL
        memory = self._memory
        if memory is not None:
            budget = self._budget
            if small and budget is not None and budget.take(len(chunk)):
                self._held += len(chunk)
                memory.append(chunk)
                self.size += len(chunk)
                return
            spool = self._spool
            if small and spool is not None:  # the budget is spent: to the run's spool
                self._segments = [(spool.append(part), len(part)) for part in memory]
            else:  # grew past the in-memory bound: to a temporary file, as a large body
                self._open()
                for part in memory:
                    self._fh.write(part)
            self._memory = None
            self._release()
        segments = self._segments
        if segments is not None:
            assert self._spool is not None
            if small:
                segments.append((self._spool.append(chunk), len(chunk)))
                self.size += len(chunk)
                return
            # Grew past the small bound: to a temporary file of its own.
            self._open()
            self._fh.write(self._spool.read(segments))
            self._segments = None
        self._fh.write(chunk)
        self.size += len(chunk)

    def finish(self) -> str:
        """Close the temporary (complete body); return its digest. Not yet published."""
        if self._memory is None and self._segments is None:
            self._fh.close()
        self.digest = digest_from_hex(self._hasher.hexdigest())
        return self.digest

    def content(self) -> bytes | None:
        """A finished small body's bytes (held in memory or the spool: exactly the bytes
        hashed to :attr:`digest`, which ``publish`` hashes again), so it is not read back
        from the store; None for a body in a file of its own."""
        if self.digest is None:
            return None
        if self._memory is not None:
            return b"".join(self._memory)
        if self._segments is not None and self._spool is not None:
            return self._spool.read(self._segments)
        return None

    def head(self, size: int) -> bytes:
        """The first ``size`` bytes written so far (to quote an error body)."""
        if self._memory is not None:
            return b"".join(self._memory)[:size]
        if self._segments is not None and self._spool is not None:
            return self._spool.read(self._segments)[:size]
        if self.tmp is None:
            return b""
        try:
            with open(self.tmp, "rb") as fh:
                return fh.read(size)
        except OSError:
            return b""

    def discard(self) -> None:
        """Drop the temporary (a body that was not complete, or not wanted)."""
        if self._memory is not None:
            self._memory = None
            self._release()
            return
        if self._segments is not None:
            self._segments = None  # its bytes go with the spool
            return
        if self.tmp is None and self._lock < 0:
            return
        _remove_temporary(self._fh, self.tmp, self._lock)
        self.tmp, self._lock = None, -1

    def publish(self, media_type: str) -> Descriptor:
        """Put the finished body into the store under its digest; return its descriptor."""
        if self.digest is not None and (self._memory is not None or self._segments is not None):
            digest = self.digest
            if self._memory is not None:
                data = b"".join(self._memory)
            else:
                assert self._spool is not None and self._segments is not None
                data = self._spool.read(self._segments)
            try:
                stored = self.store.put(data, media_type)
            finally:
                self.discard()
            if stored.digest != digest:  # the same bytes hashed twice (or a spool changed)
                raise StorageError(f"a response body hashed to {digest}, stored as {stored.digest}")
            return Descriptor(digest=digest, size=self.size, media_type=media_type)
        if self.digest is None or self.tmp is None:
            raise StorageError("a response body was published before it was finished")
        digest, tmp = self.digest, self.tmp
        try:
            self.store.upkeep.adopt(tmp, digest, self.size)
        finally:
            self.discard()  # gone when adopted; removed when the store refused it
        return Descriptor(digest=digest, size=self.size, media_type=media_type)
