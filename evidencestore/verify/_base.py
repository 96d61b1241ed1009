"""Registrations at a base revision (``verify --base REV``): registered bundles are
immutable, so each one registered at ``REV`` must still be there, unchanged.

The registrations at ``REV`` are listed with one ``git ls-tree`` and read with one
``git cat-file --batch`` (:mod:`evidencestore.gitrefs`, the one place that runs git),
not one ``git show`` per bundle.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from ..errors import GitError, ManifestError
from ..inventory import EVIDENCE_DIR, REGISTRATION_NAME, decode_registration
from ..models import Finding, Registration
from ._checks import err

__all__ = ["base_findings", "base_problem", "base_registrations"]


def base_registrations(root: str | os.PathLike[str], rev: str) -> dict[str, bytes]:
    """Return the raw ``bundle.json`` bytes registered at git revision ``rev``, by name."""
    from ..gitrefs import read_blobs, registration_blobs

    repo = Path(root).absolute()
    found = registration_blobs(repo, rev)
    wanted = list(dict.fromkeys(oid for _, oid in found))  # a copied bundle: one blob
    blobs = dict(read_blobs(repo, wanted))
    return {path.split("/")[-2]: blobs[oid] for path, oid in found}


def base_problem(root: str | os.PathLike[str], rev: str) -> GitError | None:
    """Why ``base=REV`` cannot be used at ``root`` (git missing, not a work tree, a
    revision a shallow clone lacks, with how to fetch it), as the :class:`GitError` to
    raise, or None when it can."""
    from ..gitrefs import try_git

    repo = Path(root)
    try:
        if try_git(repo, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}") is not None:
            return None
    except GitError:
        return GitError("git is not installed; {base} needs it", parameters=("base",))
    if try_git(repo, "rev-parse", "--is-inside-work-tree") is None:
        return GitError(f"{{base}} {rev}: {root} is not in a git work tree", parameters=("base",))
    answer = try_git(repo, "rev-parse", "--is-shallow-repository") or b""
    shallow = answer.strip() == b"true"
    remote, _, branch = rev.partition("/")
    fetch = f"git fetch {remote} {branch}" if branch else f"git fetch origin {rev}"
    return GitError(
        f"{{base}} {rev}: revision {rev!r} is not in this "
        f"{'shallow clone' if shallow else 'clone'}: fetch it first (`{fetch}`; in GitHub "
        "Actions, actions/checkout with `fetch-depth: 0`)",
        parameters=("base",),
    )


def base_findings(root: Path, rev: str, current: Mapping[str, Registration]) -> list[Finding]:
    """A finding for each bundle registered at ``rev`` that was removed or changed."""
    findings: list[Finding] = []
    for name, data in sorted(base_registrations(root, rev).items()):
        rel = f"{EVIDENCE_DIR}/{name}/{REGISTRATION_NAME}"
        if name not in current:
            findings.append(
                err(
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
                err(
                    "bundle-changed",
                    f"bundle {name!r} was changed after it was registered at {rev} ({what} {old.digest} -> {now.digest}); add a new bundle instead",
                    name,
                    REGISTRATION_NAME,
                    now.digest,
                )
            )
    return findings
