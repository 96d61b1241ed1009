"""Push leases: one small object per push naming the digests it relies on.

A push writes ``<root>/leases/<UTC time>-<16 hex>.json`` before it asks which blobs are
missing; ``evstore gc`` keeps every digest named by a lease younger than its grace
period, so a blob a push found already present is not deleted under it.
"""

from __future__ import annotations

import calendar
import contextlib
import json
import os
import re
import time
from collections.abc import Iterable, Iterator
from typing import NamedTuple

from .digest import parse_digest
from .errors import StorageError
from .storage import BlobStore, LocalBlobStore
from .storage._fsspec import LEASE_DIR, FsspecBlobStore

__all__ = ["LEASE_DIR", "Lease", "iter_leases", "read_lease", "remove_lease", "write_lease"]

_LEASE_NAME = re.compile(r"^(\d{8}T\d{6}Z)-[0-9a-f]{16}\.json$")


class Lease(NamedTuple):
    """A push's lease on a remote: where it is, when it was written (from its name and,
    when the backend says, its modification time)."""

    key: str
    created: float | None
    mtime: float | None

    @property
    def newest(self) -> float | None:
        """The later of the two times (the safer one to judge age by)."""
        times = [t for t in (self.created, self.mtime) if t is not None]
        return max(times) if times else None


def write_lease(store: BlobStore, digests: Iterable[str], now: float | None = None) -> str:
    """Write one lease object ``<root>/leases/<UTC time>-<random>.json`` listing
    ``digests``: gc keeps them while the lease is younger than its grace period.
    Returns the lease's key (or path)."""
    when = time.time() if now is None else now
    name = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(when)) + f"-{os.urandom(8).hex()}.json"
    body = json.dumps({"created": when, "digests": sorted(set(digests))}).encode()
    if isinstance(store, FsspecBlobStore):
        return store.write_lease(name, body)
    if isinstance(store, LocalBlobStore):
        folder = store.root / LEASE_DIR
        final = folder / name
        tmp = folder / f".tmp-{name}"
        try:
            folder.mkdir(parents=True, exist_ok=True)
            with open(tmp, "xb") as fh:
                fh.write(body)
            os.replace(tmp, final)
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise StorageError(f"{final}: cannot write the push's lease: {exc.strerror}") from exc
        return str(final)
    return ""


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
    if isinstance(store, FsspecBlobStore):
        for key, mtime in store.iter_leases():
            name = key.rsplit("/", 1)[-1]
            if _LEASE_NAME.match(name):
                yield Lease(key, _lease_created(name), mtime)
    elif isinstance(store, LocalBlobStore):
        folder = store.root / LEASE_DIR
        try:
            names = sorted(os.listdir(folder))
        except (FileNotFoundError, NotADirectoryError):
            return
        except OSError as exc:
            raise StorageError(f"{folder}: cannot list leases: {exc.strerror}") from exc
        for name in names:
            if not _LEASE_NAME.match(name):
                continue
            try:
                mtime = os.stat(folder / name).st_mtime
            except FileNotFoundError:
                continue
            yield Lease(str(folder / name), _lease_created(name), mtime)


def read_lease(store: BlobStore, key: str) -> list[str]:
    """Return the digests a lease lists; a :class:`StorageError` when it is unreadable."""
    try:
        if isinstance(store, FsspecBlobStore):
            raw = store.read_lease(key)
        else:
            with open(key, "rb") as fh:
                raw = fh.read()
        data = json.loads(raw)
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
    if isinstance(store, FsspecBlobStore):
        store.remove_lease(key)
        return
    try:
        os.unlink(key)
    except FileNotFoundError:
        pass
    except OSError as exc:
        raise StorageError(f"{key}: cannot remove lease: {exc.strerror}") from exc
