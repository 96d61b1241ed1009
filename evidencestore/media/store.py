"""Storing comparison records and check reports as blobs, ready to add to a bundle."""

from __future__ import annotations

from .._canonical import canonical
from ..models import Descriptor, Entry
from ..storage import BlobStore
from .records import CheckReport, ComparisonRecord

__all__ = ["MEDIA_TYPES", "record_bytes", "record_entry", "store_record"]

MEDIA_TYPES = {
    ComparisonRecord: "application/vnd.evidencestore.media-comparison+json",
    CheckReport: "application/vnd.evidencestore.media-check+json",
}


def record_bytes(record: ComparisonRecord | CheckReport) -> bytes:
    """Return the record's stored bytes: canonical JSON (sorted keys, compact).

    Records may hold floats (metrics); they are evidence blobs, not hashed structures.
    """
    return canonical(record)


def store_record(record: ComparisonRecord | CheckReport, store: BlobStore) -> Descriptor:
    """Put the record into ``store``; return its descriptor (with the record's verdict)."""
    desc = store.put(record_bytes(record), MEDIA_TYPES[type(record)])
    return Descriptor(
        digest=desc.digest,
        size=desc.size,
        media_type=desc.media_type,
        annotations={"org.evidencestore.media.verdict": record.verdict},
    )


def record_entry(record: ComparisonRecord | CheckReport, path: str, store: BlobStore) -> Entry:
    """Store the record and return a bundle entry (location ``store``) at ``path``."""
    return Entry(path=path, descriptor=store_record(record, store), location="store", role="media")
