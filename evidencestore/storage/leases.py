"""Leases: one small object per writer naming the digests it relies on.

A writer that may rely on blobs already present (a push relying on the remote's
copies) writes ``<root>/leases/<UTC time>-<16 hex>.json`` *before* it asks which
blobs are present. ``evstore gc`` keeps every digest named by a lease younger than
its grace period and reads the leases again after it has quarantined its
candidates, so a blob a writer saw present is never deleted under it (the argument
is in :mod:`evidencestore.gc`). A long push renews its lease; leases are never
removed by their writer, only by gc once expired, because the registrations that
reference the blobs may become visible to gc only later (a commit, a merge).
"""

from __future__ import annotations

import calendar
import json
import os
import re
import time
from collections.abc import Iterable, Iterator
from typing import NamedTuple

from ..digest import parse_digest
from ..errors import StorageError
from ._base import LEASE_DIR, BlobStore, SupportsLeases

__all__ = [
    "ACTIVE_PREFIX",
    "LEASE_DIR",
    "LEASE_RENEWAL",
    "ActiveLease",
    "Lease",
    "active_floor",
    "iter_leases",
    "read_lease",
    "remove_lease",
    "write_lease",
]

# A writer still running after this many seconds writes its lease again; gc's grace
# period must be longer (gc refuses a shorter one when it deletes).
LEASE_RENEWAL = 300.0

_LEASE_NAME = re.compile(r"^(\d{8}T\d{6}Z)-[0-9a-f]{16}\.json$")


class Lease(NamedTuple):
    """A lease: where it is, when it was written (from its name and, when the
    backend says, its modification time)."""

    key: str
    created: float | None
    mtime: float | None

    @property
    def newest(self) -> float | None:
        """The later of the two times (the safer one to judge age by)."""
        times = [t for t in (self.created, self.mtime) if t is not None]
        return max(times) if times else None


def write_lease(store: BlobStore, digests: Iterable[str], now: float | None = None) -> str:
    """Write one lease listing ``digests`` (kept by gc while younger than its grace
    period). Returns the lease's key; "" on a store that cannot hold leases (nothing
    deletes there either)."""
    upkeep = store.upkeep
    if not (isinstance(upkeep, SupportsLeases) and upkeep.supports_leases):
        return ""
    when = time.time() if now is None else now
    name = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(when)) + f"-{os.urandom(8).hex()}.json"
    body = json.dumps({"created": when, "digests": sorted(set(digests))}).encode()
    return upkeep.write_lease(name, body)


def _lease_created(name: str) -> float | None:
    match = _LEASE_NAME.match(name)
    if not match:
        return None
    try:
        return calendar.timegm(time.strptime(match.group(1), "%Y%m%dT%H%M%SZ"))
    except ValueError:
        return None


def iter_leases(store: BlobStore) -> Iterator[Lease]:
    """Yield the leases on ``store`` (none on a store that cannot have them)."""
    upkeep = store.upkeep
    if not isinstance(upkeep, SupportsLeases):
        return
    for key, mtime in upkeep.iter_leases():
        name = key.rsplit("/", 1)[-1]
        if _LEASE_NAME.match(name):
            yield Lease(key, _lease_created(name), mtime)


def read_lease(store: BlobStore, key: str) -> list[str]:
    """Return the digests a lease lists; a :class:`StorageError` when it is unreadable."""
    upkeep = store.upkeep
    if not isinstance(upkeep, SupportsLeases):
        return []
    try:
        data = json.loads(upkeep.read_lease(key))
        digests = data["digests"]
        if not isinstance(digests, list):
            raise TypeError("digests is not a list")
        return [parse_digest(d) for d in digests]
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise StorageError(f"{key}: cannot read lease: {exc.strerror or exc}") from exc
    except (ValueError, KeyError, TypeError) as exc:
        raise StorageError(f"{key}: unreadable lease: {exc}") from exc


