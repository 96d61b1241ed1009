"""A blob store on a local directory, bypassing fsspec for speed.

Writes go to a temporary name in the blob's own directory, are fsynced, made
read-only and then hard-linked to the final name (create-only), so a reader never
sees a partial blob and concurrent writers of the same content cannot clobber each
other.
"""

from __future__ import annotations

import contextlib
import os
import re
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO, Literal, cast

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

from .._atomic import fsync_dir, fsync_paths, sync_filesystem
from ..digest import copy_hashing, digest_from_hex, digest_hex, parse_digest
from ..errors import BlobNotFoundError, IntegrityError, StorageError
from ..integrity import check_content
from ._base import LEASE_DIR, QUARANTINE_DIR, RESULT_DIR, BlobInfo, BlobStore, Upkeep, blob_key

__all__ = ["LINK_MODES", "LinkMode", "LocalBlobStore", "LocalUpkeep"]

_TMP_PREFIX = ".tmp-"
INCOMING_DIR = "incoming"
#: From this many blobs written under ``deferred_sync``, one ``syncfs`` flushes them.
SYNCFS_FROM = 64
BLOB_MODE = 0o444
#: A blob published under ``deferred_sync`` and not flushed yet (owner's x bit set).
UNSYNCED_MODE = 0o544


def mark_synced(paths: list[Path]) -> None:
    """Give flushed blobs their final mode (a blob another user owns keeps its mark, so
    a writer relying on it flushes it again: a wasted fsync, never a lost blob)."""
    for path in paths:
        with contextlib.suppress(FileNotFoundError, PermissionError):
            os.chmod(path, BLOB_MODE)


_QUARANTINED = re.compile(r"^([0-9a-f]{64})-[0-9a-f]{16}$")


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
        # thread -> blobs it published without an fsync each (LocalUpkeep.deferred_sync)
        self._unsynced: dict[int, list[Path]] = {}

    def _deferred(self, final: Path) -> bool:
        """Whether this thread defers the fsync of blob ``final`` (noted for later)."""
        pending = self._unsynced.get(threading.get_ident())
        if pending is None:
            return False
        pending.append(final)
        return True

    def _relied_on(self, digest: str) -> None:
        # A blob another writer published under deferred_sync may not be on disk yet,
        # and this writer's registration may name it first: a deferring writer flushes
        # it with its own blobs; any other makes it durable now. Such blobs carry
        # UNSYNCED_MODE until flushed, so the common case (a durable blob) costs a stat.
        final = self.path_of(digest)
        if self._deferred(final):
            return
        try:
            unsynced = os.stat(final).st_mode & 0o777 == UNSYNCED_MODE
        except FileNotFoundError:
            return
        if unsynced:
            fsync_paths([final])
            mark_synced([final])

    @property
    def location(self) -> str:
        return str(self.root)

    def path_of(self, digest: str) -> Path:
        """Return where a blob lives (or would live)."""
        return self.root / blob_key(digest)

    def location_of(self, digest: str) -> str:
        return str(self.path_of(digest))

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

    def _publish(self, tmp: Path, final: Path, digest: str, durable: bool = True) -> None:
        os.chmod(tmp, BLOB_MODE if durable else UNSYNCED_MODE)
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
        if durable:
            fsync_dir(final.parent)

    def _write(self, digest: str, data: bytes) -> None:
        final = self.path_of(digest)
        tmp = self._tmp_in(final)
        durable = not self._deferred(final)
        try:
            with open(tmp, "xb") as fh:
                fh.write(data)
                if durable:
                    fh.flush()
                    os.fsync(fh.fileno())
            self._publish(tmp, final, digest, durable)
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
        try:
            with open(path, "rb") as src, open(tmp, "xb") as dst:
                got = copy_hashing(src, dst)
            check_content(f"{path}: changed while being stored", digest, size, got.digest, got.size)
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
                digest = digest_from_hex(name)
                try:
                    digest_hex(digest)
                except ValueError:
                    continue
                yield digest

    # -- upkeep (transfers and gc) -------------------------------------------
    @property
    def upkeep(self) -> LocalUpkeep:
        """Transfers' and gc's methods (see :class:`LocalUpkeep`)."""
        return cast(LocalUpkeep, super().upkeep)

    def _make_upkeep(self) -> LocalUpkeep:
        return LocalUpkeep(self)

    def _stat(self, path: Path) -> os.stat_result | None:
        try:
            return path.stat()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise StorageError(f"{path}: {exc.strerror}") from exc

    def _unlink(self, path: Path, what: str) -> None:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise StorageError(f"{path}: {what}: {exc.strerror}") from exc


def _names(folder: Path, failure: str) -> list[str]:
    """The sorted names in ``folder``; none when it does not exist."""
    try:
        return sorted(os.listdir(folder))
    except (FileNotFoundError, NotADirectoryError):
        return []
    except OSError as exc:
        raise StorageError(f"{folder}: {failure}: {exc.strerror}") from exc


