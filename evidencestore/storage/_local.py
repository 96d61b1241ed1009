"""A blob store on a local directory, bypassing fsspec for speed.

Writes go to a temporary name in the blob's own directory, are fsynced, made
read-only and then hard-linked to the final name (create-only), so a reader never
sees a partial blob and concurrent writers of the same content cannot clobber each
other.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO, Literal

from blake3 import blake3

from ..digest import digest_hex
from ..errors import BlobNotFoundError, IntegrityError, StorageError
from ._base import BlobStore, blob_key

__all__ = ["LINK_MODES", "LinkMode", "LocalBlobStore"]

_TMP_PREFIX = ".tmp-"


def _fsync_dir(path: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


LinkMode = Literal["copy", "hardlink", "reflink"]
LINK_MODES: tuple[LinkMode, ...] = ("copy", "hardlink", "reflink")
_FICLONE = 0x40049409  # Linux ioctl: share a file's extents (btrfs, XFS, bcachefs)


class LocalBlobStore(BlobStore):
    """Blobs under ``<root>/blobs/blake3/<2 hex>/<64 hex>`` on the local filesystem.

    ``link`` says how :meth:`put_file` brings a file in: ``copy`` (default);
    ``hardlink``, the blob becomes another name of the file (no bytes copied; the file is
    made read-only, as the blob is, and editing it in place would corrupt the blob, which
    ``verify`` reports); ``reflink``, a copy-on-write clone where the filesystem offers
    one. Either falls back to a copy across filesystems or where unsupported. Every way,
    the stored bytes are hashed once in place before they are published.
    """

    def __init__(
        self, root: str | os.PathLike[str], *, read_only: bool = False, link: LinkMode = "copy"
    ) -> None:
        super().__init__(read_only=read_only)
        self.root = Path(root).expanduser().absolute()
        if link not in LINK_MODES:
            raise ValueError(f"link must be one of {', '.join(LINK_MODES)}, not {link!r}")
        self.link = link

    @property
    def location(self) -> str:
        return str(self.root)

    def path_of(self, digest: str) -> Path:
        """Return where a blob lives (or would live)."""
        return self.root / blob_key(digest)

    def _exists(self, digest: str) -> bool:
        return self.path_of(digest).is_file()

    def _size(self, digest: str) -> int | None:
        try:
            return self.path_of(digest).stat().st_size
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise StorageError(f"{self.path_of(digest)}: {exc.strerror}") from exc

    def _open_raw(self, digest: str) -> BinaryIO:
        try:
            return open(self.path_of(digest), "rb")
        except FileNotFoundError:
            raise BlobNotFoundError(f"{digest} is not in store {self.location}") from None
        except OSError as exc:
            raise StorageError(f"{self.path_of(digest)}: {exc.strerror}") from exc

    def _tmp_in(self, final: Path) -> Path:
        final.parent.mkdir(parents=True, exist_ok=True)
        return final.parent / f"{_TMP_PREFIX}{final.name[:16]}-{os.getpid()}-{os.urandom(4).hex()}"

    def _publish(self, tmp: Path, final: Path, digest: str) -> None:
        os.chmod(tmp, 0o444)
        try:
            os.link(tmp, final)
        except FileExistsError:
            # Another writer won, or a corrupt copy sits there: keep an intact one.
            if not self._present_and_intact(digest, tmp.stat().st_size):
                os.replace(tmp, final)
        except OSError:
            # Filesystems without hard links: rename is still atomic.
            os.replace(tmp, final)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
        _fsync_dir(final.parent)

    def _write(self, digest: str, data: bytes) -> None:
        final = self.path_of(digest)
        tmp = self._tmp_in(final)
        try:
            with open(tmp, "xb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
            self._publish(tmp, final, digest)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
            raise

    def _linked(self, path: str, tmp: Path) -> bool:
        """Bring ``path`` in at ``tmp`` by hard link or clone; False to copy instead."""
        if self.link == "hardlink":
            try:
                os.link(path, tmp)
            except OSError:
                return False  # another filesystem, or no hard links there
            return True
        if self.link == "reflink":
            import fcntl

            try:
                with open(path, "rb") as src, open(tmp, "xb") as dst:
                    fcntl.ioctl(dst.fileno(), _FICLONE, src.fileno())
            except OSError:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(tmp)
                return False
            return True
        return False

    def _write_file(self, digest: str, path: str, size: int) -> None:
        final = self.path_of(digest)
        tmp = self._tmp_in(final)
        if self._linked(path, tmp):
            try:
                # The linked bytes are what gets published: hash them where they are.
                from ..digest import hash_file

                got = hash_file(tmp)
                if got != (digest, size):
                    raise IntegrityError(
                        f"{path}: changed while being stored (was {digest}, {size} bytes; "
                        f"now {got.digest}, {got.size} bytes)"
                    )
                self._publish(tmp, final, digest)
            except BaseException:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(tmp)
                raise
            return
        # Copy and hash in one pass so a file changed after hashing is refused.
        hasher = blake3()
        copied = 0
        try:
            with open(path, "rb") as src, open(tmp, "xb") as dst:
                while chunk := src.read(4 << 20):
                    hasher.update(chunk)
                    dst.write(chunk)
                    copied += len(chunk)
                dst.flush()
                os.fsync(dst.fileno())
            observed = "blake3:" + hasher.hexdigest()
            if observed != digest or copied != size:
                raise IntegrityError(
                    f"{path}: changed while being stored (was {digest}, {size} bytes; "
                    f"now {observed}, {copied} bytes)"
                )
            self._publish(tmp, final, digest)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
            raise

    def _delete(self, digest: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path_of(digest))

    def _iter(self) -> Iterator[str]:
        base = self.root / "blobs" / "blake3"
        if not base.is_dir():
            return
        for prefix in sorted(os.listdir(base)):
            sub = base / prefix
            if len(prefix) != 2 or not sub.is_dir():
                continue
            for name in sorted(os.listdir(sub)):
                if name.startswith(_TMP_PREFIX) or not name.startswith(prefix):
                    continue
                digest = "blake3:" + name
                try:
                    digest_hex(digest)
                except ValueError:
                    continue
                yield digest

    def iter_temporaries(self) -> Iterator[Path]:
        """Yield leftover temporary files of interrupted writes (for ``gc``)."""
        base = self.root / "blobs" / "blake3"
        if base.is_dir():
            yield from sorted(base.glob(f"*/{_TMP_PREFIX}*"))
