"""Frozen before results, and unchanged since, from git history.

History is read from ``HEAD`` in one ``git log --raw --no-renames`` over every
``evidence/*/bundle.json``: for each registration, the oldest commit that added it (a
registration git would show as renamed counts as added where the new name appears),
the registration's bytes as first committed (its blob), and every later commit that
left it different. A campaign's protocol is frozen before a run when the commit that
added the protocol's registration is a strict ancestor of the commit that added the
run's (``git merge-base --is-ancestor``, and not the same commit). A registration that
no commit of ``HEAD`` added is *uncommitted* and proves nothing yet; one whose bytes at
``HEAD`` (or in the working tree) differ from its first commit is *changed*: a
registration binds every entry by digest, so an edited ``run.json`` or ``protocol.toml``
re-sealed under the same name shows here.

Ordering rests on the branch's own history unless a *base* (the protected branch) is
given: then the protocol's commit must be reachable from the base, so a rebase that
rewrote it (or reordered runs before it) is a finding; and a registration the base holds
must be the base's bytes, added by a commit of the base (an amended commit is not). A
shallow clone, whose history is cut, is named as such. Plain ``git`` is run; no library.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import EvidenceStoreError, GitError
from ..gitrefs import git, is_ancestor, is_git_repository, read_blobs, registration_blobs
from ..inventory import EVIDENCE_DIR, REGISTRATION_NAME, decode_registration
from ..models import Registration

__all__ = [
    "Deleted",
    "HistoryCheck",
    "Registered",
    "added_in",
    "deleted_registrations",
    "is_strict_ancestor",
    "registration_history",
    "verify_history",
]

_ZERO = frozenset("0")


@dataclass(frozen=True)
class Registered:
    """One registration's history at ``HEAD``: the commit that first added it (and its
    committer time, Unix seconds), its blob then and at ``HEAD``, and the later commits
    that left it different from its first commit."""

    bundle: str
    added: str
    added_time: int
    blob: str
    head_blob: str | None
    changed_in: tuple[str, ...] = ()

    @property
    def changed(self) -> bool:
        """Whether the registration at ``HEAD`` differs from its first commit."""
        return self.head_blob != self.blob


def _log(root: Path, bundles: set[str]) -> list[tuple[str, int, list[tuple[str, str, str]]]]:
    """Commits of ``HEAD`` touching the registrations of ``bundles``, oldest first:
    ``(commit, committer time, [(status, new blob, path)])``."""
    paths = (
        [f":(literal){EVIDENCE_DIR}/{b}/{REGISTRATION_NAME}" for b in sorted(bundles)]
        if len(bundles) <= 256
        else [f":(glob){EVIDENCE_DIR}/*/{REGISTRATION_NAME}"]
    )
    try:
        out = git(
            root, "log", "--raw", "--no-renames", "--no-abbrev", "-z",
            "--format=%x01%H %ct", "--relative", "HEAD", "--", *paths,
        )  # fmt: skip
    except GitError:
        return []  # no commit yet
    commits = []
    for chunk in out.decode("utf-8", "surrogateescape").split("\x01")[1:]:
        header, _, rest = chunk.partition("\0")
        commit, _, when = header.partition(" ")
        fields = rest.lstrip("\n").split("\0")
        changes = []
        for meta, path in zip(fields[0::2], fields[1::2], strict=False):
            parts = meta.split()
            if len(parts) >= 5:
                changes.append((parts[4][:1], parts[3], path))
        commits.append((commit, int(when or 0), changes))
    commits.reverse()
    return commits


def registration_history(root: str | Path, bundles: Iterable[str]) -> dict[str, Registered]:
    """The history of each named bundle's registration that a commit of ``HEAD`` added."""
    wanted = set(bundles)
    events: dict[str, list[tuple[str, int, str, str]]] = {}
    if not wanted:
        return {}
    for commit, when, changes in _log(Path(root), wanted):
        for status, blob, path in changes:
            parts = path.split("/")
            if len(parts) == 3 and parts[1] in wanted:
                events.setdefault(parts[1], []).append((commit, when, status, blob))
    found: dict[str, Registered] = {}
    for bundle, seq in events.items():
        first = next((e for e in seq if e[2] == "A"), None)
        if first is None:
            continue
        after = seq[seq.index(first) + 1 :]
        last = seq[-1]
        head = None if last[2] == "D" or set(last[3]) <= _ZERO else last[3]
        changed = tuple(
            c for c, _, s, b in after if (s == "D" and head is None) or (s != "D" and b != first[3])
        )
        found[bundle] = Registered(bundle, first[0], first[1], first[3], head, changed)
    return found


@dataclass(frozen=True)
class Deleted:
    """A registration a commit of ``HEAD`` deleted and ``HEAD`` does not hold: the
    bundle, the deleting commit, and the registration as it was before."""

    bundle: str
    commit: str
    registration: Registration


