"""Staging directories of ``bundle create``: made, locked, and found again when left behind.

A bundle is assembled in ``evidence/.<name>.tmp-<8 hex>/`` and renamed into place whole.
A process killed before the rename leaves that directory behind. To tell a leftover from
a creation still in progress, the creating process holds an exclusive ``flock`` on the
staging directory for as long as it works in it; the kernel drops the lock when the
process dies, however it dies. A directory whose lock can be taken is therefore stale.

Why no interleaving removes a live staging directory: a cleaner takes the lock
(non-blocking) *before* removing, and removes while holding it. The creator takes the
same lock (blocking) right after ``mkdir`` and then checks that its directory still has
a link; if a cleaner got in between and removed it (before the creator could even open
it, or after), the creator starts again with a new name. So a directory is removed only while no creator holds it, and a creator never
writes into a removed directory. Where ``flock`` is unavailable (Windows) only the age
test of :func:`remove_stale_staging` protects a live directory.
"""

from __future__ import annotations

import contextlib
import os
import re
import time
from collections.abc import Iterator
from pathlib import Path

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

from .inventory import EVIDENCE_DIR

__all__ = ["remove_stale_staging", "staging_dir", "staging_name", "stale_staging_dirs"]

_STAGING = re.compile(r"^\.(?P<name>[A-Za-z0-9][A-Za-z0-9._-]{0,127})\.tmp-[0-9a-f]{8}$")


def staging_name(dirname: str) -> str | None:
    """Return the bundle name of a staging directory's name, or None if it is not one."""
    m = _STAGING.match(dirname)
    return m.group("name") if m else None


@contextlib.contextmanager
def _locked(path: Path, *, block: bool) -> Iterator[bool]:
    """Yield whether the exclusive lock on directory ``path`` was taken (held inside)."""
    try:
        fd = os.open(
            path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0)
        )
    except OSError:
        yield False
        return
    try:
        if fcntl is None:
            yield True
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if block else fcntl.LOCK_NB))
        except OSError:
            yield False
            return
        yield os.fstat(fd).st_nlink > 0
    finally:
        os.close(fd)


@contextlib.contextmanager
def staging_dir(evidence: Path, name: str) -> Iterator[Path]:
    """Create, lock and yield a fresh staging directory for bundle ``name`` under ``evidence``.

    The lock is held until the context exits; whatever is left of the directory then
    (it is gone when it was renamed into place) is removed.
    """
    import shutil

    while True:
        path = evidence / f".{name}.tmp-{os.urandom(4).hex()}"
        path.mkdir()
        try:
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
        except FileNotFoundError:
            continue  # a cleaner removed it before we could open it: take a new name
        try:
            if fcntl is not None:
                fcntl.flock(fd, fcntl.LOCK_EX)
            if os.fstat(fd).st_nlink == 0:
                continue  # a cleaner removed it before we held it: take a new name
            try:
                yield path
            finally:
                with contextlib.suppress(FileNotFoundError):
                    shutil.rmtree(path)
            return
        finally:
            os.close(fd)


def stale_staging_dirs(root: str | os.PathLike[str], name: str | None = None) -> list[Path]:
    """Return the staging directories under ``<root>/evidence/`` that no process holds.

    These are what a killed ``bundle create`` left behind (partial copies, never a
    registered bundle). With ``name``, only those of that bundle name. Sorted by path.
    """
    evidence = Path(root) / EVIDENCE_DIR
    try:
        items = sorted(os.scandir(evidence), key=lambda e: e.name)
    except (FileNotFoundError, NotADirectoryError):
        return []
    out: list[Path] = []
    for item in items:
        bundle = staging_name(item.name)
        if bundle is None or (name is not None and bundle != name):
            continue
        if not item.is_dir(follow_symlinks=False):
            continue
        with _locked(Path(item.path), block=False) as free:
            if free:
                out.append(Path(item.path))
    return out


def remove_stale_staging(
    root: str | os.PathLike[str], older_than: float = 0.0, *, name: str | None = None
) -> list[Path]:
    """Remove stale staging directories last modified ``older_than`` seconds ago or more.

    Each is removed while its lock is held, so a ``bundle create`` in progress is never
    disturbed (see the module docstring). Returns the directories removed. ``gc`` calls
    this with its grace period; ``bundle create`` with ``name`` and no age limit.
    """
    import shutil  # not on verify's import path

    removed: list[Path] = []
    now = time.time()
    for path in stale_staging_dirs(root, name):
        with _locked(path, block=False) as free:
            if not free:
                continue
            try:
                age = now - path.lstat().st_mtime
            except FileNotFoundError:
                continue
            if age < older_than:
                continue
            shutil.rmtree(path, ignore_errors=True)
            if not path.exists():
                removed.append(path)
    return removed
