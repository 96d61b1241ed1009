"""The ``BlobStore`` ABC and the verifying reader every backend returns."""

from __future__ import annotations

import io
import os
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, BinaryIO, NamedTuple, Protocol, cast, runtime_checkable

from blake3 import blake3

from .. import _steps
from ..digest import digest_from_hex, digest_hex, hash_bytes, parse_digest
from ..errors import BlobNotFoundError, IntegrityError, ReadOnlyStoreError
from ..integrity import check_content
from ..models import Descriptor

DEFAULT_MEDIA_TYPE = "application/octet-stream"
LEASE_DIR = "leases"
QUARANTINE_DIR = "quarantine"
RESULT_DIR = "results"


class BlobInfo(NamedTuple):
    """A blob found by listing: digest, stored size, modification time (epoch s)."""

    digest: str
    size: int
    mtime: float | None


def blob_key(digest: str) -> str:
    """Return a digest's key below a store root: ``blobs/blake3/<2 hex>/<64 hex>``."""
    hexd = digest_hex(digest)
    return f"blobs/blake3/{hexd[:2]}/{hexd}"


class VerifyingReader(io.RawIOBase):
    """A read-only stream that hashes what it returns and checks it at EOF.

    Raises :class:`IntegrityError` on the read that reaches EOF when the bytes read do
    not match the digest (or the expected size), and as soon as more bytes arrive than
    the expected size allows. Callers that consume the stream to EOF therefore never
    accept corrupt content.
    """

    def __init__(
        self,
        raw: BinaryIO,
        digest: str,
        *,
        size: int | None = None,
        where: str = "store",
    ) -> None:
        super().__init__()
        self._raw = raw
        self._digest = digest
        self._size = size
        self._where = where
        self._hasher = blake3()
        self._count = 0
        self._done = False

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        data = self._raw.read(len(buffer))
        n = len(data)
        if n:
            buffer[:n] = data
            self._hasher.update(data)
            self._count += n
            if self._size is not None and self._count > self._size:
                check_content(self._where, self._digest, self._size, None, self._count)
        elif not self._done:
            self._done = True
            self._check()
        return n

    def _check(self) -> None:
        check_content(self._where, self._digest, self._size, None, self._count)
        observed = digest_from_hex(self._hasher.hexdigest())
        check_content(self._where, self._digest, self._size, observed, self._count)

    @property
    def verified(self) -> bool:
        """Whether EOF was reached and the content matched."""
        return self._done

    def close(self) -> None:
        if not self.closed:
            self._raw.close()
        super().close()


class _Counting:
    """A binary reader that reports how many bytes each read returned."""

    def __init__(self, raw: BinaryIO, report: Callable[[int], None]) -> None:
        self._raw = raw
        self._report = report

    def read(self, n: int = -1) -> bytes:
        data = self._raw.read(n)
        if data:
            self._report(len(data))
        return data


@runtime_checkable
class SupportsBatchRead(Protocol):
    """A store's upkeep that reads many blobs on one event loop (``FsspecUpkeep`` on
    object stores): ``_read_batch`` hands each blob's *unverified* bytes to ``consume`` as they
    arrive and returns each digest's failure, or None. Private to ``storage/``: only
    :mod:`.transfer`, which checks every blob before keeping it, reads this way."""

    @property
    def supports_batch_read(self) -> bool: ...

    def _read_batch(
        self,
        items: Sequence[tuple[str, int]],
        consume: Callable[[str, bytes], None],
        *,
        concurrency: int = 16,
    ) -> dict[str, Exception | None]: ...


@runtime_checkable
class SupportsIncoming(Protocol):
    """A store's upkeep that takes files written next to its blobs and moves them into
    place (no second copy): streamed downloads and response bodies use it."""

    def incoming_path(self) -> Path:
        """A fresh temporary name on the blobs' filesystem."""

    def adopt(
        self, path: str | os.PathLike[str], digest: str, size: int, *, durable: bool = True
    ) -> None:
        """Publish a complete file already hashed to ``digest``; create-only."""