def _held(path: Path) -> bool:
    """Whether a live writer holds ``path``'s lock (an incoming body being received)."""
    if fcntl is None:
        return False
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)
    return False


class LocalUpkeep(Upkeep):
    """A local store's upkeep: blobs with modification times, keep-alive, incoming
    files moved into place, leases and quarantine as files under the root
    (``SupportsKeepAlive``, ``SupportsIncoming``, ``SupportsLeases``,
    ``SupportsQuarantine``)."""

    _store: LocalBlobStore

    def __init__(self, store: LocalBlobStore) -> None:
        super().__init__(store)

    def incoming_path(self) -> Path:
        """A fresh temporary name under ``<root>/incoming/`` (same filesystem as the
        blobs) for a file that :meth:`adopt` will publish; gc removes old leftovers."""
        folder = self._store.root / INCOMING_DIR
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StorageError(f"{folder}: cannot create: {exc.strerror}") from exc
        return folder / f"{_TMP_PREFIX}{os.getpid()}-{os.urandom(6).hex()}"

    def adopt(
        self, path: str | os.PathLike[str], digest: str, size: int, *, durable: bool = True
    ) -> None:
        """Publish a complete file already hashed to ``digest`` and ``size`` (moved into
        place, not copied; create-only). An intact copy already stored is kept and
        ``path`` removed. ``path`` must be on this store's filesystem. ``durable=False``
        skips the fsync, for copies that can be fetched again (a torn copy fails the
        size or hash check of the next read, which fetches it again)."""
        self._store._check_writable()
        digest = parse_digest(digest)
        tmp = Path(path)
        try:
            if self._store._present_and_intact(digest, size):
                os.unlink(tmp)
                return
            final = self._store.path_of(digest)
            if durable and self._store._deferred(final):
                durable = False  # made durable when the deferral ends
            if durable:
                with open(tmp, "rb") as fh:
                    os.fsync(fh.fileno())
            final.parent.mkdir(parents=True, exist_ok=True)
            self._store._publish(tmp, final, digest, durable)
        except OSError as exc:
            raise StorageError(f"{tmp}: cannot store as {digest}: {exc.strerror}") from exc

    @contextlib.contextmanager
    def deferred_sync(self) -> Iterator[None]:
        """Inside the block, blobs this thread stores (``put``, ``adopt``) are published
        without an fsync each; when the block ends, however it ends, they are made
        durable at once: one ``syncfs`` of the store's filesystem where the OS has it
        (for :data:`SYNCFS_FROM` blobs or more), else an fsync of each file and of each
        of their directories. For a writer of
        many small blobs that registers nothing before the block ends (the runner: a
        run's payloads, bodies and completions, then its registration), so a crash can
        leave a torn blob only where no registration names it yet, and a torn blob fails
        the size or hash check of every read and is replaced by the next ``put`` of its
        content. Until flushed, such a blob has :data:`UNSYNCED_MODE`: another writer
        that keeps it instead of writing it (a concurrent run storing the same payload)
        flushes it before relying on it, so its registration never names a blob that is
        not on disk. Blobs this thread keeps inside the block are flushed with its own.
        Other threads' writes stay durable one by one; nested blocks are one."""
        me = threading.get_ident()
        unsynced = self._store._unsynced
        if me in unsynced:
            yield
            return
        unsynced[me] = []
        try:
            yield
        finally:
            written = unsynced.pop(me)
            # A few blobs: an fsync each is cheaper than flushing the whole filesystem.
            if len(written) < SYNCFS_FROM or not sync_filesystem(self._store.root):
                fsync_paths(written)
            mark_synced(written)

    def iter_blobs(self) -> Iterator[BlobInfo]:
        for digest in self._store._iter():
            st = self._store._stat(self._store.path_of(digest))
            if st is not None:
                yield BlobInfo(digest, st.st_size, st.st_mtime)

    def blob_info(self, digest: str) -> BlobInfo | None:
        st = self._store._stat(self._store.path_of(digest))
        return None if st is None else BlobInfo(digest, st.st_size, st.st_mtime)

    def keep_alive(self, digest: str) -> None:
        if not self._store.read_only:
            with contextlib.suppress(OSError):
                os.utime(self._store.path_of(digest))

    def iter_temporaries(self) -> Iterator[tuple[str, float | None]]:
        """Yield ``(path, mtime)`` of leftover temporary files of interrupted writes
        (an incoming body a live run holds locked is not a leftover)."""
        base = self._store.root / "blobs" / "blake3"
        incoming = sorted((self._store.root / INCOMING_DIR).glob(f"{_TMP_PREFIX}*"))
        if base.is_dir() or incoming:
            for path in [*sorted(base.glob(f"*/{_TMP_PREFIX}*")), *incoming]:
                st = self._store._stat(path)
                if st is not None and not (path in incoming and _held(path)):
                    yield str(path), st.st_mtime

    def remove_temporary(self, key: str) -> None:
        """Remove a leftover temporary; an incoming body is removed only while its
        exclusive lock can be taken at once (a live run's sink holds it shared from
        creation to publication: runs/body.py), and the lock is held while unlinking."""
        self._store._check_writable()
        path = Path(key)
        if path.parent.name != INCOMING_DIR or fcntl is None:
            self._store._unlink(path, "cannot remove")
            return
        try:
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        except FileNotFoundError:
            return
        except OSError as exc:
            raise StorageError(f"{path}: cannot remove: {exc.strerror}") from exc
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                return  # a live body
            self._store._unlink(path, "cannot remove")
        finally:
            os.close(fd)

    @property
    def supports_leases(self) -> bool:
        return not self._store.read_only

    def write_lease(self, name: str, data: bytes) -> str:
        self._store._check_writable()
        from .._atomic import write_replace

        final = self._store.root / LEASE_DIR / name
        try:
            write_replace(final, data)
        except OSError as exc:
            raise StorageError(f"{final}: cannot write the lease: {exc.strerror}") from exc
        return str(final)

    def iter_leases(self) -> Iterator[tuple[str, float | None]]:
        folder = self._store.root / LEASE_DIR
        for name in _names(folder, "cannot list leases"):
            if name.startswith("."):
                continue
            st = self._store._stat(folder / name)
            if st is not None:
                yield str(folder / name), st.st_mtime

    def read_lease(self, key: str) -> bytes:
        with open(key, "rb") as fh:
            return fh.read(1 << 26)

    def remove_lease(self, key: str) -> None:
        self._store._check_writable()
        self._store._unlink(Path(key), "cannot remove lease")

    @property
    def supports_results(self) -> bool:
        return True

    def write_result(self, name: str, data: bytes) -> str:
        self._store._check_writable()
        from .._atomic import write_replace

        final = self._store.root / RESULT_DIR / name
        try:
            write_replace(final, data)  # same name, same bytes: replacing loses nothing
        except OSError as exc:
            raise StorageError(f"{final}: cannot write the result: {exc.strerror}") from exc
        return str(final)

    def iter_results(self, prefix: str = "") -> Iterator[str]:
        folder = self._store.root / RESULT_DIR
        head, _, _ = prefix.partition("/")
        for key in _names(folder, "cannot list results"):
            if key.startswith(".") or not key.startswith(head) or not (folder / key).is_dir():
                continue
            for name in _names(folder / key, "cannot list results"):
                if not name.startswith(".") and f"{key}/{name}".startswith(prefix):
                    yield f"{key}/{name}"

    def read_result(self, name: str) -> bytes:
        with open(self._store.root / RESULT_DIR / name, "rb") as fh:
            return fh.read(1 << 26)

    @property
    def supports_quarantine(self) -> bool:
        return not self._store.read_only

    def quarantine(self, digest: str) -> str | None:
        self._store._check_writable()
        folder = self._store.root / QUARANTINE_DIR
        key = folder / f"{digest_hex(digest)}-{os.urandom(8).hex()}"
        try:
            folder.mkdir(parents=True, exist_ok=True)
            os.rename(self._store.path_of(digest), key)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise StorageError(
                f"{self._store.path_of(digest)}: cannot quarantine: {exc.strerror}"
            ) from exc
        return str(key)

    def iter_quarantined(self) -> Iterator[tuple[str, str, float | None]]:
        folder = self._store.root / QUARANTINE_DIR
        for name in _names(folder, "cannot list"):
            match = _QUARANTINED.match(name)
            st = self._store._stat(folder / name) if match else None
            if match and st is not None:
                yield str(folder / name), digest_from_hex(match.group(1)), st.st_mtime

    def quarantined_mtime(self, key: str) -> float | None:
        st = self._store._stat(Path(key))
        return None if st is None else st.st_mtime

    def restore(self, key: str) -> None:
        self._store._check_writable()
        path = Path(key)
        match = _QUARANTINED.match(path.name)
        if not match:
            raise StorageError(f"{key}: not a quarantined blob")
        final = self._store.path_of(digest_from_hex(match.group(1)))
        try:
            final.parent.mkdir(parents=True, exist_ok=True)
            os.link(path, final)
        except FileExistsError:
            pass  # written again meanwhile: the same content by its name
        except FileNotFoundError:
            return
        except OSError:
            try:
                os.rename(path, final)
            except OSError as exc:
                raise StorageError(f"{key}: cannot restore: {exc.strerror}") from exc
            return
        self._store._unlink(path, "cannot remove after restoring")

    def purge(self, key: str) -> None:
        self._store._check_writable()
        self._store._unlink(Path(key), "cannot delete")
