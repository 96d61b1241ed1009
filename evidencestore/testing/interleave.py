"""Deterministic interleavings of concurrent operations, for tests.

Each actor runs in a thread of its own. Production code announces its ordering-
relevant steps through :func:`evidencestore._steps.reached`; an :class:`Interleaving`
blocks an actor at a named step until the test lets it go on, so a test states the
exact order ("gc quarantines, then the push checks, then gc re-reads") instead of
hoping a sleep produces it::

    with Interleaving() as il:
        il.start("gc", lambda: collect_garbage(root, delete=True), pause_at="gc:quarantined")
        il.wait_paused("gc")
        il.start("push", lambda: push(root))
        il.join("push")
        il.resume("gc")
        il.join("gc")
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from .. import _steps
from ..errors import InterleavingError

__all__ = ["Interleaving", "InterleavingError"]

_TIMEOUT = 60.0  # a deadlock guard only: no correct test waits anywhere near it


class _Actor:
    def __init__(self, name: str, pause_at: set[str]) -> None:
        self.name = name
        self.pause_at = pause_at
        self.paused_at: str | None = None
        self.resume = threading.Event()
        self.paused = threading.Event()
        self.done = threading.Event()
        self.result: Any = None
        self.error: BaseException | None = None
        self.points: list[str] = []
        self.thread: threading.Thread | None = None


class Interleaving:
    """Run actors in threads, pausing each at the named steps it is told to."""

    def __init__(self) -> None:
        self._actors: dict[str, _Actor] = {}
        self._by_thread: dict[int, _Actor] = {}
        self._lock = threading.Lock()
        self._previous: Callable[[str], None] | None = None

    def __enter__(self) -> Interleaving:
        self._previous = _steps.set_observer(self._observe)
        return self

    def __exit__(self, *exc: object) -> None:
        for actor in self._actors.values():
            actor.pause_at.clear()
            actor.resume.set()
        for actor in self._actors.values():
            if actor.thread is not None:
                actor.thread.join(_TIMEOUT)
        _steps.set_observer(self._previous)

    def _observe(self, point: str) -> None:
        with self._lock:
            actor = self._by_thread.get(threading.get_ident())
        if actor is None:
            return  # a thread the test did not start (e.g. a pool worker)
        actor.points.append(point)
        if point in actor.pause_at:
            actor.pause_at.discard(point)
            actor.paused_at = point
            actor.resume.clear()
            actor.paused.set()
            if not actor.resume.wait(_TIMEOUT):
                raise InterleavingError(f"{actor.name} was never resumed at {point}")
            actor.paused_at = None

    def start(
        self, name: str, fn: Callable[[], Any], *, pause_at: str | tuple[str, ...] = ()
    ) -> None:
        """Start actor ``name`` running ``fn``; it pauses at each step in ``pause_at``."""
        points = {pause_at} if isinstance(pause_at, str) else set(pause_at)
        actor = _Actor(name, points)
        self._actors[name] = actor

        def body() -> None:
            with self._lock:
                self._by_thread[threading.get_ident()] = actor
            try:
                actor.result = fn()
            except BaseException as exc:
                actor.error = exc
            finally:
                actor.done.set()
                actor.paused.set()

        actor.thread = threading.Thread(target=body, name=f"interleave-{name}", daemon=True)
        actor.thread.start()

    def wait_paused(self, name: str) -> str | None:
        """Block until ``name`` is paused and return the step, or None when it finished
        without reaching it (a step that this run did not take, such as gc's
        quarantine when there was nothing to delete)."""
        actor = self._actors[name]
        if not actor.paused.wait(_TIMEOUT):
            raise InterleavingError(f"{name} never reached a pause point")
        return actor.paused_at

    def resume(self, name: str, *, pause_at: str | tuple[str, ...] = ()) -> None:
        """Let ``name`` go on, to pause again at ``pause_at`` (if given)."""
        actor = self._actors[name]
        actor.pause_at |= {pause_at} if isinstance(pause_at, str) else set(pause_at)
        actor.paused.clear()
        actor.resume.set()

    def join(self, name: str) -> Any:
        """Wait for ``name`` to finish; return its result or raise its error."""
        actor = self._actors[name]
        if not actor.done.wait(_TIMEOUT):
            raise InterleavingError(f"{name} did not finish (paused at {actor.paused_at})")
        if actor.error is not None:
            raise actor.error
        return actor.result

    def points(self, name: str) -> list[str]:
        """The steps ``name`` reached, in order."""
        return list(self._actors[name].points)
