"""A blob store on any fsspec filesystem (``s3://``, ``gs://``, ``memory://``, ``http://``).

Every request is retried on transient failures (connection errors, timeouts, 5xx)
with bounded exponential backoff (:class:`RetryPolicy`), then reported as a
:class:`StorageError` naming the store, the digest and the cause. Object stores make
a PUT visible only once complete, so blobs are written straight to their final key;
elsewhere a temporary key ``<root>/blobs/.tmp/<32 hex>`` is written then moved. HTTP(S)
stores are read-only, and their presence checks tell a missing blob (404) from a
failing server (which ``fsspec``'s own ``info`` does not).

A download of known size also has an overall deadline, retries included (each attempt
of an object-store ``cat`` has the whole of it):
``deadline_floor + size / min_rate`` seconds (:meth:`RetryPolicy.deadline`), so a
server trickling bytes just fast enough to beat the per-read timeout cannot hold a
transfer forever; it is cut with a :class:`TransferDeadlineError` and nothing of it is
kept (callers write to a temporary they remove).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as _dt
import inspect
import io
import os
import random
import re
import time
import urllib.parse
from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, BinaryIO, TypeVar, cast

from ..digest import digest_from_hex, digest_hex, parse_digest
from ..errors import BlobNotFoundError, EvidenceStoreError, StorageError, TransferDeadlineError
from ._base import LEASE_DIR, QUARANTINE_DIR, RESULT_DIR, BlobInfo, BlobStore, Upkeep, blob_key

__all__ = [
    "DEFAULT_DEADLINE_FLOOR",
    "DEFAULT_MIN_RATE",
    "BlobInfo",
    "FsspecBlobStore",
    "FsspecUpkeep",
    "RetryPolicy",
    "TransferDeadlineError",
    "is_transient",
]

T = TypeVar("T")

_ATOMIC_PUT = frozenset({"s3", "s3a", "gs", "gcs", "az", "abfs", "abfss", "memory"})
_READ_ONLY = frozenset({"http", "https"})
_LISTING_CACHED = frozenset({"s3", "s3a", "gs", "gcs", "az", "abfs", "abfss"})
# Temporaries of non-atomic backends: ``<root>/blobs/.tmp/<32 hex>``; gc only ever
# treats keys of exactly that shape as its own.
TMP_DIR = "blobs/.tmp"
_QUARANTINED = re.compile(r"^([0-9a-f]{64})-[0-9a-f]{16}$")
_TMP_NAME = re.compile(r"^[0-9a-f]{32}$")
_REDIRECTS = frozenset({301, 302, 303, 307, 308})
_MAX_REDIRECTS = 5
# Batches at least this large are answered by listing key prefixes, not per-key HEADs.
_LIST_THRESHOLD = 16
# A remote this many listing pages (1,000 keys each) or smaller is listed whole, in
# sequence; a bigger one is listed per ``<2 hex>/`` prefix, concurrently.
_FULL_LISTING_PAGES = 8
# A download must average at least this many bytes per second beyond its floor.
DEFAULT_MIN_RATE = 64 * 1024
DEFAULT_DEADLINE_FLOOR = 60.0


@dataclass(frozen=True)
class RetryPolicy:
    """Bounded retries: ``attempts`` tries per request, backoff doubling from
    ``backoff`` seconds up to ``max_backoff`` (with jitter), ``timeout`` seconds per
    connection and read (None: the backend's default); a download of known size must
    complete, retries included, within ``deadline_floor + size / min_rate`` seconds
    (``min_rate`` None: no overall deadline)."""

    attempts: int = 4
    backoff: float = 0.25
    max_backoff: float = 8.0
    timeout: float | None = 60.0
    min_rate: float | None = DEFAULT_MIN_RATE
    deadline_floor: float = DEFAULT_DEADLINE_FLOOR

    def deadline(self, size: int | None) -> float | None:
        """Seconds a download of ``size`` bytes may take in all (None: unbounded)."""
        if size is None or self.min_rate is None:
            return None
        return self.deadline_floor + size / self.min_rate

    def delay(self, failures: int) -> float:
        """Seconds to wait after the ``failures``-th consecutive failure (1-based)."""
        base = min(self.max_backoff, self.backoff * 2.0 ** (failures - 1))
        return base * (0.5 + random.random() / 2)


_PERMANENT = (
    FileNotFoundError,
    PermissionError,
    IsADirectoryError,
    NotADirectoryError,
    FileExistsError,
    ValueError,
    TypeError,
    NotImplementedError,
    KeyError,
    # Programming errors: retrying cannot help.
    AttributeError,
    NameError,
    AssertionError,
    ImportError,
)


def is_transient(exc: BaseException) -> bool:
    """Return whether a failure may go away if the request is retried."""
    if isinstance(exc, (*_PERMANENT, EvidenceStoreError)) or _is_credentials_error(exc):
        return False
    status = getattr(exc, "status", None)  # aiohttp.ClientResponseError
    if isinstance(status, int):
        return status >= 500 or status in (408, 429)
    response = getattr(exc, "response", None)  # botocore.exceptions.ClientError
    if isinstance(response, dict):
        code = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        if isinstance(code, int):
            return code >= 500 or code in (408, 429)
    return isinstance(exc, Exception)


def _is_credentials_error(exc: BaseException) -> bool:
    names = {cls.__name__ for cls in type(exc).__mro__}
    return bool(
        names
        & {
            "NoCredentialsError",
            "PartialCredentialsError",
            "CredentialRetrievalError",
            "NoAuthTokenError",
            "DefaultCredentialsError",
        }
    )


def _describe(exc: BaseException) -> str:
    text = str(exc).strip() or repr(exc)
    return f"{type(exc).__name__}: {text}"


def _mtime(info: dict[str, Any]) -> float | None:
    for key in ("LastModified", "mtime", "created", "last_modified", "updated"):
        value = info.get(key)
        if isinstance(value, _dt.datetime):
            if value.tzinfo is None:
                value = value.replace(tzinfo=_dt.UTC)
            return value.timestamp()
        if isinstance(value, int | float):
            return float(value)
        if isinstance(value, str) and value:
            with contextlib.suppress(ValueError):
                return _dt.datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    return None


def prepare_options(url: str, options: dict[str, Any], policy: RetryPolicy) -> dict[str, Any]:
    """Return storage options for ``url`` with timeouts and single-shot backend retries
    (the store retries itself, so its policy bounds the total), keeping any the user
    set explicitly."""
    import fsspec.core

    protocol = fsspec.core.split_protocol(url)[0] or "file"
    out = dict(options)
    if protocol in ("s3", "s3a"):
        config = dict(out.get("config_kwargs") or {})
        if policy.timeout is not None:
            config.setdefault("connect_timeout", policy.timeout)
            config.setdefault("read_timeout", policy.timeout)
        config.setdefault("retries", {"max_attempts": 1, "mode": "standard"})
        config.setdefault("max_pool_connections", 64)
        endpoint = str(out.get("endpoint_url") or "")
        if endpoint.startswith("http://"):
            # Over plain HTTP botocore signs a SHA-256 of every body, which the server
            # checks: an extra CRC32 of each upload would only repeat that check.
            config.setdefault("request_checksum_calculation", "when_required")
        out["config_kwargs"] = config
    elif protocol in ("http", "https"):
        # Only the configured remote is contacted: the store follows a redirect itself,
        # and only to the same scheme, host and port.
        out["allow_redirects"] = False
        if policy.timeout is not None:
            import aiohttp

            client = dict(out.get("client_kwargs") or {})
            client.setdefault(
                "timeout",
                aiohttp.ClientTimeout(
                    total=None, sock_connect=policy.timeout, sock_read=policy.timeout
                ),
            )
            out["client_kwargs"] = client
    if protocol in _LISTING_CACHED:
        out.setdefault("use_listings_cache", False)
    return out


class FsspecBlobStore(BlobStore):
    """Blobs under ``<url>/blobs/blake3/<2 hex>/<64 hex>`` on an fsspec filesystem."""

    def __init__(
        self,
        url: str,
        *,
        read_only: bool = False,
        storage_options: dict[str, Any] | None = None,
        fs: Any = None,
        retry: RetryPolicy | None = None,
    ) -> None:
        import fsspec

        self.retry = retry or RetryPolicy()
        self.url = url.rstrip("/")
        if fs is None:
            options = prepare_options(url, storage_options or {}, self.retry)
            try:
                fs, path = fsspec.core.url_to_fs(url, **options)
            except (ImportError, ValueError, TypeError) as exc:
                raise StorageError(
                    f"{self.url}: cannot open this location: {_describe(exc)}"
                ) from exc
        else:
            path = fs._strip_protocol(url)
        protocols = fs.protocol if isinstance(fs.protocol, tuple) else (fs.protocol,)
        self.fs = fs
        if hasattr(fs, "retries"):
            fs.retries = 1  # s3fs: our own loop retries, with our policy
        self._path = str(path).rstrip("/")
        self._protocols = frozenset(protocols)
        self._http = bool(self._protocols & _READ_ONLY)
        super().__init__(read_only=read_only or self._http)

    @property
    def location(self) -> str:
        return self.url

    @property
    def supports_listing(self) -> bool:
        return not self._http

    @property
    def atomic_put(self) -> bool:
        """Whether a PUT becomes visible only once complete."""
        return bool(self._protocols & _ATOMIC_PUT)

    @property
    def upkeep(self) -> FsspecUpkeep:
        """Transfers' and gc's methods (see :class:`FsspecUpkeep`)."""
        return cast(FsspecUpkeep, super().upkeep)

    def _make_upkeep(self) -> FsspecUpkeep:
        return FsspecUpkeep(self)

    def _key_of(self, digest: str) -> str:
        if self._http:
            return f"{self.url}/{blob_key(digest)}"
        return f"{self._path}/{blob_key(digest)}"

    # -- retries ------------------------------------------------------------
    def _fail(self, what: str, exc: BaseException, attempts: int = 1) -> StorageError:
        if _is_credentials_error(exc):
            return StorageError(
                f"{self.url}: no usable credentials ({_describe(exc)}); they come from the "
                "backend's usual sources (environment variables, profiles), never evstore.toml"
            )
        tries = f" after {attempts} attempts" if attempts > 1 else ""
        return StorageError(f"{self.url}: {what} failed{tries}: {_describe(exc)}")

    def _call(self, what: str, fn: Callable[[], T]) -> T:
        """Run ``fn`` with retries; FileNotFoundError passes through untouched."""
        failures = 0
        while True:
            try:
                return fn()
            except (FileNotFoundError, TransferDeadlineError):
                raise
            except Exception as exc:
                failures += 1
                if not is_transient(exc) or failures >= self.retry.attempts:
                    raise self._fail(what, exc, failures) from exc
                time.sleep(self.retry.delay(failures))

    async def _acall(self, what: str, fn: Callable[[], Awaitable[T]]) -> T:
        failures = 0
        while True:
            try:
                return await fn()
            except FileNotFoundError:
                raise
            except Exception as exc:
                failures += 1
                if not is_transient(exc) or failures >= self.retry.attempts:
                    raise self._fail(what, exc, failures) from exc
                await asyncio.sleep(self.retry.delay(failures))

    def _run(self, coro: Awaitable[T]) -> T:
        from fsspec.asyn import sync

        return sync(self.fs.loop, lambda: coro)  # type: ignore[no-any-return]

    # -- primitives ---------------------------------------------------------
    def _exists(self, digest: str) -> bool:
        return self._size(digest) is not None

    def _size(self, digest: str) -> int | None:
        return self.upkeep.sizes([digest])[digest]

    def _http_kwargs(self) -> tuple[dict[str, Any], dict[str, Any]]:
        headers = {**self.fs.kwargs.get("headers", {}), "Accept-Encoding": "identity"}
        kwargs = {
            k: v for k, v in self.fs.kwargs.items() if k not in ("headers", "allow_redirects")
        }
        return headers, kwargs

    async def _http_request(self, method: str, digest: str) -> Any:
        """Send ``method`` for a blob, following redirects only to the same scheme, host
        and port (another host is refused: only configured remotes are contacted).
        Returns the response, which the caller releases."""
        session = await self.fs.set_session()
        headers, kwargs = self._http_kwargs()
        url = self.fs.encode_url(self._key_of(digest))
        origin = urllib.parse.urlsplit(str(url))
        for _ in range(_MAX_REDIRECTS + 1):
            response = await session.request(
                method, url, allow_redirects=False, headers=headers, **kwargs
            )
            if response.status not in _REDIRECTS:
                return response
            location = response.headers.get("Location", "")
            response.release()
            target = urllib.parse.urljoin(str(url), location)
            there = urllib.parse.urlsplit(target)
            if (there.scheme, there.netloc) != (origin.scheme, origin.netloc):
                raise StorageError(
                    f"{self.url}: {digest}: the server redirects to {target}, another host; "
                    "refused (only configured remotes are contacted)"
                )
            url = target
        raise StorageError(f"{self.url}: {digest}: more than {_MAX_REDIRECTS} redirects")

    async def _http_size(self, digest: str) -> int | None:
        url = self._key_of(digest)

        async def head() -> int | None:
            response = await self._http_request("HEAD", digest)
            async with response:
                if response.status in (404, 410):
                    return None
                response.raise_for_status()
                length = response.headers.get("Content-Length")
                if length is None:
                    raise StorageError(f"{url}: the server gave no Content-Length")
                return int(length)

        return await self._acall(f"HEAD {digest}", head)

    def _deadline_error(self, digest: str, budget: float, size: int) -> TransferDeadlineError:
        return TransferDeadlineError(
            f"{self.url}: GET {digest}: not complete within its deadline of {budget:.1f} s "
            f"({size} bytes at a minimum rate of {self.retry.min_rate:g} bytes/s, plus "
            f"{self.retry.deadline_floor:g} s); the partial copy was discarded (min_rate and "
            "deadline_floor of the remote in evstore.toml set the deadline)"
        )

    async def _http_get(self, digest: str, limit: int | None, dest: str | None) -> bytes:
        """GET a blob, stopping after ``limit`` bytes; into ``dest`` when given; within
        the policy's deadline for ``limit`` bytes."""
        return await self._within(self._http_get_retried(digest, limit, dest), digest, limit)

    async def _within(self, coro: Awaitable[T], digest: str, limit: int | None) -> T:
        """Await ``coro`` under the deadline for ``limit`` bytes (none when unknown)."""
        budget = self.retry.deadline(limit)
        timer = asyncio.timeout(budget)
        try:
            async with timer:
                return await coro
        except TimeoutError:
            if not timer.expired() or budget is None or limit is None:
                raise  # a timeout of the request itself, not the deadline
            raise self._deadline_error(digest, budget, limit) from None

    async def _http_get_retried(self, digest: str, limit: int | None, dest: str | None) -> bytes:

        async def get() -> bytes:
            response = await self._http_request("GET", digest)
            async with response:
                if response.status in (404, 410):
                    raise FileNotFoundError(self._key_of(digest))
                response.raise_for_status()
                chunks: list[bytes] = []
                total = 0
                out = open(dest, "wb") if dest is not None else None  # noqa: SIM115
                try:
                    async for chunk in response.content.iter_chunked(1 << 20):
                        if limit is not None and total + len(chunk) > limit:
                            chunk = chunk[: limit - total]
                        total += len(chunk)
                        if out is not None:
                            out.write(chunk)
                        else:
                            chunks.append(chunk)
                        if limit is not None and total >= limit:
                            break  # enough to refuse an oversized copy
                finally:
                    if out is not None:
                        out.close()
                return b"".join(chunks)

        return await self._acall(f"GET {digest}", get)

    async def _info_size(self, digest: str) -> int | None:
        key = self._key_of(digest)
        try:
            info = await self._acall(f"HEAD {digest}", lambda: self.fs._info(key))
        except FileNotFoundError:
            return None
        size = info.get("size")
        return int(size) if size is not None and info.get("type") != "directory" else None

    async def _list_all(self, limit: int) -> dict[str, int] | None:
        """List every blob in one paginated listing, or None past ``limit`` keys."""
        bucket, _, key = f"{self._path}/blobs/blake3/".partition("/")

        async def listing() -> dict[str, int] | None:
            entries = []
            async for entry in self.fs._iterdir(bucket, delimiter="", prefix=key):
                entries.append(entry)
                if len(entries) > limit:
                    return None
            return _sizes_from_listing(entries)

        try:
            return await self._acall("list", listing)
        except FileNotFoundError:
            return {}

    async def _list_prefix(self, prefix: str) -> dict[str, int]:
        base = f"{self._path}/blobs/blake3/{prefix}"

        async def ls() -> list[dict[str, Any]]:
            if hasattr(self.fs, "_lsdir"):  # s3fs: one paginated listing, no fallbacks
                return await self.fs._lsdir(base, refresh=True)  # type: ignore[no-any-return]
            return await self.fs._ls(base, detail=True, refresh=True)  # type: ignore[no-any-return]

        try:
            entries = await self._acall(f"list {prefix}", ls)
        except FileNotFoundError:
            return {}
        return _sizes_from_listing(entries)

    @staticmethod
    async def _gather(coros: Sequence[Awaitable[T]], concurrency: int) -> list[T]:
        semaphore = asyncio.Semaphore(concurrency)

        async def bounded(coro: Awaitable[T]) -> T:
            async with semaphore:
                return await coro

        return await asyncio.gather(*(bounded(c) for c in coros))

    def _sync_list_prefix(self, prefix: str) -> dict[str, int]:
        base = f"{self._path}/blobs/blake3/{prefix}"
        try:
            entries = self._call(f"list {prefix}", lambda: self.fs.ls(base, detail=True))
        except FileNotFoundError:
            return {}
        return _sizes_from_listing(entries)

    def _sync_info_size(self, digest: str) -> int | None:
        key = self._key_of(digest)
        try:
            info = self._call(f"HEAD {digest}", lambda: self.fs.info(key))
        except FileNotFoundError:
            return None
        size = info.get("size")
        return int(size) if size is not None and info.get("type") != "directory" else None

    def _open_raw(self, digest: str) -> BinaryIO:
        return io.BytesIO(self._read_raw(digest))

    def _read_raw(self, digest: str, *, limit: int | None = None) -> bytes:
        """Return a blob's stored bytes, unverified (callers verify); retried. With
        ``limit``, at most that many bytes are read (a ranged GET), so an oversized
        object cannot exhaust memory."""
        key = self._key_of(digest)

        if self._http:  # retried inside, with the same policy
            try:
                return self._run(self._http_get(digest, limit, None))
            except FileNotFoundError:
                raise BlobNotFoundError(f"{digest} is not in store {self.url}") from None

        def cat() -> bytes:
            if self.fs.async_impl:
                # One GET: no size probe first, whatever the backend's default.
                kwargs = _one_get(self.fs)
                if limit is not None:
                    kwargs.update(start=0, end=limit)
                data: bytes = self._run(
                    self._within(self.fs._cat_file(key, **kwargs), digest, limit)
                )
                return data
            if limit is not None:
                return self.fs.cat_file(key, start=0, end=limit)  # type: ignore[no-any-return]
            return self.fs.cat_file(key)  # type: ignore[no-any-return]

        try:
            return self._call(f"GET {digest}", cat)
        except FileNotFoundError:
            raise BlobNotFoundError(f"{digest} is not in store {self.url}") from None

    def _download_raw(self, digest: str, path: str, *, limit: int | None = None) -> None:
        """Copy a blob's stored bytes to a local file, unverified (callers verify); with
        ``limit``, stop after that many bytes."""
        key = self._key_of(digest)

        if self._http:  # retried inside, with the same policy
            try:
                self._run(self._http_get(digest, limit, path))
                return
            except FileNotFoundError:
                raise BlobNotFoundError(f"{digest} is not in store {self.url}") from None

        budget = self.retry.deadline(limit)
        end = None if budget is None else time.monotonic() + budget

        def get() -> None:
            with self.fs.open(key, "rb", block_size=8 << 20) as src, open(path, "wb") as dst:
                written = 0
                while limit is None or written < limit:
                    if end is not None and time.monotonic() > end:
                        assert budget is not None and limit is not None
                        raise self._deadline_error(digest, budget, limit)
                    want = 8 << 20 if limit is None else min(8 << 20, limit - written)
                    chunk = src.read(want)
                    if not chunk:
                        break
                    dst.write(chunk)
                    written += len(chunk)

        try:
            self._call(f"GET {digest}", get)
        except FileNotFoundError:
            raise BlobNotFoundError(f"{digest} is not in store {self.url}") from None

    def _not_found(self, digest: str, exc: FileNotFoundError) -> StorageError:
        return StorageError(
            f"{self.url}: {digest}: cannot write: bucket or prefix not found ({_describe(exc)})"
        )

    def _write(self, digest: str, data: bytes) -> None:
        self._check_writable()
        final = self._key_of(digest)
        try:
            if self.atomic_put:
                self._call(f"PUT {digest}", lambda: self.fs.pipe_file(final, data))
                return
            self._via_temporary(digest, final, lambda tmp: self.fs.pipe_file(tmp, data))
        except FileNotFoundError as exc:
            raise self._not_found(digest, exc) from exc

    def _write_file(self, digest: str, path: str, size: int) -> None:
        self.upkeep.upload_file(digest, path, size)

    def _via_temporary(self, digest: str, final: str, write: Callable[[str], Any]) -> None:
        tmp = f"{self._path}/{TMP_DIR}/{os.urandom(16).hex()}"
        try:

            def publish() -> None:
                self.fs.makedirs(self.fs._parent(final), exist_ok=True)
                self.fs.makedirs(self.fs._parent(tmp), exist_ok=True)
                write(tmp)
                self.fs.mv(tmp, final)

            self._call(f"PUT {digest}", publish)
        finally:
            with contextlib.suppress(Exception):
                if self.fs.exists(tmp):
                    self.fs.rm(tmp)

    def _delete(self, digest: str) -> None:
        key = self._key_of(digest)
        with contextlib.suppress(FileNotFoundError):
            self._call(f"DELETE {digest}", lambda: self.fs.rm(key))

    def _find(self, base: str) -> dict[str, dict[str, Any]]:
        if not self.supports_listing:
            raise StorageError(f"{self.url}: listing is not supported by this backend")
        try:
            found = self._call("list", lambda: self.fs.find(base, detail=True))
        except FileNotFoundError:
            return {}
        return found if isinstance(found, dict) else {}

    def _iter(self) -> Iterator[str]:
        for info in self.upkeep.iter_blobs():
            yield info.digest


def _one_get(fs: Any) -> dict[str, Any]:
    """Keywords that make ``fs._cat_file`` one GET: s3fs splits large reads into
    concurrent ranged GETs unless told ``max_concurrency=1``; older s3fs (and other
    backends) take no such keyword and read with one GET already."""
    try:
        accepted = inspect.signature(fs._cat_file).parameters
    except (TypeError, ValueError):
        return {}
    return {"max_concurrency": 1} if "max_concurrency" in accepted else {}


def _digest_of_key(key: str) -> str | None:
    parts = key.rstrip("/").rsplit("/", 2)
    if len(parts) == 3 and len(parts[2]) == 64 and parts[2].startswith(parts[1]):
        digest = digest_from_hex(parts[2])
        with contextlib.suppress(ValueError):
            return parse_digest(digest)
    return None


def _sizes_from_listing(entries: Iterable[dict[str, Any]]) -> dict[str, int]:
    out: dict[str, int] = {}
    for entry in entries:
        if entry.get("type") == "directory":
            continue
        digest = _digest_of_key(str(entry.get("name", "")))
        if digest is not None and entry.get("size") is not None:
            out[digest] = int(entry["size"])
    return out


class FsspecUpkeep(Upkeep):
    """An fsspec store's upkeep: sizes by listing or concurrent HEADs, uploads with
    progress, batched reads on the event loop, leftovers (temporaries, incomplete
    multipart uploads), leases and quarantine as objects under the root
    (``SupportsBatchRead``, ``SupportsLeases``, ``SupportsQuarantine``)."""

    _store: FsspecBlobStore

    def __init__(self, store: FsspecBlobStore) -> None:
        super().__init__(store)

    def sizes(self, digests: Iterable[str], *, concurrency: int = 32) -> dict[str, int | None]:
        """Return the stored size of each digest (None when absent), asking in batches.

        Large batches on listable backends list each ``<2 hex>/`` key prefix once
        (like REAPI's FindMissingBlobs); otherwise one concurrent HEAD per blob.
        """
        wanted = sorted({parse_digest(d) for d in digests})
        if not wanted:
            return {}
        by_listing = not self._store._http and len(wanted) >= _LIST_THRESHOLD
        if by_listing:
            prefixes = sorted({d[7:9] for d in wanted})
            found: dict[str, int] | None = None
            if hasattr(self._store.fs, "_iterdir"):  # s3fs: a small remote lists in a few pages
                found = self._store._run(self._store._list_all(_FULL_LISTING_PAGES * 1000))
            if found is None:
                found = {}
                if self._store.fs.async_impl:
                    coros = [self._store._list_prefix(p) for p in prefixes]
                    for listing in self._store._run(self._store._gather(coros, concurrency)):
                        found.update(listing)
                else:
                    for prefix in prefixes:
                        found.update(self._store._sync_list_prefix(prefix))
            return {d: found.get(d) for d in wanted}
        if self._store.fs.async_impl:
            probe = self._store._http_size if self._store._http else self._store._info_size
            values = self._store._run(self._store._gather([probe(d) for d in wanted], concurrency))
            return dict(zip(wanted, values, strict=True))
        return {d: self._store._sync_info_size(d) for d in wanted}

    @property
    def supports_batch_read(self) -> bool:
        """Whether :meth:`_read_batch` reads on the backend's event loop (async object
        stores), instead of one thread per blob."""
        return bool(self._store.fs.async_impl) and not self._store._http

    def _read_batch(
        self,
        items: Sequence[tuple[str, int]],
        consume: Callable[[str, bytes], None],
        *,
        concurrency: int = 16,
    ) -> dict[str, Exception | None]:
        """Read each ``(digest, limit)`` like :meth:`_read_raw` (at most ``limit`` bytes,
        unverified, retried, each attempt within the deadline for ``limit`` bytes), all
        on the backend's event loop, ``concurrency`` at a time, handing each blob's bytes
        to ``consume`` as they arrive (on the loop's thread, so at most ``concurrency``
        blobs are held). Returns each digest's failure, None where it went through: a
        :class:`BlobNotFoundError`, a :class:`StorageError`, or what ``consume`` raised."""
        semaphore = asyncio.Semaphore(max(1, concurrency))
        kwargs = _one_get(self._store.fs)

        async def attempt(key: str, digest: str, limit: int) -> bytes:
            cat = self._store.fs._cat_file(key, start=0, end=limit, **kwargs)
            return await self._store._within(cat, digest, limit)

        async def one(digest: str, limit: int) -> Exception | None:
            key = self._store._key_of(digest)
            async with semaphore:
                failures = 0
                while True:
                    try:
                        data = await attempt(key, digest, limit)
                        break
                    except FileNotFoundError:
                        return BlobNotFoundError(f"{digest} is not in store {self._store.url}")
                    except TransferDeadlineError as exc:
                        return exc
                    except Exception as exc:
                        failures += 1
                        if not is_transient(exc) or failures >= self._store.retry.attempts:
                            return self._store._fail(f"GET {digest}", exc, failures)
                        await asyncio.sleep(self._store.retry.delay(failures))
            try:
                consume(digest, data)
            except Exception as exc:
                return exc
            return None

        async def run_all() -> list[Exception | None]:
            return await asyncio.gather(*(one(d, n) for d, n in items))

        results = self._store._run(run_all())
        return {d: r for (d, _), r in zip(items, results, strict=True)}

    def upload_file(
        self,
        digest: str,
        path: str,
        size: int,
        *,
        on_bytes: Callable[[int], None] | None = None,
    ) -> None:
        """Upload a local file as ``digest`` (the caller has hashed it); the final key
        appears only once the upload is complete, and its size is checked. ``on_bytes``
        is told of each part sent, where the backend reports them."""
        self._store._check_writable()
        final = self._store._key_of(digest)
        kwargs: dict[str, Any] = {}
        if on_bytes is not None:
            from fsspec.callbacks import Callback

            report = on_bytes

            class _Sent(Callback):  # type: ignore[misc]
                def relative_update(self, inc: int = 1) -> None:
                    report(inc)

            kwargs["callback"] = _Sent()
        try:
            if self._store.atomic_put:
                self._store._call(
                    f"PUT {digest}", lambda: self._store.fs.put_file(path, final, **kwargs)
                )
            else:
                self._store._via_temporary(
                    digest, final, lambda tmp: self._store.fs.put_file(path, tmp, **kwargs)
                )
        except FileNotFoundError as exc:
            raise self._store._not_found(digest, exc) from exc
        stored = self._store._size(digest)
        if stored != size:
            raise StorageError(
                f"{self._store.url}: {digest}: stored {stored} bytes after upload, expected {size}"
            )

    def iter_blobs(self) -> Iterator[BlobInfo]:
        """Yield every blob present with its size and modification time."""
        found = self._store._find(f"{self._store._path}/blobs/blake3")
        for key in sorted(found):
            digest = _digest_of_key(str(key))
            if digest is not None:
                info = found[key]
                yield BlobInfo(digest, int(info.get("size") or 0), _mtime(info))

    def blob_info(self, digest: str) -> BlobInfo | None:
        """Return a blob's size and modification time as stored now (None if absent)."""
        key = self._store._key_of(digest)
        try:
            info = self._store._call(f"HEAD {digest}", lambda: self._store.fs.info(key))
        except FileNotFoundError:
            return None
        if info.get("type") == "directory" or info.get("size") is None:
            return None
        return BlobInfo(digest, int(info["size"]), _mtime(info))

    def iter_temporaries(self) -> Iterator[tuple[str, float | None]]:
        """Yield ``(key, mtime)`` of leftovers of this store's interrupted writes.

        Only what evidencestore itself writes: on non-atomic backends, temporaries
        ``<root>/blobs/.tmp/<32 hex>``; on S3, incomplete multipart uploads of blob keys
        under ``<root>/blobs/blake3/`` (yielded as ``upload:<id>:<bucket>/<key>``).
        Backends whose PUT is atomic never get temporaries, so none are looked for.
        """
        if self._store._http:
            return
        if not self._store.atomic_put:
            found = self._store._find(f"{self._store._path}/{TMP_DIR}")
            for key in sorted(found):
                if _TMP_NAME.match(str(key).rstrip("/").rsplit("/", 1)[-1]):
                    yield str(key), _mtime(found[key])
        if self._store._protocols & {"s3", "s3a"}:
            bucket, _, prefix = self._store._path.partition("/")
            blob_prefix = f"{prefix}/blobs/blake3/" if prefix else "blobs/blake3/"
            try:
                response = self._store._call(
                    "list multipart uploads",
                    lambda: self._store.fs.call_s3(
                        "list_multipart_uploads", Bucket=bucket, Prefix=blob_prefix
                    ),
                )
            except FileNotFoundError as exc:
                raise StorageError(
                    f"{self._store.url}: bucket or prefix not found ({_describe(exc)})"
                ) from exc
            for upload in response.get("Uploads", []):
                key = str(upload["Key"])
                if not key.startswith(blob_prefix) or _digest_of_key(key) is None:
                    continue
                yield (
                    f"upload:{upload['UploadId']}:{bucket}/{key}",
                    _mtime({"LastModified": upload.get("Initiated")}),
                )

    def _write_whole(self, folder: str, name: str, data: bytes, kind: str, what: str) -> str:
        """Write ``<root>/<folder>/<name>`` whole (a PUT, or a renamed temporary where a
        PUT is not atomic); returns its key. ``what`` names it in the error."""
        self._store._check_writable()
        key = f"{self._store._path}/{folder}/{name}"
        try:
            if self._store.atomic_put:
                self._store._call(f"PUT {kind}", lambda: self._store.fs.pipe_file(key, data))
            else:
                self._store._via_temporary(
                    f"{kind} {name}", key, lambda tmp: self._store.fs.pipe_file(tmp, data)
                )
        except FileNotFoundError as exc:
            raise StorageError(
                f"{self._store.url}: cannot write {what}: bucket or prefix not found "
                f"({_describe(exc)})"
            ) from exc
        return key

    def write_lease(self, name: str, data: bytes) -> str:
        """Write a push's lease ``<root>/leases/<name>``; returns its key."""
        return self._write_whole(LEASE_DIR, name, data, "lease", f"the push's lease {name}")

    def iter_leases(self) -> Iterator[tuple[str, float | None]]:
        """Yield ``(key, mtime)`` of every object under ``<root>/leases/``."""
        if self._store._http:
            return
        found = self._store._find(f"{self._store._path}/{LEASE_DIR}")
        for key in sorted(found):
            yield str(key), _mtime(found[key])

    def read_lease(self, key: str) -> bytes:
        """Return a lease's bytes."""
        return self._store._call("GET lease", lambda: self._store.fs.cat_file(key))  # type: ignore[no-any-return]

    def remove_lease(self, key: str) -> None:
        """Remove a lease."""
        self._store._check_writable()
        with contextlib.suppress(FileNotFoundError):
            self._store._call("remove lease", lambda: self._store.fs.rm(key))

    def remove_temporary(self, key: str) -> None:
        """Remove a leftover yielded by :meth:`iter_temporaries`."""
        self._store._check_writable()
        if key.startswith("upload:"):
            _, upload_id, path = key.split(":", 2)
            bucket, _, name = path.partition("/")
            self._store._call(
                "abort multipart upload",
                lambda: self._store.fs.call_s3(
                    "abort_multipart_upload", Bucket=bucket, Key=name, UploadId=upload_id
                ),
            )
            return
        with contextlib.suppress(FileNotFoundError):
            self._store._call("remove temporary", lambda: self._store.fs.rm(key))

    @property
    def supports_leases(self) -> bool:
        return not self._store.read_only and not self._store._http

    @property
    def supports_results(self) -> bool:
        return not self._store._http and self._store.supports_listing

    def write_result(self, name: str, data: bytes) -> str:
        """Write ``<root>/results/<name>`` (a whole object: PUT, or a renamed
        temporary where a PUT is not atomic); returns its key."""
        return self._write_whole(RESULT_DIR, name, data, "result", f"result {name}")

    def iter_results(self, prefix: str = "") -> Iterator[str]:
        """Yield the name of every object under ``<root>/results/`` starting with ``prefix``."""
        if not self.supports_results:
            return
        base = f"{self._store._path}/{RESULT_DIR}/"
        found = self._store._find(base + prefix.partition("/")[0] if "/" in prefix else base)
        for key in sorted(found):
            name = str(key).split(f"/{RESULT_DIR}/", 1)[-1]
            if name.startswith(prefix):
                yield name

    def read_result(self, name: str) -> bytes:
        """Return a result's bytes."""
        key = f"{self._store._path}/{RESULT_DIR}/{name}"
        return self._store._call("GET result", lambda: self._store.fs.cat_file(key))  # type: ignore[no-any-return]

    @property
    def supports_quarantine(self) -> bool:
        return not self._store.read_only and not self._store._http and self._store.supports_listing

    def quarantine(self, digest: str) -> str | None:
        self._store._check_writable()
        key = self._store._key_of(digest)
        target = f"{self._store._path}/{QUARANTINE_DIR}/{digest_hex(digest)}-{os.urandom(8).hex()}"

        def move() -> None:
            self._store.fs.makedirs(self._store.fs._parent(target), exist_ok=True)
            self._store.fs.mv(key, target)

        try:
            self._store._call(f"quarantine {digest}", move)
        except FileNotFoundError:
            return None
        return target

    def iter_quarantined(self) -> Iterator[tuple[str, str, float | None]]:
        if self._store._http:
            return
        found = self._store._find(f"{self._store._path}/{QUARANTINE_DIR}")
        for key in sorted(found):
            match = _QUARANTINED.match(str(key).rstrip("/").rsplit("/", 1)[-1])
            if match:
                yield str(key), digest_from_hex(match.group(1)), _mtime(found[key])

    def quarantined_mtime(self, key: str) -> float | None:
        """None: quarantine is a copy here, which does not keep the blob's mtime (the
        writer's lease carries gc's argument)."""
        return None

    def restore(self, key: str) -> None:
        self._store._check_writable()
        match = _QUARANTINED.match(key.rstrip("/").rsplit("/", 1)[-1])
        if not match:
            raise StorageError(f"{self._store.url}: {key}: not a quarantined blob")
        digest = digest_from_hex(match.group(1))
        final = self._store._key_of(digest)

        def put_back() -> None:
            if not self._store.fs.exists(final):
                self._store.fs.makedirs(self._store.fs._parent(final), exist_ok=True)
                self._store.fs.copy(key, final)
            self._store.fs.rm(key)

        with contextlib.suppress(FileNotFoundError):
            self._store._call(f"restore {digest}", put_back)

    def purge(self, key: str) -> None:
        self._store._check_writable()
        with contextlib.suppress(FileNotFoundError):
            self._store._call("delete quarantined", lambda: self._store.fs.rm(key))
