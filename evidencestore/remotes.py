"""Remotes from ``evstore.toml``, push / pull / fetch by digest, and the read-through store.

Bytes only ever come from the local store or a configured remote, and are verified
(size, then BLAKE3) before they are cached or returned. Remotes are tried in the order
``evstore.toml`` lists them; a corrupt copy on one is refused and the next is tried.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import IO, TypedDict, TypeVar, Unpack

from . import _steps
from ._atomic import replacing
from ._keywords import check_keywords
from .config import RemoteConfig, Repository, as_repository, local_store
from .digest import parse_digest
from .errors import (
    BlobNotFoundError,
    ConfigError,
    IntegrityError,
    ReadOnlyStoreError,
    RemoteConfigError,
    StorageError,
    TransferError,
)
from .inventory import load_inventory
from .models import Finding, Registration
from .progress import Observer, Tick
from .storage import BlobStore, LocalBlobStore, ReadThroughStore, SupportsArtifacts
from .storage.leases import (
    LEASE_DIR,
    LEASE_RENEWAL,
    Lease,
    iter_leases,
    read_lease,
    remove_lease,
    write_lease,
)
from .storage.transfer import (
    DEFAULT_JOBS,
    Progress,
    Source,
    TransferSummary,
    check_copy,
    download,
    download_all,
    parallel,
    sizes_of,
    upload,
)

__all__ = [
    "DEFAULT_JOBS",
    "LEASE_DIR",
    "Lease",
    "ReadThroughStore",
    "Remote",
    "TransferOptions",
    "TransferSummary",
    "configured_remotes",
    "export_blob",
    "fetch",
    "iter_leases",
    "local_store",
    "open_remote",
    "pull",
    "push",
    "read_lease",
    "registry_remote",
    "remote_store",
    "remote_url_problem",
    "remove_lease",
    "repository_store",
    "store_entries",
    "verify_remote",
    "write_lease",
]

log = logging.getLogger("evidencestore")
OCI_SCHEMES = ("oci://", "oci+http://", "oci+https://")
T = TypeVar("T")
_LOCAL = "local store"


class Remote:
    """A configured remote: its name, its configuration and its store, opened lazily.

    Nothing is imported or contacted until the store is first used, so one remote
    that cannot be opened (a backend that is not installed, an unknown protocol)
    fails only where it is used, as that remote's :class:`StorageError`.
    """

    def __init__(self, name: str, config: RemoteConfig, base: str | os.PathLike[str] = ".") -> None:
        self.name = name
        self.config = config
        self.base = Path(base)
        self.source = Source(
            name,
            opener=self._open,
            location=_location(config, self.base),
            max_unregistered_size=config.max_unregistered_size,
        )

    def __repr__(self) -> str:
        return f"Remote({self.name!r}, {self.config.url!r})"

    def _open(self) -> BlobStore:
        try:
            return remote_store(self.config, self.base)
        except StorageError as exc:
            text = str(exc).removeprefix(f"{self.location}: ")
            raise StorageError(f"{self.source.label}: {text}") from exc
        except Exception as exc:  # a backend failing to initialise: this remote's error
            raise StorageError(
                f"{self.source.label}: cannot open this location: {type(exc).__name__}: {exc}"
            ) from exc

    @property
    def store(self) -> BlobStore:
        """The remote's store (opened on first use)."""
        return self.source.store

    @property
    def location(self) -> str:
        """The remote's URL or directory, for messages."""
        return self.source.location


def _local_path(url: str, base: Path) -> Path | None:
    if "://" in url and not url.startswith("file://"):
        return None
    path = Path(os.path.expanduser(url.removeprefix("file://")))
    if not path.is_absolute():
        path = Path(os.path.normpath(base.absolute() / path))
    return path


def _location(config: RemoteConfig, base: Path) -> str:
    path = _local_path(config.url, base)
    return str(path) if path is not None else config.url.rstrip("/")


