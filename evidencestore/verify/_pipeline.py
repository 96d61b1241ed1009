"""The one verification pipeline: plan every bundle, hash one flat list of files in
the background while this thread does what needs no hash, then judge each bundle.

:func:`plan` decides from the registration and the directory layout alone which files
each bundle needs hashed (a frozen :class:`Plan`); :func:`pipeline` hashes them all at
once (forked workers, :func:`~evidencestore.digest.start_hash_files`) while this
thread computes Merkle roots and walks directories (:class:`Unhashed`), and
:func:`judge` turns the outcomes into the bundle's report, in report order.
"""

from __future__ import annotations

import errno
import functools
import os
import stat
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import msgspec

from ..digest import (
    Hashed,
    HashOutcome,
    PendingHashes,
    digest_from_hex,
    hash_files,
    start_hash_files,
    would_fork,
)
from ..errors import IntegrityError, NotRegularFileError
from ..inventory import EVIDENCE_DIR, REGISTRATION_NAME
from ..models import BundleReport, Entry, Finding, Registration
from ..paths import all_plain, resolve, shown, within
from ..storage import BlobStore, SupportsLocalPaths
from ._checks import err, path_findings, tree_findings, unavailable
from ._walk import (
    dir_state,
    holds_only,
    readlink,
    real_bundle_dir,
    sole_parent,
    walk_files,
    walk_order,
)

__all__ = [
    "Context",
    "Early",
    "Plan",
    "Unhashed",
    "judge",
    "pipeline",
    "plan",
    "start_early",
    "while_hashing",
]

_ANY_DIGEST = digest_from_hex("0" * 64)


class Context:
    """What every bundle of one run shares: the root, resolved once, and the store.

    ``plain_dirs``: the bundle directories a listing saw as directories, not symlinks
    (None: not listed); each is where it is without an ``lstat`` of its own.
    """

    __slots__ = (
        "blob_base",
        "evidence_s",
        "local",
        "plain_dirs",
        "real_evidence",
        "real_root",
        "repo",
        "require_available",
        "store",
    )

    def __init__(
        self,
        root: str | os.PathLike[str],
        store: BlobStore | None,
        require_available: bool,
        plain_dirs: Collection[str] | None = None,
    ) -> None:
        self.repo = str(Path(root).absolute())
        self.real_root = os.path.realpath(self.repo)
        evidence = f"{self.repo}{os.sep}{EVIDENCE_DIR}"
        self.real_evidence = resolve(evidence)
        self.store = store
        # Blobs that are plain files are hashed in place with the repo entries.
        self.local = store if isinstance(store, SupportsLocalPaths) else None
        self.blob_base = (
            f"{self.local.path_of(_ANY_DIGEST).parent.parent}{os.sep}" if self.local else ""
        )
        self.require_available = require_available
        self.evidence_s = f"{evidence}{os.sep}"
        self.plain_dirs = plain_dirs


class Plan(NamedTuple):
    """One bundle planned: what its registration and layout alone decided, and the
    files whose bytes are hashed (``jobs``: each entry and where it is read)."""

    name: str
    reg: Registration
    findings: tuple[Finding, ...]  # the first ``n_path`` are about entry paths
    n_path: int
    jobs: tuple[tuple[Entry, str], ...]
    checked: int  # store entries verified while planning (a store without local paths)
    unavailable: int
    bdir_s: str  # the bundle directory, with a trailing separator
    outside: str  # where the bundle directory resolves
    bdir_escapes: bool
    repo_entries: int  # entries kept beside the registration (a job each, or a finding)
    paths: tuple[str, ...]  # every entry's path, in manifest order


class Unhashed(NamedTuple):
    """What a bundle's judgement needs besides hashes: tree findings and the walk
    (``walked`` None: the directory lists exactly the registration and the entries'
    names, so the walk is needed only if one of them turns out not to be a file)."""

    tree: list[Finding]
    walked: list[tuple[str, str, str]] | None