def deleted_registrations(root: str | Path, present: Iterable[str]) -> list[Deleted]:
    """Every registration deleted in the history of ``HEAD`` whose bundle is not among
    ``present`` (the last deletion of each), decoded from git (one batch read)."""
    root = Path(root)
    have = set(present)
    try:
        out = git(
            root, "log", "--raw", "--no-renames", "--no-abbrev", "-z", "--diff-filter=D",
            "--format=%x01%H", "--relative", "HEAD", "--",
            f":(glob){EVIDENCE_DIR}/*/{REGISTRATION_NAME}",
        )  # fmt: skip
    except GitError:
        return []
    last: dict[str, tuple[str, str]] = {}  # bundle -> (commit, old blob), newest first
    for chunk in out.decode("utf-8", "surrogateescape").split("\x01")[1:]:
        commit, _, rest = chunk.partition("\0")
        fields = rest.lstrip("\n").split("\0")
        for meta, path in zip(fields[0::2], fields[1::2], strict=False):
            parts, where = meta.split(), path.split("/")
            if len(parts) >= 5 and len(where) == 3 and where[1] not in have:
                last.setdefault(where[1], (commit.strip(), parts[2]))
    blobs = dict(read_blobs(root, sorted({oid for _, oid in last.values()})))
    found = []
    for bundle, (commit, oid) in sorted(last.items()):
        try:
            reg = decode_registration(blobs[oid], f"{EVIDENCE_DIR}/{bundle}/{REGISTRATION_NAME}")
        except EvidenceStoreError:
            continue
        found.append(Deleted(bundle, commit, reg))
    return found


def added_in(root: Path, bundle: str) -> str | None:
    """The oldest commit of ``HEAD`` that added bundle ``bundle``'s registration."""
    reg = registration_history(root, [bundle]).get(bundle)
    return reg.added if reg is not None else None


def is_strict_ancestor(root: Path, older: str, newer: str) -> bool:
    """Whether commit ``older`` is an ancestor of ``newer`` and not ``newer`` itself."""
    return older != newer and is_ancestor(root, older, newer)


def topological_rank(root: Path, base: str | None) -> dict[str, int]:
    """Each commit's place in the history, by ancestry and never by date: the commits of
    ``base`` (the protected branch) first, oldest first in topological order (``git
    rev-list --topo-order --reverse``), then those of ``HEAD`` not on it, the same way. A
    commit comes after every commit it descends from, whatever its committer date says."""
    order: dict[str, int] = {}
    for tip in ([base] if base else []) + ["HEAD"]:
        try:
            out = git(root, "rev-list", "--topo-order", "--reverse", tip)
        except GitError:
            continue  # no commit yet
        for line in out.decode("ascii", "replace").split():
            order.setdefault(line, len(order))
    return order


def _dirty(root: Path) -> set[str]:
    """Bundles with a file under ``evidence/<bundle>/`` changed since ``HEAD`` (staged or
    not)."""
    try:
        out = git(root, "diff", "--no-renames", "--name-only", "-z", "--relative", "HEAD",
                  "--", EVIDENCE_DIR)  # fmt: skip
    except GitError:
        return set()
    names = set()
    for path in out.decode("utf-8", "surrogateescape").split("\0"):
        parts = path.split("/")
        if len(parts) >= 3 and parts[0] == EVIDENCE_DIR:
            names.add(parts[1])
    return names


def _shallow_boundary(root: Path) -> set[str]:
    """The commits where a shallow clone's history is cut (empty for a full clone)."""
    try:
        if git(root, "rev-parse", "--is-shallow-repository").strip() != b"true":
            return set()
        path = Path(git(root, "rev-parse", "--path-format=absolute", "--git-path", "shallow")
                    .decode().strip())  # fmt: skip
        return set(path.read_text().split())
    except (GitError, OSError):
        return set()


@dataclass
class HistoryCheck:
    """The protocol's commit and, per run bundle, whether it was frozen before it and is
    unchanged since; the anchor ordering rests on."""

    git: bool
    protocol_commit: str | None
    protocol_time: int | None = None
    frozen: dict[str, str] = field(default_factory=dict)  # run -> its commit
    commits: dict[str, tuple[str, int]] = field(default_factory=dict)  # run -> (commit, time)
    rank: dict[str, int] = field(default_factory=dict)  # run -> its commit's place (ancestry)
    before: dict[str, str] = field(default_factory=dict)  # run -> why it is excluded
    changed: dict[str, str] = field(default_factory=dict)  # run -> what changed, where
    rewritten: dict[str, str] = field(default_factory=dict)  # run -> how (against the base)
    uncommitted: list[str] = field(default_factory=list)
    problem: str | None = None
    problems: list[tuple[str, str]] = field(default_factory=list)  # (code, message)
    anchor: str | None = None
    shallow: bool = False


def _change_message(what: str, reg: Registered, dirty: bool) -> str:
    where = f"in commit(s) {', '.join(c[:12] for c in reg.changed_in)}" if reg.changed_in else ""
    if reg.changed and reg.head_blob is None:
        return (
            f"{what} was first committed in {reg.added[:12]} and deleted since {where}: the "
            "registration in the working tree is not the committed one"
        )
    if reg.changed:
        return (
            f"{what} was first committed in {reg.added[:12]} and changed since {where}".rstrip()
            + ": a registration is never edited; record a new one under a new name"
        )
    return (
        f"{what} differs in the working tree from what was committed in {reg.added[:12]} "
        "(uncommitted changes under its directory): a registration is never edited"
    )


