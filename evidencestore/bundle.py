"""Building and sealing bundles, and creating their registrations.

A bundle directory appears whole or not at all: files are copied (and hashed in the
same pass) into a locked staging directory (``staging.py``), the registration is
written last, and the directory is renamed into place; an existing registration is
never overwritten. A staging directory left by a killed creation is removed by the
next creation of the same name (and by ``gc``, through :func:`remove_stale_staging`).

Nothing from outside a source reaches the git-tracked tree unasked: a symlink that
leaves its source directory (or is itself an argument) is refused unless
``follow_symlinks`` is given; what cannot be bundled (FIFOs, sockets, devices, dangling
or looping symlinks, symlinked directories not followed) is skipped and reported. Entry
names are checked before any byte is copied, by the one rule in ``paths.py``.
"""

from __future__ import annotations

import errno
import fnmatch
import mimetypes
import os
import stat
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from ._canonical import pretty
from ._version import __version__
from .confined import kind_of as _kind
from .confined import pseudo_file
from .digest import copy_hashing, hash_bytes
from .errors import BundleError, BundleNameTaken, IntegrityError, ManifestError
from .inventory import EVIDENCE_DIR, REGISTRATION_NAME
from .merkle import bundle_digest, entries_root
from .models import (
    BundleManifest,
    Descriptor,
    Entry,
    Location,
    Metadata,
    Registration,
)
from .paths import fold_name, name_collisions, path_problem, readlink, within
from .staging import remove_stale_staging, staging_dir, stale_staging_dirs
from .storage import BlobStore

if TYPE_CHECKING:
    from .config import Repository

__all__ = [
    "BundleNameTaken",
    "PlannedEntry",
    "RepoFile",
    "SkippedSource",
    "SourceFile",
    "Sources",
    "check_name_free",
    "collect_sources",
    "create_bundle",
    "free_name",
    "make_manifest",
    "matches_external",
    "oversized",
    "plan_bundle",
    "register_bundle",
    "remove_stale_staging",
    "scan_sources",
    "seal",
    "size_error",
    "stale_staging_dirs",
    "trusted_digest",
    "utc_now",
]

_NAME_OK = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")


def utc_now() -> str:
    """Return the current UTC time as ``YYYY-MM-DDTHH:MM:SSZ`` (honours SOURCE_DATE_EPOCH)."""
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    seconds = int(epoch) if epoch and epoch.isdigit() else int(time.time())
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


def check_bundle_name(name: str) -> str:
    """Return ``name`` if it is a valid bundle name, else raise :class:`BundleError`."""
    if not name or len(name) > 128 or not set(name) <= _NAME_OK or not name[0].isalnum():
        raise BundleError(
            f"invalid bundle name {name!r}: use letters, digits, '.', '_' and '-', "
            "starting with a letter or digit, at most 128 characters"
        )
    return name


def make_manifest(
    name: str,
    entries: Iterable[Entry],
    *,
    created: str | None = None,
    producer: str | None = None,
    references: Sequence[str] = (),
    annotations: Mapping[str, str] | None = None,
) -> BundleManifest:
    """Return a manifest with entries sorted by path.

    Paths are checked by :func:`evidencestore.paths.path_problem` (bad or misleading
    names), and for duplicates and names that collide on case- or
    normalisation-insensitive file systems.
    """
    check_bundle_name(name)
    ordered = sorted(entries, key=lambda e: e.path)
    seen: set[str] = set()
    for entry in ordered:
        problem = path_problem(entry.path)
        if problem:
            raise BundleError(f"bundle {name!r}: entry path {entry.path!r} {problem.reason}")
        if entry.path in seen:
            raise BundleError(f"bundle {name!r}: duplicate entry path {entry.path!r}")
        seen.add(entry.path)
    collisions = name_collisions(seen, reserved=[REGISTRATION_NAME])
    if collisions:
        raise BundleError(f"bundle {name!r}: entry names collide: {collisions[0].reason}")
    return BundleManifest(
        name=name,
        metadata=Metadata(
            created=created or utc_now(),
            producer=producer or f"evidencestore {__version__}",
            references=tuple(references),
            annotations=dict(annotations or {}),
        ),
        entries=tuple(ordered),
    )


def seal(manifest: BundleManifest) -> Registration:
    """Return the registration of a manifest: its Merkle root and bundle digest."""
    root = entries_root(manifest.entries)
    return Registration(digest=bundle_digest(manifest, root), root=root, manifest=manifest)