def remote_store(config: RemoteConfig, base: str | os.PathLike[str] = ".") -> BlobStore:
    """Open the store of a remote; relative local paths are relative to ``base``."""
    url = config.url
    path = _local_path(url, Path(base))
    if path is not None:
        return LocalBlobStore(path, read_only=config.read_only)
    if url.startswith(OCI_SCHEMES):
        from .storage import OciBlobStore  # only now: requests

        return OciBlobStore(
            url, read_only=config.read_only, options=config.options, **config.retry()
        )
    from .storage import FsspecBlobStore, RetryPolicy  # only now: fsspec and asyncio

    retry = RetryPolicy(**config.retry())
    return FsspecBlobStore(
        url, read_only=config.read_only, storage_options=dict(config.options), retry=retry
    )


def configured_remotes(
    root: str | os.PathLike[str] | None = None, only: str | None = None
) -> list[Remote]:
    """Return the remotes of ``evstore.toml`` in order (just ``only`` when named)."""
    repo = as_repository(root)
    base, config = repo.root, repo.config
    if only is not None and only not in config.remotes:
        known = ", ".join(repr(n) for n in config.remotes) or "none configured"
        raise RemoteConfigError(f"unknown remote {only!r} (remotes: {known})")
    return [
        Remote(name, cfg, base)
        for name, cfg in config.remotes.items()
        if only is None or name == only
    ]


def open_remote(root: str | os.PathLike[str] | None, name: str) -> Remote:
    """Return the remote called ``name``; an unknown name is a :class:`RemoteConfigError`."""
    return configured_remotes(root, name)[0]


def remote_url_problem(url: str) -> str | None:
    """Why ``url`` cannot be a remote's URL, or None: an OCI registry URL needs a host
    and a valid repository name (other URLs are checked when first used)."""
    if not url.startswith(OCI_SCHEMES):
        return None
    from .storage import parse_oci_url

    try:
        parse_oci_url(url)
    except StorageError as exc:
        return str(exc).removeprefix(f"{url}: ")
    return None


def registry_remote(root: str | os.PathLike[str] | None, name: str | None = None) -> Remote:
    """Return the OCI registry remote called ``name`` (default: the first ``oci://`` one)."""
    remotes = configured_remotes(root, name)
    found = [r for r in remotes if r.config.url.startswith(OCI_SCHEMES)]
    if not found:
        if name is not None:
            raise RemoteConfigError(
                f"remote {name!r} ({remotes[0].config.url}) is not an OCI registry "
                "(oci://HOST/REPO or oci+http://HOST/REPO)"
            )
        raise RemoteConfigError(
            "no OCI registry remote configured: add one with "
            "`evstore remote add NAME oci://HOST/REPO`"
        )
    return found[0]


def repository_store(
    root: str | os.PathLike[str] | None = None, only: str | None = None
) -> ReadThroughStore:
    """Return the store that serves digests for a repository: the local store, then the
    remotes of ``evstore.toml`` in order (just ``only`` when named), verified and cached
    locally."""
    repo = as_repository(root)
    remotes = configured_remotes(repo, only)
    sources = [r.source for r in remotes]

    def fill(cache: BlobStore, digest: str, size: int | None, looked_before: list[str]) -> str:
        return download(sources, cache, digest, size, looked_before=looked_before)[0]

    return ReadThroughStore(repo.local_store(), remotes, fill=fill)


# -- bundles ------------------------------------------------------------------------
def store_entries(
    root: str | os.PathLike[str], bundles: Iterable[str] | None = None
) -> dict[str, int]:
    """Return digest -> size of every ``store`` entry of the named bundles (default: all
    registered). An unknown bundle name is a :class:`ConfigError`."""
    inventory = load_inventory(root)
    names = list(dict.fromkeys(bundles)) if bundles else sorted(inventory.registrations)
    unknown = [n for n in names if n not in inventory.registrations]
    if unknown:
        raise ConfigError(
            f"no registered bundle named {', '.join(repr(n) for n in unknown)} "
            f"(no evidence/<name>/bundle.json under {Path(root)})"
        )
    out: dict[str, int] = {}
    for name in names:
        for entry in inventory.registrations[name].manifest.entries:
            if entry.location == "store":
                out[entry.descriptor.digest] = entry.descriptor.size
    return out


