"""Moving blobs between the local store and remotes: verified, atomic, in parallel.

Every byte that arrives is checked against the size and digest it was asked for
before it is published under its final name; a local blob is re-hashed before it is
uploaded, so a corrupt cache is never pushed. Failures name the remote, the digest and
what was observed against what was expected.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TypeVar

from .. import _steps
from ..digest import hash_bytes, hash_file
from ..errors import (
    BlobNotFoundError,
    EvidenceStoreError,
    IntegrityError,
    LocalWriteError,
    StorageError,
)
from ..integrity import check_content
from ._base import BlobStore, SupportsBatchRead, SupportsIncoming
from ._local import LocalBlobStore

__all__ = [
    "DEFAULT_MAX_UNREGISTERED",
    "STREAM_THRESHOLD",
    "Progress",
    "Source",
    "TransferSummary",
    "check_bytes",
    "check_copy",
    "download",
    "download_all",
    "parallel",
    "sizes_of",
    "upload",
]

T = TypeVar("T")
R = TypeVar("R")

# Blobs above this size are streamed through a temporary file instead of memory.
STREAM_THRESHOLD = 64 << 20
# A digest that no registration names is fetched only up to this size (per remote:
# ``max_unregistered_size``): its only bound is otherwise what the server claims.
DEFAULT_MAX_UNREGISTERED = 256 << 20
DEFAULT_JOBS = 16


class Source:
    """A place blobs can come from: ``name`` is ``"local store"`` or a remote's name.

    ``store`` may be given as an ``opener``: it is then opened on first use, so a
    remote that cannot be opened fails only when (and where) it is tried. A digest of
    unknown size is refused from here when it stores more than ``max_unregistered_size``
    bytes (None: no bound).
    """

    __slots__ = ("_location", "_lock", "_opener", "_store", "max_unregistered_size", "name")

    def __init__(
        self,
        name: str,
        store: BlobStore | None = None,
        *,
        opener: Callable[[], BlobStore] | None = None,
        location: str | None = None,
        max_unregistered_size: int | None = DEFAULT_MAX_UNREGISTERED,
    ) -> None:
        if store is None and opener is None:
            raise TypeError("Source needs a store or an opener")
        self.name = name
        self.max_unregistered_size = max_unregistered_size
        self._store = store
        self._opener = opener
        self._location = location
        self._lock = threading.Lock()

    @property
    def store(self) -> BlobStore:
        """The store (opened now if it was not yet); a :class:`StorageError` naming this
        place when it cannot be opened."""
        if self._store is None:
            with self._lock:
                if self._store is None:
                    assert self._opener is not None
                    self._store = self._opener()
        return self._store

    @property
    def location(self) -> str:
        """Where the place is (known without opening it)."""
        if self._location is not None:
            return self._location
        return self.store.location

    @property
    def label(self) -> str:
        """How messages name this place."""
        if self.name == "local store":
            return f"local store ({self.location})"
        return f"remote {self.name!r} ({self.location})"

    def labelled(self, exc: BaseException) -> str:
        """``exc``'s message prefixed with this place's label (once)."""
        text = str(exc)
        return text if text.startswith(self.label) else f"{self.label}: {text}"


def _local_failure(cache: BlobStore, digest: str, exc: Exception) -> LocalWriteError:
    reason = getattr(exc, "strerror", None) or exc
    return LocalWriteError(f"local store ({cache.location}): {digest}: cannot write: {reason}")


@dataclass
class TransferSummary:
    """What a push, pull or fetch did."""

    action: str
    target: str
    blobs: int = 0
    present: int = 0
    transferred: int = 0
    bytes: int = 0
    seconds: float = 0.0
    failures: list[str] = field(default_factory=list)
    repaired: int = 0  # of ``transferred``: copies on the remote replaced (push)
    manifests: int = 0  # bundle manifests written (push to an OCI registry)

    def line(self) -> str:
        """One line for logs and non-terminal output."""
        mib = self.bytes / (1 << 20)
        rate = f", {mib / self.seconds:.1f} MiB/s" if self.seconds > 0 and self.bytes else ""
        failed = f"; {len(self.failures)} FAILED" if self.failures else ""
        repaired = f" ({self.repaired} replacing a corrupt copy)" if self.repaired else ""
        manifests = f"; {self.manifests} bundle manifest(s) written" if self.manifests else ""
        return (
            f"{self.action} {self.target}: {self.transferred} of {self.blobs} blobs transferred"
            f"{repaired} ({mib:.1f} MiB in {self.seconds:.2f} s{rate}), {self.present} already "
            f"present{manifests}{failed}"
        )


# Temporary files of streamed downloads being written now: a progress line adds the
# bytes they hold, so one large blob shows byte-level progress, not a jump at its end.
_inflight_lock = threading.Lock()
_inflight: set[Path] = set()
_active_bars: set[Progress] = set()


def _inflight_bytes() -> int:
    with _inflight_lock:
        paths = list(_inflight)
    total = 0
    for path in paths:
        with contextlib.suppress(OSError):
            total += os.stat(path).st_size
    return total


class Progress:
    """A progress line when ``stream`` is a terminal; silent otherwise (or without one):
    blobs done of the total, bytes, blobs failed so far, and the rate.

    On a terminal a ticker thread redraws it five times a second with the bytes of
    streamed downloads still in flight, so a single large blob moves the line too.
    """

    def __init__(self, label: str, total: int, total_bytes: int, stream: IO[str] | None = None):
        self.label = label
        self.total = total
        self.total_bytes = total_bytes
        self.done = 0
        self.done_bytes = 0
        self.failed = 0
        self._start = time.monotonic()
        self._stream = stream if stream is not None else sys.stderr
        self._enabled = stream is not None and bool(getattr(stream, "isatty", lambda: False)())
        self._lock = threading.Lock()
        self._partial: dict[str, int] = {}
        self._last = 0.0
        self._closed = threading.Event()
        self._ticker: threading.Thread | None = None
        if self._enabled and total:
            _active_bars.add(self)
            self._ticker = threading.Thread(target=self._tick, name="evstore-progress", daemon=True)
            self._ticker.start()

    def _tick(self) -> None:
        while not self._closed.wait(0.2):
            self.render()

    def render(self) -> None:
        """Redraw the line now (finished blobs plus bytes in flight)."""
        if not self._enabled or self._closed.is_set():
            return
        with self._lock:
            self._last = time.monotonic()
            partial = sum(self._partial.values())
            shown = min(self.done_bytes + partial + _inflight_bytes(), self.total_bytes)
            failed = f", {self.failed} failed" if self.failed else ""
            seconds = self._last - self._start
            rate = f", {shown / (1 << 20) / seconds:.1f} MiB/s" if seconds > 0 and shown else ""
            self._stream.write(
                f"\r{self.label}: {self.done}/{self.total} blobs{failed}, "
                f"{shown / (1 << 20):.1f}/{self.total_bytes / (1 << 20):.1f} MiB{rate}\x1b[K"
            )
            self._stream.flush()

    def sent(self, key: str, nbytes: int) -> None:
        """Count ``nbytes`` more of blob ``key`` in flight (uploads report as they go)."""
        with self._lock:
            self._partial[key] = self._partial.get(key, 0) + nbytes

    def advance(self, nbytes: int, key: str | None = None) -> None:
        """Count one finished blob of ``nbytes`` (dropping what ``key`` had in flight)."""
        with self._lock:
            if key is not None:
                self._partial.pop(key, None)
            self.done += 1
            self.done_bytes += nbytes
            now = time.monotonic()
            due = now - self._last >= 0.1 or self.done == self.total
        if due:
            self.render()

    def fail(self, key: str | None = None) -> None:
        """Count one blob that failed (dropping what ``key`` had in flight)."""
        with self._lock:
            if key is not None:
                self._partial.pop(key, None)
            self.failed += 1
        self.render()

    def close(self) -> None:
        """Stop the ticker and clear the progress line."""
        self._closed.set()
        _active_bars.discard(self)
        if self._ticker is not None:
            self._ticker.join()
        if self._enabled and self.total:
            with self._lock:
                self._stream.write("\r\x1b[K")
                self._stream.flush()


def parallel(
    items: Sequence[T], fn: Callable[[T], R], jobs: int
) -> list[tuple[T, R | None, EvidenceStoreError | None]]:
    """Apply ``fn`` to every item on ``jobs`` threads; collect results and errors."""

    def one(item: T) -> tuple[T, R | None, EvidenceStoreError | None]:
        try:
            return item, fn(item), None
        except EvidenceStoreError as exc:
            return item, None, exc
        except OSError as exc:
            return item, None, StorageError(f"{_item_name(item)}: {exc.strerror or exc}")

    if jobs <= 1 or len(items) <= 1:
        return [one(i) for i in items]
    with ThreadPoolExecutor(max_workers=min(jobs, len(items))) as pool:
        return list(pool.map(one, items))


def _item_name(item: object) -> str:
    if isinstance(item, tuple) and item:
        return str(item[0])
    return str(item)


def sizes_of(store: BlobStore, digests: Iterable[str]) -> dict[str, int | None]:
    """Return each digest's stored size (None when absent), batched where possible."""
    return store.upkeep.sizes(sorted(set(digests)))


