"""evidencestore: a content-addressed evidence store for ML campaigns."""

from __future__ import annotations

__version__ = "0.1.0"
