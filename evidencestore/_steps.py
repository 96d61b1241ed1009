"""Named interleaving points, so concurrency tests can pause each side at each step.

Production code calls :func:`reached` at the steps whose order matters (gc's mark,
quarantine and re-read; a push's lease and presence check; a put's check). With no
observer installed the call is one global lookup; tests install one through
:func:`evidencestore.testing.interleave.Interleaving`, which blocks the calling thread
at a named point until the test releases it. No timing is involved.
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["reached", "set_observer"]

_observer: Callable[[str], None] | None = None


def reached(point: str) -> None:
    """Tell the observer (if any) that the current thread reached ``point``."""
    if _observer is not None:
        _observer(point)


def set_observer(observer: Callable[[str], None] | None) -> Callable[[str], None] | None:
    """Install ``observer`` (None removes it); return the previous one."""
    global _observer
    previous, _observer = _observer, observer
    return previous