def remove_lease(store: BlobStore, key: str) -> None:
    """Remove a lease (absent ones are ignored)."""
    upkeep = store.upkeep
    if isinstance(upkeep, SupportsLeases):
        upkeep.remove_lease(key)


# -- leases held by a live writer ------------------------------------------------------
ACTIVE_PREFIX = "active-"
_MARGIN = 2.0  # seconds: filesystem timestamps are coarser than the clock


class ActiveLease:
    """A lease held for the life of a writer (a run), whatever gc's grace period.

    ``<store>/leases/active-<16 hex>.lease`` is written when the writer starts and
    locked (``flock``, exclusive) for as long as it runs. While it is locked, gc keeps
    every blob whose modification time is at or after the lease's own (less a margin),
    ``--grace 0`` included: every blob the writer stores is written after the lease, and
    every blob it finds present and relies on has its modification time refreshed
    (``keep_alive``) before the check it relies on (``_present_and_intact``), so either
    the refresh landed before gc quarantined the blob (the time moves with it, and gc's
    re-read after quarantine sees the lease and restores it) or the check found the
    blob gone and the writer stored it again. gc reads leases before references, and the
    writer releases its lease only after its registration is written, so a blob is
    always named by one or the other. A lease whose lock is free belongs to a writer
    that ended (or died): gc removes it, holding its lock, once older than the grace
    period; a writer that finds its new lease removed under it before it locked it
    writes another. Only stores on a local filesystem hold such leases (a run records
    into one); elsewhere this is inert."""

    def __init__(self, store: BlobStore) -> None:
        self.path: str | None = None
        self._fd = -1
        upkeep = store.upkeep
        if os.name != "posix" or not (
            isinstance(upkeep, SupportsLeases) and upkeep.supports_leases
        ):
            return
        import fcntl

        for _ in range(100):
            name = f"{ACTIVE_PREFIX}{os.urandom(8).hex()}.lease"
            key = upkeep.write_lease(name, json.dumps({"pid": os.getpid()}).encode())
            if not os.path.isabs(key):
                return  # not a file: a backend this cannot lock
            try:
                fd = os.open(key, os.O_RDONLY)
            except FileNotFoundError:
                continue  # gc removed it before it was opened
            fcntl.flock(fd, fcntl.LOCK_EX)
            if os.fstat(fd).st_nlink == 0:  # removed before it was locked
                os.close(fd)
                continue
            self.path, self._fd = key, fd
            return
        raise StorageError("cannot hold a lease for the run: its file kept disappearing")

    def release(self) -> None:
        """End the lease: remove its file, then release the lock (gc never sees it present
        and unlocked meanwhile)."""
        if self._fd < 0 or self.path is None:
            return
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass
        finally:
            os.close(self._fd)
            self._fd, self.path = -1, None

    def __enter__(self) -> ActiveLease:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def active_floor(store: BlobStore, grace: float, now: float) -> float | None:
    """The earliest start (modification time, less a margin) of the leases live writers
    hold on ``store``: gc keeps every blob at or after it; None when none is held. Leases
    of ended writers older than ``grace`` (every one when it is 0) are removed here,
    each under its own lock."""
    upkeep = store.upkeep
    if os.name != "posix" or not isinstance(upkeep, SupportsLeases):
        return None
    import fcntl

    floor: float | None = None
    for key, _mtime in upkeep.iter_leases():
        if not key.rsplit("/", 1)[-1].startswith(ACTIVE_PREFIX) or not os.path.isabs(key):
            continue
        try:
            fd = os.open(key, os.O_RDONLY)
        except FileNotFoundError:
            continue
        try:
            st = os.fstat(fd)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:  # held: a live writer
                start = st.st_mtime - _MARGIN
                floor = start if floor is None else min(floor, start)
                continue
            if grace == 0 or st.st_mtime < now - grace:
                upkeep.remove_lease(key)  # an ended writer's, removed under its lock
        finally:
            os.close(fd)
    return floor