def _known_sizes(root: Repository) -> dict[str, int]:
    out: dict[str, int] = {}
    for registration in load_inventory(root).registrations.values():
        for entry in registration.manifest.entries:
            out[entry.descriptor.digest] = entry.descriptor.size
    return out


def _push_target(base: Repository, name: str | None) -> Remote:
    if name is not None:
        remote = open_remote(base, name)
        if remote.config.read_only or remote.store.read_only:
            raise RemoteConfigError(f"{remote.source.label} is read-only")
        return remote
    for remote in configured_remotes(base):
        # Decided from the configuration, so an unusable remote before it costs nothing.
        if not remote.config.read_only and not remote.config.url.startswith(
            ("http://", "https://")
        ):
            return remote
    raise RemoteConfigError(
        "no writable remote configured in evstore.toml: add one with `evstore remote add NAME URL`"
    )


def _finish(summary: TransferSummary, started: float) -> TransferSummary:
    summary.seconds = time.monotonic() - started
    if summary.failures:
        shown = summary.failures[:20]
        more = len(summary.failures) - len(shown)
        tail = f"\n  ... and {more} more" if more else ""
        raise TransferError(
            summary.line() + ":\n  " + "\n  ".join(shown) + tail,
            summary,
        )
    return summary


class TransferOptions(TypedDict, total=False):
    """The options :func:`push`, :func:`pull` and :func:`fetch` take, as keywords:
    ``remote`` (a configured remote's name; default: push's first writable one, the
    remotes in order for pull and fetch), ``jobs`` (parallel transfers, default
    ``DEFAULT_JOBS``) and ``progress`` (a stream the progress line is drawn on)."""

    remote: str | None
    jobs: int
    progress: IO[str] | None