def trusted_digest(repo: Repository, name: str) -> str:
    """The digest of registered bundle ``name``, once recomputed from its manifest (what
    may anchor an inclusion proof); :class:`ManifestError` when they disagree."""
    from .inventory import load_registration, registration_path
    from .merkle import registration_hashes

    reg = load_registration(registration_path(repo.root, name))
    _, digest = registration_hashes(reg)  # the manifest as it stands in its file
    if digest != reg.digest:
        raise ManifestError(
            f"bundle {name!r}: registration digest {reg.digest} does not match its manifest "
            f"({digest}); it cannot anchor a proof: run evstore verify"
        )
    return reg.digest


@dataclass(frozen=True)
class SourceFile:
    """A file to put in a bundle: where it is now and its path inside the bundle.

    ``target`` is the file actually read when ``source`` is a symlink that was followed
    (its resolved path); None for a regular file.
    """

    source: Path
    path: str
    target: Path | None = None

    @property
    def read_path(self) -> Path:
        """The path whose bytes become the entry."""
        return self.target or self.source


@dataclass(frozen=True)
class SkippedSource:
    """Something below a source directory that is not put in the bundle, and why.

    A ``reason`` naming a parameter does so as ``{name}``, listed in ``parameters``
    (as an :class:`~evidencestore.errors.EvidenceStoreError` does): :meth:`worded`
    writes it as the library's parameter, or as the CLI's flag."""

    source: Path
    reason: str
    parameters: tuple[str, ...] = ()

    def worded(self, name: Callable[[str], str] | None = None) -> str:
        """``SOURCE: skipped: REASON``, each parameter written by ``name`` (default: the
        parameter's own name)."""
        reason = self.reason
        for parameter in self.parameters:
            reason = reason.replace("{" + parameter + "}", name(parameter) if name else parameter)
        return f"{self.source}: skipped: {reason}"

    def __str__(self) -> str:
        return self.worded()


@dataclass
class Sources:
    """The result of :func:`scan_sources`: files to bundle and what was skipped."""

    files: list[SourceFile]
    skipped: list[SkippedSource]


# Names the parameter as a placeholder (``parameters=_FOLLOW``): the CLI words it as its flag.
_FOLLOW_HINT = "pass {follow_symlinks} to copy what it points to"
_FOLLOW = ("follow_symlinks",)


class _Scanner:
    """Walks one source argument; symlinks leaving ``root_real`` are refused unless followed."""

    def __init__(self, arg: str, root_real: str, follow: bool, out: Sources) -> None:
        self.arg = arg
        self.root_real = root_real
        self.follow = follow
        self.out = out

    def skip(self, path: Path, reason: str, parameters: tuple[str, ...] = ()) -> None:
        self.out.skipped.append(SkippedSource(path, reason, parameters))

    def walk(self, directory: Path, prefix: str, ancestors: frozenset[tuple[int, int]]) -> None:
        try:
            with os.scandir(directory) as it:
                items = sorted(it, key=lambda e: e.name)
        except OSError as exc:
            raise BundleError(f"{directory}: cannot list: {exc.strerror}") from exc
        for item in items:
            full = Path(item.path)
            rel = f"{prefix}/{item.name}"
            if item.is_symlink():
                self.symlink(full, rel, ancestors)
                continue
            st = item.stat(follow_symlinks=False)
            if stat.S_ISDIR(st.st_mode):
                self.walk(full, rel, ancestors | {(st.st_dev, st.st_ino)})
            elif stat.S_ISREG(st.st_mode):
                self.out.files.append(SourceFile(full, rel))
            else:
                self.skip(full, f"{_kind(st.st_mode)}, not a regular file")

    def symlink(self, full: Path, rel: str, ancestors: frozenset[tuple[int, int]]) -> None:
        try:
            st = os.stat(full)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                self.skip(full, f"a symlink loop ({full} -> {readlink(full)})")
            elif isinstance(exc, FileNotFoundError):
                self.skip(full, f"a dangling symlink to {readlink(full)}")
            else:
                self.skip(full, f"a symlink that cannot be followed: {exc.strerror}")
            return
        real = os.path.realpath(full)
        if not self.follow and not within(real, self.root_real):
            raise BundleError(
                f"{full} is a symlink to {real}, outside the source {self.arg}: refusing to "
                f"copy it into the bundle ({_FOLLOW_HINT})",
                parameters=_FOLLOW,
            )
        if stat.S_ISDIR(st.st_mode):
            if not self.follow:
                self.skip(
                    full, f"a symlink to directory {real}, not followed ({_FOLLOW_HINT})", _FOLLOW
                )
            elif (st.st_dev, st.st_ino) in ancestors:
                self.skip(full, f"a symlink loop (to {real}, a directory above it)")
            else:
                self.walk(full, rel, ancestors | {(st.st_dev, st.st_ino)})
        elif stat.S_ISREG(st.st_mode):
            self.out.files.append(SourceFile(full, rel, Path(real)))
        else:
            self.skip(full, f"a symlink to {_kind(st.st_mode)}, not a regular file")


