"""What every importer of a harness's results shares (``aiperf.py``, ``loadgen.py``).

An imported run is a run bundle like a native one: every file of the harness's output
directory is sealed byte for byte as a ``harness/<path>`` entry, and ``run.json`` is
mapped from the harness's own records, with a :class:`~.models.Harness` section naming
the harness, its version and command, its metric definitions and what it did not record.
The files' digests (path and digest of each, canonical) are the run's
``source_digest``: the same directory imports once. Importing it again under the same
name is a no-op (reported as already registered); under another name it is refused.

Concurrent imports (:func:`import_lock`): the "already imported?" check and the
registration that follows it run under one exclusive ``flock`` on the repository's
``evidence/`` directory, taken by every importer. Why no interleaving registers one
folder twice: a second importer cannot check until the first has released the lock,
which it does only after its registration was renamed into place whole (or it failed,
leaving nothing); so the second one's check sees the first one's registration. The
kernel drops the lock when a process dies, however it dies, so none is left stale.
Where ``flock`` is unavailable (Windows) the check is not serialised.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict, Unpack

from .._canonical import canonical, loads_json
from .._keywords import check_keywords
from ..bundle import check_bundle_name
from ..confined import check_file, read_file
from ..digest import hash_bytes
from ..errors import BundleError, ConfigError, ManifestError, ResultsPredateProtocol
from ..inventory import EVIDENCE_DIR, REGISTRATION_NAME, load_registration, registration_path
from ..models import Descriptor
from ..progress import Observer, Tick
from .fit import CampaignRules, check_signer
from .judge import Expected, Slot, judge
from .models import RequestRecord
from .recorder import RunRecorder
from .transport import Observation

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from ..config import Repository

__all__ = [
    "MAX_HARNESS_FILE",
    "HarnessDir",
    "ImportOptions",
    "ImportResult",
    "ResultsPredateProtocol",
    "already_imported",
    "harness_dir",
    "import_lock",
    "json_objects",
    "judge_kept",
    "open_import",
]

#: The largest single file of a harness directory sealed (accuracy logs can be large).
MAX_HARNESS_FILE = 64 << 30
#: The largest file parsed into memory (a record export, a detail log).
MAX_PARSED_FILE = 1 << 30


class ImportOptions(TypedDict, total=False):
    """The options every importer takes, as keywords (see :func:`open_import`, which
    applies them): ``arm`` (default ``"imported"``), ``campaign`` (its rules,
    ``evidencestore.campaign.fit.campaign_rules``), ``condition``, ``configs`` (the
    arm's configuration files), ``signing_key`` (signs the record as ``run --sign``
    does) and ``observer`` (``evidencestore.progress``: hears of each file read)."""

    arm: str
    campaign: CampaignRules | None
    condition: str | None
    configs: Sequence[str | os.PathLike[str]]
    signing_key: Ed25519PrivateKey | None
    observer: Observer | None


@dataclass(frozen=True)
class HarnessDir:
    """A harness output directory: its files (entry path -> real path), each checked
    under the file-reading rule (inside the directory, regular, bounded)."""

    directory: Path
    files: dict[str, str]
    harness: str

    def has(self, rel: str) -> bool:
        """Whether the directory holds file ``rel``."""
        return rel in self.files

    def read(self, rel: str, what: str) -> bytes:
        """The bytes of file ``rel``, which must exist (a clear error naming it if not)."""
        if rel not in self.files:
            raise ConfigError(
                f"{self.directory}: not {what}: no {rel} (found: "
                f"{', '.join(sorted(self.files)) or 'no files'})"
            )
        return read_file(
            self.files[rel],
            (self.directory,),
            limit=MAX_PARSED_FILE,
            where=f"{self.harness} {self.directory / rel}",
        )


def harness_dir(directory: str | os.PathLike[str], harness: str) -> HarnessDir:
    """Every regular file under ``directory`` (recursively, sorted), each under the
    file-reading rule; a directory that is missing or empty is a :class:`ConfigError`."""
    base = Path(directory)
    if not base.is_dir():
        raise ConfigError(f"import {harness} {base}: not a directory")
    files: dict[str, str] = {}
    for path in sorted(base.rglob("*")):
        if path.is_dir() and not path.is_symlink():
            continue
        rel = path.relative_to(base).as_posix()
        files[rel] = check_file(
            path, (base,), limit=MAX_HARNESS_FILE, where=f"import {harness} {base / rel}"
        )
    if not files:
        raise ConfigError(f"import {harness} {base}: the directory holds no files")
    return HarnessDir(base, files, harness)


def json_objects(
    lines: Iterable[bytes | str], where: object, what: str = "JSON"
) -> list[tuple[int, dict[str, Any]]]:
    """Every line of a JSON-lines file that is not blank, as a JSON object with its line
    number; a line that is not ``what`` (JSON), or not an object, is a
    :class:`ConfigError` naming ``where`` and the line."""
    out = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            obj = loads_json(line)
        except ValueError as exc:
            raise ConfigError(f"{where}: line {number}: not {what}: {exc}") from None
        if not isinstance(obj, dict):
            raise ConfigError(f"{where}: line {number}: expected a JSON object")
        out.append((number, obj))
    return out


def judge_kept(
    recorder: RunRecorder,
    observation: Observation,
    body: Descriptor | None,
    slot: Slot,
    payload: Descriptor,
) -> RequestRecord:
    """The judge's record of an output the harness kept whole (its text or decoded data,
    not a stream or media: nothing to read back, nothing expected of it)."""
    return judge(
        None, observation, body, Expected(), store=recorder.store, slot=slot, payload=payload
    )


@dataclass(frozen=True)
class ImportResult:
    """An import's outcome: the bundle name and digest, and whether it was already
    registered from the same files (then nothing was written)."""

    name: str
    digest: str
    already: bool
    outcome: str


def already_imported(
    repo: Repository, name: str, source_digest: str, execution: str | None = None
) -> ImportResult | None:
    """The registered run imported from the same files, if any: under ``name`` it is
    the same import (a no-op); under another name, or ``name`` taken by other content,
    a :class:`BundleError`. A run imported from the same harness ``execution`` (other
    side files) is refused under any name: one execution counts once."""
    check_bundle_name(name)
    mine = registration_path(repo.root, name)
    if mine.exists():
        reg = load_registration(mine)
        annotations = reg.manifest.metadata.annotations
        if annotations.get("harness-source") == source_digest:
            return ImportResult(name, reg.digest, True, annotations.get("outcome", ""))
        raise BundleError(
            f"bundle {name!r} is already registered at {mine} with other content; "
            "choose another {name}",
            parameters=("name",),
        )
    evidence = repo.root / EVIDENCE_DIR
    for reg_path in sorted(evidence.glob(f"*/{REGISTRATION_NAME}")):
        try:
            reg = load_registration(reg_path)
        except ManifestError:
            continue  # verify reports it; it cannot be this import
        annotations = reg.manifest.metadata.annotations
        if annotations.get("harness-source") == source_digest:
            raise BundleError(
                f"these files were already imported as bundle {reg.manifest.name!r} "
                f"({reg.digest}); a run counts once"
            )
        if execution is not None and annotations.get("harness-execution") == execution:
            raise BundleError(
                f"this {annotations.get('harness', 'harness')} execution was already imported "
                f"as bundle {reg.manifest.name!r} ({reg.digest}) from files that differ only "
                f"beside it (execution {execution}); a run counts once"
            )
    return None


@contextlib.contextmanager
def import_lock(repo: Repository) -> Iterator[None]:
    """Hold the repository's import lock (see the module): an exclusive ``flock`` on
    ``evidence/``, blocking until it is free."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        yield
        return
    evidence = repo.root / EVIDENCE_DIR
    evidence.mkdir(parents=True, exist_ok=True)
    fd = os.open(evidence, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing drops the lock


def source_digest(descriptors: dict[str, Descriptor], part: str | None = None) -> str:
    """The digest of the imported files: canonical ``{path: digest}`` (with ``part``,
    the part of them one run was read from: one of several results in one file)."""
    files = {p: d.digest for p, d in sorted(descriptors.items())}
    return hash_bytes(canonical(files if part is None else {"files": files, "part": part})).digest


def open_import(
    repo: Repository,
    name: str,
    source: HarnessDir,
    *,
    workload: str | None,
    workload_bytes: bytes | None = None,
    execution: str | None = None,
    started: str | None = None,
    part: str | None = None,
    **options: Unpack[ImportOptions],
) -> tuple[RunRecorder, str] | ImportResult:
    """Store every file of ``source`` and open a run recorder whose workload is the
    harness file ``workload`` (or ``workload_bytes`` when the harness keeps none), every
    file an entry ``harness/<path>``; return the recorder and the files' source digest,
    or the :class:`ImportResult` of the same files registered as ``name`` already. A run
    for ``campaign`` (its rules, ``evidencestore.campaign.fit.campaign_rules``) must fit
    it: condition, arm, harness and workload digest, checked before anything is
    registered. ``execution`` identifies the harness's execution (``Harness.execution``):
    one already imported under another name is refused. ``configs``: the arm's
    configuration files (``configs/<name>``, checked against those the arm declares);
    ``signing_key`` signs the record (``run.dsse.json``) as ``run --sign`` does, and must
    be one the campaign allows when its protocol pins keys (``fit.check_signer``);
    ``part``: which part of the files this run is (several runs in one file);
    ``started`` (UTC): when the results were made, refused with
    :class:`ResultsPredateProtocol` for a campaign whose protocol is younger and not
    retrospective. The harness files go to ``repo``'s store and the run is registered in
    ``repo``: one repository, resolved once by the importer's entry point. ``observer``
    (``evidencestore.progress``) hears of each file read and stored."""
    check_keywords("open_import", options, ImportOptions)
    arm = options.get("arm", "imported")
    campaign = options.get("campaign")
    condition = options.get("condition")
    observer = options.get("observer")
    if campaign is not None:  # a run its campaign would not count is not even read
        check_signer(campaign, repo.root, options.get("signing_key"))
    store = repo.local_store()
    descriptors: dict[str, Descriptor] = {}
    label = f"import {source.harness} {name}"
    for k, (rel, real) in enumerate(source.files.items(), 1):
        try:
            descriptors[rel] = store.put_file(real, _media_type(rel))
        except OSError as exc:
            raise ConfigError(
                f"import {source.harness} {source.directory / rel}: cannot read: {exc.strerror}"
            ) from exc
        if observer is not None:
            observer(Tick(label, k, len(source.files), "files", what=rel))
    digest = source_digest(descriptors, part)
    done = already_imported(repo, name, digest, execution)
    if done is not None:
        return done
    if workload is not None:
        wl = descriptors[workload]
    else:
        data = workload_bytes or b""
        wl = store.put(data, "application/json")
    config_descs: list[tuple[str, Descriptor]] = []
    for given in options.get("configs", ()):
        path = Path(given)
        if not path.is_file():
            raise ConfigError(f"{{configs}} {path}: no such file", parameters=("configs",))
        try:
            config_descs.append((path.name, store.put_file(path, "text/plain")))
        except OSError as exc:
            raise ConfigError(
                f"{{configs}} {path}: cannot read: {exc.strerror}", parameters=("configs",)
            ) from exc
    if len({n for n, _ in config_descs}) != len(config_descs):
        raise ConfigError(
            "{configs}: two configuration files share a name", parameters=("configs",)
        )
    if campaign is not None:
        campaign.check_run(
            arm=arm,
            condition=condition,
            workload_digest=wl.digest,
            config_digests=tuple(d.digest for _, d in config_descs),
            workload_source=str(source.directory / workload) if workload else "its settings",
            harness=source.harness,
        )
        problem = campaign.results_problem(repo.root, started) if started is not None else None
        if problem is not None:
            raise ResultsPredateProtocol(problem, parameters=("campaign",))
    recorder = RunRecorder(
        repo,
        name,
        arm=arm,
        workload=wl,
        store=store,
        campaign=campaign.name if campaign is not None else None,
        protocol_digest=campaign.digest if campaign is not None else None,
        condition=condition,
        signing_key=options.get("signing_key"),
    )
    for rel, desc in descriptors.items():
        recorder.add_entry(f"harness/{rel}", desc, "harness")
    for config_name, desc in config_descs:
        recorder.add_entry(f"configs/{config_name}", desc, "config")
        recorder.configs[f"configs/{config_name}"] = desc
    if workload is None:
        recorder.add_entry("workload/settings.json", wl, "workload")
    return recorder, digest


def _media_type(rel: str) -> str:
    if rel.endswith(".jsonl"):
        return "application/jsonl"
    if rel.endswith(".json"):
        return "application/json"
    if rel.endswith(".csv"):
        return "text/csv"
    return "text/plain"
