"""BLAKE3 digests (``blake3:<64 lowercase hex>``) paired with sizes.

Hashing of bytes, streams and files. A file's size is checked against the expected
size before any byte is hashed, so truncation costs nothing to catch. Large files are
memory-mapped and hashed on every core; many small files go through a lean
``os.open``/``os.read`` loop, batched across threads when they are large enough for
hashing to dominate.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import BinaryIO, NamedTuple

from blake3 import blake3

from .errors import IntegrityError, InvalidDigestError

__all__ = [
    "ALGORITHM",
    "DIGEST_PATTERN",
    "Hashed",
    "digest_hex",
    "hash_bytes",
    "hash_file",
    "hash_files",
    "hash_stream",
    "is_digest",
    "new_hasher",
    "parse_digest",
]

ALGORITHM = "blake3"
DIGEST_PATTERN = r"^blake3:[0-9a-f]{64}$"
_DIGEST_RE = re.compile(r"blake3:[0-9a-f]{64}")
_PREFIX = "blake3:"

# Files at least this large are memory-mapped and hashed with every core.
MMAP_THRESHOLD = 16 << 20
# Whole-file single reads up to this size; larger files are read in chunks.
_WHOLE_READ_MAX = 8 << 20
_CHUNK = 1 << 20
# Batches of files averaging less than this are hashed on one thread: below it the
# GIL hand-offs cost more than the hashing they would overlap.
_THREADED_MIN_AVERAGE = 64 << 10


class Hashed(NamedTuple):
    """A digest and the number of bytes it was computed over."""

    digest: str
    size: int


def is_digest(text: object) -> bool:
    """Return whether ``text`` is a well-formed digest string."""
    return isinstance(text, str) and _DIGEST_RE.fullmatch(text) is not None


def parse_digest(text: str) -> str:
    """Return ``text`` if it is a well-formed digest, else raise :class:`InvalidDigestError`."""
    if is_digest(text):
        return text
    shown = text if len(text) <= 80 else text[:77] + "..."
    raise InvalidDigestError(
        f"invalid digest {shown!r}: expected 'blake3:' followed by 64 lowercase hex digits"
    )


def digest_hex(digest: str) -> str:
    """Return the 64 hex digits of a digest (validated)."""
    return parse_digest(digest)[len(_PREFIX) :]


def new_hasher(*, threads: bool = False) -> blake3:
    """Return a fresh BLAKE3 hasher; ``threads`` lets large updates use every core."""
    return blake3(max_threads=blake3.AUTO) if threads else blake3()


def _format(hasher: blake3) -> str:
    return _PREFIX + hasher.hexdigest()


def hash_bytes(data: bytes | bytearray | memoryview) -> Hashed:
    """Hash an in-memory buffer."""
    return Hashed(_PREFIX + blake3(data).hexdigest(), len(data))


def hash_stream(stream: BinaryIO, *, chunk_size: int = _CHUNK) -> Hashed:
    """Hash a binary stream from its current position to EOF."""
    hasher = blake3()
    size = 0
    while chunk := stream.read(chunk_size):
        hasher.update(chunk)
        size += len(chunk)
    return Hashed(_format(hasher), size)


def _size_mismatch(path: str | os.PathLike[str], expected: int, observed: int) -> IntegrityError:
    return IntegrityError(f"{os.fspath(path)}: size is {observed} bytes, expected {expected}")


def _hash_fd(fd: int, size: int, path: str | os.PathLike[str]) -> Hashed:
    if size <= _WHOLE_READ_MAX:
        data = os.read(fd, size + 1)
        if len(data) != size:
            raise _size_mismatch(path, size, len(data))
        return Hashed(_PREFIX + blake3(data).hexdigest(), size)
    hasher = blake3()
    total = 0
    buf = bytearray(_CHUNK)
    view = memoryview(buf)
    while n := os.readv(fd, [buf]):
        hasher.update(view[:n])
        total += n
    if total != size:
        raise _size_mismatch(path, size, total)
    return Hashed(_format(hasher), size)


def hash_file(path: str | os.PathLike[str], expected_size: int | None = None) -> Hashed:
    """Hash a file; if ``expected_size`` is given it is checked before hashing.

    Raises :class:`IntegrityError` on a size mismatch and ``OSError`` when the file
    cannot be read.
    """
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_BINARY", 0))
    try:
        size = os.fstat(fd).st_size
        if expected_size is not None and size != expected_size:
            raise _size_mismatch(path, expected_size, size)
        if size >= MMAP_THRESHOLD:
            hasher = blake3(max_threads=blake3.AUTO)
            hasher.update_mmap(path)
            return Hashed(_format(hasher), size)
        return _hash_fd(fd, size, path)
    finally:
        os.close(fd)


HashOutcome = Hashed | OSError | IntegrityError


def _hash_batch(
    paths: Sequence[str | os.PathLike[str]], sizes: Sequence[int | None]
) -> list[HashOutcome]:
    out: list[HashOutcome] = []
    append = out.append
    for path, expected in zip(paths, sizes, strict=True):
        try:
            append(hash_file(path, expected))
        except (OSError, IntegrityError) as exc:
            append(exc)
    return out


def hash_files(
    paths: Sequence[str | os.PathLike[str]],
    expected_sizes: Iterable[int | None] | None = None,
    *,
    threads: int | None = None,
) -> list[HashOutcome]:
    """Hash many files, returning one outcome per path, in order.

    Each outcome is a :class:`Hashed`, the ``OSError`` that prevented reading, or the
    :class:`IntegrityError` of a size that disagreed with ``expected_sizes`` (checked
    before hashing). Batches of large-enough files are split across ``threads``
    (default: the CPU count) in contiguous slices; small files stay on one thread.
    """
    sizes: list[int | None] = (
        list(expected_sizes) if expected_sizes is not None else [None] * len(paths)
    )
    if len(sizes) != len(paths):
        raise ValueError("expected_sizes must have one size per path")
    workers = threads or os.cpu_count() or 1
    known = [s for s in sizes if s is not None]
    average = sum(known) / len(known) if known else _THREADED_MIN_AVERAGE
    if workers <= 1 or len(paths) < 2 * workers or average < _THREADED_MIN_AVERAGE:
        return _hash_batch(paths, sizes)
    # Interleaved slices balance the threads when sizes vary along the list.
    with ThreadPoolExecutor(max_workers=workers) as pool:
        parts = list(
            pool.map(lambda k: _hash_batch(paths[k::workers], sizes[k::workers]), range(workers))
        )
    out: list[HashOutcome] = [None] * len(paths)  # type: ignore[list-item]
    for k, part in enumerate(parts):
        out[k::workers] = part
    return out