@runtime_checkable
class SupportsLocalPaths(Protocol):
    """A store whose blobs are plain files on this machine, at ``path_of(digest)``: a
    verifier may hash them in place with its own engine (still re-reading every byte)."""

    def path_of(self, digest: str) -> Path:
        """Where a blob lives (or would live)."""


class OciDescriptor(NamedTuple):
    """An OCI descriptor: media type, ``sha256:`` digest and size."""

    media_type: str
    digest: str
    size: int


@runtime_checkable
class SupportsArtifacts(Protocol):
    """A store that is an OCI registry (``OciBlobStore``): besides blobs by BLAKE3, it
    keeps blobs by sha256 and manifests (artifacts with layers, referrers of a subject).
    Manifests read here are checked against the digest they were fetched by."""

    @property
    def location(self) -> str: ...

    def has_oci_blob(self, sha256: str) -> bool:
        """Whether the registry holds blob ``sha256:<hex>``."""

    def push_oci_blob(self, data: bytes | BinaryIO, sha256: str, size: int) -> None:
        """Upload a blob under its sha256 (the registry checks it)."""

    def get_manifest(self, reference: str) -> tuple[OciDescriptor, dict[str, Any]] | None:
        """A manifest by tag or digest with its descriptor, or None when absent."""

    def blob_layer(self, digest: str) -> tuple[str, int] | None:
        """The sha256 and size of the blob stored for BLAKE3 ``digest`` (None: absent)."""

    def put_artifact(
        self,
        artifact_type: str,
        layers: Sequence[Mapping[str, Any]],
        *,
        annotations: Mapping[str, str] | None = None,
        subject: OciDescriptor | None = None,
        tag: str | None = None,
    ) -> tuple[OciDescriptor, bool]:
        """Store an artifact manifest; return it and whether the registry indexed
        its subject."""

    def referrers(self, subject: str) -> list[dict[str, Any]]:
        """The descriptors of the manifests referring to ``subject``."""

    def add_referrer(self, subject: str, referrer: dict[str, Any], *, tries: int = 5) -> None:
        """List ``referrer`` in the fallback index of ``subject``."""


# -- what gc's safety argument rests on (see evidencestore.gc) ------------------------
@runtime_checkable
class SupportsKeepAlive(Protocol):
    """A store's upkeep whose blobs have modification times that a writer refreshes
    (``LocalUpkeep``): ``keep_alive`` marks a present blob as in use now, before the
    writer relies on it, so a gc about to remove it sees it young. Elsewhere a lease
    protects the blob."""

    def keep_alive(self, digest: str) -> None:
        """Mark a present blob as in use now (a refreshed modification time)."""


@runtime_checkable
class SupportsLeases(Protocol):
    """A store's upkeep that holds leases: small objects under ``<root>/leases/`` naming the
    digests a writer relies on (gc keeps them while the lease is young).
    ``supports_leases`` is False where this store cannot write them now (read-only)."""

    @property
    def supports_leases(self) -> bool:
        """Whether leases can be written here now."""

    def write_lease(self, name: str, data: bytes) -> str:
        """Write lease ``<root>/leases/<name>`` atomically; return its key."""

    def iter_leases(self) -> Iterator[tuple[str, float | None]]:
        """Yield ``(key, mtime)`` of every lease."""

    def read_lease(self, key: str) -> bytes:
        """Return a lease's bytes (FileNotFoundError when it is gone)."""

    def remove_lease(self, key: str) -> None:
        """Remove a lease (absent ones are ignored)."""


@runtime_checkable
class SupportsResults(Protocol):
    """A store's upkeep that holds computed results by key: small objects under
    ``<root>/results/`` whose names are a function of their bytes (the caller's
    ``<key hex>/<entry hex>.json``: ``campaign/results.py``), so any write of a name
    writes the same bytes. ``supports_results`` is False where they cannot be listed."""

    @property
    def supports_results(self) -> bool:
        """Whether results can be listed and read here."""

    def write_result(self, name: str, data: bytes) -> str:
        """Write ``<root>/results/<name>`` atomically (readers see all of it or nothing);
        return its key."""

    def iter_results(self, prefix: str = "") -> Iterator[str]:
        """Yield the name (relative to ``<root>/results/``) of every result whose name
        starts with ``prefix``."""

    def read_result(self, name: str) -> bytes:
        """Return a result's bytes (FileNotFoundError when it is gone)."""