def verify_history(
    root: str | Path, campaign: str, runs: Iterable[str], *, base: str | None = None
) -> HistoryCheck:
    """Check every run bundle against the commit that registered ``campaign`` and, when
    ``base`` is given, that commit against the protected branch ``base``."""
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
    base_commit = None
    if base is not None:
        try:
            base_commit = git(root, "rev-parse", "--verify", "--quiet", f"{base}^{{commit}}")
        except GitError as exc:
            raise exc.about(
                f"{{base}} {base}", f"not a commit of {root}", parameters=("base",)
            ) from None
    history = registration_history(root, [campaign, *runs])
    known: dict[tuple[str, str], bool] = {}  # runs share commits: ask git once per pair

    def ancestor(older: str, newer: str) -> bool:
        if (older, newer) not in known:
            known[older, newer] = is_ancestor(root, older, newer)
        return known[older, newer]

    on_base: dict[str, str] = {}
    if base_commit is not None:
        on_base = {
            path.split("/")[-2]: oid
            for path, oid in registration_blobs(root, base_commit.decode().strip())
        }
    dirty = _dirty(root)
    boundary = _shallow_boundary(root)
    proto = history.get(campaign)
    rank = topological_rank(root, base_commit.decode().strip() if base_commit else None)
    check = HistoryCheck(
        git=True,
        protocol_commit=proto.added if proto else None,
        protocol_time=proto.added_time if proto else None,
        shallow=bool(boundary),
    )
    if boundary:
        check.problems.append(
            (
                "shallow-clone",
                f"{root} is a shallow clone (history cut at "
                f"{', '.join(sorted(c[:12] for c in boundary))}): the commits that order the "
                "protocol before its runs may be missing; fetch the whole history "
                "(git fetch --unshallow) and verify again",
            )
        )
    if proto is None:
        check.problem = (
            f"the protocol registration evidence/{campaign}/{REGISTRATION_NAME} is not "
            "committed: commit it before any run"
        )
    else:
        if proto.changed or campaign in dirty:
            check.problems.append(
                (
                    "protocol-changed",
                    _change_message(f"the protocol {campaign!r}", proto, campaign in dirty),
                )
            )
        if base_commit is not None:
            commit = base_commit.decode().strip()
            # Named by what it is, the protocol's own commit (on the protected branch): the
            # same on every clone, whatever the ref is called there or where its tip is.
            check.anchor = proto.added[:12]
            if campaign in on_base and on_base[campaign] != proto.head_blob:
                check.problems.append(
                    (
                        "protocol-changed",
                        f"the protocol {campaign!r} differs from its registration on {base} "
                        f"({commit[:12]}): a registration is never edited",
                    )
                )
            if not is_ancestor(root, proto.added, commit):
                check.problems.append(
                    (
                        "protocol-not-on-base",
                        f"the protocol was registered in commit {proto.added[:12]}, which is "
                        f"not on {base} ({commit[:12]}): the protected branch does not hold "
                        "this protocol (a rebased or unpublished history); land the protocol "
                        "on it before any run",
                    )
                )
    for run in runs:
        reg = history.get(run)
        if reg is None:
            check.uncommitted.append(run)
            continue
        check.commits[run] = (reg.added, reg.added_time)
        check.rank[run] = rank.get(reg.added, len(rank))
        if reg.changed or run in dirty:
            check.changed[run] = _change_message(f"run {run!r}", reg, run in dirty)
        elif run in on_base and on_base[run] != reg.head_blob:
            check.changed[run] = (
                f"run {run!r} differs from its registration on {base}: a registration is "
                "never edited, and the protected branch's history is not rewritten"
            )
        commit = reg.added
        if run in on_base and base_commit is not None:
            tip = base_commit.decode().strip()
            if not ancestor(commit, tip):
                check.rewritten[run] = (
                    f"run {run!r} is on {base}, but this branch's history adds it in commit "
                    f"{commit[:12]}, which is not on {base}: the history was rewritten"
                )
                continue
        if proto is None:
            check.before[run] = (
                f"run {run!r} was committed in {commit[:12]}, but the protocol is not committed"
            )
        elif commit != proto.added and ancestor(proto.added, commit):
            check.frozen[run] = commit
        elif commit == proto.added and commit in boundary:
            check.before[run] = (
                f"run {run!r} appears in commit {commit[:12]} together with the protocol "
                "because this shallow clone cuts the history there: fetch the whole history "
                "(git fetch --unshallow) to prove its order"
            )
        elif commit == proto.added:
            check.before[run] = (
                f"run {run!r} was added in commit {commit[:12]} together with the protocol: "
                "it is not provably recorded after the protocol was frozen"
            )
        else:
            check.before[run] = (
                f"run {run!r} was added in commit {commit[:12]}, which does not descend from "
                f"{proto.added[:12]}, where the protocol was registered: it was not "
                "recorded under a frozen protocol"
            )
    return check