def scan_sources(
    paths: Iterable[str | os.PathLike[str]], *, follow_symlinks: bool = False
) -> Sources:
    """Expand files and directories into bundle sources, and say what was skipped.

    A file becomes an entry named by its base name; a directory contributes every
    regular file below it, named ``<directory name>/<relative path>`` (the name as
    given, never a symlink target's). By default a symlink argument, and a symlink below
    a directory that resolves outside that directory, raise :class:`BundleError`; a
    symlink to a file inside it is copied; symlinked subdirectories are not followed.
    With ``follow_symlinks`` the targets' contents are copied wherever they are
    (directory cycles are cut). FIFOs, sockets, devices, dangling and looping symlinks
    are skipped and listed in :attr:`Sources.skipped`.
    """
    out = Sources([], [])
    for arg in paths:
        src = Path(arg)
        try:
            lst = os.lstat(src)
        except FileNotFoundError:
            raise BundleError(f"{arg}: no such file or directory") from None
        except OSError as exc:
            raise BundleError(f"{arg}: cannot read: {exc.strerror}") from exc
        top = Path(os.path.abspath(src)).name
        st = lst
        target: Path | None = None
        if stat.S_ISLNK(lst.st_mode):
            try:
                st = os.stat(src)
            except OSError as exc:
                if exc.errno == errno.ELOOP:
                    raise BundleError(
                        f"{arg}: a symlink loop ({arg} -> {readlink(src)}), nothing to bundle"
                    ) from None
                if isinstance(exc, FileNotFoundError):
                    raise BundleError(
                        f"{arg}: a symlink to {readlink(src)}, which does not exist"
                    ) from None
                raise BundleError(f"{arg}: cannot follow symlink: {exc.strerror}") from exc
            target = Path(os.path.realpath(src))
            if not follow_symlinks:
                raise BundleError(
                    f"{arg} is a symlink to {target}: refusing to follow it (name the target "
                    f"itself, or {_FOLLOW_HINT})",
                    parameters=_FOLLOW,
                )
        pseudo = pseudo_file(os.path.realpath(src))
        if pseudo is not None:  # the one file-reading rule (confined.py)
            raise BundleError(f"{arg}: a {pseudo} file, not evidence")
        if stat.S_ISREG(st.st_mode):
            out.files.append(SourceFile(src, top, target))
            continue
        if not stat.S_ISDIR(st.st_mode):
            raise BundleError(f"{arg}: {_kind(st.st_mode)}, not a regular file or directory")
        root_real = os.path.realpath(src)
        _Scanner(str(arg), root_real, follow_symlinks, out).walk(
            src, top, frozenset({(st.st_dev, st.st_ino)})
        )
    return out


def collect_sources(
    paths: Iterable[str | os.PathLike[str]], *, follow_symlinks: bool = False
) -> list[SourceFile]:
    """The files of :func:`scan_sources` (what is skipped is not reported)."""
    return scan_sources(paths, follow_symlinks=follow_symlinks).files


def matches_external(src: SourceFile, globs: Sequence[str]) -> bool:
    """Whether ``src`` goes to the store: a glob matches its entry path or source path
    (``fnmatch``: ``*`` also crosses ``/``; a relative glob is anchored at the start)."""
    return any(
        fnmatch.fnmatch(src.path, g) or fnmatch.fnmatch(src.source.as_posix(), g) for g in globs
    )


@dataclass(frozen=True)
class PlannedEntry:
    """What ``create_bundle`` would do with one source: its entry, size and location."""

    source: Path
    path: str
    size: int
    location: Location


