"""Garbage collection: remove blobs no registration references, never young ones.

What is kept: every digest named by an entry (either location) of every registration
in the working tree and at the listed git revisions, and the LPIPS weights pinned in
``evstore.toml``. A blob is only removed once it is older than the grace period, so a
blob just written by a concurrent push (whose registration is not visible yet) is
never deleted; leftovers of interrupted writes older than the grace period are
removed too. Dry run unless ``delete`` is set.

A push may also rely on blobs that are already on the remote (and old): before asking
which blobs are missing it writes one lease, ``<root>/leases/<UTC time>-<random>.json``,
listing every digest it wants. gc keeps the digests of leases younger than the grace
period, and removes older leases. Just before deleting, gc lists the leases again and
re-reads each blob's size and modification time, skipping any that became young or
leased. So the grace period must cover a push and the time until its registrations are
visible to gc (committed, or listed with ``--rev``).
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .config import find_root, load_config
from .errors import ConfigError, ManifestError, StorageError
from .inventory import EVIDENCE_DIR, REGISTRATION_NAME, decode_registration, load_inventory
from .leases import iter_leases, read_lease, remove_lease
from .remotes import local_store, open_remote
from .storage import BlobStore, LocalBlobStore
from .storage._fsspec import BlobInfo, FsspecBlobStore

__all__ = ["DEFAULT_GRACE", "GcPlan", "collect_garbage", "referenced_digests"]

DEFAULT_GRACE = 3600.0


@dataclass
class GcPlan:
    """What gc found (and, when ``deleted``, removed) in one store."""

    store: str
    referenced: int
    kept: int = 0
    garbage: list[BlobInfo] = field(default_factory=list)
    young: list[BlobInfo] = field(default_factory=list)
    temporaries: list[str] = field(default_factory=list)
    leased: int = 0
    leases: list[str] = field(default_factory=list)
    deleted: bool = False

    @property
    def garbage_bytes(self) -> int:
        """Bytes the garbage blobs take."""
        return sum(b.size for b in self.garbage)

    def line(self) -> str:
        """A one-line summary."""
        verb = "removed" if self.deleted else "would remove"
        return (
            f"gc {self.store}: {verb} {len(self.garbage)} unreferenced blob(s) "
            f"({self.garbage_bytes / (1 << 20):.1f} MiB) and {len(self.temporaries)} "
            f"leftover temporary file(s); kept {self.kept} referenced, "
            f"{len(self.young)} unreferenced within the grace period, "
            f"{self.leased} leased by a recent push; {verb} {len(self.leases)} expired lease(s)"
        )


def _git(root: Path, *args: str, stdin: bytes | None = None) -> bytes:
    try:
        done = subprocess.run(
            ["git", "-C", str(root), *args], input=stdin, capture_output=True, check=False
        )
    except FileNotFoundError as exc:
        raise ConfigError("git is not installed; --rev needs it") from exc
    if done.returncode != 0:
        message = done.stderr.decode("utf-8", "replace").strip().splitlines()
        raise ConfigError(f"git {' '.join(args[:2])}: {message[-1] if message else 'failed'}")
    return done.stdout


def _registrations_at(root: Path, rev: str) -> Iterator[tuple[str, bytes]]:
    """Yield (path, bytes) of every ``evidence/*/bundle.json`` at git revision ``rev``."""
    try:
        _git(root, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}")
    except ConfigError as exc:
        raise ConfigError(f"--rev {rev}: not a git revision of {root} ({exc})") from None
    listing = _git(
        root, "ls-tree", "-r", "--full-name", "--name-only", "-z", rev, "--", EVIDENCE_DIR
    )
    prefix = _git(root, "rev-parse", "--show-prefix").decode().strip()
    paths = []
    for raw in listing.split(b"\0"):
        if not raw:
            continue
        full = raw.decode("utf-8", "surrogateescape")
        rel = full[len(prefix) :] if prefix and full.startswith(prefix) else full
        parts = rel.split("/")
        if len(parts) == 3 and parts[0] == EVIDENCE_DIR and parts[2] == REGISTRATION_NAME:
            paths.append(full)
    if not paths:
        return
    request = "".join(f"{rev}:{p}\n" for p in paths).encode()
    out = _git(root, "cat-file", "--batch", stdin=request)
    pos = 0
    for path in paths:
        eol = out.index(b"\n", pos)
        header = out[pos:eol].split()
        if len(header) != 3:
            raise ConfigError(f"git cat-file: unexpected answer for {rev}:{path}")
        size = int(header[2])
        yield path, out[eol + 1 : eol + 1 + size]
        pos = eol + 1 + size + 1


def referenced_digests(root: str | os.PathLike[str], revs: Sequence[str] = ()) -> set[str]:
    """Return every digest the working tree's registrations (and those at ``revs``) and
    the pinned weights reference. Refuses (raises) when a registration is unreadable,
    since its blobs could not be kept."""
    base = Path(root)
    inventory = load_inventory(base)
    errors = [f for f in inventory.findings if f.severity == "error"]
    if errors:
        listed = "; ".join(f.message for f in errors[:5])
        raise ManifestError(
            f"gc refused: the inventory has {len(errors)} error(s), so what is referenced "
            f"cannot be known: {listed}"
        )
    registrations = list(inventory.registrations.values())
    for rev in revs:
        for path, data in _registrations_at(base, rev):
            registrations.append(decode_registration(data, f"{rev}:{path}"))
    keep: set[str] = set()
    for registration in registrations:
        keep.update(e.descriptor.digest for e in registration.manifest.entries)
    lpips = load_config(base).lpips
    if lpips is not None:
        for desc in (lpips.backbone, lpips.linear):
            if desc is not None:
                keep.add(desc.digest)
        if lpips.state_digest:
            keep.add(lpips.state_digest)
    return keep


def _blobs(store: BlobStore) -> Iterator[BlobInfo]:
    if isinstance(store, FsspecBlobStore):
        yield from store.iter_blobs()
        return
    for digest in store.iter_digests():
        if isinstance(store, LocalBlobStore):
            try:
                st = store.path_of(digest).stat()
            except FileNotFoundError:
                continue
            yield BlobInfo(digest, st.st_size, st.st_mtime)
        else:
            yield BlobInfo(digest, store.size(digest) or 0, None)


def _temporaries(store: BlobStore) -> Iterator[tuple[str, float | None]]:
    if isinstance(store, FsspecBlobStore):
        yield from store.iter_temporaries()
    elif isinstance(store, LocalBlobStore):
        for path in store.iter_temporaries():
            try:
                yield str(path), path.stat().st_mtime
            except FileNotFoundError:
                continue


def _remove_temporary(store: BlobStore, key: str) -> None:
    if isinstance(store, FsspecBlobStore):
        store.remove_temporary(key)
    else:
        try:
            os.unlink(key)
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise StorageError(f"{key}: cannot remove: {exc.strerror}") from exc


def _blob_info(store: BlobStore, digest: str) -> BlobInfo | None:
    """A blob's size and modification time as stored right now (None when absent)."""
    if isinstance(store, FsspecBlobStore):
        return store.blob_info(digest)
    if isinstance(store, LocalBlobStore):
        try:
            st = store.path_of(digest).stat()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise StorageError(f"{store.path_of(digest)}: {exc.strerror}") from exc
        return BlobInfo(digest, st.st_size, st.st_mtime)
    size = store.size(digest)
    return None if size is None else BlobInfo(digest, size, None)


def _leases(store: BlobStore, cutoff: float, grace: float) -> tuple[set[str], list[str]]:
    """Return the digests of leases younger than the grace period, and the keys of
    the expired ones. A young lease that cannot be read stops gc (what it protects
    cannot be known); an unreadable expired one is just expired."""
    leased: set[str] = set()
    expired: list[str] = []
    for lease in iter_leases(store):
        newest = lease.newest
        if grace == 0 or (newest is not None and newest < cutoff):
            expired.append(lease.key)
            continue
        try:
            leased.update(read_lease(store, lease.key))
        except StorageError as exc:
            raise StorageError(
                f"gc refused: a recent push's lease cannot be read, so what it protects "
                f"cannot be known: {exc}"
            ) from exc
    return leased, expired


def collect_garbage(
    root: str | os.PathLike[str] | None = None,
    *,
    remote: str | None = None,
    revs: Sequence[str] = (),
    grace: float = DEFAULT_GRACE,
    delete: bool = False,
    now: float | None = None,
) -> GcPlan:
    """Plan (and with ``delete``, carry out) gc of the local store or ``remote``.

    Blobs whose age is unknown (backends without modification times) count as young
    unless ``grace`` is 0.
    """
    if grace < 0:
        raise ConfigError(f"--grace must be 0 or more seconds, got {grace}")
    base = find_root(root)
    keep = referenced_digests(base, revs)
    store: BlobStore
    if remote is None:
        store = local_store(base)
        label = f"local store ({store.location})"
    else:
        target = open_remote(base, remote)
        store = target.store
        label = target.source.label
        if not store.supports_listing:
            raise ConfigError(f"{label}: this backend cannot list its blobs, so gc cannot run")
        if delete and store.read_only:
            raise ConfigError(f"{label} is read-only")
    cutoff = (time.time() if now is None else now) - grace

    def old(mtime: float | None) -> bool:
        return grace == 0 or (mtime is not None and mtime < cutoff)

    plan = GcPlan(store=label, referenced=len(keep))
    try:
        leased, plan.leases = _leases(store, cutoff, grace)
        for blob in _blobs(store):
            if blob.digest in keep:
                plan.kept += 1
            elif blob.digest in leased:
                plan.leased += 1
            elif old(blob.mtime):
                plan.garbage.append(blob)
            else:
                plan.young.append(blob)
        for key, mtime in _temporaries(store):
            if old(mtime):
                plan.temporaries.append(key)
        if delete:
            # A push may have started since the listing: read the leases again, and
            # each blob's size and age just before deleting it.
            leased |= _leases(store, cutoff, grace)[0]
            removed: list[BlobInfo] = []
            for blob in plan.garbage:
                if blob.digest in leased:
                    plan.leased += 1
                    continue
                current = _blob_info(store, blob.digest)
                if current is None:
                    continue
                if current.size != blob.size or not old(current.mtime):
                    plan.young.append(current)
                    continue
                store.delete(blob.digest)
                removed.append(blob)
            plan.garbage = removed
            for key in plan.temporaries:
                _remove_temporary(store, key)
            for key in plan.leases:
                remove_lease(store, key)
            plan.deleted = True
    except StorageError as exc:
        text = str(exc)
        raise StorageError(text if text.startswith(label) else f"{label}: {text}") from exc
    return plan
