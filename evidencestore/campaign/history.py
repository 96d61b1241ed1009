"""Frozen before results, from git history.

A campaign's protocol is frozen before a run when the commit that added the protocol's
registration (``evidence/<campaign>/bundle.json``, the oldest commit adding it, found with
``git log --diff-filter=A``) is a strict ancestor of the commit that added the run's
registration (``git merge-base --is-ancestor``, and not the same commit). History is read
from ``HEAD``; a registration that no commit of ``HEAD`` added is *uncommitted* and
proves nothing yet. Plain ``git`` is run; no library.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import ConfigError
from ..gitrefs import git, is_ancestor, is_git_repository
from ..inventory import EVIDENCE_DIR, REGISTRATION_NAME

__all__ = ["HistoryCheck", "added_in", "check_history", "is_strict_ancestor"]


def added_in(root: Path, bundle: str) -> str | None:
    """The oldest commit of ``HEAD`` that added bundle ``bundle``'s registration."""
    return _added(root, [bundle]).get(bundle)


def _added(root: Path, bundles: Iterable[str]) -> dict[str, str]:
    """For each bundle whose registration a commit of ``HEAD`` added, the oldest such
    commit: one ``git log --diff-filter=A`` for all of them."""
    wanted = set(bundles)
    if not wanted:
        return {}
    try:
        out = git(
            root, "log", "--diff-filter=A", "--format=%x00%H", "--name-only",
            "--relative", "HEAD", "--", f":(glob){EVIDENCE_DIR}/*/{REGISTRATION_NAME}",
        )  # fmt: skip
    except ConfigError:
        return {}  # no commit yet
    found: dict[str, str] = {}
    for chunk in out.decode("utf-8", "surrogateescape").split("\0")[1:]:
        commit, *paths = chunk.split()
        for path in paths:
            parts = path.split("/")
            if len(parts) == 3 and parts[1] in wanted:
                found[parts[1]] = commit  # newest first: the last seen is the oldest
    return found


def is_strict_ancestor(root: Path, older: str, newer: str) -> bool:
    """Whether commit ``older`` is an ancestor of ``newer`` and not ``newer`` itself."""
    return older != newer and is_ancestor(root, older, newer)


def _descendants(root: Path, commit: str) -> set[str]:
    """The commits of ``HEAD`` that have ``commit`` as a strict ancestor."""
    out = git(root, "rev-list", "--ancestry-path", f"{commit}..HEAD")
    return set(out.decode("ascii").split())


@dataclass
class HistoryCheck:
    """The protocol's commit and, per run bundle, whether it was frozen before it."""

    git: bool
    protocol_commit: str | None
    frozen: dict[str, str] = field(default_factory=dict)  # run -> its commit
    before: dict[str, str] = field(default_factory=dict)  # run -> why it is excluded
    uncommitted: list[str] = field(default_factory=list)
    problem: str | None = None


def check_history(root: str | Path, campaign: str, runs: Iterable[str]) -> HistoryCheck:
    """Check every run bundle against the commit that registered ``campaign``."""
    root = Path(root)
    runs = list(runs)
    if not is_git_repository(root):
        return HistoryCheck(
            git=False,
            protocol_commit=None,
            uncommitted=runs,
            problem=f"{root} is not a git repository: the order of protocol and runs "
            "cannot be proven",
        )
    added = _added(root, [campaign, *runs])
    protocol_commit = added.get(campaign)
    check = HistoryCheck(git=True, protocol_commit=protocol_commit)
    if protocol_commit is None:
        check.problem = (
            f"the protocol registration evidence/{campaign}/{REGISTRATION_NAME} is not "
            "committed: commit it before any run"
        )
    # One walk instead of one `git merge-base` per run: the commits of HEAD that descend
    # from the protocol's commit (every commit found above is an ancestor of HEAD).
    after = _descendants(root, protocol_commit) if protocol_commit else set()
    for run in runs:
        commit = added.get(run)
        if commit is None:
            check.uncommitted.append(run)
        elif protocol_commit is None:
            check.before[run] = (
                f"run {run!r} was committed in {commit[:12]}, but the protocol is not committed"
            )
        elif commit in after:
            check.frozen[run] = commit
        elif commit == protocol_commit:
            check.before[run] = (
                f"run {run!r} was added in commit {commit[:12]} together with the protocol: "
                "it is not provably recorded after the protocol was frozen"
            )
        else:
            check.before[run] = (
                f"run {run!r} was added in commit {commit[:12]}, which does not descend from "
                f"{protocol_commit[:12]}, where the protocol was registered: it was not "
                "recorded under a frozen protocol"
            )
    return check
