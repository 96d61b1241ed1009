"""Progress of long operations: the library reports counts, one terminal line shows them.

A long operation (a run's requests, an import's files, a campaign's computations)
takes an ``Observer`` and calls it with a :class:`Tick` as it goes: what is done of the
total, what failed so far, what was started (requests sent) when that differs from
what is done. It never writes anywhere itself. The CLI owns the drawing: a
:class:`Line` on standard error, only when that is a terminal and ``-q`` was not given,
redrawn in place (``\\r``) at most ten times a second on average (a token bucket: a few
ticks close together are all drawn, so a request sent just after another finished
shows while it runs, however long; thousands a second draw ten), always at the last
tick, and cleared when the operation ends, so nothing of it reaches standard output or
a log. No thread draws it (a live thread would stop the work that forks workers from
forking). (Transfers draw byte-level lines of their own: ``storage/transfer.py``.)

Ticks may come from several threads: the line draws under a lock, whole lines only, so
no interleaving tears a line. (Every operation here ticks from one thread, its own or
its event loop's, so the counts drawn only grow.)
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import IO

import msgspec

__all__ = ["Line", "Observer", "Tick"]


class Tick(msgspec.Struct, frozen=True):  # not a dataclass: `verify` never loads inspect
    """Where a long operation stands: ``done`` of ``total`` ``unit`` (``total`` None when
    not known), ``failed`` of those done, ``started`` (sent, begun) when it differs from
    ``done``, and ``what`` (the item last done, or the phase); ``rate`` False when a
    rate of ``unit`` a second means nothing (seconds waited)."""

    label: str
    done: int
    total: int | None
    unit: str
    failed: int = 0
    started: int | None = None
    what: str = ""
    rate: bool = True


Observer = Callable[[Tick], None]


def describe(tick: Tick, seconds: float) -> str:
    """The line's text for ``tick``, ``seconds`` after the first one."""
    total = "" if tick.total is None else f"/{tick.total}"
    parts = [f"{tick.label}: {tick.done}{total} {tick.unit}"]
    if tick.started is not None:
        parts.append(f"{tick.started} sent")
    if tick.failed:
        parts.append(f"{tick.failed} failed")
    if tick.rate and seconds > 0 and tick.done:
        parts.append(f"{tick.done / seconds:.1f}/s")
    text = ", ".join(parts)
    return f"{text} ({tick.what})" if tick.what else text


class Line:
    """One progress line on ``stream``, redrawn in place; draws nothing unless the
    stream is a terminal. Call it with each :class:`Tick`; :meth:`close` clears it."""

    #: Redraws a second, on average, and how many may come at once.
    RATE = 10.0
    BURST = 4.0

    def __init__(self, stream: IO[str] | None, clock: Callable[[], float] = time.monotonic) -> None:
        self._stream = stream
        self.enabled = stream is not None and bool(getattr(stream, "isatty", lambda: False)())
        self._clock = clock
        self._lock = threading.Lock()
        self._first: float | None = None
        self._last = 0.0
        self._tokens = self.BURST
        self.drawn = 0  # lines written (for tests: counts, never timing)

    def __call__(self, tick: Tick) -> None:
        if not self.enabled:
            return
        with self._lock:
            now = self._clock()
            if self._first is None:
                self._first = self._last = now
            self._tokens = min(self.BURST, self._tokens + (now - self._last) * self.RATE)
            self._last = now
            if self._tokens < 1 and tick.done != tick.total:
                return  # the bucket is empty; the last tick is drawn whatever it holds
            self._tokens = max(0.0, self._tokens - 1)
            text = describe(tick, now - self._first)
            assert self._stream is not None
            self._stream.write(f"\r{text}\x1b[K")  # the rest of a longer line erased
            self._stream.flush()
            self.drawn += 1

    def close(self) -> None:
        """Clear the line (when one was drawn)."""
        with self._lock:
            if self.enabled and self.drawn and self._stream is not None:
                self._stream.write("\r\x1b[K")
                self._stream.flush()
            self.enabled = False

    def __enter__(self) -> Line:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
