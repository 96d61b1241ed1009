"""Media inputs: a file path, a digest served (verified) by the repository store, or bytes."""

from __future__ import annotations

import errno
import io
import os
import stat
from dataclasses import dataclass
from typing import BinaryIO

from ..digest import hash_bytes, hash_stream, is_digest
from ..errors import BlobNotFoundError, EvidenceStoreError, MediaError, MediaNotFoundError
from ..models import Descriptor

__all__ = ["MediaSource", "resolve"]


@dataclass(frozen=True)
class MediaSource:
    """Media content with its descriptor; ``open()`` gives a fresh binary stream.

    Paths are read through Python file objects, never handed to FFmpeg as URLs, so a
    name such as ``http://...`` or ``concat:...`` cannot make FFmpeg fetch anything.
    """

    name: str
    descriptor: Descriptor
    path: str | None = None
    data: bytes | None = None
    stat: tuple[int, int] | None = None  # (size, mtime_ns) of a path when it was hashed

    def open(self) -> BinaryIO:
        """Return a new binary stream over the content."""
        if self.data is not None:
            return io.BytesIO(self.data)
        assert self.path is not None
        try:
            return open(self.path, "rb")  # the caller closes it
        except OSError as exc:
            raise MediaError(f"{self.name}: cannot read: {exc.strerror}") from exc

    @classmethod
    def from_path(cls, path: str | os.PathLike[str]) -> MediaSource:
        """Describe a file (hashing it) without keeping its bytes in memory."""
        name = os.fspath(path)
        try:
            before = _stat(name)
            digest, size = _hash_path(name)
            after = _stat(name)
        except OSError as exc:
            raise MediaError(f"{name}: cannot read media file: {exc.strerror}") from exc
        if before != after or after[0] != size:
            raise MediaError(f"{name}: the file changed while it was being hashed")
        return cls(
            name=name, descriptor=Descriptor(digest=digest, size=size), path=name, stat=after
        )

    def ensure_unchanged(self) -> None:
        """Raise :class:`MediaError` if a path's content is no longer what was hashed.

        Paths are hashed once and re-opened to decode, so a file rewritten in between (or
        during decoding) would give a report about other bytes than its digest. A changed
        size or modification time triggers a re-hash; a different digest is an error.
        """
        if self.path is None or self.stat is None:
            return
        try:
            now = _stat(self.path)
            if now == self.stat:
                return
            digest, size = _hash_path(self.path)
        except OSError as exc:
            raise MediaError(f"{self.name}: cannot re-read media file: {exc.strerror}") from exc
        if (digest, size) != (self.descriptor.digest, self.descriptor.size):
            raise MediaError(
                f"{self.name}: the file changed while it was being checked (hashed as "
                f"{self.descriptor.digest}, {self.descriptor.size} bytes; now {digest}, "
                f"{size} bytes); check a file that is not being written"
            )

    @classmethod
    def from_bytes(cls, data: bytes, name: str | None = None) -> MediaSource:
        """Describe in-memory content."""
        digest, size = hash_bytes(data)
        return cls(name=name or digest, descriptor=Descriptor(digest=digest, size=size), data=data)


def _hash_path(path: str) -> tuple[str, int]:
    """Hash a regular file in bounded memory (streamed, not read whole or mapped: peak RSS
    must not grow with a clip's length); other files are refused, as hash_file does."""
    with open(path, "rb", buffering=0, opener=_open_regular) as f:
        return hash_stream(f)


def _open_regular(path: str, flags: int) -> int:
    # O_NONBLOCK: opening a FIFO must not hang; it is then refused as not a regular file.
    fd = os.open(path, flags | getattr(os, "O_NONBLOCK", 0))
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OSError(errno.EINVAL, "not a regular file", path)
    return fd


def _stat(path: str) -> tuple[int, int]:
    st = os.stat(path)
    return st.st_size, st.st_mtime_ns


def resolve(
    ref: str | os.PathLike[str] | MediaSource, root: str | os.PathLike[str] | None = None
) -> MediaSource:
    """Resolve ``FILE|DIGEST``: a well-formed digest is read, verified, from the store of
    the repository at (or above) ``root``; anything else is a path. A digest no store
    holds raises :class:`~evidencestore.errors.MediaNotFoundError` (a ``NotFoundError``
    and a ``MediaError``); one that cannot be read otherwise, ``MediaError``."""
    if isinstance(ref, MediaSource):
        return ref
    text = os.fspath(ref)
    if is_digest(text):
        from ..config import as_repository
        from ..remotes import repository_store

        try:
            data = repository_store(as_repository(root)).get(text)
        except BlobNotFoundError as exc:  # absent stays "not found", and is a MediaError
            raise MediaNotFoundError(f"{text}: cannot get media from the store: {exc}") from exc
        except EvidenceStoreError as exc:
            raise MediaError(f"{text}: cannot get media from the store: {exc}") from exc
        return MediaSource(name=text, descriptor=Descriptor(digest=text, size=len(data)), data=data)
    return MediaSource.from_path(text)