def plan(ctx: Context, name: str, reg: Registration) -> Plan:
    """Path checks, and the list of files this bundle needs hashed."""
    m = reg.manifest
    bdir = ctx.evidence_s + name
    bdir_s = f"{bdir}{os.sep}"
    paths = tuple([e.path for e in m.entries])
    findings = path_findings(reg, name, paths)
    n_path = len(findings)
    bad = {f.path for f in findings if f.code == "bad-path"} if findings else set()
    outside = real_bundle_dir(bdir, name, ctx.real_evidence, ctx.plain_dirs)
    plain_bdir = ctx.real_evidence is not None and outside == (f"{ctx.real_evidence}{os.sep}{name}")
    real_root = ctx.real_root
    bdir_escapes = not within(outside, real_root)
    if bdir_escapes:
        findings.append(
            err(
                "symlink-escape",
                f"{EVIDENCE_DIR}/{name} resolves to {outside}, outside the repository: its files are not checked",
                name,
            )
        )
    dir_states: dict[str, str] = {}
    jobs: list[tuple[Entry, str]] = []
    checked = unavailable_n = repo_entries = 0
    entries = m.entries
    # the common case, with no name looked at one by one: every entry is kept beside
    # the registration, in one directory inside the repository
    common = None if findings else sole_parent(paths)
    if (
        common is not None
        and (not common or dir_state(bdir, plain_bdir, common, real_root, dir_states) == "inside")
        and "store" not in {e.location for e in entries}
    ):
        return Plan(
            name,
            reg,
            (),
            0,
            tuple(zip(entries, [bdir_s + p for p in paths], strict=True)),
            0,
            0,
            bdir_s,
            outside,
            False,
            len(entries),
            paths,
        )
    store, local = ctx.store, ctx.local
    blob_base = ctx.blob_base
    for entry in entries:
        if bad and entry.path in bad:
            continue
        if entry.location == "repo":
            repo_entries += 1
            if bdir_escapes:
                continue
            parent = entry.path.rpartition("/")[0]
            if parent:
                state = dir_state(bdir, plain_bdir, parent, real_root, dir_states)
                if state == "loop":
                    findings.append(
                        err(
                            "symlink-loop",
                            f"{EVIDENCE_DIR}/{name}/{parent} is a symlink loop: "
                            f"{EVIDENCE_DIR}/{name}/{entry.path} cannot be read",
                            name,
                            entry.path,
                            entry.descriptor.digest,
                        )
                    )
                    continue
                if state == "outside":
                    target = resolve(bdir_s + entry.path)
                    findings.append(
                        err(
                            "symlink-escape",
                            f"{EVIDENCE_DIR}/{name}/{entry.path} resolves to {target}, outside the repository",
                            name,
                            entry.path,
                            entry.descriptor.digest,
                        )
                    )
                    continue
            jobs.append((entry, bdir_s + entry.path))
            continue
        d = entry.descriptor
        if local is not None:
            hexd = d.digest[7:]
            jobs.append((entry, f"{blob_base}{hexd[:2]}{os.sep}{hexd}"))
        elif store is not None and store.size(d.digest) is not None:
            try:
                store.verify(d.digest, d.size)
                checked += 1
            except IntegrityError as exc:
                findings.append(
                    err(
                        "blob-corrupt",
                        f"store entry {entry.path!r}: {exc}",
                        name,
                        entry.path,
                        d.digest,
                    )
                )
        else:
            unavailable_n += 1
            findings.append(unavailable(entry, name, store, ctx.require_available))
    return Plan(
        name,
        reg,
        tuple(findings),
        n_path,
        tuple(jobs),
        checked,
        unavailable_n,
        bdir_s,
        outside,
        bdir_escapes,
        repo_entries,
        paths,
    )


def _walk(ctx: Context, b: Plan) -> list[tuple[str, str, str]]:
    return [] if b.bdir_escapes else walk_files(b.bdir_s, b.outside, ctx.real_root, [])


def while_hashing(ctx: Context, b: Plan) -> Unhashed:
    """The work that needs no hash: Merkle root, digest, collisions, the directory walk
    (or, for a plain bundle directory whose entries all have a job, the listing that
    shows it holds nothing else)."""
    walked: list[tuple[str, str, str]] | None
    repo = (
        b.paths
        if len(b.jobs) == len(b.paths) == b.repo_entries
        else [e.path for e, _ in b.jobs if e.location == "repo"]
    )
    if (
        b.n_path == 0
        and b.outside == f"{ctx.real_evidence}{os.sep}{b.name}"
        and len(repo) == b.repo_entries
        and holds_only(b.bdir_s, repo, REGISTRATION_NAME)
    ):
        walked = None
    else:
        walked = _walk(ctx, b)
    return Unhashed(tree_findings(b.reg, b.name, b.paths), walked)