def plan_bundle(
    paths: Iterable[str | os.PathLike[str]],
    external: Sequence[str] = (),
    *,
    follow_symlinks: bool = False,
) -> tuple[list[PlannedEntry], list[str | SkippedSource]]:
    """Return the entries ``create_bundle`` would make, without writing anything, and
    warnings: globs that match no source, absolute globs (matched against source
    paths only), empty directories (which add nothing) and every skipped source
    (see :func:`scan_sources`, which also decides what is refused; ``str`` words each)."""
    planned: list[PlannedEntry] = []
    warnings: list[str | SkippedSource] = []
    for arg in paths:
        scanned = scan_sources([arg], follow_symlinks=follow_symlinks)
        sources = scanned.files
        warnings.extend(scanned.skipped)
        if os.path.isdir(arg):
            for dirpath, dirnames, filenames in os.walk(arg):
                if not dirnames and not filenames:
                    warnings.append(f"{dirpath}: empty directory, adds nothing")
        for src in sources:
            location: Location = "store" if matches_external(src, external) else "repo"
            size = src.read_path.stat().st_size
            planned.append(PlannedEntry(src.source, src.path, size, location))
    for glob in dict.fromkeys(external):
        if glob.startswith("/"):
            warnings.append(
                f"external pattern {glob!r} is absolute: it is matched against source paths, "
                "never entry paths"
            )
        if not any(matches_external(SourceFile(p.source, p.path), [glob]) for p in planned):
            warnings.append(
                f"external pattern {glob!r} matches no file: those files would go to git "
                f"(entry paths look like {planned[0].path!r})"
                if planned
                else f"external pattern {glob!r} matches no file"
            )
    return planned, warnings


def _media_type(path: str) -> str:
    guessed, _ = mimetypes.guess_type(path, strict=False)
    return guessed or "application/octet-stream"


def _copy_hashing(src: SourceFile, dst: Path) -> tuple[str, int]:
    # O_NOFOLLOW: a file swapped for a symlink after the scan is refused, not followed;
    # O_NONBLOCK: one swapped for a FIFO does not hang the open (refused below).
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(src.read_path, flags)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise BundleError(f"{src.source}: became a symlink while being bundled") from None
        raise
    with open(fd, "rb") as fin:
        mode = os.fstat(fin.fileno()).st_mode
        if not stat.S_ISREG(mode):
            raise BundleError(f"{src.source}: {_kind(mode)} now, no longer a regular file")
        with open(dst, "xb") as fout:
            return copy_hashing(fin, fout)


def _check_entry_names(name: str, sources: Mapping[str, str]) -> None:
    """Refuse bad, misleading and colliding entry paths before anything is written;
    ``sources`` maps each entry path to where it comes from (for the message)."""
    for path, source in sources.items():
        problem = path_problem(path)
        if problem:
            raise BundleError(f"{source}: entry path {path!r} {problem.reason}")
    collisions = name_collisions(sources, reserved=[REGISTRATION_NAME])
    if collisions:
        raise BundleError(
            f"bundle {name!r}: entry names collide: "
            + "; ".join(c.reason for c in collisions[:5])
            + (f" (and {len(collisions) - 5} more)" if len(collisions) > 5 else "")
        )


def check_name_free(repo: Repository, name: str) -> str:
    """Return ``name`` if a bundle of that name can be registered in ``repo`` now.

    Raises :class:`BundleError` for a malformed name and :class:`BundleNameTaken` when
    the name is registered, its directory holds files but no registration, or another
    bundle directory differs from it only in letter case (a case-insensitive checkout
    would merge the two).
    """
    check_bundle_name(name)
    evidence = repo.root / EVIDENCE_DIR
    final = evidence / name
    if (final / REGISTRATION_NAME).exists():
        raise BundleNameTaken(
            f"bundle {name!r} is already registered at {final / REGISTRATION_NAME}; "
            "registered bundles are immutable: create a new bundle instead"
        )
    if final.is_dir() and any(final.iterdir()):
        raise BundleNameTaken(
            f"{final}: directory exists and is not empty, but holds no registration"
        )
    if final.exists() and not final.is_dir():
        raise BundleNameTaken(f"{final}: exists and is not a directory")
    try:
        existing = [e.name for e in os.scandir(evidence) if not e.name.startswith(".")]
    except (FileNotFoundError, NotADirectoryError):
        return name
    key = fold_name(name)
    for other in existing:
        if other != name and fold_name(other) == key:
            raise BundleNameTaken(
                f"bundle {name!r}: {EVIDENCE_DIR}/{other} differs only in letter case; a "
                "case-insensitive checkout (macOS, Windows) would merge the two directories"
            )
    return name


