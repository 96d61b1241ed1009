"""The gc grace period: blobs and leases younger than this are never deleted.

Defined here, in a module that imports nothing, so that both :mod:`evidencestore.gc`
and the CLI's argument parser (which must start without loading gc) use the one value.
See :mod:`evidencestore.gc` for what the grace period must cover.
"""

from __future__ import annotations

__all__ = ["DEFAULT_GRACE"]

DEFAULT_GRACE = 3600.0
"""Seconds: the default ``grace`` of :func:`evidencestore.gc.collect_garbage` and ``evstore gc``."""