def judge(
    ctx: Context, b: Plan, unhashed: Unhashed, odd: Sequence[tuple[int, HashOutcome]]
) -> BundleReport:
    """Turn hash outcomes and the walk into this bundle's findings, in report order.

    ``odd``: (job index, outcome) of the jobs whose outcome is not the expected digest
    and size, in job order; every other job hashed as registered.
    """
    name = b.name
    m = b.reg.manifest
    # report order: path findings, tree findings, then the per-entry findings
    findings = [*b.findings[: b.n_path], *unhashed.tree, *b.findings[b.n_path :]]
    checked, unavailable_n = b.checked + len(b.jobs) - len(odd), b.unavailable
    real_root = ctx.real_root
    store = ctx.store
    walked = unhashed.walked
    if walked is None and any(b.jobs[j][0].location == "repo" for j, _ in odd):
        walked = _walk(ctx, b)  # a name listed as expected is not a plain file
    for j, outcome in odd:
        entry, fpath = b.jobs[j]
        d = entry.descriptor
        if type(outcome) is Hashed and outcome.digest == d.digest:
            checked += 1
            continue
        in_store = entry.location == "store"
        what = (
            f"store blob of {entry.path!r}" if in_store else f"{EVIDENCE_DIR}/{name}/{entry.path}"
        )
        if not in_store and isinstance(outcome, OSError) and outcome.errno == errno.ELOOP:
            real = resolve(fpath)
            if real is None:
                findings.append(
                    err(
                        "symlink-loop",
                        f"{what} is a symlink loop (-> {readlink(fpath)}): its content cannot be read",
                        name,
                        entry.path,
                        d.digest,
                    )
                )
                continue
            if not within(real, real_root):
                findings.append(
                    err(
                        "symlink-escape",
                        f"{what} is a symlink to {real}, outside the repository",
                        name,
                        entry.path,
                        d.digest,
                    )
                )
                continue
            [outcome] = hash_files([real], [d.size])
            what = f"{what} (symlink to {real})"
        if isinstance(outcome, Hashed):
            if outcome.digest == d.digest:
                checked += 1
                continue
            code = "blob-corrupt" if in_store else "hash-mismatch"
            msg = f"{what}: content hashes to {outcome.digest}, expected {d.digest}"
        elif isinstance(outcome, IntegrityError):
            code = "blob-corrupt" if in_store else "size-mismatch"
            msg = f"{what}: {outcome.reason}"
        elif isinstance(outcome, FileNotFoundError):
            if in_store:
                unavailable_n += 1
                findings.append(unavailable(entry, name, store, ctx.require_available))
                continue
            code = "missing-file"
            msg = f"{what} is missing (expected {d.size} bytes, {d.digest})"
        elif isinstance(outcome, NotRegularFileError):
            code = "not-a-file"
            msg = f"{what} is not a regular file"
        else:
            code = "unreadable"
            msg = f"{what}: cannot read: {outcome.strerror or outcome}"
        findings.append(err(code, msg, name, entry.path, d.digest))

    # files in the bundle directory that no entry names
    if walked:
        named = {e.path for e in m.entries if e.location == "repo"}
        named.add(REGISTRATION_NAME)
        extra = sorted((w for w in walked if w[0] not in named), key=walk_order)
    else:
        extra = []
    if extra:
        store_names = {e.path for e in m.entries if e.location == "store"}
        reported = {f.path for f in findings if f.code in ("symlink-loop", "symlink-escape")}
    for rel_in, kind, detail in extra:
        where = f"{EVIDENCE_DIR}/{name}/{rel_in}"
        if kind != "file" and any(p and p.startswith(f"{rel_in}/") for p in reported):
            continue  # the entries below it already say why they were not checked
        if kind == "loop":
            findings.append(
                err("symlink-loop", f"{where} is a symlink loop (-> {detail})", name, rel_in)
            )
            continue
        if kind == "outside-dir":
            findings.append(
                err(
                    "symlink-escape",
                    f"{where} is a symlink to directory {detail}, outside the repository",
                    name,
                    rel_in,
                )
            )
            continue
        why = (
            "a store entry's bytes must not be kept in git"
            if rel_in in store_names
            else "no entry names it"
        )
        findings.append(err("unregistered-file", f"{where}: {why}", name, rel_in))

    errors = sum(f.severity == "error" for f in findings) if findings else 0
    return BundleReport(
        name=shown(name),
        ok=errors == 0,
        digest=b.reg.digest,
        entries=len(m.entries),
        checked=checked,
        unavailable=unavailable_n,
        findings=tuple(findings),
    )


@functools.cache
def _light() -> msgspec.json.Decoder[Any]:
    """A decoder of what hashing needs of a registration, every other field skipped
    unread (made on first use: most verifications never need it)."""

    # defstruct: the field types as objects (this module's annotations are strings)
    descriptor = msgspec.defstruct("LightDescriptor", [("digest", str), ("size", int)])
    entry = msgspec.defstruct(
        "LightEntry", [("path", str), ("descriptor", descriptor), ("location", str)]
    )
    manifest = msgspec.defstruct("LightManifest", [("entries", list[entry])])  # type: ignore[valid-type]
    light = msgspec.defstruct("Light", [("manifest", manifest)])
    return msgspec.json.Decoder(light)


