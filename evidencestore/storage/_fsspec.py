"""A blob store on any fsspec filesystem (``s3://``, ``gs://``, ``memory://``, ``http://``)."""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import Iterator
from typing import Any, BinaryIO

from ..errors import BlobNotFoundError, StorageError
from ._base import BlobStore, blob_key

__all__ = ["FsspecBlobStore"]

# Object stores make a PUT visible only once complete, so blobs are written straight
# to their final key; elsewhere a temporary key is written then moved.
_ATOMIC_PUT = frozenset({"s3", "s3a", "gs", "gcs", "az", "abfs", "abfss", "memory"})
_READ_ONLY = frozenset({"http", "https"})


class FsspecBlobStore(BlobStore):
    """Blobs under ``<url>/blobs/blake3/<2 hex>/<64 hex>`` on an fsspec filesystem."""

    def __init__(
        self,
        url: str,
        *,
        read_only: bool = False,
        storage_options: dict[str, Any] | None = None,
        fs: Any = None,
    ) -> None:
        import fsspec

        if fs is None:
            fs, path = fsspec.core.url_to_fs(url, **(storage_options or {}))
        else:
            path = fs._strip_protocol(url)
        protocols = fs.protocol if isinstance(fs.protocol, tuple) else (fs.protocol,)
        self.fs = fs
        self.url = url.rstrip("/")
        self._path = str(path).rstrip("/")
        self._protocols = frozenset(protocols)
        super().__init__(read_only=read_only or bool(self._protocols & _READ_ONLY))

    @property
    def location(self) -> str:
        return self.url

    @property
    def supports_listing(self) -> bool:
        return not self._protocols & _READ_ONLY

    def key_of(self, digest: str) -> str:
        """Return the backend path of a blob."""
        if self._protocols & _READ_ONLY:
            return f"{self.url}/{blob_key(digest)}"
        return f"{self._path}/{blob_key(digest)}"

    def _wrap(self, digest: str, exc: Exception) -> StorageError:
        return StorageError(f"{self.url}: {digest}: {type(exc).__name__}: {exc}")

    def _exists(self, digest: str) -> bool:
        return self._size(digest) is not None

    def _size(self, digest: str) -> int | None:
        try:
            info = self.fs.info(self.key_of(digest))
        except FileNotFoundError:
            return None
        except Exception as exc:
            raise self._wrap(digest, exc) from exc
        size = info.get("size")
        return int(size) if size is not None else None

    def _open_raw(self, digest: str) -> BinaryIO:
        try:
            return self.fs.open(self.key_of(digest), "rb")  # type: ignore[no-any-return]
        except FileNotFoundError:
            raise BlobNotFoundError(f"{digest} is not in store {self.url}") from None
        except Exception as exc:
            raise self._wrap(digest, exc) from exc

    def _write(self, digest: str, data: bytes) -> None:
        final = self.key_of(digest)
        try:
            if self._protocols & _ATOMIC_PUT:
                self.fs.pipe_file(final, data)
                return
            tmp = f"{self._path}/tmp/{secrets.token_hex(16)}"
            self.fs.makedirs(self.fs._parent(final), exist_ok=True)
            self.fs.makedirs(f"{self._path}/tmp", exist_ok=True)
            try:
                self.fs.pipe_file(tmp, data)
                self.fs.mv(tmp, final)
            finally:
                with contextlib.suppress(Exception):
                    if self.fs.exists(tmp):
                        self.fs.rm(tmp)
        except Exception as exc:
            raise self._wrap(digest, exc) from exc

    def _delete(self, digest: str) -> None:
        try:
            self.fs.rm(self.key_of(digest))
        except FileNotFoundError:
            pass
        except Exception as exc:
            raise self._wrap(digest, exc) from exc

    def _iter(self) -> Iterator[str]:
        if not self.supports_listing:
            raise StorageError(f"{self.url}: listing is not supported by this backend")
        base = f"{self._path}/blobs/blake3"
        try:
            found = self.fs.find(base)
        except FileNotFoundError:
            return
        except Exception as exc:
            raise StorageError(f"{self.url}: cannot list blobs: {exc}") from exc
        for key in sorted(found):
            parts = str(key).rsplit("/", 2)
            if len(parts) == 3 and len(parts[2]) == 64 and parts[2].startswith(parts[1]):
                digest = "blake3:" + parts[2]
                with contextlib.suppress(ValueError):
                    from ..digest import parse_digest

                    yield parse_digest(digest)