# -- downloads ---------------------------------------------------------------------
# Raw reads (``_read_raw``, ``_download_raw``, ``_read_batch``) are unverified: each
# reads at most one byte past the expected size (so an object bigger than expected
# cannot exhaust memory) and what it returns is checked here before anything keeps it.
def check_bytes(source: Source, digest: str, size: int | None, data: bytes | memoryview) -> None:
    """Check received bytes (size first, then hash) before anything keeps them."""
    n = len(data)
    observed = hash_bytes(data).digest if size is None or n == size else None
    check_content(source.label, digest, size, observed, n, suffix="; refused")


def check_copy(source: Source, digest: str, size: int) -> None:
    """Download and hash ``source``'s copy of a blob without keeping it (never reading
    more than one byte past ``size``); an :class:`IntegrityError` when it is wrong."""
    store = source.store
    if size > STREAM_THRESHOLD:
        import tempfile

        with tempfile.TemporaryDirectory(prefix="evstore-verify-") as tmpdir:
            path = os.path.join(tmpdir, "blob")
            store._download_raw(digest, path, limit=size + 1)
            check_content(source.label, digest, size, None, os.stat(path).st_size)
            check_content(source.label, digest, size, hash_file(path, size).digest, size)
        return
    check_bytes(source, digest, size, store._read_raw(digest, limit=size + 1))