# A registration this large (a few thousand entries) has its files hashed while it is
# decoded and checked (see start_early).
EARLY_MIN_BYTES = 256 << 10
_OPEN_PLAIN = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)


class Early(NamedTuple):
    """Hashing started before the registration was decoded (:func:`start_early`)."""

    paths: list[str]
    sizes: list[int | None]
    digests: list[str | None]
    pending: PendingHashes


def start_early(ctx: Context, name: str) -> Early | None:
    """Start hashing bundle ``name``'s files from the bytes of its registration, before
    the registration is decoded and checked, or None when that is not worth it or not
    safe. The files are a guess from a light decode (each entry's path, size and digest,
    nothing validated); :func:`pipeline` uses the outcomes only when the plan's files,
    sizes and digests are exactly these, and otherwise stops and drops them.

    Only a large registration qualifies, whose entries are all kept beside it, with
    plain names (:func:`~evidencestore.paths.all_plain`) in one directory, and only when
    the bundle directory and that directory are plain directories, so nothing outside
    the bundle is opened, whatever the registration says.
    """
    bdir = ctx.evidence_s + name
    try:
        fd = os.open(f"{bdir}{os.sep}{REGISTRATION_NAME}", _OPEN_PLAIN)
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or st.st_size < EARLY_MIN_BYTES:
                return None
            data = os.read(fd, st.st_size)
        finally:
            os.close(fd)
        entries = _light().decode(data).manifest.entries
    except (OSError, msgspec.DecodeError):
        return None  # the inventory reports what is wrong with it
    if any(e.location != "repo" for e in entries):
        return None
    names = [e.path for e in entries]
    common = sole_parent(names) if all_plain(names) else None
    if common is None:
        return None
    way = [bdir]
    for part in common.split("/") if common else ():
        way.append(f"{way[-1]}{os.sep}{part}")
    try:
        if not all(stat.S_ISDIR(os.lstat(d).st_mode) for d in way):
            return None  # a symlink (or a file) on the way
    except OSError:
        return None
    sizes: list[int | None] = [e.descriptor.size for e in entries]
    if not would_fork(sizes):
        return None  # hashed here anyway: nothing to overlap with the decode
    bdir_s = f"{bdir}{os.sep}"
    paths = [bdir_s + n for n in names]
    digests: list[str | None] = [e.descriptor.digest for e in entries]
    pending = start_hash_files(paths, sizes, follow_symlinks=False, expected_digests=digests)
    return Early(paths, sizes, digests, pending)


def pipeline(
    ctx: Context,
    regs: Mapping[str, Registration],
    *,
    threads: int | None = None,
    early: Early | None = None,
) -> list[BundleReport]:
    """The one pipeline: plan every bundle, hash one flat list of files in the
    background while this thread does the rest, then judge each bundle. ``early``:
    hashing started before the registrations were decoded (:func:`start_early`), used
    when its files are exactly the plan's, and stopped and dropped otherwise."""
    planned = [plan(ctx, name, reg) for name, reg in regs.items()]
    starts: list[int] = []
    paths: list[str] = []
    sizes: list[int | None] = []
    digests: list[str | None] = []
    for b in planned:
        starts.append(len(paths))
        for entry, fpath in b.jobs:
            paths.append(fpath)
            sizes.append(entry.descriptor.size)
            digests.append(entry.descriptor.digest)
    if early is not None and (early.paths, early.sizes, early.digests) == (paths, sizes, digests):
        pending = early.pending
    else:
        if early is not None:
            early.pending.cancel()  # a guess that missed: stopped and dropped
        pending = start_hash_files(
            paths, sizes, threads=threads, follow_symlinks=False, expected_digests=digests
        )
    try:
        unhashed = [while_hashing(ctx, b) for b in planned]
    finally:
        odd = pending.unexpected()
    # each bundle's odd outcomes, by job index within the bundle
    per_bundle: list[list[tuple[int, HashOutcome]]] = [[] for _ in planned]
    k, last = 0, len(starts) - 1
    for i, outcome in odd.items():  # ascending
        # the last bundle starting at or before i (one without jobs starts where the
        # next one does, so it is never the last)
        while k < last and starts[k + 1] <= i:
            k += 1
        per_bundle[k].append((i - starts[k], outcome))
    return [
        judge(ctx, b, u, found) for b, u, found in zip(planned, unhashed, per_bundle, strict=True)
    ]
