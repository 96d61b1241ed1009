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
"""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path

from .digest import Hashed, NotRegularFileError, hash_files
from .errors import ConfigError, IntegrityError, ManifestError, VerificationError
from .inventory import EVIDENCE_DIR, REGISTRATION_NAME, decode_registration, load_inventory
from .merkle import bundle_digest, entries_root
from .models import (
    BundleReport,
    Entry,
    Finding,
    Registration,
    Totals,
    VerifyReport,
)
from .paths import name_collisions, path_problem, resolve, shown, within
from .staging import staging_name, stale_staging_dirs
from .storage import BlobStore, LocalBlobStore

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


def _structure_findings(reg: Registration, name: str) -> list[Finding]:
    """Entry paths, order, duplicates, Merkle root and bundle digest."""
    m = reg.manifest
    out: list[Finding] = []
    prev: str | None = None
    seen: set[str] = set()
    for entry in m.entries:
        problem = path_problem(entry.path)
        if problem:
            out.append(
                _err(problem.code, f"entry path {entry.path!r} {problem.reason}", name, entry.path)
            )
        if entry.path in seen:
            out.append(
                _err(
                    "duplicate-path",
                    f"entry path {entry.path!r} appears more than once",
                    name,
                    entry.path,
                )
            )
        elif prev is not None and entry.path < prev:
            out.append(
                _err(
                    "unsorted-entries",
                    f"entry {entry.path!r} is out of path order (after {prev!r})",
                    name,
                    entry.path,
                )
            )
        seen.add(entry.path)
        prev = entry.path
    for c in name_collisions(seen, reserved=[REGISTRATION_NAME]):
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
        message=f"store entry {entry.path!r} ({d.digest}, {d.size} bytes) is not in {where}",
        bundle=bundle,
        path=entry.path,
        digest=d.digest,
    )


def _walk_files(
    base: str, real_dir: str, real_root: str, prefix: str = "", above: frozenset[str] = frozenset()
) -> Iterator[tuple[str, str, str]]:
    """Yield ``(relative path, kind, detail)`` for every non-directory below ``base``.

    ``kind`` is ``file``; ``loop`` for a symlink loop (``detail``: its link text); or
    ``outside-dir`` for a symlink to a directory outside the repository (``detail``: its
    target). A symlink to a directory inside the repository is walked like a directory,
    unless it leads back to a directory above it (a ``loop``).
    """
    try:
        with os.scandir(base) as it:
            items = sorted(it, key=lambda e: e.name)
    except OSError:
        return
    above = above | {real_dir}
    for item in items:
        rel = prefix + item.name
        if item.is_dir(follow_symlinks=False):
            yield from _walk_files(
                item.path, f"{real_dir}{os.sep}{item.name}", real_root, f"{rel}/", above
            )
            continue
        if not item.is_symlink():
            yield rel, "file", ""
            continue
        real = resolve(item.path)
        if real is None:
            yield rel, "loop", _readlink(item.path)
        elif not os.path.isdir(real):
            yield rel, "file", ""
        elif not within(real, real_root):
            yield rel, "outside-dir", real
        elif real in above:
            yield rel, "loop", _readlink(item.path)
        else:
            yield from _walk_files(item.path, real, real_root, f"{rel}/", above)


def _readlink(path: str) -> str:
    try:
        return os.readlink(path)
    except OSError:
        return "?"


def _dir_state(bdir: Path, parent: str, real_root: str, cache: dict[str, str]) -> str:
    """``inside``, ``outside`` or ``loop``: where a bundle subdirectory resolves (cached)."""
    state = cache.get(parent)
    if state is None:
        real = resolve(bdir / parent)
        state = "loop" if real is None else "inside" if within(real, real_root) else "outside"
        cache[parent] = state
    return state


def verify_registration(
    root: str | os.PathLike[str],
    reg: Registration,
    *,
    dir_name: str | None = None,
    store: BlobStore | None = None,
    require_available: bool = False,
) -> BundleReport:
    """Verify one registered bundle against the working tree and the local store."""
    repo_root = Path(root).absolute()
    real_root = os.path.realpath(repo_root)
    m = reg.manifest
    name = dir_name or m.name
    bdir = repo_root / EVIDENCE_DIR / name
    findings = _structure_findings(reg, name)
    checked = 0
    unavailable = 0

    bad = {f.path for f in findings if f.code == "bad-path"}
    local = store if isinstance(store, LocalBlobStore) else None
    blob_base = f"{local.root}{os.sep}blobs{os.sep}blake3{os.sep}" if local else ""
    bdir_s = f"{bdir}{os.sep}"
    dir_states: dict[str, str] = {}
    outside = resolve(bdir)
    if outside is None:  # load_inventory reports the loop; nothing here can be read
        outside = f"{bdir} (a symlink loop)"
    bdir_escapes = not within(outside, real_root)
    if bdir_escapes:
        findings.append(
            _err(
                "symlink-escape",
                f"{EVIDENCE_DIR}/{name} resolves to {outside}, outside the repository: its files are not checked",
                name,
            )
        )
    jobs: list[tuple[Entry, str]] = []  # entries whose bytes are hashed here, and where
    for entry in m.entries:
        if entry.path in bad or (bdir_escapes and entry.location == "repo"):
            continue
        d = entry.descriptor
        if entry.location == "repo":
            parent = entry.path.rpartition("/")[0]
            state = _dir_state(bdir, parent, real_root, dir_states) if parent else "inside"
            if state == "loop":
                findings.append(
                    _err(
                        "symlink-loop",
                        f"{EVIDENCE_DIR}/{name}/{parent} is a symlink loop: "
                        f"{EVIDENCE_DIR}/{name}/{entry.path} cannot be read",
                        name,
                        entry.path,
                        d.digest,
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
                        d.digest,
                    )
                )
                continue
            jobs.append((entry, bdir_s + entry.path))
        elif local is not None:
            hexd = d.digest[7:]
            jobs.append((entry, f"{blob_base}{hexd[:2]}{os.sep}{hexd}"))
        elif store is not None and store.size(d.digest) is not None:
            try:
                store.verify(d.digest, d.size)
                checked += 1
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
            unavailable += 1
            findings.append(_unavailable(entry, name, store, require_available))

    outcomes = hash_files(
        [j[1] for j in jobs], [j[0].descriptor.size for j in jobs], follow_symlinks=False
    )
    for (entry, fpath), outcome in zip(jobs, outcomes, strict=True):
        d = entry.descriptor
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
            msg = f"{what}: {str(outcome).split(': ', 1)[-1]}"
        elif isinstance(outcome, FileNotFoundError):
            if in_store:
                unavailable += 1
                findings.append(_unavailable(entry, name, store, require_available))
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
    named = {e.path for e in m.entries if e.location == "repo"}
    store_names = {e.path for e in m.entries if e.location == "store"}
    reported = {f.path for f in findings if f.code in ("symlink-loop", "symlink-escape")}
    walked = () if bdir_escapes else _walk_files(bdir_s, outside, real_root)
    for rel_in, kind, detail in walked:
        if rel_in == REGISTRATION_NAME or rel_in in named:
            continue
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

    errors = sum(f.severity == "error" for f in findings)
    return BundleReport(
        name=shown(name),
        ok=errors == 0,
        digest=reg.digest,
        entries=len(m.entries),
        checked=checked,
        unavailable=unavailable,
        findings=tuple(findings),
    )


def _git(root: Path, *args: str) -> bytes:
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
) -> VerifyReport:
    """Verify the evidence repository at ``root`` and return every finding.

    ``bundles`` restricts the per-bundle checks (unknown names are errors);
    ``remote_checker`` adds findings about ``store`` entries on a remote.
    """
    repo = Path(root).absolute()
    inventory = load_inventory(repo)
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
    for name in selected:
        rep = verify_registration(
            repo, regs[name], dir_name=name, store=store, require_available=require_available
        )
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
    all_findings = [f for r in reports for f in r.findings] + repo_findings
    errors = sum(f.severity == "error" for f in all_findings)
    totals = Totals(
        bundles=len(reports),
        entries=sum(r.entries for r in reports),
        checked=sum(r.checked for r in reports),
        unavailable=sum(r.unavailable for r in reports),
        errors=errors,
        warnings=sum(f.severity == "warning" for f in all_findings),
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
) -> VerifyReport:
    """Like :func:`verify_repository`, but raise :class:`VerificationError` on any error."""
    report = verify_repository(
        root,
        bundles=bundles,
        store=store,
        require_available=require_available,
        base=base,
        remote_checker=remote_checker,
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