@runtime_checkable
class SupportsQuarantine(Protocol):
    """A store's upkeep with which gc can delete safely: a blob is moved out of its name to
    ``<root>/quarantine/`` before gc decides, so a writer that saw it present is
    always seen by gc afterwards. ``supports_quarantine`` is False where this store
    cannot move blobs now (read-only, or a backend that cannot list)."""

    @property
    def supports_quarantine(self) -> bool:
        """Whether gc can quarantine (and so delete) here now."""

    def quarantine(self, digest: str) -> str | None:
        """Move a blob from its name to the quarantine; return the quarantine key, or
        None when the blob was absent. The mtime is kept."""

    def iter_quarantined(self) -> Iterator[tuple[str, str, float | None]]:
        """Yield ``(key, digest, mtime)`` of every quarantined blob."""

    def quarantined_mtime(self, key: str) -> float | None:
        """The modification time the blob had under its name, refreshed by
        ``keep_alive`` (None where the move does not keep it, such as a copy)."""

    def restore(self, key: str) -> None:
        """Put a quarantined blob back under its name (kept as it is when the name
        was written again meanwhile), then drop the quarantined copy."""

    def purge(self, key: str) -> None:
        """Delete a quarantined blob for good."""


class BlobStore(ABC):
    """Blobs addressed by digest. Writes are create-only; every read is verified.

    What a user needs is all that is public here: ``put`` / ``put_file`` (store, get
    the descriptor), ``get`` / ``open`` (verified bytes or stream), ``verify``, ``has``
    / ``size``, ``delete``, ``iter_digests``, ``location_of`` and the properties
    ``location``, ``read_only``, ``supports_writes``, ``supports_listing``. What serves
    transfers and gc (bulk sizes, verified writes, uploads, listing with age,
    temporaries; leases, quarantine, keep-alive and incoming files where a backend has
    them, described by the ``Supports*`` protocols) is on :attr:`upkeep`.

    Subclasses implement the ``_``-prefixed primitives; the public methods add
    validation, verification and the read-only guard. A backend that does upkeep better
    or offers a capability returns its own :class:`Upkeep` subclass from
    ``_make_upkeep``.
    """

    def __init__(self, *, read_only: bool = False) -> None:
        self._read_only = read_only
        self._upkeep = self._make_upkeep()  # one per store (it may hold state: memory)

    # -- capabilities -------------------------------------------------------
    @property
    def read_only(self) -> bool:
        """Whether writes and deletes are refused."""
        return self._read_only

    @property
    def supports_writes(self) -> bool:
        """Whether ``put`` can be called."""
        return not self._read_only

    @property
    def supports_listing(self) -> bool:
        """Whether ``iter_digests`` is available."""
        return True

    @property
    @abstractmethod
    def location(self) -> str:
        """Where the store lives, for messages (a path or URL)."""

    def _check_writable(self) -> None:
        if self._read_only:
            raise ReadOnlyStoreError(f"store {self.location} is read-only")

    # -- primitives ---------------------------------------------------------
    @abstractmethod
    def _exists(self, digest: str) -> bool: ...

    @abstractmethod
    def _size(self, digest: str) -> int | None:
        """The stored size, or None when absent."""

    @abstractmethod
    def _open_raw(self, digest: str) -> BinaryIO:
        """Open the stored bytes; raise BlobNotFoundError when absent."""

    @abstractmethod
    def _write(self, digest: str, data: bytes) -> None:
        """Store verified bytes atomically under ``digest`` (replacing a corrupt copy)."""

    def _write_file(self, digest: str, path: str, size: int) -> None:
        with open(path, "rb") as fh:
            data = fh.read()
        if len(data) != size:
            raise IntegrityError(f"{path}: changed while being stored ({len(data)} != {size})")
        self._write(digest, data)

    @abstractmethod
    def _delete(self, digest: str) -> None: ...

    @abstractmethod
    def _iter(self) -> Iterator[str]: ...

    # -- public API ---------------------------------------------------------
    def has(self, digest: str) -> bool:
        """Return whether a blob is present (presence only; nothing is hashed)."""
        return self._exists(parse_digest(digest))

    def size(self, digest: str) -> int | None:
        """Return the stored size of a blob, or None when absent (nothing is hashed)."""
        return self._size(parse_digest(digest))

    def open(self, digest: str, size: int | None = None) -> VerifyingReader:
        """Open a blob for reading; the reader raises at EOF if the bytes are wrong."""
        digest = parse_digest(digest)
        return VerifyingReader(self._open_raw(digest), digest, size=size, where=self.location)

    def get(self, digest: str, size: int | None = None) -> bytes:
        """Return a blob's bytes after verifying them."""
        with self.open(digest, size) as reader:
            return reader.read()

    def verify(self, digest: str, size: int | None = None) -> None:
        """Re-read and hash a blob; raise :class:`IntegrityError` or BlobNotFoundError."""
        with self.open(digest, size) as reader:
            while reader.read(1 << 20):
                pass

    def put(
        self,
        data: bytes | bytearray | memoryview,
        media_type: str = DEFAULT_MEDIA_TYPE,
        *,
        expected: str | None = None,
    ) -> Descriptor:
        """Store bytes; idempotent for identical content. Returns their descriptor.

        With ``expected``, bytes that do not hash to it are refused.
        """
        self._check_writable()
        digest, size = hash_bytes(data)
        if expected is not None and digest != parse_digest(expected):
            raise IntegrityError(
                f"refusing to store {size} bytes as {expected}: they hash to {digest}"
            )
        if not self._present_and_intact(digest, size):
            self._write(digest, bytes(data))
        return Descriptor(digest=digest, size=size, media_type=media_type)

    def put_file(
        self,
        path: str | os.PathLike[str],
        media_type: str = DEFAULT_MEDIA_TYPE,
        *,
        on_bytes: Callable[[int], None] | None = None,
    ) -> Descriptor:
        """Store a file's bytes; idempotent for identical content. Returns the descriptor.

        ``on_bytes`` hears of every chunk hashed and every chunk stored (a progress
        line counts twice the file's size); without it the faster hashing engine runs.
        """
        from ..digest import hash_file, hash_stream

        self._check_writable()
        path = os.fspath(path)
        if on_bytes is None:
            digest, size = hash_file(path)
        else:
            with open(path, "rb") as fh:
                digest, size = hash_stream(cast(BinaryIO, _Counting(fh, on_bytes)))
        if not self._present_and_intact(digest, size):
            self._write_file(digest, path, size)
            if on_bytes is not None:
                on_bytes(size)
        elif on_bytes is not None:
            on_bytes(size)  # nothing to store: the second half is done at once
        return Descriptor(digest=digest, size=size, media_type=media_type)

    def _present_and_intact(self, digest: str, size: int) -> bool:
        # Create-only: an intact existing blob is kept; a corrupt one is replaced.
        if self._size(digest) != size:
            return False
        upkeep = self.upkeep
        if isinstance(upkeep, SupportsKeepAlive):
            upkeep.keep_alive(digest)  # before the check the caller relies on (see gc)
        _steps.reached("put:kept-alive")
        try:
            self.verify(digest, size)
        except (IntegrityError, BlobNotFoundError):
            return False
        self._relied_on(digest)
        return True

    def _relied_on(self, digest: str) -> None:  # noqa: B027 - an optional hook
        """Called when a writer keeps the intact blob ``digest`` instead of writing it: a
        backend whose blobs may not be durable yet makes this one durable (or notes it)."""

    def delete(self, digest: str) -> None:
        """Remove a blob (absent blobs are ignored)."""
        self._check_writable()
        self._delete(parse_digest(digest))

    def iter_digests(self) -> Iterator[str]:
        """Yield the digest of every blob present."""
        return self._iter()

    # -- raw reads: unverified, so private to storage/ (transfer.py verifies them) --
    def _read_raw(self, digest: str, *, limit: int | None = None) -> bytes:
        """Return a blob's stored bytes *unverified* (the caller verifies), at most
        ``limit`` of them, so an oversized object cannot exhaust memory."""
        with self._open_raw(parse_digest(digest)) as fh:
            return fh.read() if limit is None else fh.read(limit)

    def _download_raw(self, digest: str, path: str, *, limit: int | None = None) -> None:
        """Copy a blob's stored bytes *unverified* to a local file, stopping after
        ``limit`` bytes when given."""
        with self._open_raw(parse_digest(digest)) as src, open(path, "wb") as dst:
            written = 0
            while limit is None or written < limit:
                step = 8 << 20 if limit is None else min(8 << 20, limit - written)
                chunk = src.read(step)
                if not chunk:
                    break
                dst.write(chunk)
                written += len(chunk)

    def location_of(self, digest: str) -> str:
        """Where a blob lives (or would live), for messages."""
        return f"{self.location}/{blob_key(digest)}"

    # -- upkeep: what transfers and gc use, kept off the user's surface --------
    @property
    def upkeep(self) -> Upkeep:
        """The store's upkeep (sizes in bulk, verified writes, listing with age,
        leftovers; leases, quarantine, keep-alive where the backend has them): used by
        transfers and gc, not needed to store and read evidence."""
        return self._upkeep

    def _make_upkeep(self) -> Upkeep:
        """The backend's upkeep object (a subclass of :class:`Upkeep`); made once, when
        the store is."""
        return Upkeep(self)

    def __contains__(self, digest: object) -> bool:
        return isinstance(digest, str) and self.has(digest)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.location!r})"