def push(
    root: str | os.PathLike[str] | None = None,
    bundles: Iterable[str] | None = None,
    *,
    repair: bool = False,
    **options: Unpack[TransferOptions],
) -> TransferSummary:
    """Upload every ``store`` entry of ``bundles`` (default: all) that ``remote``
    (default: the first writable one) lacks or holds at the wrong size.

    Missing blobs are found with batched queries, then uploaded on ``jobs`` threads;
    each is re-hashed before upload and appears under its final key only once
    complete. With ``repair``, every copy the remote holds at the right size is also
    downloaded and hashed, and one that does not match its digest is replaced (from
    the verified local copy, atomically: an object store's PUT, a temporary renamed
    elsewhere); every replaced copy is read back and hashed again (``repaired`` counts
    them). Raises :class:`TransferError` listing every blob that failed.
    """
    check_keywords("push", options, TransferOptions)
    jobs = options.get("jobs", DEFAULT_JOBS)
    base = as_repository(root)
    started = time.monotonic()
    wanted = store_entries(base, bundles)
    target = _push_target(base, options.get("remote"))
    summary = TransferSummary("push", f"remote {target.name!r}", blobs=len(wanted))
    stored: Mapping[str, int | None] = {}
    if wanted:
        try:
            # The lease first: from now on a concurrent gc keeps every blob this push
            # relies on, including those the query below finds already present.
            write_lease(target.store, wanted)
            leased_at = time.monotonic()
            _steps.reached("push:leased")
            stored = sizes_of(target.store, wanted)
            _steps.reached("push:checked")
        except (StorageError, ReadOnlyStoreError) as exc:
            raise StorageError(target.source.labelled(exc)) from exc
    missing = [(d, s) for d, s in sorted(wanted.items()) if stored.get(d) != s]
    # A copy of the wrong size is replaced by any push; a corrupt one of the right
    # size only by a repair, which reads every copy back.
    damaged = {d for d, s in missing if stored.get(d) is not None}
    if repair:
        present = [(d, s) for d, s in sorted(wanted.items()) if stored.get(d) == s]
        for item, _, error in parallel(present, lambda i: check_copy(target.source, *i), jobs):
            if isinstance(error, IntegrityError):
                missing.append(item)
                damaged.add(item[0])
            elif error is not None:
                summary.failures.append(error.diagnostics())
        missing.sort()
    summary.present = len(wanted) - len(missing)
    cache = base.local_store()
    bar = Progress(
        f"push {target.name}", len(missing), sum(s for _, s in missing), options.get("progress")
    )

    def one(item: tuple[str, int]) -> int:
        try:
            return push_one(item)
        except BaseException:
            bar.fail(item[0])
            raise

    def push_one(item: tuple[str, int]) -> int:
        digest, size = item
        upload(cache, target.source, digest, size, lambda n: bar.sent(digest, n))
        if repair and digest in damaged:
            try:
                check_copy(target.source, digest, size)  # the replacement, read back
            except IntegrityError as exc:
                raise IntegrityError(f"{digest}: still corrupt after re-upload: {exc}") from exc
        bar.advance(size, digest)
        return size

    for (digest, size), _, error in parallel(missing, one, jobs):
        if error is not None:
            summary.failures.append(error.diagnostics())
        else:
            summary.transferred += 1
            summary.bytes += size
            summary.repaired += digest in damaged
        if time.monotonic() - leased_at > LEASE_RENEWAL:
            write_lease(target.store, wanted)  # a long push: gc judges leases by age
            leased_at = time.monotonic()
    bar.close()
    if isinstance(target.store, SupportsArtifacts) and not summary.failures:
        from . import oci

        names = (
            list(dict.fromkeys(bundles)) if bundles else sorted(load_inventory(base).registrations)
        )
        try:
            written = oci.push_bundles(base, target.store, target.name, names, rewrite=repair)
            summary.manifests = len(written)
        except (StorageError, IntegrityError) as exc:
            summary.failures.append(target.source.labelled(exc))
    if wanted and time.monotonic() - leased_at > LEASE_RENEWAL / 10:
        # The grace period then counts from the end of the push.
        write_lease(target.store, wanted)
    return _finish(summary, started)


def _unverified(
    cache: LocalBlobStore, items: Sequence[tuple[str, int | None]], jobs: int
) -> list[tuple[str, int | None]]:
    """Return the items whose local copy is absent or fails verification (re-hashed,
    like every read: a same-size corrupt copy is not "present")."""

    def check(item: tuple[str, int | None]) -> bool:
        try:
            cache.upkeep.keep_alive(item[0])  # before the check relied on (see gc)
            cache.verify(item[0], item[1])
        except (BlobNotFoundError, IntegrityError):
            return False
        return True

    results = parallel(items, check, jobs)
    return [item for item, ok, error in results if error is not None or not ok]


def _sources(base: Repository, remote: str | None) -> list[Source]:
    return [r.source for r in configured_remotes(base, remote)]


def pull(
    root: str | os.PathLike[str] | None = None,
    bundles: Iterable[str] | None = None,
    **options: Unpack[TransferOptions],
) -> TransferSummary:
    """Fetch every ``store`` entry of ``bundles`` (default: all) missing from the local
    store, from ``remote`` or the remotes in order, verified before caching."""
    check_keywords("pull", options, TransferOptions)
    base = as_repository(root)
    started = time.monotonic()
    wanted = store_entries(base, bundles)
    sources = _sources(base, options.get("remote"))
    return _download_all("pull", started, sources, base, sorted(wanted.items()), options)


