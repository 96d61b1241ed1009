"""The one place that runs git: registrations as git sees them (the refs of a
repository and the ``bundle.json`` files at any revision, read with plain ``git``, no
library, in one ``cat-file --batch`` per revision; identical registration blobs across
refs are read once) and the few questions verify asks about a work tree."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from .errors import GitError
from .inventory import EVIDENCE_DIR, REGISTRATION_NAME

__all__ = [
    "REF_NAMESPACES",
    "git",
    "is_ancestor",
    "is_git_repository",
    "list_refs",
    "read_blobs",
    "registration_blobs",
    "try_git",
]

REF_NAMESPACES = ("refs/heads", "refs/remotes", "refs/tags")


def _run(root: Path, args: tuple[str, ...], stdin: bytes | None) -> tuple[int, bytes, bytes]:
    import subprocess  # not on the start-up path of a verify that needs no git

    try:
        done = subprocess.run(
            ["git", "-C", str(root), *args], input=stdin, capture_output=True, check=False
        )
    except FileNotFoundError as exc:
        raise GitError("git is not installed", command=f"git {' '.join(args[:2])}") from exc
    return done.returncode, done.stdout, done.stderr


def git(root: Path, *args: str, stdin: bytes | None = None) -> bytes:
    """Run ``git -C root ARGS``; a :class:`GitError` with git's message on failure (or
    when git is not installed)."""
    returncode, stdout, stderr = _run(root, args, stdin)
    if returncode != 0:
        lines = stderr.decode("utf-8", "replace").strip().splitlines()
        last = lines[-1] if lines else ""
        command = f"git {' '.join(args[:2])}"
        raise GitError(
            f"{command}: {last or 'failed without a message'}", command=command, stderr=last
        )
    return stdout


def try_git(root: Path, *args: str) -> bytes | None:
    """``git -C root ARGS``'s output, or None when git answers with a failure; a
    :class:`GitError` only when git is not installed."""
    returncode, stdout, _ = _run(root, args, None)
    return stdout if returncode == 0 else None


def is_git_repository(root: Path) -> bool:
    """Whether ``root`` is inside a git work tree (and git is installed)."""
    try:
        return git(root, "rev-parse", "--is-inside-work-tree").strip() == b"true"
    except GitError:
        return False


def is_ancestor(root: Path, older: str, newer: str) -> bool:
    """Whether commit ``older`` is an ancestor of ``newer`` (or ``newer`` itself); a
    :class:`GitError` with git's message when git cannot tell."""
    returncode, _, stderr = _run(root, ("merge-base", "--is-ancestor", older, newer), None)
    if returncode not in (0, 1):
        said = stderr.decode("utf-8", "replace").strip()
        raise GitError(
            f"git merge-base --is-ancestor {older[:12]} {newer[:12]}: {said}",
            command="git merge-base",
            stderr=said,
        )
    return returncode == 0


def list_refs(root: Path) -> dict[str, str]:
    """Return every branch, remote-tracking branch and tag as ``{ref: commit}``
    (annotated tags peeled to their commit; refs that are not commits are skipped)."""
    out = git(
        root,
        "for-each-ref",
        "--format=%(objecttype) %(objectname) %(*objecttype) %(*objectname) %(refname)",
        *REF_NAMESPACES,
    )
    refs: dict[str, str] = {}
    for line in out.decode("utf-8", "surrogateescape").splitlines():
        parts = line.split(" ")
        if parts[0] == "commit" and parts[2] == "":
            refs[" ".join(parts[4:])] = parts[1]
        elif parts[0] == "tag" and parts[2] == "commit":
            refs[" ".join(parts[4:])] = parts[3]
    return refs


def registration_blobs(root: Path, rev: str) -> list[tuple[str, str]]:
    """Return ``(path, git blob id)`` of every ``evidence/*/bundle.json`` at ``rev``."""
    try:
        git(root, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}")
    except GitError as exc:
        raise GitError(
            f"not a git revision of {root} (git rev-parse --verify {rev}^{{commit}} failed)",
            command=exc.command,
            stderr=exc.stderr,
        ) from None
    listing = git(root, "ls-tree", "-r", "--full-name", "-z", rev, "--", EVIDENCE_DIR)
    prefix = git(root, "rev-parse", "--show-prefix").decode().strip()
    found = []
    for raw in listing.split(b"\0"):
        if not raw:
            continue
        meta, _, name = raw.partition(b"\t")
        _mode, kind, oid = meta.decode().split(" ")
        full = name.decode("utf-8", "surrogateescape")
        rel = full[len(prefix) :] if prefix and full.startswith(prefix) else full
        parts = rel.split("/")
        is_registration = len(parts) == 3 and parts[0] == EVIDENCE_DIR
        if kind == "blob" and is_registration and parts[2] == REGISTRATION_NAME:
            found.append((full, oid))
    return found


def read_blobs(root: Path, oids: list[str]) -> Iterator[tuple[str, bytes]]:
    """Yield ``(oid, bytes)`` for git blob ids, read in one ``cat-file --batch``."""
    if not oids:
        return
    out = git(root, "cat-file", "--batch", stdin="".join(f"{o}\n" for o in oids).encode())
    pos = 0
    for oid in oids:
        eol = out.index(b"\n", pos)
        header = out[pos:eol].split()
        if len(header) != 3:
            raise GitError(f"git cat-file: unexpected answer for {oid}", command="git cat-file")
        size = int(header[2])
        yield oid, out[eol + 1 : eol + 1 + size]
        pos = eol + 1 + size + 1
