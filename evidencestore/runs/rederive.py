"""Re-derive imported runs from their sealed harness files (``import-mismatch``).

An imported run's ``run.json`` is a function of the harness files sealed beside it
(``harness/<path>``): :func:`rederive` writes those files, read and verified from the
store, into a scratch directory, imports them again into a scratch repository with the
same importer, and compares the two records. Everything the harness files decide must
be equal: every request (times, metrics, failures, payload, output and completion
digests), the counts, the outcome and its reason, the workload, the harness section;
only what the importer was told rather than read is left out (the bundle name, arm,
campaign, protocol digest, condition, the configuration files and the importing
client). So a ``run.json`` edited and re-sealed before its first commit (which the
registration's digests alone cannot catch) is reported by ``evstore verify`` and
``campaign verify`` as ``import-mismatch``, naming the first field that differs.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from ..errors import EvidenceStoreError
from ..models import Finding, Registration
from ..storage import BlobStore
from .models import RunRecord

if TYPE_CHECKING:
    from ..config import Repository

__all__ = ["IMPORT_MISMATCH", "import_mismatch", "import_mismatches", "rederive"]

IMPORT_MISMATCH = "import-mismatch"
HARNESS_PREFIX = "harness/"
#: What an importer is told, not what it reads from the harness files.
_GIVEN = ("name", "arm", "campaign", "protocol_digest", "condition", "client", "configs")


def _first_difference(a: Any, b: Any, path: str = "") -> str | None:
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b)):
            found = _first_difference(a.get(key), b.get(key), f"{path}.{key}" if path else key)
            if found is not None:
                return found
        return None
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        if len(a) != len(b):
            return f"{path} ({len(a)} entries, re-derived {len(b)})"
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            found = _first_difference(x, y, f"{path}[{i}]")
            if found is not None:
                return found
        return None
    return None if a == b else f"{path} ({a!r}, re-derived {b!r})"


def _comparable(record: RunRecord) -> dict[str, Any]:
    data = msgspec.to_builtins(record)
    for key in _GIVEN:
        data.pop(key, None)
    return data  # type: ignore[no-any-return]


def rederive(registration: Registration, record: RunRecord, store: BlobStore) -> str | None:
    """The first difference between ``record`` and the record its sealed harness files
    give when imported again, or None when they agree (see the module)."""
    from ..config import Repository
    from .importers import importer_for

    harness = record.harness
    if harness is None:
        return None
    importer = importer_for(harness.name)  # an unknown harness is an error, never misrouted
    sealed = [e for e in registration.manifest.entries if e.path.startswith(HARNESS_PREFIX)]
    with tempfile.TemporaryDirectory(prefix="evstore-rederive-") as tmp:
        source = Path(tmp) / "harness"
        for entry in sealed:
            target = source / entry.path[len(HARNESS_PREFIX) :]
            target.parent.mkdir(parents=True, exist_ok=True)
            with (
                store.open(entry.descriptor.digest, entry.descriptor.size) as fh,
                open(target, "wb") as out,
            ):
                shutil.copyfileobj(fh, out, 1 << 20)
        scratch = Path(tmp) / "repo"
        (scratch / "evidence").mkdir(parents=True)
        given = source
        if importer.source == "file":
            files = [p for p in source.iterdir() if p.is_file()]
            if len(files) != 1:
                return f"harness files ({len(files)} sealed, {harness.name} imports one file)"
            given = files[0]
        results = importer.run(Repository(scratch), given, "rederived")
        from .recorder import load_run

        for result in results:
            again = load_run(Repository(scratch), result.name)
            if again.harness is not None and again.harness.source_digest == harness.source_digest:
                return _first_difference(_comparable(record), _comparable(again))
        return "harness.source_digest (no part of the sealed files imports as this run)"


def import_mismatch(
    registration: Registration, record: RunRecord, store: BlobStore
) -> Finding | None:
    """An ``import-mismatch`` finding for an imported run whose record is not what its
    sealed harness files give, or whose files cannot be imported again; else None."""
    name = registration.manifest.name
    try:
        diff = rederive(registration, record, store)
    except EvidenceStoreError as exc:
        diff = f"its sealed harness files do not import again: {exc}"
    if diff is None:
        return None
    return Finding(
        severity="error",
        code=IMPORT_MISMATCH,
        message=f"run {name!r} was imported from {record.harness.name if record.harness else '?'}"
        f" files, but its run.json is not what they give: first difference at {diff}",
        bundle=name,
        path="run.json",
    )


def import_mismatches(
    repo: Repository,
    store: BlobStore,
    bundles: list[str] | None = None,
    skip: set[str] | frozenset[str] = frozenset(),
) -> list[Finding]:
    """An ``import-mismatch`` finding for every imported run of ``repo`` (resolved by
    the entry point: nothing here walks up to another repository), or of ``bundles``,
    whose record its sealed harness files do not give; bundles in ``skip``
    (already found broken) are left to their findings, and so are those whose sealed
    files are not all in ``store`` (verify reports them unavailable, an error with
    ``--require-available``)."""
    from ..inventory import EVIDENCE_DIR, REGISTRATION_NAME, load_registration
    from .recorder import load_run

    out = []
    for reg_path in sorted((repo.root / EVIDENCE_DIR).glob(f"*/{REGISTRATION_NAME}")):
        name = reg_path.parent.name
        if (bundles is not None and name not in bundles) or name in skip:
            continue
        try:
            reg = load_registration(reg_path)
        except EvidenceStoreError:
            continue  # verify reports it
        notes = reg.manifest.metadata.annotations
        if notes.get("kind") != "run" or "harness" not in notes:
            continue
        sealed = [e for e in reg.manifest.entries if e.path.startswith(HARNESS_PREFIX)]
        if not all(store.has(e.descriptor.digest) for e in sealed):
            continue  # not re-derivable here: verify reports them unavailable (`evstore pull`)
        try:
            record = load_run(repo, name)
        except EvidenceStoreError:
            continue  # verify reports an altered or invalid run.json
        found = import_mismatch(reg, record, store)
        if found is not None:
            out.append(found)
    return out