def _download_all(
    action: str,
    started: float,
    sources: list[Source],
    base: Repository,
    items: Sequence[tuple[str, int | None]],
    options: TransferOptions,
) -> TransferSummary:
    """Fetch every item the local store lacks (or holds corrupt) from ``sources``."""
    remote, jobs = options.get("remote"), options.get("jobs", DEFAULT_JOBS)
    cache = base.local_store()
    missing = _unverified(cache, items, jobs)
    summary = TransferSummary(
        action,
        f"remote {remote!r}" if remote else "remotes",
        blobs=len(items),
        present=len(items) - len(missing),
    )
    if missing and not sources:
        raise RemoteConfigError(
            f"{len(missing)} blob(s) are not in the local store ({cache.location}) and no "
            "remote is configured: add one with `evstore remote add NAME URL`"
        )
    bar = Progress(
        summary.action, len(missing), sum(s or 0 for _, s in missing), options.get("progress")
    )

    def looked_before(digest: str) -> list[str]:
        state = "absent" if cache.size(digest) is None else "wrong size or corrupt"
        return [f"local store ({cache.location}): {state}"]

    results = download_all(sources, cache, missing, jobs, looked_before, bar.advance, bar.fail)
    bar.close()
    for _, got, error in results:
        if error is not None:
            summary.failures.append(error.diagnostics())
        else:
            summary.transferred += 1
            summary.bytes += got or 0
    return _finish(summary, started)


def fetch(
    root: str | os.PathLike[str] | None,
    digests: Iterable[str],
    **options: Unpack[TransferOptions],
) -> TransferSummary:
    """Make sure each digest is in the local store, verified: a local copy is re-hashed,
    a missing or corrupt one is fetched from ``remote`` or the remotes in order.

    Sizes are taken from the registrations that mention a digest, when any does.
    Raises :class:`InvalidDigestError` for a malformed digest before any transfer.
    """
    check_keywords("fetch", options, TransferOptions)
    base = as_repository(root)
    started = time.monotonic()
    wanted = list(dict.fromkeys(parse_digest(d) for d in digests))
    # An unknown remote name is an error, cached or not.
    sources = _sources(base, options.get("remote"))
    known = _known_sizes(base) if (base.root / "evidence").is_dir() else {}
    items = [(d, known.get(d)) for d in wanted]
    return _download_all("fetch", started, sources, base, items, options)


def export_blob(
    store: BlobStore, digest: str, dest: str | os.PathLike[str], size: int | None = None
) -> Path:
    """Copy a blob from ``store`` to ``dest`` atomically, verifying while copying; a
    copy that fails verification never appears at ``dest``."""
    dest = Path(dest)
    try:
        with store.open(digest, size) as reader, replacing(dest) as out:
            while chunk := reader.read(8 << 20):
                out.write(chunk)
    except OSError as exc:
        raise StorageError(f"{dest}: cannot write: {exc.strerror or exc}") from exc
    return dest


# -- verification against a remote -------------------------------------------------
def _counted(
    check: Callable[[Source, str, int], None],
    observer: Observer,
    label: str,
    done: int,
    total: int,
    failed: int,
    refs: Mapping[str, Sequence[object]],
) -> Callable[[Source, str, int], None]:
    """``check`` telling ``observer`` of each copy's entries once it is checked (from
    the threads of ``parallel``: counted and told under one lock, so the counts drawn
    only grow)."""
    import threading

    lock = threading.Lock()
    counts = [done, failed]

    def counted(source: Source, digest: str, size: int) -> None:
        ok = False
        try:
            check(source, digest, size)
            ok = True
        finally:
            with lock:
                counts[0] += len(refs[digest])
                counts[1] += 0 if ok else len(refs[digest])
                observer(Tick(label, counts[0], total, "store entries", counts[1]))

    return counted