def _publish_bytes(cache: BlobStore, digest: str, data: bytes) -> None:
    """Store already-verified bytes in the cache atomically.

    Fetched copies are not fsynced one by one: they can be fetched again, and a copy
    torn by a power loss fails the size or hash check of the next read, which the
    read-through store and ``pull`` answer by fetching it again.
    """
    incoming = cache.upkeep
    if not isinstance(incoming, SupportsIncoming):
        cache.put(data, expected=digest)
        return
    tmp: Path | None = None
    try:
        tmp = incoming.incoming_path()
        with open(tmp, "xb") as fh:
            fh.write(data)
        _steps.reached("fetch-written")
        incoming.adopt(tmp, digest, len(data), durable=False)
    except (OSError, StorageError) as exc:
        raise _local_failure(cache, digest, exc) from exc
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


def _download_streamed(source: Source, cache: BlobStore, digest: str, size: int) -> None:
    incoming = cache.upkeep
    if not isinstance(incoming, SupportsIncoming):
        raise TypeError(f"{cache!r} cannot take streamed downloads")
    tmp: Path | None = None
    try:
        try:
            tmp = incoming.incoming_path()
            with open(tmp, "xb"):
                pass
        except (OSError, StorageError) as exc:
            raise _local_failure(cache, digest, exc) from exc
        with _inflight_lock:
            _inflight.add(tmp)
        source.store._download_raw(digest, str(tmp), limit=size + 1)
        observed_size = os.stat(tmp).st_size
        check_content(source.label, digest, size, None, observed_size, suffix="; refused")
        observed = hash_file(tmp, size).digest
        check_content(source.label, digest, size, observed, size, suffix="; refused")
        _steps.reached("fetch-written")
        try:
            incoming.adopt(tmp, digest, size, durable=False)
        except (OSError, StorageError) as exc:
            raise _local_failure(cache, digest, exc) from exc
    finally:
        if tmp is not None:
            with _inflight_lock:
                _inflight.discard(tmp)
            with contextlib.suppress(OSError):
                os.unlink(tmp)


