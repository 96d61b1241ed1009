"""The perceptual scoring hook: what a frame scorer (e.g. LPIPS) must provide.

A comparison of compatible, unequal video streams converts each frame pair to RGB24,
passes them to every scorer in batches of ``batch_size`` and records per-frame scores, a
max/mean summary, the threshold check (``Thresholds.perceptual_max[name]``) and the
scorer's ``provenance()``. A threshold met never turns INCONCLUSIVE into PASS.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    import numpy

__all__ = ["FrameScorer"]


@runtime_checkable
class FrameScorer(Protocol):
    """A perceptual frame-pair scorer."""

    name: str
    """Short name, e.g. ``"lpips"``; keys thresholds and recorded scores."""
    batch_size: int
    """Frames per :meth:`score` call the scorer prefers."""

    def score(self, reference: numpy.ndarray, candidate: numpy.ndarray) -> list[float]:
        """Score ``N`` frame pairs given as uint8 RGB arrays of shape ``(N, H, W, 3)``;
        return ``N`` scores (lower is more similar, 0.0 for identical frames)."""
        ...

    def provenance(self) -> dict[str, str]:
        """Weight digests, scorer-state digest and library versions, to be recorded."""
        ...
