"""The blob-store conformance suite (:mod:`evidencestore.storage.conformance`) under its
public name; importing it imports pytest."""

from ..storage.conformance import BlobStoreSuite

__all__ = ["BlobStoreSuite"]