def free_name(repo: Repository, name: str) -> str:
    """The first of ``name``, ``name-2``, ``name-3``, ... that :func:`check_name_free`
    accepts (for a run that lost its name to another process)."""
    for k in range(1, 10_000):
        candidate = name if k == 1 else f"{name[: 127 - len(str(k))]}-{k}"
        try:
            return check_name_free(repo, candidate)
        except BundleNameTaken:
            continue
    raise BundleError(f"bundle {name!r}: no free name {name}-2 ... {name}-9999")


@dataclass(frozen=True)
class RepoFile:
    """A file kept in git beside the registration: bytes in memory, or a source file
    copied (and hashed in the same pass). ``media_type`` is guessed from the entry path
    when None."""

    data: bytes | SourceFile
    media_type: str | None = None
    role: str | None = None

    @property
    def size(self) -> int:
        """Its size in bytes (a source file's as it is now)."""
        if isinstance(self.data, bytes):
            return len(self.data)
        return self.data.read_path.stat().st_size

    @property
    def origin(self) -> str:
        """Where it comes from, for messages."""
        return "bytes" if isinstance(self.data, bytes) else os.fspath(self.data.source)


def oversized(sizes: Iterable[tuple[str, int]], limit: int | None) -> list[tuple[str, int]]:
    """The ``(path, size)`` pairs over ``limit`` (``[bundle] max_git_file_size``)."""
    if limit is None:
        return []
    return [(path, size) for path, size in sizes if size > limit]


def size_error(name: str, too_big: Sequence[tuple[str, int]], limit: int | None) -> BundleError:
    """The refusal of files that would go to git over ``max_git_file_size``."""
    shown = ", ".join(f"{path} ({size} bytes)" for path, size in too_big[:5])
    files = f"{len(too_big)} file{'' if len(too_big) == 1 else 's'}"
    return BundleError(
        f"bundle {name!r}: {files} would go to git over "
        f"max_git_file_size = {limit} bytes (evstore.toml [bundle]): {shown}; "
        "give them to the store with {external} GLOB (a dry run shows where each goes)",
        parameters=("external",),
    )


def register_bundle(
    repo: Repository,
    name: str,
    *,
    files: Mapping[str, RepoFile] | None = None,
    stored: Iterable[Entry] = (),
    references: Sequence[str] = (),
    annotations: Mapping[str, str] | None = None,
    created: str | None = None,
    producer: str | None = None,
    max_git_file_size: int | Literal["config"] | None = "config",
) -> Registration:
    """Register bundle ``name`` in ``repo``: the one registration path.

    ``files`` (entry path -> :class:`RepoFile`) are kept in git beside the registration;
    ``stored`` entries name bytes already in the store. Before anything is written the
    name is checked (:func:`check_name_free`), every entry path (the one rule in
    ``paths.py``: bad, misleading, duplicate and colliding names), and the size policy:
    a git file over ``max_git_file_size`` (by default ``[bundle] max_git_file_size`` of
    the repository's configuration; None for no limit) is refused. The files are then
    written into a locked staging directory with the registration last, and renamed
    into place whole. Raises :class:`BundleNameTaken` when the name is taken, also when
    another process registered it between the check and the rename (nothing is left
    behind: the caller may register under another name), and :class:`BundleError` for
    any other bad input or failed write.
    """
    check_name_free(repo, name)
    files = dict(files or {})
    stored = list(stored)
    sources: dict[str, str] = {}
    for path, f in files.items():
        sources[path] = f.origin
    for entry in stored:
        if entry.path in sources:
            raise BundleError(
                f"bundle {name!r}: {sources[entry.path]} and {entry.descriptor.digest} would "
                f"both be entry {entry.path!r}"
            )
        sources[entry.path] = entry.descriptor.digest
    _check_entry_names(name, sources)
    limit = (
        repo.config.bundle.max_git_file_size if max_git_file_size == "config" else max_git_file_size
    )
    too_big = oversized(((path, f.size) for path, f in files.items()), limit)
    if too_big:
        raise size_error(name, too_big, limit)
    evidence = repo.root / EVIDENCE_DIR
    final = evidence / name
    try:
        evidence.mkdir(parents=True, exist_ok=True)
        remove_stale_staging(repo.root, name=name)
        with staging_dir(evidence, name) as staging:
            entries = list(stored)
            for path, f in files.items():
                target = staging / path
                target.parent.mkdir(parents=True, exist_ok=True)
                if isinstance(f.data, bytes):
                    target.write_bytes(f.data)
                    digest, size = hash_bytes(f.data)
                else:
                    digest, size = _copy_hashing(f.data, target)
                media_type = f.media_type or _media_type(path)
                desc = Descriptor(digest=digest, size=size, media_type=media_type)
                entries.append(Entry(path=path, descriptor=desc, location="repo", role=f.role))
            manifest = make_manifest(
                name,
                entries,
                created=created,
                producer=producer,
                references=references,
                annotations=annotations,
            )
            registration = seal(manifest)
            (staging / REGISTRATION_NAME).write_bytes(pretty(registration))
            try:
                final.rmdir()  # an empty directory; one with files was refused above
            except OSError as exc:  # absent, or filled meanwhile: the rename tells
                if exc.errno not in (errno.ENOENT, errno.ENOTEMPTY, errno.EEXIST):
                    raise
            try:
                os.rename(staging, final)
            except OSError as exc:
                if exc.errno in (errno.ENOTEMPTY, errno.EEXIST):
                    raise BundleNameTaken(
                        f"bundle {name!r} was registered at {final} by another process "
                        "while this one was being written"
                    ) from exc
                raise
    except OSError as exc:
        raise BundleError(f"bundle {name!r}: {exc}") from exc
    except IntegrityError as exc:
        raise BundleError(f"bundle {name!r}: {exc}") from exc
    return registration


