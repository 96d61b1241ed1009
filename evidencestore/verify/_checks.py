"""Checks a bundle's registration allows without opening a file: entry paths and
their order, name collisions, the Merkle root and the bundle digest."""

from __future__ import annotations

import operator
from collections.abc import Sequence

from ..inventory import REGISTRATION_NAME
from ..merkle import registration_hashes
from ..models import Entry, Finding, Registration
from ..paths import all_plain, name_collisions, path_problem, shown
from ..storage import BlobStore
from ._walk import sole_parent

__all__ = ["err", "path_findings", "tree_findings", "unavailable"]


def err(
    code: str, message: str, bundle: str, path: str | None = None, digest: str | None = None
) -> Finding:
    """An error finding; every name shown as :func:`~evidencestore.paths.shown` does."""
    # shown(): a file name on disk need not be UTF-8; the report must still encode
    return Finding(
        severity="error",
        code=code,
        message=shown(message),
        bundle=shown(bundle),
        path=None if path is None else shown(path),
        digest=digest,
    )


def path_findings(
    reg: Registration, name: str, paths: Sequence[str] | None = None
) -> list[Finding]:
    """A bundle's entry paths, order and duplicates (decided before any file is opened);
    ``paths``: the entries' paths, when the caller has listed them."""
    if paths is None:
        paths = [e.path for e in reg.manifest.entries]
    if all_plain(paths) and all(map(operator.lt, paths, paths[1:])):
        return []  # the common case, in C: plain names, strictly increasing
    out: list[Finding] = []
    prev: str | None = None
    seen: set[str] = set()
    for path in paths:
        problem = path_problem(path)
        if problem:
            out.append(err(problem.code, f"entry path {path!r} {problem.reason}", name, path))
        if path in seen:
            out.append(
                err("duplicate-path", f"entry path {path!r} appears more than once", name, path)
            )
        elif prev is not None and path < prev:
            out.append(
                err(
                    "unsorted-entries",
                    f"entry {path!r} is out of path order (after {prev!r})",
                    name,
                    path,
                )
            )
        seen.add(path)
        prev = path
    return out


def _cannot_collide(paths: Sequence[str]) -> bool:
    """True when no two of ``paths`` (nor their directories, nor the registration) can
    fold together: ASCII names fold by ``lower()`` alone, so distinct names whose lower
    case is distinct too are safe. Otherwise :func:`name_collisions` decides."""
    joined = "\n".join(paths)
    if not joined.isascii():
        return False
    lowered = joined.lower()
    if joined == lowered:
        return True  # lower-case ASCII names fold to themselves
    dirs: set[str] = set()
    common = sole_parent(paths)
    for parent in {path.rpartition("/")[0] for path in paths} if common is None else (common,):
        while parent and parent not in dirs:
            dirs.add(parent)
            parent = parent.rpartition("/")[0]
    names = dirs.union(paths, (REGISTRATION_NAME,))
    # the lower case of every name, folded in C: the paths in one call
    folded = {d.lower() for d in dirs}.union(lowered.split("\n"), (REGISTRATION_NAME,))
    return len(folded) == len(names)


def tree_findings(
    reg: Registration, name: str, paths: Sequence[str] | None = None
) -> list[Finding]:
    """A bundle's name collisions, Merkle root and bundle digest (``paths``: as for
    :func:`path_findings`)."""
    m = reg.manifest
    out: list[Finding] = []
    if paths is None:
        paths = [e.path for e in m.entries]
    if not _cannot_collide(paths):
        for c in name_collisions(paths, reserved=[REGISTRATION_NAME]):
            out.append(err("name-collision", f"entry names {c.reason}", name, c.second))
    root, digest = registration_hashes(reg)  # the manifest as it stands in its file
    if root != reg.root:
        out.append(
            err(
                "root-mismatch",
                f"entries hash to Merkle root {root}, registration says {reg.root}",
                name,
                REGISTRATION_NAME,
            )
        )
    if digest != reg.digest:
        out.append(
            err(
                "digest-mismatch",
                f"manifest hashes to bundle digest {digest}, registration says {reg.digest}",
                name,
                REGISTRATION_NAME,
            )
        )
    return out


def unavailable(entry: Entry, bundle: str, store: BlobStore | None, required: bool) -> Finding:
    """The finding for a ``store`` entry absent from ``store`` (an error when required)."""
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