class Upkeep:
    """A store's upkeep: what transfers and gc use beyond the user's methods.

    Bulk sizes, verified writes and uploads, listing with size and age, and the
    leftovers of interrupted writes, for every backend; a backend's own upkeep class
    adds the capabilities it has (``Supports*``: leases, quarantine, keep-alive,
    incoming files, batched reads). Reached through :attr:`BlobStore.upkeep`.
    """

    def __init__(self, store: BlobStore) -> None:
        self._store = store

    def sizes(self, digests: Iterable[str]) -> dict[str, int | None]:
        """Return each digest's stored size (None when absent); batched where possible."""
        return {d: self._store._size(d) for d in sorted({parse_digest(x) for x in digests})}

    def write_verified(self, digest: str, data: bytes) -> None:
        """Store bytes the caller has just checked against ``digest`` (no presence
        check: for transfers that already know the blob is missing)."""
        self._store._check_writable()
        self._store._write(parse_digest(digest), bytes(data))

    def upload_file(
        self,
        digest: str,
        path: str,
        size: int,
        *,
        on_bytes: Callable[[int], None] | None = None,
    ) -> None:
        """Store a local file already hashed to ``digest`` and ``size``; refuses it if it
        changed meanwhile. ``on_bytes`` hears of progress where the backend reports it."""
        stored = self._store.put_file(path)
        if stored.digest != digest or stored.size != size:
            raise IntegrityError(
                f"{path}: changed while being stored (was {digest}, {size} bytes; now "
                f"{stored.digest}, {stored.size} bytes)"
            )

    def iter_blobs(self) -> Iterator[BlobInfo]:
        """Yield every blob with its size and modification time (None when unknown)."""
        for digest in self._store._iter():
            size = self._store._size(digest)
            if size is not None:
                yield BlobInfo(digest, size, None)

    def blob_info(self, digest: str) -> BlobInfo | None:
        """Return a blob's size and modification time as stored now (None if absent)."""
        size = self._store._size(parse_digest(digest))
        return None if size is None else BlobInfo(digest, size, None)

    def iter_temporaries(self) -> Iterator[tuple[str, float | None]]:
        """Yield ``(key, mtime)`` of leftovers of this store's interrupted writes."""
        return iter(())

    def remove_temporary(self, key: str) -> None:
        """Remove a leftover yielded by :meth:`iter_temporaries`."""
        return None
