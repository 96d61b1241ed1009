"""Atomic file writes: the one place that writes a temporary, fsyncs and renames.

``write_replace`` replaces a file's content atomically (readers see the old bytes or
the new ones, never a mix); ``write_create`` publishes a file only if the name is
free (create-only, via a hard link where the filesystem has them). Both write to a
temporary in the target's own directory, so the rename never crosses filesystems,
and remove the temporary on any failure.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import BinaryIO

__all__ = [
    "fsync_dir",
    "fsync_paths",
    "replacing",
    "sync_filesystem",
    "temporary_beside",
    "write_create",
    "write_replace",
]


def temporary_beside(final: Path) -> Path:
    """Return a fresh temporary name in ``final``'s directory (created if needed)."""
    final.parent.mkdir(parents=True, exist_ok=True)
    return final.parent / f".tmp-{final.name[:24]}-{os.getpid()}-{os.urandom(4).hex()}"


def _fsync_path(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_dir(path: Path) -> None:
    """Flush a directory's entries to disk (best effort: not every OS allows it)."""
    with contextlib.suppress(OSError):
        _fsync_path(path)


def sync_filesystem(path: Path) -> bool:
    """Flush everything written to the filesystem holding ``path`` (Linux ``syncfs``: one
    call instead of an fsync per file); False where the OS offers no such call or it
    failed, so the caller fsyncs file by file instead."""
    try:
        import ctypes

        syncfs = ctypes.CDLL(None, use_errno=True).syncfs
    except (OSError, AttributeError, TypeError):  # no syncfs here (or no libc by name)
        return False
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return False
    try:
        return bool(syncfs(fd) == 0)
    finally:
        os.close(fd)


def fsync_paths(paths: Iterable[Path]) -> None:
    """Flush each file's content, then each of their directories' entries, once."""
    folders: dict[Path, None] = {}
    for path in paths:
        with contextlib.suppress(FileNotFoundError):
            _fsync_path(path)
        folders[path.parent] = None
    for folder in folders:
        fsync_dir(folder)


def _discard(tmp: Path) -> None:
    """Remove a temporary, if it is still there."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(tmp)


def _write_tmp(final: Path, data: bytes) -> Path:
    tmp = temporary_beside(final)
    try:
        with open(tmp, "xb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
    except BaseException:
        _discard(tmp)
        raise
    return tmp


def write_replace(final: str | os.PathLike[str], data: bytes) -> None:
    """Replace ``final`` with ``data`` atomically (raises OSError)."""
    with replacing(final) as fh:
        fh.write(data)


def write_create(final: str | os.PathLike[str], data: bytes) -> bool:
    """Write ``final`` only if it does not exist; return whether this call created it."""
    path = Path(final)
    tmp = _write_tmp(path, data)
    try:
        os.link(tmp, path)
    except FileExistsError:
        return False
    finally:
        _discard(tmp)
    fsync_dir(path.parent)
    return True


@contextlib.contextmanager
def replacing(final: str | os.PathLike[str]) -> Iterator[BinaryIO]:
    """Write ``final`` through a temporary that replaces it only if the block completes
    (streamed content: readers never see a partial file; on an exception nothing
    changes at ``final``)."""
    path = Path(final)
    tmp = temporary_beside(path)
    try:
        with open(tmp, "xb") as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    finally:
        _discard(tmp)
    fsync_dir(path.parent)