def create_bundle(
    root: str | os.PathLike[str],
    name: str,
    paths: Iterable[str | os.PathLike[str]],
    *,
    store: BlobStore,
    external: Sequence[str] = (),
    references: Sequence[str] = (),
    annotations: Mapping[str, str] | None = None,
    roles: Mapping[str, str] | None = None,
    created: str | None = None,
    producer: str | None = None,
    follow_symlinks: bool = False,
    max_git_file_size: int | Literal["config"] | None = "config",
    on_skip: Callable[[SkippedSource], None] | None = None,
    on_bytes: Callable[[int], None] | None = None,
) -> Registration:
    """Create and register bundle ``name`` in the evidence repository at ``root``
    (:func:`~evidencestore.config.as_repository`): scan the sources, then
    :func:`register_bundle`.

    ``on_bytes`` hears of the bytes of ``store`` entries as they are hashed and stored
    (twice each file's size in all), for a progress line.

    Sources whose bundle path (or source path) matches an ``external`` glob go into
    ``store`` with location ``store``; the rest are copied into ``evidence/<name>/``
    with location ``repo``, within ``max_git_file_size`` (see :func:`register_bundle`).
    ``roles`` maps bundle paths to an entry role. Symlinks and special files are treated
    as :func:`scan_sources` says (``follow_symlinks``); each skipped source is passed to
    ``on_skip``. Staging directories that an earlier, killed creation of ``name`` left
    behind are removed first. Raises :class:`BundleError` when the bundle is already
    registered or an input is bad.
    """
    from .config import as_repository

    repo = as_repository(root)
    check_name_free(repo, name)
    scanned = scan_sources(paths, follow_symlinks=follow_symlinks)
    for skipped in scanned.skipped:
        if on_skip is not None:
            on_skip(skipped)
    sources = scanned.files
    if not sources:
        raise BundleError(f"bundle {name!r}: no files given")
    (repo.root / EVIDENCE_DIR).mkdir(parents=True, exist_ok=True)
    seen: dict[str, Path] = {}
    for src in sources:
        if src.path in seen:
            raise BundleError(
                f"bundle {name!r}: {src.source} and {seen[src.path]} would both be "
                f"entry {src.path!r}"
            )
        seen[src.path] = src.source
    _check_entry_names(name, {p: os.fspath(s) for p, s in seen.items()})
    roles = dict(roles or {})
    external_sources = [s for s in sources if matches_external(s, external)]
    files = {
        s.path: RepoFile(s, role=roles.get(s.path))
        for s in sources
        if not matches_external(s, external)
    }
    limit = (
        repo.config.bundle.max_git_file_size if max_git_file_size == "config" else max_git_file_size
    )
    too_big = oversized(((p, f.size) for p, f in files.items()), limit)
    if too_big:
        raise size_error(name, too_big, limit)
    stored: list[Entry] = []
    try:
        for src in external_sources:
            desc = store.put_file(src.read_path, _media_type(src.path), on_bytes=on_bytes)
            stored.append(
                Entry(path=src.path, descriptor=desc, location="store", role=roles.get(src.path))
            )
    except (OSError, IntegrityError) as exc:
        raise BundleError(f"bundle {name!r}: {exc}") from exc
    return register_bundle(
        repo,
        name,
        files=files,
        stored=stored,
        references=references,
        annotations=annotations,
        created=created,
        producer=producer,
        max_git_file_size=limit,
    )
