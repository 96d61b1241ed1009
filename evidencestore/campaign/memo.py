"""Computed records keyed by the digests of their inputs: computed once, then reused.

A memo key is the BLAKE3 digest of the canonical bytes of ``{kind, inputs, tool}``:
``inputs`` holds only digests and declared values (run bundle digests, output digests,
the expectations' canonical digest, the protocol digest), ``tool`` the versions that
could change the answer (evidencestore, PyAV with its FFmpeg; read from package
metadata, so a hit imports neither). The record is stored once in the blob store by
its own digest, together with its key (``{"key", "record"}``); the key names it in a
small index file beside the blobs (``<store>/memo/<2 hex>/<64 hex>``: the stored
digest and size). A hit re-reads the record verified by digest and checks that it was
stored under this very key; an index entry whose record is gone, altered, kept under
another key or no longer decodes is a miss, and the record is computed again. A hit
writes nothing. Nothing here decides a verdict: it only avoids computing the same
answer twice.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any, Generic, TypeVar

import msgspec

from .._atomic import write_replace
from .._canonical import canonical, decode
from ..digest import digest_hex, hash_bytes
from ..errors import EvidenceStoreError
from ..storage import BlobStore

__all__ = [
    "MEMO_DIR",
    "MEMO_FORMAT",
    "Memo",
    "kept_bytes",
    "kept_record",
    "memo_key",
    "open_memo",
    "tool_version",
]

MEMO_DIR = "memo"  # beside the local store's blobs

T = TypeVar("T")

#: Bumped whenever a memoised computation changes its answer for the same inputs (or
#: the stored form changes: 2 keeps each record with its key; 3: nothing compared is
#: UNAVAILABLE, a harness's INVALID run is never judged).
MEMO_FORMAT = 3
_MEDIA_TYPE = "application/vnd.evidencestore.campaign-memo+json"


class _Kept(msgspec.Struct, Generic[T], frozen=True, forbid_unknown_fields=True):
    """A memoised record as stored: with the key it answers."""

    key: str
    record: T


@functools.cache
def tool_version() -> dict[str, str]:
    """The versions a memoised record depends on, without importing the tools: each
    from its installed distribution's ``*.dist-info`` name beside the package."""
    from .._version import __version__

    out = {"evidencestore": __version__, "memo": str(MEMO_FORMAT)}
    for dist in ("av", "numpy", "scipy"):
        out[dist] = _installed_version(dist)
    return out


def _installed_version(dist: str) -> str:
    import importlib.util

    try:
        spec = importlib.util.find_spec(dist)
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.submodule_search_locations:
        return "-"
    site = Path(next(iter(spec.submodule_search_locations))).parent
    found = sorted(site.glob(f"{dist}-*.dist-info"))
    if len(found) != 1:
        from importlib import metadata

        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            return "-"
    return found[0].name[len(dist) + 1 : -len(".dist-info")]


def kept_bytes(key: str, record: Any) -> bytes:
    """The stored form of ``record`` computed under ``key``: canonical ``{key, record}``."""
    return canonical(_Kept(key=key, record=record))


def kept_record(data: bytes, key: str, type_: type[T]) -> T | None:
    """The record in stored bytes ``data`` when they decode as ``type_`` and were stored
    under ``key`` (its binding to its inputs); None otherwise."""
    try:
        kept = decode(data, _Kept[type_])  # type: ignore[valid-type]
    except (ValueError, msgspec.DecodeError):
        return None
    return kept.record if kept.key == key else None


def memo_key(kind: str, inputs: Any) -> str:
    """The key of a computation: digest of its kind, inputs and the tool version."""
    data = canonical({"kind": kind, "inputs": inputs, "tool": tool_version()})
    return hash_bytes(data).digest


class Memo:
    """Records by key, stored in ``store``, indexed under ``index`` (a directory)."""

    def __init__(self, store: BlobStore, index: str | Path) -> None:
        self.store = store
        self.index = Path(index)
        self.hits = 0
        self.misses = 0

    def _path(self, key: str) -> Path:
        hexd = digest_hex(key)
        return self.index / hexd[:2] / hexd

    def get(self, key: str, type_: type[T]) -> T | None:
        """The record stored under ``key``, verified and decoded; None on a miss."""
        try:
            digest, size = self._path(key).read_text("ascii").split()
            kind = _Kept[type_]  # type: ignore[valid-type]
            kept = decode(self.store.get(digest, int(size)), kind)
        except (OSError, ValueError, EvidenceStoreError, msgspec.DecodeError):
            self.misses += 1
            return None
        if kept.key != key:  # an index entry naming another computation's record
            self.misses += 1
            return None
        self.hits += 1
        return kept.record

    def stored(self, key: str) -> bytes | None:
        """The stored bytes indexed under ``key`` (verified by digest), or None."""
        try:
            digest, size = self._path(key).read_text("ascii").split()
            return self.store.get(digest, int(size))
        except (OSError, ValueError, EvidenceStoreError):
            return None

    def has(self, key: str) -> bool:
        """Whether an index entry names ``key`` (its record is not read)."""
        return self._path(key).is_file()

    def put(self, key: str, record: Any) -> str:
        """Store ``record`` and index it under ``key``; return its digest. A store that
        cannot be written leaves the memo empty (the record is recomputed next time)."""
        return self.put_bytes(key, kept_bytes(key, record))

    def put_bytes(self, key: str, data: bytes) -> str:
        """Store ``data`` (``kept_bytes``' form, already checked by the caller) and index
        it under ``key``; return its digest."""
        try:
            desc = self.store.put(data, _MEDIA_TYPE)
            path = self._path(key)
            path.parent.mkdir(parents=True, exist_ok=True)
            write_replace(path, f"{desc.digest} {desc.size}\n".encode("ascii"))
        except (OSError, EvidenceStoreError):
            return hash_bytes(data).digest
        return desc.digest


def open_memo(local: BlobStore) -> Memo:
    """The memo of a repository's local store (``<store>/memo``)."""
    return Memo(local, Path(local.location) / MEMO_DIR)
