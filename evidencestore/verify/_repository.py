"""Verifying a repository: every bundle through the pipeline (split across forked
workers when there are many), the findings about the repository itself (unreadable or
colliding registrations, unknown bundles asked for, staging left by a killed
``bundle create``, changes against a base revision, a remote's copies), and the report
of them all; :func:`check_repository` is the raising twin."""

from __future__ import annotations

import contextlib
import gc
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TypedDict, Unpack

from .._keywords import check_keywords
from ..config import as_repository
from ..errors import VerificationError
from ..inventory import EVIDENCE_DIR, REGISTRATION_NAME, BundleDirs, Inventory
from ..models import BundleReport, Finding, Registration, Totals, VerifyReport
from ..paths import shown
from ..progress import Observer, Tick
from ..staging import staging_name, stale_staging_dirs
from ..storage import BlobStore
from ._base import base_findings
from ._pipeline import Context, Early, start_early
from ._shares import BATCH_DIRS, dir_shares, settle, verify_bundles, verify_dir_shares

__all__ = [
    "RemoteChecker",
    "VerifyOptions",
    "check_repository",
    "verify_registration",
    "verify_repository",
]

RemoteChecker = Callable[[Mapping[str, Registration]], Mapping[str, Sequence[Finding]]]


def verify_registration(
    root: str | os.PathLike[str],
    reg: Registration,
    *,
    dir_name: str | None = None,
    store: BlobStore | None = None,
    require_available: bool = False,
) -> BundleReport:
    """Verify one registered bundle against the working tree and the local store."""
    ctx = Context(root, store, require_available)
    [report] = verify_bundles(ctx, {dir_name or reg.manifest.name: reg})
    return report


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
    observer: Observer | None = None,
) -> VerifyReport:
    """Verify the evidence repository at ``root`` and return every finding.

    ``store`` is where ``store`` entries are re-hashed (default: the repository's own
    local store); ``bundles`` restricts the per-bundle checks (unknown names are errors);
    ``remote_checker`` adds findings about ``store`` entries on a remote;
    ``inventory`` is ``load_inventory(root)`` when the caller has already loaded it;
    ``observer`` (``evidencestore.progress``) hears of the bundles to check, then of
    those checked and failed: a step of bundles at a time where many bundles are split
    across forked workers (the workers count in shared memory, this process draws);
    where one pipeline runs here, every entry is hashed together and the count moves
    at the end.
    """
    # What exists now (modules, the caller's objects) is left out of the cyclic
    # collections that verifying many registrations triggers, and forked workers do
    # not copy the pages those collections would touch; unless the caller froze some.
    freeze = gc.get_freeze_count() == 0
    if freeze:
        gc.freeze()
    try:
        report = _verify_repository(
            root, bundles, store, require_available, base, remote_checker, inventory, observer
        )
        if observer is not None:
            n, failed = len(report.bundles), sum(not b.ok for b in report.bundles)
            observer(Tick("verify", n, n, "bundles", failed))
        return report
    finally:
        if freeze:
            gc.unfreeze()


def _verify_repository(
    root: str | os.PathLike[str],
    bundles: Iterable[str] | None,
    store: BlobStore | None,
    require_available: bool,
    base: str | None,
    remote_checker: RemoteChecker | None,
    inventory: Inventory | None,
    observer: Observer | None = None,
) -> VerifyReport:
    repository = as_repository(root)
    repo = repository.root
    if store is None:
        store = repository.local_store()
    if inventory is None:
        dirs = BundleDirs(repo)
        if observer is not None:
            total = len(dirs.dirs) if bundles is None else len(set(bundles))
            observer(Tick("verify", 0, total, "bundles", what="hashing every entry"))
        plain = frozenset(d.name for d in dirs.dirs if not d.is_symlink())
        settle()  # the listing lives to the end: out of the collector's way
        ctx = Context(repo, store, require_available, plain)
        whole = bundles is None and base is None and remote_checker is None
        shares = dir_shares(ctx, dirs) if whole else []
        if not shares and whole and len(dirs.dirs) > BATCH_DIRS:
            shares = [dirs.dirs]  # not forked: still loaded a batch at a time, here
        if shares:  # many bundles: each worker also loads its own registrations
            found, parts = verify_dir_shares(ctx, dirs, shares, observer)
            found[:0] = dirs.findings
            found.extend(dirs.closing_findings())
            return _report(repo, parts, [*found, *_staging_findings(repo)])
        early: Early | None = None
        if bundles is None and len(dirs.dirs) == 1 and (ctx.store is None or ctx.local):
            # one bundle: its files are hashed while its registration is decoded
            early = start_early(ctx, dirs.dirs[0].name)
        try:
            inventory = dirs.inventory()  # load_inventory, on the listing made above
            return _verify_inventory(
                repo, ctx, inventory, bundles, base, remote_checker, early, observer
            )
        finally:
            if early is not None:
                early.pending.cancel()  # waited for (a no-op once used), whatever happened
    if observer is not None:
        total = len(inventory.registrations) if bundles is None else len(set(bundles))
        observer(Tick("verify", 0, total, "bundles", what="hashing every entry"))
    ctx = Context(repo, store, require_available)
    return _verify_inventory(repo, ctx, inventory, bundles, base, remote_checker, None, observer)


def _verify_inventory(
    repo: Path,
    ctx: Context,
    inventory: Inventory,
    bundles: Iterable[str] | None,
    base: str | None,
    remote_checker: RemoteChecker | None,
    early: Early | None = None,
    observer: Observer | None = None,
) -> VerifyReport:
    """The report of the loaded ``inventory`` (see :func:`verify_repository`)."""
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
        extra = base_findings(repo, base, inventory.registrations)
        repo_findings.extend(
            f
            for f in extra
            if bundles is None or f.bundle in selected or f.code == "bundle-removed"
        )
    repo_findings.extend(_staging_findings(repo))
    regs = {n: inventory.registrations[n] for n in selected}
    remote_found = remote_checker(regs) if remote_checker is not None else {}
    reports: list[BundleReport] = []
    for name, rep in zip(selected, verify_bundles(ctx, regs, early, observer), strict=True):
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


class VerifyOptions(TypedDict, total=False):
    """The keywords :func:`verify_repository` takes besides ``root``, for the entry
    points that pass them on."""

    bundles: Iterable[str] | None
    store: BlobStore | None
    require_available: bool
    base: str | None
    remote_checker: RemoteChecker | None
    inventory: Inventory | None
    observer: Observer | None


def check_repository(
    root: str | os.PathLike[str], **options: Unpack[VerifyOptions]
) -> VerifyReport:
    """Like :func:`verify_repository`, but raise :class:`VerificationError` on any error."""
    check_keywords("check_repository", options, VerifyOptions)
    report = verify_repository(root, **options)
    if not report.ok:
        from .render import describe  # the path only where the message lacks it

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
