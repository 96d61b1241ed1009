"""Remotes from ``evstore.toml`` and the read-through store validators use."""

from __future__ import annotations

import os

from .config import find_root, load_config
from .storage import BlobStore, LocalBlobStore

__all__ = ["local_store", "repository_store"]


def local_store(root: str | os.PathLike[str] | None = None) -> LocalBlobStore:
    """Return the local blob store of the evidence repository at (or above) ``root``."""
    base = find_root(root)
    config = load_config(base)
    path = os.path.join(base, os.path.expanduser(config.store.path))
    return LocalBlobStore(path)


def repository_store(root: str | os.PathLike[str] | None = None) -> BlobStore:
    """Return the store that serves digests for a repository: local, then remotes."""
    return local_store(root)
