"""Building and sealing bundles, and creating their registrations.

A bundle directory appears whole or not at all: files are copied (and hashed in the
same pass) into a temporary sibling directory, the registration is written last, and
the directory is renamed into place; an existing registration is never overwritten.
"""

from __future__ import annotations

import contextlib
import fnmatch
import mimetypes
import os
import shutil
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from blake3 import blake3

from . import __version__
from ._canonical import pretty
from .errors import BundleError, IntegrityError
from .inventory import EVIDENCE_DIR, REGISTRATION_NAME
from .merkle import bundle_digest, entries_root
from .models import (
    BundleManifest,
    Descriptor,
    Entry,
    Location,
    Metadata,
    Registration,
    entry_path_problem,
)
from .storage import BlobStore

__all__ = [
    "PlannedEntry",
    "SourceFile",
    "collect_sources",
    "create_bundle",
    "make_manifest",
    "matches_external",
    "plan_bundle",
    "seal",
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
    """Return a manifest with entries sorted by path; paths and duplicates are checked."""
    check_bundle_name(name)
    ordered = sorted(entries, key=lambda e: e.path)
    seen: set[str] = set()
    for entry in ordered:
        problem = entry_path_problem(entry.path)
        if problem:
            raise BundleError(f"bundle {name!r}: entry path {entry.path!r} {problem}")
        if entry.path == REGISTRATION_NAME:
            raise BundleError(f"bundle {name!r}: entry path {REGISTRATION_NAME!r} is reserved")
        if entry.path in seen:
            raise BundleError(f"bundle {name!r}: duplicate entry path {entry.path!r}")
        seen.add(entry.path)
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


@dataclass(frozen=True)
class SourceFile:
    """A file to put in a bundle: where it is now and its path inside the bundle."""

    source: Path
    path: str


def collect_sources(paths: Iterable[str | os.PathLike[str]]) -> list[SourceFile]:
    """Expand files and directories into bundle sources.

    A file becomes an entry named by its base name; a directory contributes every file
    below it, named ``<directory name>/<relative path>``. Symlinked directories are not
    followed.
    """
    out: list[SourceFile] = []
    for arg in paths:
        src = Path(arg)
        if not src.exists():
            raise BundleError(f"{arg}: no such file or directory")
        if src.is_file():
            out.append(SourceFile(src, src.name))
            continue
        if not src.is_dir():
            raise BundleError(f"{arg}: not a regular file or directory")
        top = src.resolve().name
        for dirpath, dirnames, filenames in os.walk(src):
            dirnames.sort()
            for fname in sorted(filenames):
                full = Path(dirpath) / fname
                if not full.is_file():
                    continue
                rel = full.relative_to(src).as_posix()
                out.append(SourceFile(full, f"{top}/{rel}"))
    return out


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
    paths: Iterable[str | os.PathLike[str]], external: Sequence[str] = ()
) -> tuple[list[PlannedEntry], list[str]]:
    """Return the entries ``create_bundle`` would make, without writing anything, and
    warnings: globs that match no source, absolute globs (matched against source
    paths only), and empty directories (which add nothing)."""
    planned: list[PlannedEntry] = []
    warnings: list[str] = []
    for arg in paths:
        sources = collect_sources([arg])
        if os.path.isdir(arg):
            for dirpath, dirnames, filenames in os.walk(arg):
                if not dirnames and not filenames:
                    warnings.append(f"{dirpath}: empty directory, adds nothing")
        for src in sources:
            location: Location = "store" if matches_external(src, external) else "repo"
            planned.append(PlannedEntry(src.source, src.path, src.source.stat().st_size, location))
    for glob in dict.fromkeys(external):
        if glob.startswith("/"):
            warnings.append(
                f"--external {glob!r} is absolute: it is matched against source paths, "
                "never entry paths"
            )
        if not any(matches_external(SourceFile(p.source, p.path), [glob]) for p in planned):
            warnings.append(
                f"--external {glob!r} matches no file: those files would go to git "
                f"(entry paths look like {planned[0].path!r})"
                if planned
                else f"--external {glob!r} matches no file"
            )
    return planned, warnings


def _media_type(path: str) -> str:
    guessed, _ = mimetypes.guess_type(path, strict=False)
    return guessed or "application/octet-stream"


def _copy_hashing(src: Path, dst: Path) -> tuple[str, int]:
    hasher = blake3()
    size = 0
    with open(src, "rb") as fin, open(dst, "xb") as fout:
        while chunk := fin.read(4 << 20):
            hasher.update(chunk)
            fout.write(chunk)
            size += len(chunk)
        fout.flush()
        os.fsync(fout.fileno())
    return "blake3:" + hasher.hexdigest(), size


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
) -> Registration:
    """Create and register bundle ``name`` in the evidence repository at ``root``.

    Sources whose bundle path (or source path) matches an ``external`` glob go into
    ``store`` with location ``store``; the rest are copied into ``evidence/<name>/``
    with location ``repo``. ``roles`` maps bundle paths to an entry role. Raises
    :class:`BundleError` when the bundle is already registered or an input is bad.
    """
    check_bundle_name(name)
    evidence = Path(root) / EVIDENCE_DIR
    final = evidence / name
    if (final / REGISTRATION_NAME).exists():
        raise BundleError(
            f"bundle {name!r} is already registered at {final / REGISTRATION_NAME}; "
            "registered bundles are immutable: create a new bundle instead"
        )
    if final.exists() and any(final.iterdir()):
        raise BundleError(f"{final}: directory exists and is not empty, but holds no registration")
    sources = collect_sources(paths)
    if not sources:
        raise BundleError(f"bundle {name!r}: no files given")
    roles = dict(roles or {})
    evidence.mkdir(parents=True, exist_ok=True)
    staging = evidence / f".{name}.tmp-{os.urandom(4).hex()}"
    staging.mkdir()
    try:
        entries: list[Entry] = []
        seen: dict[str, Path] = {}
        for src in sources:
            if src.path in seen:
                raise BundleError(
                    f"bundle {name!r}: {src.source} and {seen[src.path]} would both be "
                    f"entry {src.path!r}"
                )
            problem = entry_path_problem(src.path)
            if problem:
                raise BundleError(f"{src.source}: entry path {src.path!r} {problem}")
            seen[src.path] = src.source
            is_external = matches_external(src, external)
            location: Location
            if is_external:
                desc = store.put_file(src.source, _media_type(src.path))
                location = "store"
            else:
                target = staging / src.path
                target.parent.mkdir(parents=True, exist_ok=True)
                digest, size = _copy_hashing(src.source, target)
                desc = Descriptor(digest=digest, size=size, media_type=_media_type(src.path))
                location = "repo"
            entries.append(
                Entry(path=src.path, descriptor=desc, location=location, role=roles.get(src.path))
            )
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
        if final.exists():
            final.rmdir()  # empty, checked above
        os.rename(staging, final)
    except (OSError, IntegrityError) as exc:
        raise BundleError(f"bundle {name!r}: {exc}") from exc
    finally:
        with contextlib.suppress(FileNotFoundError):
            shutil.rmtree(staging)
    return registration
