"""The read-through store: a local cache filled on demand from other stores, verified.

Reads are served from the cache; a miss is filled by the injected ``fill`` (the
remotes' download path, which checks size, then hash, before anything is cached), and
a cached copy that fails verification is filled again once. Only public
:class:`BlobStore` methods of the cache and the remote stores are used.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from typing import BinaryIO, Protocol, TypeVar

from ..digest import parse_digest
from ..errors import BlobNotFoundError, IntegrityError
from ..models import Descriptor
from ._base import DEFAULT_MEDIA_TYPE, BlobStore, VerifyingReader

T = TypeVar("T")
LOCAL = "local store"


class HasStore(Protocol):
    """What the read-through store needs of a remote: its store (opened lazily)."""

    @property
    def store(self) -> BlobStore: ...


class Fill(Protocol):
    """Copy ``digest`` into ``cache`` from the remotes, verified; return the name of the
    remote it came from. ``looked_before`` says what was found locally, for messages."""

    def __call__(
        self, cache: BlobStore, digest: str, size: int | None, looked_before: list[str]
    ) -> str: ...


def _integrity(
    exc: BlobNotFoundError, where: str, digest: str, size: int | None, observed: int | None
) -> IntegrityError:
    """The :class:`IntegrityError` for a local copy that is there but wrong, when no
    remote could replace it (``exc`` says where each was looked for)."""
    return IntegrityError(
        str(exc),
        where=f"local store ({where})",
        digest=digest,
        expected_size=size,
        observed_size=observed,
        reason="the local copy is wrong and no remote holds an intact one",
    )


class ReadThroughStore(BlobStore):
    """The local store, filled on demand from remotes in order, verifying everything.

    A miss fetches the blob from the first remote holding an intact copy and a copy
    that fails verification is refused and the next remote tried (``fill``). It never
    reaches any location but the given remotes. Writes and deletes go to the cache only
    (``push`` publishes).
    """

    def __init__(self, cache: BlobStore, remotes: Sequence[HasStore] = (), *, fill: Fill) -> None:
        super().__init__(read_only=cache.read_only)
        self.cache = cache
        self.remotes = tuple(remotes)
        self._fill = fill

    @property
    def location(self) -> str:
        return self.cache.location

    def fetch(self, digest: str, size: int | None = None) -> str:
        """Make sure ``digest`` is in the local store; return where it came from
        (``"local store"`` or the remote's name)."""
        digest = parse_digest(digest)
        cached = self.cache.size(digest)
        if cached is not None and (size is None or cached == size):
            return LOCAL
        state = "absent" if cached is None else f"{cached} bytes, expected {size}"
        try:
            return self._fill(
                self.cache, digest, size, [f"local store ({self.cache.location}): {state}"]
            )
        except BlobNotFoundError as exc:
            if cached is None:
                raise
            # A copy is here, of the wrong size, and no remote has a right one: that is
            # an integrity failure, as the local store itself would report it.
            raise _integrity(exc, self.cache.location, digest, size, cached) from exc

    def open(self, digest: str, size: int | None = None) -> VerifyingReader:
        """Open a blob (fetching it first if needed); the reader verifies at EOF."""
        digest = parse_digest(digest)
        self.fetch(digest, size)
        return self.cache.open(digest, size)

    def get(self, digest: str, size: int | None = None) -> bytes:
        """Return a blob's verified bytes, fetching and caching it first if needed.

        A cached copy that fails verification is replaced from the remotes.
        """
        return self._repairing(lambda d: self.cache.get(d, size), digest, size)

    def verify(self, digest: str, size: int | None = None) -> None:
        """Hash the local copy, streaming (fetching it first if needed); a cached copy
        that fails verification is replaced from the remotes."""
        self._repairing(lambda d: self.cache.verify(d, size), digest, size)

    def _repairing(self, read: Callable[[str], T], digest: str, size: int | None) -> T:
        """``read`` the cached copy (fetched first); once more after re-fetching it from
        the remotes when the cached copy fails verification."""
        digest = parse_digest(digest)
        self.fetch(digest, size)
        try:
            return read(digest)
        except IntegrityError as exc:
            if not self.remotes:
                raise
            import logging  # off the start-up path: only a repair logs

            logging.getLogger("evidencestore").warning(
                "%s; fetching it again from the remotes", exc
            )
        try:
            self._fill(self.cache, digest, size, [f"local store ({self.cache.location}): corrupt"])
        except BlobNotFoundError as exc:
            raise _integrity(exc, self.cache.location, digest, size, None) from exc
        return read(digest)

    def put(
        self,
        data: bytes | bytearray | memoryview,
        media_type: str = DEFAULT_MEDIA_TYPE,
        *,
        expected: str | None = None,
    ) -> Descriptor:
        """Store bytes in the local store."""
        return self.cache.put(data, media_type, expected=expected)

    def put_file(
        self,
        path: str | os.PathLike[str],
        media_type: str = DEFAULT_MEDIA_TYPE,
        *,
        on_bytes: Callable[[int], None] | None = None,
    ) -> Descriptor:
        """Store a file in the local store."""
        return self.cache.put_file(path, media_type, on_bytes=on_bytes)

    # -- primitives ---------------------------------------------------------
    def _exists(self, digest: str) -> bool:
        return self._size(digest) is not None

    def _size(self, digest: str) -> int | None:
        size = self.cache.size(digest)
        for remote in self.remotes:
            if size is not None:
                break
            size = remote.store.size(digest)
        return size

    def _open_raw(self, digest: str) -> BinaryIO:
        return self.open(digest)  # type: ignore[return-value]  # a verifying stream

    def _write(self, digest: str, data: bytes) -> None:
        self.cache.write_verified(digest, data)

    def _delete(self, digest: str) -> None:
        self.cache.delete(digest)

    def _iter(self) -> Iterator[str]:
        return self.cache.iter_digests()
