"""Garbage collection: remove blobs nothing references, and never one a writer relies on.

**What is kept.** Every digest named by an entry of every registration in the working
tree, at every git ref (branches, remote-tracking branches, tags: ``scope="refs"``,
the default) and at the revisions listed; the LPIPS weights pinned in
``evstore.toml``; every digest named by a lease younger than the grace period; every
blob younger than the grace period. With ``scope="refs"`` on a remote, gc refuses to
delete when it cannot read the refs (it would delete other branches' evidence);
``scope="worktree"`` is the explicit narrower choice.

**Why no interleaving with a writer loses a blob.** Writers are ``push`` (to a
remote), ``put``/``put_file`` and ``bundle create`` (local store), and ``pull``/
``fetch`` (local store). Each one, before the check that tells it a blob is already
present (the check it then relies on), either writes a lease naming the blob (push,
on every backend) or refreshes the blob's modification time (``keep_alive``, local
stores). gc deletes in three steps per batch of candidates:

1. *quarantine*: move each candidate out of its name (``<root>/quarantine/``; the
   mtime moves with it). From then on a writer's check finds the blob absent and
   writes it again, so a writer whose check found it present checked *before* step 1,
   and so wrote its lease or refreshed the mtime before step 1 too;
2. *re-read*: read the leases and the references again (and each quarantined blob's
   mtime) after the whole batch is quarantined;
3. *decide*: restore every quarantined blob that a lease, a reference or a young mtime
   now names; purge the others.

A writer that relied on a blob's presence therefore always did so before step 1, and
its lease (or mtime) is seen by step 2: the blob is restored. A writer that checked
after step 1 found the blob absent and stored its own copy, which gc never touches
(it only purges quarantined keys). The same argument holds on object stores (S3),
where quarantine is a copy and a delete and there is no mtime refresh: there the lease
alone carries it. Leases are judged against a cutoff fixed when gc starts, so a lease
young at step 2 cannot expire in the middle of a run. A crash of gc between the steps
leaves blobs in quarantine: the next gc restores every one of them before it starts,
so nothing is deleted that was not decided in one complete run. While a blob sits in
quarantine, a reader may find it missing for a moment and must retry; only blobs that
were unreferenced and unleased are ever quarantined.

A run (``runs/recorder.py``) holds an :class:`~evidencestore.storage.leases.ActiveLease`
from before its first blob until its registration is written: while it is locked, every
blob at or after its start is kept, with ``grace = 0`` too (the argument is the same,
carried by the blob's modification time: see the lease's doc). A run never loses an
entry to gc.

The grace period must cover a writer's run (a long push renews its lease every
:data:`~evidencestore.storage.leases.LEASE_RENEWAL` seconds) and the time until the
registrations it wrote are visible to gc (committed on a ref gc reads). Dry run unless
``delete`` is set.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from . import _steps
from ._grace import DEFAULT_GRACE
from .config import Repository, as_repository
from .errors import ConfigError, GitError, ManifestError, StorageError
from .gitrefs import is_git_repository, list_refs, read_blobs, registration_blobs
from .inventory import decode_registration, load_inventory
from .models import Registration
from .remotes import open_remote
from .staging import remove_stale_staging, stale_staging_dirs
from .storage import BlobInfo, BlobStore, SupportsQuarantine
from .storage.leases import active_floor, iter_leases, read_lease, remove_lease

__all__ = [
    "DEFAULT_GRACE",
    "GcPlan",
    "References",
    "Scope",
    "collect_garbage",
    "find_references",
    "referenced_digests",
]

BATCH = 1000  # candidates quarantined before the leases and references are re-read

Scope = Literal["refs", "worktree"]


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
    scope: str = "refs"
    kept_by_ref: dict[str, int] = field(default_factory=dict)
    restored: int = 0  # quarantined, then put back: a writer relied on it meanwhile
    recovered: int = 0  # left in quarantine by an interrupted gc, put back first
    notes: list[str] = field(default_factory=list)
    staging: list[str] = field(default_factory=list)  # left by killed `bundle create`s

    @property
    def garbage_bytes(self) -> int:
        """Bytes the garbage blobs take."""
        return sum(b.size for b in self.garbage)

    def line(self) -> str:
        """A one-line summary."""
        verb = "removed" if self.deleted else "would remove"
        text = (
            f"gc {self.store}: {verb} {len(self.garbage)} unreferenced blob(s) "
            f"({self.garbage_bytes / (1 << 20):.1f} MiB) and {len(self.temporaries)} "
            f"leftover temporary file(s); kept {self.kept} referenced, "
            f"{len(self.young)} unreferenced within the grace period, "
            f"{self.leased} leased by a recent push; {verb} {len(self.leases)} expired lease(s)"
        )
        if self.staging:
            text += f"; {verb} {len(self.staging)} staging directory(ies) of killed creates"
        if self.restored or self.recovered:
            text += (
                f"; put back {self.restored} blob(s) a concurrent writer relied on and "
                f"{self.recovered} left in quarantine by an interrupted gc"
            )
        return text


@dataclass
class References:
    """The digests gc must keep, and how many each git ref names."""

    digests: set[str]
    by_ref: dict[str, set[str]]
    scope: str
    notes: list[str] = field(default_factory=list)


def _decode_at(base: Path, rev: str, label: str) -> list[Registration]:
    blobs = registration_blobs(base, rev)
    paths = {oid: path for path, oid in blobs}
    return [
        decode_registration(data, f"{label}:{paths[oid]}")
        for oid, data in read_blobs(base, list(paths))
    ]


def find_references(
    root: str | os.PathLike[str],
    revs: Sequence[str] = (),
    *,
    scope: Scope = "refs",
    require_refs: bool = False,
) -> References:
    """Return every digest the working tree's registrations, the git refs (with
    ``scope="refs"``), the revisions ``revs`` and the pinned weights reference.

    Refuses (raises) when a registration is unreadable, since its blobs could not be
    kept, and, with ``require_refs``, when the git refs cannot be read.
    """
    repo = as_repository(root)
    base = repo.root
    inventory = load_inventory(base)
    errors = [f for f in inventory.findings if f.severity == "error"]
    if errors:
        listed = "; ".join(f.message for f in errors[:5])
        raise ManifestError(
            f"gc refused: the inventory has {len(errors)} error(s), so what is referenced "
            f"cannot be known: {listed}"
        )
    keep: set[str] = set()
    for registration in inventory.registrations.values():
        keep.update(e.descriptor.digest for e in registration.manifest.entries)
    refs = References(keep, {}, scope)
    by_commit: dict[str, set[str]] = {}
    if scope == "refs":
        if is_git_repository(base):
            for ref, commit in list_refs(base).items():
                if commit not in by_commit:
                    by_commit[commit] = {
                        e.descriptor.digest
                        for reg in _decode_at(base, commit, ref)
                        for e in reg.manifest.entries
                    }
                refs.by_ref[ref] = by_commit[commit]
                keep |= by_commit[commit]
        elif require_refs:
            raise ConfigError(
                f"gc refused: {base} is not a git repository (or git is missing), so the "
                "registrations of other branches cannot be read and their blobs would be "
                "deleted; run gc in a clone with every branch fetched, or give "
                "{scope} worktree to keep only what this working tree references",
                parameters=("scope",),
            )
        else:
            refs.notes.append(f"{base} is not a git repository: kept what the working tree names")
    for rev in revs:
        try:
            for reg in _decode_at(base, rev, rev):
                keep.update(e.descriptor.digest for e in reg.manifest.entries)
        except GitError as exc:
            raise exc.about(f"{{revs}} {rev}", parameters=("revs",)) from None
    lpips = repo.config.lpips
    if lpips is not None:
        for desc in (lpips.backbone, lpips.linear):
            if desc is not None:
                keep.add(desc.digest)
        if lpips.state_digest:
            keep.add(lpips.state_digest)
    return refs


def referenced_digests(
    root: str | os.PathLike[str], revs: Sequence[str] = (), *, scope: Scope = "worktree"
) -> set[str]:
    """Return every digest gc keeps for ``root`` (see :func:`find_references`)."""
    return find_references(root, revs, scope=scope).digests


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


def _open(base: Repository, remote: str | None, delete: bool) -> tuple[BlobStore, str]:
    if remote is None:
        store: BlobStore = base.local_store()
        return store, f"local store ({store.location})"
    target = open_remote(base, remote)
    label = target.source.label
    if not target.store.supports_listing:
        raise ConfigError(f"{label}: this backend cannot list its blobs, so gc cannot run")
    if delete and (target.store.read_only or target.config.read_only):
        raise ConfigError(f"{label} is read-only")
    return target.store, label


def collect_garbage(
    root: str | os.PathLike[str] | None = None,
    *,
    remote: str | None = None,
    revs: Sequence[str] = (),
    scope: Scope = "refs",
    grace: float = DEFAULT_GRACE,
    delete: bool = False,
    now: float | None = None,
) -> GcPlan:
    """Plan (and with ``delete``, carry out) gc of the local store or ``remote``.

    Blobs whose age is unknown (backends without modification times) count as young
    unless ``grace`` is 0 (which also disregards every lease but those live runs hold:
    only for a store no one else writes to).
    """
    if grace < 0:
        raise ConfigError(
            f"{{grace}} must be 0 or more seconds, got {grace}", parameters=("grace",)
        )
    if scope not in ("refs", "worktree"):
        raise ConfigError(
            f"{{scope}} must be 'refs' or 'worktree', got {scope!r}", parameters=("scope",)
        )
    base = as_repository(root)
    store, label = _open(base, remote, delete)
    upkeep = store.upkeep
    quarantine = (
        upkeep if isinstance(upkeep, SupportsQuarantine) and upkeep.supports_quarantine else None
    )
    if delete and quarantine is None:
        raise ConfigError(f"{label}: this backend cannot delete safely, so gc cannot run")
    cutoff = (time.time() if now is None else now) - grace
    floor = active_floor(store, grace, cutoff + grace)

    def old(mtime: float | None) -> bool:
        if floor is not None and (mtime is None or mtime >= floor):
            return False  # a live run may rely on it (``ActiveLease``), whatever the grace
        return grace == 0 or (mtime is not None and mtime < cutoff)

    try:
        plan = GcPlan(store=label, referenced=0, scope=scope)
        if quarantine is not None and delete:
            # An interrupted gc decided nothing for what it left in quarantine.
            for key, _digest, _mtime in list(quarantine.iter_quarantined()):
                quarantine.restore(key)
                plan.recovered += 1
        references = find_references(
            base, revs, scope=scope, require_refs=delete and remote is not None
        )
        keep = references.digests
        plan.referenced = len(keep)
        plan.notes = references.notes
        leased, plan.leases = _leases(store, cutoff, grace)
        present: set[str] = set()
        for blob in upkeep.iter_blobs():
            present.add(blob.digest)
            if blob.digest in keep:
                plan.kept += 1
            elif blob.digest in leased:
                plan.leased += 1
            elif old(blob.mtime):
                plan.garbage.append(blob)
            else:
                plan.young.append(blob)
        for ref, digests in sorted(references.by_ref.items()):
            plan.kept_by_ref[ref] = len(digests & present)
        for key, mtime in upkeep.iter_temporaries():
            if old(mtime):
                plan.temporaries.append(key)
        if remote is None:
            plan.staging = [str(p) for p in stale_staging_dirs(base)]
        _steps.reached("gc:marked")
        if quarantine is not None and delete:
            removed: list[BlobInfo] = []
            for start in range(0, len(plan.garbage), BATCH):
                batch = plan.garbage[start : start + BATCH]
                removed += _sweep(store, quarantine, base, revs, scope, batch, cutoff, grace, plan)
            plan.garbage = removed
            for key in plan.temporaries:
                upkeep.remove_temporary(key)
            for key in plan.leases:
                remove_lease(store, key)
            if plan.staging:
                # Each is locked by a live `bundle create`, so the lock, not age, decides
                # (where flock exists).
                older = 0.0 if os.name == "posix" else grace
                plan.staging = [str(p) for p in remove_stale_staging(base, older)]
            plan.deleted = True
    except StorageError as exc:
        text = str(exc)
        raise StorageError(text if text.startswith(label) else f"{label}: {text}") from exc
    return plan


def _sweep(
    store: BlobStore,
    quarantine: SupportsQuarantine,
    base: Repository,
    revs: Sequence[str],
    scope: Scope,
    batch: Iterable[BlobInfo],
    cutoff: float,
    grace: float,
    plan: GcPlan,
) -> list[BlobInfo]:
    """Quarantine ``batch``, re-read leases and references, then restore or purge
    (``quarantine`` is ``store``, seen through the capability gc deletes by)."""
    held: list[tuple[BlobInfo, str]] = []
    try:
        for blob in batch:
            key = quarantine.quarantine(blob.digest)
            if key is not None:
                held.append((blob, key))
        _steps.reached("gc:quarantined")
        leased = _leases(store, cutoff, grace)[0]  # leases before references (ActiveLease)
        floor = active_floor(store, grace, cutoff + grace)
        keep = find_references(base, revs, scope=scope).digests
        _steps.reached("gc:reread")
    except BaseException:
        for _blob, key in held:
            quarantine.restore(key)
        raise
    removed = []
    for blob, key in held:
        mtime = quarantine.quarantined_mtime(key)
        young = mtime is not None and (
            (grace != 0 and mtime >= cutoff) or (floor is not None and mtime >= floor)
        )
        if blob.digest in leased or blob.digest in keep or young:
            quarantine.restore(key)
            plan.restored += 1
            if blob.digest in leased:
                plan.leased += 1
            elif blob.digest in keep:
                plan.kept += 1
            else:
                plan.young.append(blob)
        else:
            quarantine.purge(key)
            removed.append(blob)
    _steps.reached("gc:swept")
    return removed