def download(
    sources: Sequence[Source],
    cache: BlobStore,
    digest: str,
    size: int | None = None,
    *,
    looked_before: Sequence[str] = (),
) -> tuple[str, int]:
    """Fetch ``digest`` from the first source holding an intact copy into ``cache``.

    Sources are tried in order; a copy of the wrong size or content is refused (never
    cached) and the next source is tried. Returns the source's name and the size.
    Raises :class:`BlobNotFoundError` when no source has it, or the
    :class:`IntegrityError` / :class:`StorageError` class of the failures met, with a
    message naming every place looked (``looked_before`` first) and what was found.
    """
    return _download_from(sources, cache, digest, size, list(looked_before), [])


def _looked_at(
    source: Source, exc: EvidenceStoreError, looked: list[str], errors: list[EvidenceStoreError]
) -> None:
    """Record what ``source`` answered for a blob it did not deliver."""
    if isinstance(exc, LocalWriteError):
        raise exc
    if isinstance(exc, BlobNotFoundError):
        looked.append(f"{source.label}: absent")
    else:
        errors.append(exc)
        looked.append(source.labelled(exc))


def _download_from(
    sources: Sequence[Source],
    cache: BlobStore,
    digest: str,
    size: int | None,
    looked: list[str],
    errors: list[EvidenceStoreError],
) -> tuple[str, int]:
    for source in sources:
        try:
            expected = size
            if expected is None or expected == 0 or expected > STREAM_THRESHOLD:
                stored = source.store.size(digest)
                if stored is None:
                    raise BlobNotFoundError(digest)
                if expected is not None and stored != expected:
                    raise IntegrityError(
                        f"{source.label}: {digest}: stores {stored} bytes, expected {expected}; "
                        "refused"
                    )
                bound = source.max_unregistered_size
                if expected is None and bound is not None and stored > bound:
                    raise IntegrityError(
                        f"{source.label}: {digest}: stores {stored} bytes, more than the "
                        f"{bound} allowed for a digest that no registration names; refused "
                        "before reading (raise max_unregistered_size of the remote in "
                        "evstore.toml to fetch it)"
                    )
                expected = stored
            if expected > STREAM_THRESHOLD and isinstance(cache.upkeep, SupportsIncoming):
                _download_streamed(source, cache, digest, expected)
            else:
                data = source.store._read_raw(digest, limit=expected + 1) if expected else b""
                check_bytes(source, digest, expected, data)
                _publish_bytes(cache, digest, data)
            return source.name, expected
        except (BlobNotFoundError, IntegrityError, StorageError) as exc:
            _looked_at(source, exc, looked, errors)
    places = "; ".join(looked) if looked else "no local store or remote configured"
    message = f"{digest} could not be fetched: {places}"
    if any(isinstance(e, IntegrityError) for e in errors):
        raise IntegrityError(message)
    if errors:
        raise StorageError(message)
    raise BlobNotFoundError(message)