def verify_remote(
    root: str | os.PathLike[str],
    registrations: Mapping[str, Registration],
    remote: str,
    *,
    deep: bool = False,
    jobs: int = DEFAULT_JOBS,
    observer: Observer | None = None,
) -> dict[str, list[Finding]]:
    """Check that every ``store`` entry of ``registrations`` is on ``remote`` with the
    right size (one batched query, no download); ``deep`` also downloads and hashes.
    ``observer`` (``evidencestore.progress``) hears of the store entries checked of
    the total, and of those that failed: all of them once the sizes are known, or with
    ``deep``, each copy's entries as it is hashed.

    On an OCI registry each bundle's manifest is checked too (``remote-bundle-manifest``:
    present and naming the bundle's digest and files; ``deep``: every layer's sha256).

    Returns bundle name -> error findings (an empty list for a bundle that checks
    out). An unknown remote is a :class:`RemoteConfigError`; an unreachable one a
    :class:`StorageError`.
    """
    repo = as_repository(root)
    target = open_remote(repo, remote)
    source = target.source
    refs: dict[str, list[tuple[str, str, int]]] = {}
    for name, registration in registrations.items():
        for entry in registration.manifest.entries:
            if entry.location == "store":
                refs.setdefault(entry.descriptor.digest, []).append(
                    (name, entry.path, entry.descriptor.size)
                )
    label = f"verify remote {remote}"
    total = sum(len(users) for users in refs.values())
    if observer is not None:
        observer(Tick(label, 0, total, "store entries", what="asking for sizes"))
    try:
        stored = sizes_of(target.store, refs)
    except StorageError as exc:
        raise StorageError(source.labelled(exc)) from exc
    problems: dict[tuple[str, str, str], Finding] = {}

    def problem(bundle: str, path: str, digest: str, code: str, message: str) -> None:
        problems[(bundle, path, digest)] = Finding(
            severity="error", code=code, bundle=bundle, path=path, digest=digest, message=message
        )

    to_hash: list[tuple[str, int]] = []
    for digest, users in refs.items():
        for bundle, path, size in users:
            have = stored.get(digest)
            where = target.store.location_of(digest)
            if have is None:
                problem(bundle, path, digest, "remote-missing",
                        f"{digest} ({size} bytes) is not on remote {remote!r}; looked at {where}"
                        f"; upload it with `evstore push --remote {remote}`")  # fmt: skip
            elif have != size:
                problem(bundle, path, digest, "remote-size-mismatch",
                        f"{digest} on remote {remote!r} is {have} bytes, expected {size} ({where})"
                        f"; replace it with `evstore push --repair --remote {remote}`")  # fmt: skip
        first_size = users[0][2]
        if deep and stored.get(digest) == first_size:
            to_hash.append((digest, first_size))
    check: Callable[[Source, str, int], None] = check_copy
    if observer is not None:
        done = total - sum(len(refs[d]) for d, _ in to_hash)  # nothing more to check
        failed = len(problems)
        observer(Tick(label, done, total, "store entries", failed))
        if to_hash:
            check = _counted(check_copy, observer, label, done, total, failed, refs)
    for (digest, _size), _, error in parallel(to_hash, lambda item: check(source, *item), jobs):
        if error is None:
            continue
        code = "remote-corrupt" if isinstance(error, IntegrityError) else "remote-unreadable"
        hint = (
            f"; replace it with `evstore push --repair --remote {remote}`"
            if code == "remote-corrupt"
            else ""
        )
        for bundle, path, _size in refs[digest]:
            problem(bundle, path, digest, code, error.diagnostics() + hint)
    out: dict[str, list[Finding]] = {name: [] for name in registrations}
    for (bundle, _path, _digest), finding in sorted(problems.items()):
        out[bundle].append(finding)
    if isinstance(target.store, SupportsArtifacts):
        from . import oci

        for name, registration in registrations.items():
            try:
                found = oci.bundle_problems(
                    repo, target.store, remote, name, registration, deep=deep
                )
            except StorageError as exc:
                raise StorageError(source.labelled(exc)) from exc
            out[name].extend(
                Finding(
                    severity="error",
                    code="remote-bundle-manifest",
                    bundle=name,
                    digest=registration.digest,
                    message=message,
                )
                for message in found
            )
    return out
