"""Verification: checks that return a report of every finding, and raising twins.

``verify_repository`` never stops at the first problem: each bundle's registration,
Merkle root and digest are recomputed, every ``repo`` entry is hashed against the
working tree (size first), files that no entry names are reported, ``store`` entries
are re-hashed in the local store (or reported unavailable), and with ``base`` the
registrations at a git revision must be unchanged.

Nothing outside the repository is read as evidence: an entry, bundle directory or
registration that resolves outside is a ``symlink-escape`` (``registration-symlink-
escape``) finding, a symlink loop is a ``symlink-loop`` finding (never an exception),
and a symlinked directory inside the repository is walked like a directory. Names are
judged by the one rule in ``paths.py`` (``bad-path``, ``misleading-name``,
``name-collision``), and staging directories left by a killed ``bundle create`` are
``stale-staging`` warnings.

Speed: one pipeline plans every selected bundle, hashes one flat list of files in
forked workers while this process computes Merkle roots and walks the directories, then
judges each bundle. A repository of many bundles is instead split bundle by bundle
across forked workers that each run that pipeline (``_fork.fork_map``); given no
inventory, each worker also reads and decodes its own contiguous run of registrations
(``inventory.BundleDirs``), so none is decoded here first. A worker that fails has its
share verified again here, so the report never depends on forking.
Verification only reads, so no interleaving with a writer can lose anything here.
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import operator
import os
import stat
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path

from ._fork import can_fork, cpu_count, fork_map
from .config import as_repository
from .digest import (
    Hashed,
    HashOutcome,
    NotRegularFileError,
    digest_from_hex,
    hash_files,
    start_hash_files,
)
from .errors import ConfigError, IntegrityError, ManifestError, VerificationError
from .inventory import (
    EVIDENCE_DIR,
    REGISTRATION_NAME,
    BundleDirs,
    Inventory,
    decode_registration,
)
from .merkle import bundle_digest, entries_root
from .models import (
    BundleReport,
    Entry,
    Finding,
    Registration,
    Totals,
    VerifyReport,
)
from .paths import all_plain, name_collisions, path_problem, resolve, shown, within
from .staging import staging_name, stale_staging_dirs
from .storage import BlobStore
from .storage._base import SupportsLocalPaths

_ANY_DIGEST = digest_from_hex("0" * 64)

__all__ = [
    "RemoteChecker",
    "base_registrations",
    "check_repository",
    "verify_registration",
    "verify_repository",
]

RemoteChecker = Callable[[Mapping[str, Registration]], Mapping[str, Sequence[Finding]]]


def _err(
    code: str, message: str, bundle: str, path: str | None = None, digest: str | None = None
) -> Finding:
    # shown(): a file name on disk need not be UTF-8; the report must still encode
    return Finding(
        severity="error",
        code=code,
        message=shown(message),
        bundle=shown(bundle),
        path=None if path is None else shown(path),
        digest=digest,
    )


def _path_findings(reg: Registration, name: str) -> list[Finding]:
    """Entry paths, order and duplicates (decided before any file is opened)."""
    paths = [e.path for e in reg.manifest.entries]
    if all_plain(paths) and all(map(operator.lt, paths, paths[1:])):
        return []  # the common case, in C: plain names, strictly increasing
    out: list[Finding] = []
    prev: str | None = None
    seen: set[str] = set()
    for path in paths:
        problem = path_problem(path)
        if problem:
            out.append(_err(problem.code, f"entry path {path!r} {problem.reason}", name, path))
        if path in seen:
            out.append(
                _err("duplicate-path", f"entry path {path!r} appears more than once", name, path)
            )
        elif prev is not None and path < prev:
            out.append(
                _err(
                    "unsorted-entries",
                    f"entry {path!r} is out of path order (after {prev!r})",
                    name,
                    path,
                )
            )
        seen.add(path)
        prev = path
    return out


def _cannot_collide(paths: list[str]) -> bool:
    """True when no two of ``paths`` (nor their directories, nor the registration) can
    fold together: ASCII names fold by ``lower()`` alone, so distinct names whose lower
    case is distinct too are safe. Otherwise :func:`name_collisions` decides."""
    joined = "\n".join(paths)
    if not joined.isascii():
        return False
    if joined == joined.lower():
        return True  # lower-case ASCII names fold to themselves
    dirs: set[str] = set()
    for parent in {path.rpartition("/")[0] for path in paths}:
        while parent and parent not in dirs:
            dirs.add(parent)
            parent = parent.rpartition("/")[0]
    names = dirs.union(paths, (REGISTRATION_NAME,))
    # the lower case of every name, folded in C: the paths in one call
    folded = {d.lower() for d in dirs}.union(joined.lower().split("\n"), (REGISTRATION_NAME,))
    return len(folded) == len(names)


def _tree_findings(reg: Registration, name: str) -> list[Finding]:
    """Name collisions, Merkle root and bundle digest."""
    m = reg.manifest
    out: list[Finding] = []
    paths = [e.path for e in m.entries]
    if not _cannot_collide(paths):
        for c in name_collisions(paths, reserved=[REGISTRATION_NAME]):
            out.append(_err("name-collision", f"entry names {c.reason}", name, c.second))
    root = entries_root(m.entries)
    if root != reg.root:
        out.append(
            _err(
                "root-mismatch",
                f"entries hash to Merkle root {root}, registration says {reg.root}",
                name,
                REGISTRATION_NAME,
            )
        )
    digest = bundle_digest(m, root)
    if digest != reg.digest:
        out.append(
            _err(
                "digest-mismatch",
                f"manifest hashes to bundle digest {digest}, registration says {reg.digest}",
                name,
                REGISTRATION_NAME,
            )
        )
    return out


def _unavailable(entry: Entry, bundle: str, store: BlobStore | None, required: bool) -> Finding:
    d = entry.descriptor
    where = store.location if store is not None else "no local store"
    return Finding(
        severity="error" if required else "warning",
        code="unavailable",
        message=shown(f"store entry {entry.path!r} ({d.digest}, {d.size} bytes) is not in {where}"),
        bundle=shown(bundle),  # as _err: a name on disk need not be UTF-8
        path=shown(entry.path),
        digest=d.digest,
    )


def _walk_files(
    base: str,
    real_dir: str,
    real_root: str,
    out: list[tuple[str, str, str]],
    prefix: str = "",
    above: frozenset[str] = frozenset(),
) -> list[tuple[str, str, str]]:
    """Append ``(relative path, kind, detail)`` to ``out`` for every non-directory below
    ``base``, in no particular order (:func:`_walk_order` sorts them as a walk would).

    ``kind`` is ``file``; ``loop`` for a symlink loop (``detail``: its link text); or
    ``outside-dir`` for a symlink to a directory outside the repository (``detail``: its
    target). A symlink to a directory inside the repository is walked like a directory,
    unless it leads back to a directory above it (a ``loop``). What each item is comes
    from its ``scandir`` entry; only a symlink is resolved.
    """
    try:
        with os.scandir(base) as it:
            items = list(it)
    except OSError:
        return out
    above = above | {real_dir}
    append = out.append
    for item in items:
        if item.is_dir(follow_symlinks=False):
            _walk_files(
                item.path,
                f"{real_dir}{os.sep}{item.name}",
                real_root,
                out,
                f"{prefix}{item.name}/",
                above,
            )
        elif not item.is_symlink():
            append((prefix + item.name, "file", ""))
        else:
            rel = prefix + item.name
            real = resolve(item.path)
            if real is None:
                append((rel, "loop", _readlink(item.path)))
            elif not os.path.isdir(real):
                append((rel, "file", ""))
            elif not within(real, real_root):
                append((rel, "outside-dir", real))
            elif real in above:
                append((rel, "loop", _readlink(item.path)))
            else:
                _walk_files(item.path, real, real_root, out, f"{rel}/", above)
    return out


def _walk_order(item: tuple[str, str, str]) -> list[str]:
    # a depth-first walk with each directory's names sorted visits paths in the order
    # of their lists of segments
    return item[0].split("/")


def _readlink(path: str) -> str:
    try:
        return os.readlink(path)
    except OSError:
        return "?"


class _Context:
    """What every bundle of one run shares: the root, resolved once, and the store."""

    def __init__(
        self, root: str | os.PathLike[str], store: BlobStore | None, require_available: bool
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
        # Bundle directories the listing saw as directories, not symlinks (None: not
        # listed here); each is where it is without an lstat of its own.
        self.plain_dirs: frozenset[str] | None = None


class _Bundle:
    """One bundle on its way through the pipeline: planned, hashed, then judged."""

    __slots__ = (
        "bdir_escapes",
        "bdir_s",
        "checked",
        "findings",
        "jobs",
        "n_path",
        "name",
        "outside",
        "reg",
        "start",
        "tree",
        "unavailable",
        "walked",
    )

    def __init__(self, name: str, reg: Registration) -> None:
        self.name = name
        self.reg = reg
        self.findings: list[Finding] = []
        self.tree: list[Finding] = []
        self.jobs: list[tuple[Entry, str]] = []  # entries whose bytes are hashed, and where
        self.walked: list[tuple[str, str, str]] = []
        self.checked = 0
        self.unavailable = 0
        self.start = 0
        self.n_path = 0
        self.bdir_s = ""
        self.outside = ""
        self.bdir_escapes = False


def _real_bundle_dir(ctx: _Context, bdir: str, name: str) -> str:
    """Where a bundle directory resolves: one ``lstat`` (none when the listing said)
    unless it is a symlink."""
    if ctx.plain_dirs is not None and name in ctx.plain_dirs:
        plain = True
    else:
        try:
            plain = not stat.S_ISLNK(os.lstat(bdir).st_mode)
        except OSError:
            plain = True
    if plain and ctx.real_evidence is not None:
        return f"{ctx.real_evidence}{os.sep}{name}"
    real = resolve(bdir)
    # load_inventory reports a loop; nothing here can be read
    return f"{bdir} (a symlink loop)" if real is None else real


def _dir_state(
    bdir: str, plain_bdir: bool, parent: str, real_root: str, cache: dict[str, str]
) -> str:
    """``inside``, ``outside`` or ``loop``: where a bundle subdirectory resolves (cached).

    A chain of plain directories (``lstat``, no symlink on the way) is inside without
    resolving; only a symlink on the way is resolved.
    """
    state = cache.get(parent)
    if state is not None:
        return state
    state = "inside" if plain_bdir else ""
    if plain_bdir:
        at = -1
        while True:
            at = parent.find("/", at + 1)
            prefix = parent if at < 0 else parent[:at]
            known = cache.get(prefix)
            if known is None:
                try:
                    mode = os.lstat(f"{bdir}{os.sep}{prefix}").st_mode
                except OSError:
                    break  # missing: nothing below it is read through a link
                if stat.S_ISLNK(mode):
                    state = ""
                    break
                if not stat.S_ISDIR(mode):
                    break
            elif known != "inside":
                state = ""
                break
            if at < 0:
                break
    if not state:
        real = resolve(f"{bdir}{os.sep}{parent}")
        state = "loop" if real is None else "inside" if within(real, real_root) else "outside"
    cache[parent] = state
    return state


def _plan(ctx: _Context, b: _Bundle) -> None:
    """Path checks, and the list of files this bundle needs hashed."""
    name = b.name
    m = b.reg.manifest
    bdir = ctx.evidence_s + name
    b.bdir_s = bdir_s = f"{bdir}{os.sep}"
    b.findings = findings = _path_findings(b.reg, name)
    b.n_path = len(findings)
    bad = {f.path for f in findings if f.code == "bad-path"} if findings else set()
    b.outside = outside = _real_bundle_dir(ctx, bdir, name)
    plain_bdir = ctx.real_evidence is not None and outside == (f"{ctx.real_evidence}{os.sep}{name}")
    real_root = ctx.real_root
    b.bdir_escapes = bdir_escapes = not within(outside, real_root)
    if bdir_escapes:
        findings.append(
            _err(
                "symlink-escape",
                f"{EVIDENCE_DIR}/{name} resolves to {outside}, outside the repository: its files are not checked",
                name,
            )
        )
    dir_states: dict[str, str] = {}
    jobs = b.jobs
    store, local = ctx.store, ctx.local
    blob_base = ctx.blob_base
    for entry in m.entries:
        if bad and entry.path in bad:
            continue
        if entry.location == "repo":
            if bdir_escapes:
                continue
            parent = entry.path.rpartition("/")[0]
            if parent:
                state = _dir_state(bdir, plain_bdir, parent, real_root, dir_states)
                if state == "loop":
                    findings.append(
                        _err(
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
                        _err(
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
                b.checked += 1
            except IntegrityError as exc:
                findings.append(
                    _err(
                        "blob-corrupt",
                        f"store entry {entry.path!r}: {exc}",
                        name,
                        entry.path,
                        d.digest,
                    )
                )
        else:
            b.unavailable += 1
            findings.append(_unavailable(entry, name, store, ctx.require_available))


def _while_hashing(ctx: _Context, b: _Bundle) -> None:
    """The work that needs no hash: Merkle root, digest, collisions, the directory walk."""
    b.tree = _tree_findings(b.reg, b.name)
    if not b.bdir_escapes:
        b.walked = _walk_files(b.bdir_s, b.outside, ctx.real_root, [])


def _judge(ctx: _Context, b: _Bundle, outcomes: Sequence[HashOutcome]) -> BundleReport:
    """Turn hash outcomes and the walk into this bundle's findings, in report order."""
    name = b.name
    m = b.reg.manifest
    # report order: path findings, tree findings, then the per-entry findings
    findings = [*b.findings[: b.n_path], *b.tree, *b.findings[b.n_path :]]
    checked, unavailable = b.checked, b.unavailable
    real_root = ctx.real_root
    store = ctx.store
    for (entry, fpath), outcome in zip(b.jobs, outcomes, strict=True):
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
                    _err(
                        "symlink-loop",
                        f"{what} is a symlink loop (-> {_readlink(fpath)}): its content cannot be read",
                        name,
                        entry.path,
                        d.digest,
                    )
                )
                continue
            if not within(real, real_root):
                findings.append(
                    _err(
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
                unavailable += 1
                findings.append(_unavailable(entry, name, store, ctx.require_available))
                continue
            code = "missing-file"
            msg = f"{what} is missing (expected {d.size} bytes, {d.digest})"
        elif isinstance(outcome, NotRegularFileError):
            code = "not-a-file"
            msg = f"{what} is not a regular file"
        else:
            code = "unreadable"
            msg = f"{what}: cannot read: {outcome.strerror or outcome}"
        findings.append(_err(code, msg, name, entry.path, d.digest))

    # files in the bundle directory that no entry names
    if b.walked:
        named = {e.path for e in m.entries if e.location == "repo"}
        named.add(REGISTRATION_NAME)
        extra = sorted((w for w in b.walked if w[0] not in named), key=_walk_order)
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
                _err("symlink-loop", f"{where} is a symlink loop (-> {detail})", name, rel_in)
            )
            continue
        if kind == "outside-dir":
            findings.append(
                _err(
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
        findings.append(_err("unregistered-file", f"{where}: {why}", name, rel_in))

    errors = sum(f.severity == "error" for f in findings) if findings else 0
    return BundleReport(
        name=shown(name),
        ok=errors == 0,
        digest=b.reg.digest,
        entries=len(m.entries),
        checked=checked,
        unavailable=unavailable,
        findings=tuple(findings),
    )


def _verify_bundles(ctx: _Context, regs: Mapping[str, Registration]) -> list[BundleReport]:
    """Every bundle's report, in order: many bundles are split across forked workers
    (each runs the whole pipeline on its share); otherwise one pipeline runs here."""
    shares = _shares(ctx, regs)
    if not shares:
        return _pipeline(ctx, regs)
    import msgspec

    def run(share: list[str]) -> bytes:
        return msgspec.msgpack.encode(_pipeline(ctx, {n: regs[n] for n in share}, threads=1))

    decoder = msgspec.msgpack.Decoder(list[BundleReport])
    by_name: dict[str, BundleReport] = {}
    for share, data in zip(shares, fork_map(run, shares), strict=True):
        reports: list[BundleReport] | None = None
        if data is not None:
            with contextlib.suppress(msgspec.DecodeError):
                reports = decoder.decode(data)
        if reports is None or len(reports) != len(share):
            reports = _pipeline(ctx, {n: regs[n] for n in share})  # the worker failed
        by_name.update(zip(share, reports, strict=True))
    return [by_name[n] for n in regs]


# Forking whole-pipeline workers pays once a repository has this many bundles (each
# bundle's cost is mostly its own syscalls and interpreter work, which one process
# cannot overlap), and only when no bundle is most of the work (one large bundle is
# split file by file instead).
_SPLIT_MIN_BUNDLES = 64


def _may_split(ctx: _Context, bundles: int, workers: int) -> bool:
    """Whether ``bundles`` bundles go to ``workers`` forked workers: enough of both, and
    only over local files (a worker must not use a network client it inherited)."""
    return (
        workers >= 2
        and bundles >= _SPLIT_MIN_BUNDLES
        and (ctx.store is None or ctx.local is not None)
        and can_fork()
    )


def _shares(ctx: _Context, regs: Mapping[str, Registration]) -> list[list[str]]:
    """The bundles each worker verifies (largest first onto the least loaded worker),
    or none when the work stays in this process (see :func:`_may_split`)."""
    workers = cpu_count()
    if not _may_split(ctx, len(regs), workers):
        return []
    weight = {n: 1 + len(r.manifest.entries) for n, r in regs.items()}
    total = sum(weight.values())
    if max(weight.values()) * workers > total:
        return []
    shares: list[list[str]] = [[] for _ in range(workers)]
    loads = [0] * workers
    for name in sorted(regs, key=lambda n: -weight[n]):
        k = loads.index(min(loads))
        shares[k].append(name)
        loads[k] += weight[name]
    return [share for share in shares if share]


def _dir_shares(ctx: _Context, dirs: BundleDirs) -> list[list[os.DirEntry[str]]]:
    """Contiguous runs of bundle directories of equal length (one a worker, at least
    half of ``_SPLIT_MIN_BUNDLES`` each), or none when the work stays in this process
    (see :func:`_may_split`). Each worker then reads and decodes its own registrations,
    so no bundle is decoded here first, and nothing here is read to weigh the bundles
    (a worker that finds a large one among its own hashes it on forked workers of its
    own)."""
    found = dirs.dirs
    workers = min(cpu_count(), len(found) // (_SPLIT_MIN_BUNDLES // 2))
    if not _may_split(ctx, len(found), workers):
        return []
    size, extra = divmod(len(found), workers)
    cuts = [k * size + min(k, extra) for k in range(workers + 1)]
    return [found[a:b] for a, b in itertools.pairwise(cuts)]


# A worker's share with a bundle of this many entries hashes on forked workers of its
# own (one large bundle among many small ones would otherwise be hashed on one core).
_LARGE_BUNDLE = 2000


def _verify_dir_shares(
    ctx: _Context, dirs: BundleDirs, shares: list[list[os.DirEntry[str]]]
) -> tuple[list[Finding], list[BundleReport]]:
    """Each share's registrations loaded and verified in a forked worker: the findings
    about its directories and its bundles' reports, joined in directory order."""
    import msgspec

    def run(share: list[os.DirEntry[str]]) -> bytes:
        part = dirs.load(share)
        regs = part.registrations
        large = any(len(r.manifest.entries) >= _LARGE_BUNDLE for r in regs.values())
        reports = _pipeline(ctx, regs, threads=None if large else 1)
        return msgspec.msgpack.encode((part.findings, reports))

    decoder = msgspec.msgpack.Decoder(tuple[list[Finding], list[BundleReport]])
    found: list[Finding] = []
    reports: list[BundleReport] = []
    for share, data in zip(shares, fork_map(run, shares), strict=True):
        got: tuple[list[Finding], list[BundleReport]] | None = None
        if data is not None:
            with contextlib.suppress(msgspec.DecodeError):
                got = decoder.decode(data)
        if got is None:  # the worker failed: its share again, here
            part = dirs.load(share)
            got = (part.findings, _pipeline(ctx, part.registrations))
        found.extend(got[0])
        reports.extend(got[1])
    return found, reports


def _pipeline(
    ctx: _Context, regs: Mapping[str, Registration], *, threads: int | None = None
) -> list[BundleReport]:
    """The one pipeline: plan every bundle, hash one flat list of files in the
    background while this thread does the rest, then judge each bundle."""
    planned = [_Bundle(name, reg) for name, reg in regs.items()]
    paths: list[str] = []
    sizes: list[int | None] = []
    digests: list[str | None] = []
    for b in planned:
        _plan(ctx, b)
        b.start = len(paths)
        for entry, fpath in b.jobs:
            paths.append(fpath)
            sizes.append(entry.descriptor.size)
            digests.append(entry.descriptor.digest)
    pending = start_hash_files(
        paths, sizes, threads=threads, follow_symlinks=False, expected_digests=digests
    )
    try:
        for b in planned:
            _while_hashing(ctx, b)
    finally:
        outcomes = pending.result()
    return [_judge(ctx, b, outcomes[b.start : b.start + len(b.jobs)]) for b in planned]


def verify_registration(
    root: str | os.PathLike[str],
    reg: Registration,
    *,
    dir_name: str | None = None,
    store: BlobStore | None = None,
    require_available: bool = False,
) -> BundleReport:
    """Verify one registered bundle against the working tree and the local store."""
    ctx = _Context(root, store, require_available)
    [report] = _verify_bundles(ctx, {dir_name or reg.manifest.name: reg})
    return report


def _git(root: Path, *args: str) -> bytes:
    import subprocess  # only --base needs it: not on the start-up path

    try:
        proc = subprocess.run(["git", "-C", str(root), *args], capture_output=True, check=False)
    except FileNotFoundError as exc:
        raise ConfigError("git is not installed; --base needs it") from exc
    if proc.returncode != 0:
        raise ConfigError(f"git {' '.join(args)}: {proc.stderr.decode(errors='replace').strip()}")
    return proc.stdout


def base_registrations(root: str | os.PathLike[str], rev: str) -> dict[str, bytes]:
    """Return the raw ``bundle.json`` bytes registered at git revision ``rev``, by name."""
    repo = Path(root).absolute()
    _git(repo, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}")
    prefix = _git(repo, "rev-parse", "--show-prefix").decode().strip()
    listing = _git(repo, "ls-tree", "-r", "-z", "--name-only", rev, "--", f"{EVIDENCE_DIR}/")
    out: dict[str, bytes] = {}
    for raw in listing.split(b"\0"):
        path = raw.decode("utf-8", errors="surrogateescape")
        parts = path.split("/")
        if len(parts) == 3 and parts[2] == REGISTRATION_NAME:
            out[parts[1]] = _git(repo, "show", f"{rev}:{prefix}{path}")
    return out


def _base_findings(root: Path, rev: str, current: Mapping[str, Registration]) -> list[Finding]:
    findings: list[Finding] = []
    for name, data in sorted(base_registrations(root, rev).items()):
        rel = f"{EVIDENCE_DIR}/{name}/{REGISTRATION_NAME}"
        if name not in current:
            findings.append(
                _err(
                    "bundle-removed",
                    f"bundle {name!r} registered at {rev} was removed or made unreadable; registered bundles are immutable",
                    name,
                    REGISTRATION_NAME,
                )
            )
            continue
        try:
            old = decode_registration(data, f"{rev}:{rel}")
        except ManifestError:
            continue  # the base's own problem; the current registration is judged on its own
        now = current[name]
        if old != now:
            what = "bundle digest" if old.digest != now.digest else "registration"
            findings.append(
                _err(
                    "bundle-changed",
                    f"bundle {name!r} was changed after it was registered at {rev} ({what} {old.digest} -> {now.digest}); add a new bundle instead",
                    name,
                    REGISTRATION_NAME,
                    now.digest,
                )
            )
    return findings


def _staging_findings(repo: Path) -> list[Finding]:
    """A warning for each staging directory that a killed ``bundle create`` left behind."""
    out: list[Finding] = []
    for path in stale_staging_dirs(repo):
        files = size = 0
        for dirpath, _, filenames in os.walk(path):
            for fname in filenames:
                files += 1
                with contextlib.suppress(OSError):
                    size += os.lstat(os.path.join(dirpath, fname)).st_size
        bundle = staging_name(path.name)
        rel = f"{EVIDENCE_DIR}/{path.name}"
        out.append(
            Finding(
                severity="warning",
                code="stale-staging",
                message=(
                    f"{rel}: left behind by an interrupted 'bundle create {bundle}' "
                    f"({files} partial file(s), {size} bytes; not a bundle); the next "
                    f"'evstore bundle create {bundle}' or 'evstore gc' removes it"
                ),
                path=rel,
            )
        )
    return out


def verify_repository(
    root: str | os.PathLike[str],
    *,
    bundles: Iterable[str] | None = None,
    store: BlobStore | None = None,
    require_available: bool = False,
    base: str | None = None,
    remote_checker: RemoteChecker | None = None,
    inventory: Inventory | None = None,
) -> VerifyReport:
    """Verify the evidence repository at ``root`` and return every finding.

    ``store`` is where ``store`` entries are re-hashed (default: the repository's own
    local store); ``bundles`` restricts the per-bundle checks (unknown names are errors);
    ``remote_checker`` adds findings about ``store`` entries on a remote;
    ``inventory`` is ``load_inventory(root)`` when the caller has already loaded it.
    """
    repository = as_repository(root)
    repo = repository.root
    if store is None:
        store = repository.local_store()
    ctx = _Context(repo, store, require_available)
    if inventory is None:
        dirs = BundleDirs(repo)
        ctx.plain_dirs = frozenset(d.name for d in dirs.dirs if not d.is_symlink())
        shares = (
            _dir_shares(ctx, dirs)
            if bundles is None and base is None and remote_checker is None
            else []
        )
        if shares:  # many bundles: each worker also loads its own registrations
            found, parts = _verify_dir_shares(ctx, dirs, shares)
            found[:0] = dirs.findings
            found.extend(dirs.closing_findings())
            return _report(repo, parts, [*found, *_staging_findings(repo)])
        inventory = dirs.inventory()  # load_inventory, on the listing made above
    repo_findings = list(inventory.findings)
    selected = sorted(inventory.registrations)
    if bundles is not None:
        wanted = list(dict.fromkeys(bundles))
        unreadable = {f.bundle for f in inventory.findings if f.severity == "error"}
        for name in wanted:
            if name not in inventory.registrations and name not in unreadable:
                repo_findings.append(
                    Finding(
                        severity="error",
                        code="unknown-bundle",
                        bundle=name,
                        message=f"no registration evidence/{name}/{REGISTRATION_NAME} found",
                    )
                )
        selected = [n for n in wanted if n in inventory.registrations]
        # Findings about other bundles' registrations do not fail a selective run.
        repo_findings = [f for f in repo_findings if f.bundle is None or f.bundle in wanted]
    if base is not None:
        extra = _base_findings(repo, base, inventory.registrations)
        repo_findings.extend(
            f
            for f in extra
            if bundles is None or f.bundle in selected or f.code == "bundle-removed"
        )
    repo_findings.extend(_staging_findings(repo))
    regs = {n: inventory.registrations[n] for n in selected}
    remote_found = remote_checker(regs) if remote_checker is not None else {}
    reports: list[BundleReport] = []
    for name, rep in zip(selected, _verify_bundles(ctx, regs), strict=True):
        extra_findings = tuple(remote_found.get(name, ()))
        if extra_findings:
            all_f = rep.findings + extra_findings
            rep = BundleReport(
                name=rep.name,
                ok=not any(f.severity == "error" for f in all_f),
                digest=rep.digest,
                entries=rep.entries,
                checked=rep.checked,
                unavailable=rep.unavailable,
                findings=all_f,
            )
        reports.append(rep)
    return _report(repo, reports, repo_findings)


def _report(repo: Path, reports: list[BundleReport], repo_findings: list[Finding]) -> VerifyReport:
    all_findings = [f for r in reports for f in r.findings] + repo_findings
    errors = sum(f.severity == "error" for f in all_findings)
    totals = Totals(
        bundles=len(reports),
        entries=sum(r.entries for r in reports),
        checked=sum(r.checked for r in reports),
        unavailable=sum(r.unavailable for r in reports),
        errors=errors,
        # An unavailable entry is counted once, in `unavailable`, never also as a warning.
        warnings=sum(f.severity == "warning" and f.code != "unavailable" for f in all_findings),
    )
    return VerifyReport(
        ok=errors == 0,
        root=shown(str(repo)),
        bundles=tuple(reports),
        findings=tuple(repo_findings),
        totals=totals,
    )


def check_repository(
    root: str | os.PathLike[str],
    *,
    bundles: Iterable[str] | None = None,
    store: BlobStore | None = None,
    require_available: bool = False,
    base: str | None = None,
    remote_checker: RemoteChecker | None = None,
    inventory: Inventory | None = None,
) -> VerifyReport:
    """Like :func:`verify_repository`, but raise :class:`VerificationError` on any error."""
    report = verify_repository(
        root,
        bundles=bundles,
        store=store,
        require_available=require_available,
        base=base,
        remote_checker=remote_checker,
        inventory=inventory,
    )
    if not report.ok:
        from ._verify_render import describe  # the path only where the message lacks it

        lines = [
            f"{f.bundle or '-'}: {describe(f)}"
            for r in report.bundles
            for f in r.findings
            if f.severity == "error"
        ] + [describe(f) for f in report.findings if f.severity == "error"]
        raise VerificationError(
            f"verification of {report.root} failed with {report.totals.errors} error(s):\n  "
            + "\n  ".join(lines),
            report,
        )
    return report