def download_all(
    sources: Sequence[Source],
    cache: BlobStore,
    items: Sequence[tuple[str, int | None]],
    jobs: int,
    looked_before: Callable[[str], list[str]],
    done: Callable[[int], None] = lambda _n: None,
    failed_one: Callable[[], None] = lambda: None,
) -> list[tuple[tuple[str, int | None], int | None, EvidenceStoreError | None]]:
    """:func:`download` every item, like ``parallel(items, ..., jobs)`` (same results,
    in order); ``done`` hears each fetched blob's size, ``failed_one`` of each blob no
    source gave.

    Blobs of known size up to :data:`STREAM_THRESHOLD` whose first source reads in
    batches are read on that store's event loop, ``jobs`` at a time, each checked
    (size, then hash) and published as it arrives; one it does not deliver goes on to
    the other sources as :func:`download` would. Everything else takes a thread each.
    """
    batch: list[tuple[str, int]] = []
    first: Source | None = sources[0] if sources else None
    reader: SupportsBatchRead | None = None
    if first is not None and len(items) > 1:
        try:
            store = first.store
        except StorageError:  # reported per blob below, as download does
            store = None
        upkeep = None if store is None else store.upkeep
        if isinstance(upkeep, SupportsBatchRead) and upkeep.supports_batch_read:
            reader = upkeep
            batch = [(d, s) for d, s in items if s is not None and 0 < s <= STREAM_THRESHOLD]
    sizes = dict(batch)
    failed: dict[str, Exception] = {}
    if batch:
        assert first is not None and reader is not None

        def consume(digest: str, data: bytes) -> None:
            check_bytes(first, digest, sizes[digest], data)
            _publish_bytes(cache, digest, data)
            done(len(data))

        answers = reader._read_batch([(d, s + 1) for d, s in batch], consume, concurrency=jobs)
        failed = {d: e for d, e in answers.items() if e is not None}

    def one(item: tuple[str, int | None]) -> int:
        try:
            return fetch_one(item)
        except BaseException:
            failed_one()
            raise

    def fetch_one(item: tuple[str, int | None]) -> int:
        digest, size = item
        if digest in sizes:
            exc = failed[digest]
            if not isinstance(exc, EvidenceStoreError):
                raise exc  # an OSError is reported by parallel; anything else is a bug
            looked, errors = looked_before(digest), list[EvidenceStoreError]()
            assert first is not None
            _looked_at(first, exc, looked, errors)
            got = _download_from(sources[1:], cache, digest, size, looked, errors)[1]
        else:
            got = download(sources, cache, digest, size, looked_before=looked_before(digest))[1]
        done(got)
        return got

    rest = [item for item in items if item[0] not in sizes or item[0] in failed]
    answered = {item[0]: (got, error) for item, got, error in parallel(rest, one, jobs)}
    out: list[tuple[tuple[str, int | None], int | None, EvidenceStoreError | None]] = []
    for item in items:
        if item[0] in answered:
            got, error = answered[item[0]]
            out.append((item, got, error))
        else:
            out.append((item, sizes[item[0]], None))
    return out


# -- uploads -----------------------------------------------------------------------
def upload(
    cache: LocalBlobStore,
    remote: Source,
    digest: str,
    size: int,
    on_bytes: Callable[[int], None] | None = None,
) -> None:
    """Upload a blob from the local store to a remote, re-hashing it first.

    The remote never shows a partial blob under its final key: object stores publish
    a PUT only once complete; other backends write a temporary then move it.
    """
    path = cache.path_of(digest)
    local = Source("local store", cache)
    try:
        if size <= STREAM_THRESHOLD:
            with open(path, "rb") as fh:
                data = fh.read()
            check_bytes(local, digest, size, data)
        else:
            check_content(local.label, digest, size, hash_file(path, size).digest, size)
    except FileNotFoundError:
        raise BlobNotFoundError(
            f"{digest} cannot be pushed to {remote.label}: it is not in the {local.label}"
        ) from None
    except IntegrityError as exc:
        raise IntegrityError(f"refusing to push a corrupt blob: {exc}") from None
    try:
        # The blob is known to be missing there and was just verified: no second check.
        if size <= STREAM_THRESHOLD:
            remote.store.upkeep.write_verified(digest, data)
        else:
            remote.store.upkeep.upload_file(digest, str(path), size, on_bytes=on_bytes)
    except (StorageError, OSError) as exc:
        detail = exc.strerror or exc if isinstance(exc, OSError) else exc
        text = str(detail)
        if text.startswith(remote.label):  # already says where
            text = text[len(remote.label) :].lstrip(": ")
        raise StorageError(f"{remote.label}: {digest}: cannot upload: {text}") from exc
    _steps.reached("push-uploaded")
