"""Work split across forked processes, for CPU-bound loops that hold the GIL.

A child runs its share and sends back bytes on a pipe, then leaves with ``os._exit``
(no cleanup of state it shares with the parent). Nothing a child does is trusted
blindly: a child that dies, or whose output is cut short, has its share done again in
the parent, so the result never depends on whether forking worked. Forking happens only
from a single-threaded process (a fork with live threads can deadlock) and never when
``EVSTORE_NO_FORK`` is set.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable, Sequence
from typing import TypeVar

T = TypeVar("T")

__all__ = ["WAIT_TICK", "Child", "can_fork", "cpu_count", "fork_map"]

_CPUS: int | None = None


def cpu_count() -> int:
    """``os.cpu_count()``, asked once per process."""
    global _CPUS
    if _CPUS is None:
        _CPUS = os.cpu_count() or 1
    return _CPUS


def _threads() -> int:
    import threading

    return threading.active_count()


def can_fork() -> bool:
    """Whether work may be forked off now."""
    return (
        hasattr(os, "fork")
        # threads are started through threading; none when it was never imported
        and (sys.modules.get("threading") is None or _threads() == 1)
        and os.environ.get("EVSTORE_NO_FORK", "") in ("", "0")
    )


class Child:
    """A forked worker running one piece of work; :meth:`result` collects it."""

    def __init__(self, work: Callable[[], bytes]) -> None:
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # child: do the work, send it, exit without cleanup
            status = 1
            try:
                os.close(r)
                view = memoryview(_len_prefixed(work()))
                while view:
                    view = view[os.write(w, view) :]
                status = 0
            finally:
                os._exit(status)
        os.close(w)
        self._r, self._pid = r, pid

    def result(self) -> bytes | None:
        """The child's bytes, or None when it failed (the caller redoes its work)."""
        with os.fdopen(self._r, "rb") as fh:
            data = fh.read()
        _, status = os.waitpid(self._pid, 0)
        return _unprefixed(data) if status == 0 else None


def fork_map(
    func: Callable[[T], bytes],
    shares: Sequence[T],
    waiting: Callable[[], None] | None = None,
) -> list[bytes | None]:
    """Run ``func`` on each share, all at once: every share but the last in a child of
    its own, the last here meanwhile (this process would only wait otherwise, and one
    fork fewer is one copy of its memory fewer). Return each share's bytes, or None for
    a share that failed (the caller redoes it). ``waiting``: called every
    :data:`WAIT_TICK` seconds while this process waits for its children (a progress
    line that reads what they have done)."""
    if not shares:
        return []
    children = [Child(functools.partial(func, share)) for share in shares[:-1]]
    try:
        here: bytes | None = func(shares[-1])
    except Exception:
        here = None  # as a child that failed: the caller redoes it
    if waiting is not None:
        _wait(children, waiting)
    return [*(child.result() for child in children), here]


#: How often ``fork_map``'s ``waiting`` is called while children work (seconds).
WAIT_TICK = 0.1


def _wait(children: Sequence[Child], waiting: Callable[[], None]) -> None:
    """Call ``waiting`` until every child has started answering (or died: its pipe then
    reads as closed)."""
    import select

    pending = [child._r for child in children]
    while pending:
        ready, _, _ = select.select(pending, [], [], WAIT_TICK)
        pending = [fd for fd in pending if fd not in ready]
        waiting()


def _len_prefixed(data: bytes) -> bytes:
    """``data`` with its length in front, so a cut-short transfer is detected."""
    return len(data).to_bytes(8, "little") + data


def _unprefixed(data: bytes) -> bytes | None:
    if len(data) < 8 or int.from_bytes(data[:8], "little") != len(data) - 8:
        return None
    return data[8:]
