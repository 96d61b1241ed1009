"""Blob stores: an ABC, local, memory, fsspec, OCI registry and read-through implementations,
``open_store``, the capability protocols (``Supports*``), and what moves blobs between
stores: ``transfer`` (verified, atomic, parallel push / pull / fetch) and ``leases``.
Every public read is verified; raw reads are private to this package. A store's
public methods are what a user needs; what transfers and gc use is on its ``upkeep``."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from ._base import (
    DEFAULT_MEDIA_TYPE,
    BlobInfo,
    BlobStore,
    OciDescriptor,
    SupportsArtifacts,
    SupportsBatchRead,
    SupportsIncoming,
    SupportsKeepAlive,
    SupportsLeases,
    SupportsLocalPaths,
    SupportsQuarantine,
    SupportsResults,
    Upkeep,
    VerifyingReader,
    blob_key,
)
from ._local import LocalBlobStore, LocalUpkeep
from ._memory import MemoryBlobStore, MemoryUpkeep
from ._readthrough import ReadThroughStore

if TYPE_CHECKING:
    from ._fsspec import FsspecBlobStore, FsspecUpkeep, RetryPolicy
    from ._oci import OciBlobStore, OciUpkeep, parse_oci_url


def __getattr__(name: str) -> Any:
    # fsspec (and asyncio with it) is imported only when a non-local store is used,
    # so `evstore verify` on the local store starts fast.
    if name in ("FsspecBlobStore", "FsspecUpkeep", "RetryPolicy"):
        from . import _fsspec

        return getattr(_fsspec, name)
    if name in ("OciBlobStore", "OciUpkeep", "parse_oci_url"):
        from . import _oci  # requests, only for registries

        return getattr(_oci, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "DEFAULT_MEDIA_TYPE",
    "BlobInfo",
    "BlobStore",
    "FsspecBlobStore",
    "FsspecUpkeep",
    "LocalBlobStore",
    "LocalUpkeep",
    "MemoryBlobStore",
    "MemoryUpkeep",
    "OciBlobStore",
    "OciDescriptor",
    "OciUpkeep",
    "ReadThroughStore",
    "RetryPolicy",
    "SupportsArtifacts",
    "SupportsBatchRead",
    "SupportsIncoming",
    "SupportsKeepAlive",
    "SupportsLeases",
    "SupportsLocalPaths",
    "SupportsQuarantine",
    "SupportsResults",
    "Upkeep",
    "VerifyingReader",
    "blob_key",
    "open_store",
    "parse_oci_url",
]


def open_store(
    url: str | os.PathLike[str],
    *,
    read_only: bool = False,
    storage_options: dict[str, Any] | None = None,
) -> BlobStore:
    """Open a store by path or URL: local paths and ``file://`` bypass fsspec;
    ``oci://`` and ``oci+http://`` are OCI registries."""
    text = os.fspath(url)
    if "://" not in text:
        return LocalBlobStore(text, read_only=read_only)
    if text.startswith("file://"):
        return LocalBlobStore(text[len("file://") :], read_only=read_only)
    if text.startswith(("oci://", "oci+http://", "oci+https://")):
        from ._oci import OciBlobStore

        return OciBlobStore(text, read_only=read_only, options=storage_options)
    from ._fsspec import FsspecBlobStore

    return FsspecBlobStore(text, read_only=read_only, storage_options=storage_options)
