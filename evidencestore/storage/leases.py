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
    "LEASE_DIR",
    "LEASE_RENEWAL",
    "Lease",
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
