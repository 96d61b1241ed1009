"""What ``evstore report TARGET`` names, resolved to stored records, and the page for it.

A TARGET is a record file, a record's digest (in the store, or of an entry kept in git),
a bundle name (the run, the campaign status or the one comparison record it holds; a
registered bundle of campaign records renders its status with every record beside it,
from those records alone), ``BUNDLE:PATH`` (one entry of a bundle), or a campaign's
protocol bundle (its status is evaluated from the runs registered now, with every record
it was computed from). Every registered record kind renders: run, comparison, campaign
status, claim, repeatability, adjudication, void and withdrawal. Records are read from
the working tree or the repository store, always verified against the digest that names
them, and the page names that digest. The record's decoded type
(``evidencestore.records``: one tagged union, untagged comparison records of earlier
versions included) decides the page.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from ..errors import EvidenceStoreError, ReportError
from ..models import Entry

if TYPE_CHECKING:
    from ..config import Repository
    from ..records import Record

__all__ = ["Rendered", "ReportError", "render_record_bytes", "render_report"]


@dataclass(frozen=True)
class Rendered:
    """A rendered page, what it shows, and the digest of the record it came from."""

    html: str
    kind: str
    digest: str
    context: dict[str, str] = field(default_factory=dict)


def _decode(data: bytes, source: str) -> Record:
    """The record's decoded type (``evidencestore.records``), as a report error."""
    from ..records import UnknownRecordKind, decode_record

    try:
        return decode_record(data, source)
    except UnknownRecordKind as exc:
        raise ReportError(
            f"{source}: record kind {exc.kind!r} has no report (expected a comparison record, "
            "a run record or a campaign record)"
        ) from None
    except EvidenceStoreError as exc:
        raise ReportError(str(exc)) from None


def render_record_bytes(
    data: bytes,
    *,
    source: str,
    root: str | os.PathLike[str] | None,
    context: dict[str, str] | None = None,
    records: list[Any] | None = None,
) -> Rendered:
    """Render a stored record (its exact bytes) by its decoded type; ``records``: the
    records stored beside a campaign status (shown with it)."""
    from ..campaign.models import StatusRecord
    from ..digest import hash_bytes
    from ..media.records import ComparisonRecord
    from ..records import kind_of
    from ..runs.models import RunRecord

    digest = hash_bytes(data).digest
    record = _decode(data, source)
    context = dict(context or {})
    if isinstance(record, ComparisonRecord):
        from .comparison import render_comparison_html

        html = render_comparison_html(record, record_digest=digest, root=root, context=context)
        return Rendered(html, "comparison", digest, context)
    if isinstance(record, RunRecord):
        from .run import render_run_html

        html = render_run_html(msgspec.to_builtins(record), record_digest=digest, context=context)
        return Rendered(html, "run", digest, context)
    if isinstance(record, StatusRecord):
        from .campaign import render_campaign_status_html

        html = render_campaign_status_html(
            record, record_digest=digest, context=context, records=records or ()
        )
        return Rendered(html, "campaign", digest, context)
    if isinstance(record, _campaign_records()):
        from .campaign import render_campaign_record_html

        html = render_campaign_record_html(record, record_digest=digest, context=context)
        return Rendered(html, kind_of(record).label.removeprefix("campaign-"), digest, context)
    raise ReportError(
        f"{source}: record kind {kind_of(record).tag!r} has no report (expected a comparison "
        "record, a run record or a campaign status)"
    )


def _campaign_records() -> tuple[type, ...]:
    """The campaign record types with a page of their own (the status has its own)."""
    from ..campaign.models import Adjudication, Claim, Repeatability, RunVoid, Withdrawal

    return (Claim, Repeatability, Adjudication, RunVoid, Withdrawal)


def _entry_bytes(root: Repository, bundle: str, entry: Entry) -> bytes:
    from ..digest import hash_bytes
    from ..inventory import EVIDENCE_DIR

    if entry.location == "repo":
        path = root / EVIDENCE_DIR / bundle / entry.path
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise ReportError(f"{path}: cannot read: {exc.strerror}") from exc
        if hash_bytes(data).digest != entry.descriptor.digest:
            raise ReportError(
                f"{path}: content does not match {entry.descriptor.digest} named by bundle "
                f"{bundle!r}; run `evstore verify`"
            )
        return data
    from ..remotes import repository_store

    try:
        data = repository_store(root).get(entry.descriptor.digest, entry.descriptor.size)
    except EvidenceStoreError as exc:
        raise ReportError(
            f"bundle {bundle!r} entry {entry.path!r} ({entry.descriptor.digest}): {exc}"
        ) from exc
    return data


_RECORD_MAX = 64 << 20


def _reported(root: Repository, bundle: str, entry: Entry) -> Any:
    """The record a JSON entry holds when it has a report, else None (other entries are
    not read)."""
    from ..campaign.models import StatusRecord
    from ..media.records import ComparisonRecord
    from ..records import decode_record
    from ..runs.models import RunRecord

    d = entry.descriptor
    is_json = d.media_type.endswith(("/json", "+json")) or entry.path.endswith(".json")
    if not is_json or d.size > _RECORD_MAX:
        return None
    try:
        record = decode_record(_entry_bytes(root, bundle, entry), entry.path)
    except EvidenceStoreError:
        return None
    reported = (ComparisonRecord, RunRecord, StatusRecord, *_campaign_records())
    return record if isinstance(record, reported) else None


def _bundle(
    root: Repository, name: str, path: str | None, *, base_rev: str | None = None
) -> Rendered:
    from ..inventory import load_registration, registration_path

    reg = load_registration(registration_path(root, name))
    if path is None and reg.manifest.metadata.annotations.get("kind") == "campaign-protocol":
        return render_campaign(root, name, base_rev=base_rev)
    if base_rev is not None:
        raise ReportError(
            f"{name}: {{base_rev}} applies to a campaign's report only", parameters=("base_rev",)
        )
    context = {f"bundle {name}": reg.digest}
    entries = reg.manifest.entries
    if path is not None:
        chosen = [e for e in entries if e.path == path]
        if not chosen:
            raise ReportError(f"bundle {name!r} has no entry {path!r}")
    else:
        from ..campaign.models import StatusRecord

        found = {e.path: _reported(root, name, e) for e in entries}
        chosen = [e for e in entries if found[e.path] is not None]
        runs = [e for e in chosen if e.path == "run.json"]
        statuses = [e for e in chosen if isinstance(found[e.path], StatusRecord)]
        if not runs and len(statuses) == 1:
            # A bundle of campaign records: the status, with every record beside it.
            entry = statuses[0]
            siblings = [r for r in found.values() if isinstance(r, _campaign_records())]
            context[f"entry {name}:{entry.path}"] = entry.descriptor.digest
            data = _entry_bytes(root, name, entry)
            return render_record_bytes(
                data, source=f"{name}:{entry.path}", root=root, context=context,
                records=siblings,
            )  # fmt: skip
        chosen = runs or chosen
        if len(chosen) > 1:
            listed = ", ".join(f"{name}:{e.path}" for e in chosen)
            raise ReportError(f"bundle {name!r} holds {len(chosen)} records: name one ({listed})")
        if not chosen:
            raise ReportError(
                f"bundle {name!r} holds no run record, comparison record or campaign record"
            )
    entry = chosen[0]
    context[f"entry {name}:{entry.path}"] = entry.descriptor.digest
    data = _entry_bytes(root, name, entry)
    return render_record_bytes(data, source=f"{name}:{entry.path}", root=root, context=context)


def render_campaign(
    repo: Repository,
    name: str,
    *,
    evaluated: tuple[Any, Any] | None = None,
    base_rev: str | None = None,
) -> Rendered:
    """Evaluate the campaign registered as bundle ``name`` (its status and every record it
    was computed from, from the runs registered now; its history anchored at the protected
    branch ``base_rev`` when given, as ``campaign status --base``) and render its page,
    the protocol's claim at the top. ``evaluated`` is a ``(campaign, evaluation)`` pair
    already computed by the caller."""
    from .._canonical import canonical
    from ..campaign.protocol import load_campaign
    from ..campaign.status import evaluate
    from ..digest import hash_bytes
    from .campaign import render_campaign_status_html

    if evaluated is None:
        campaign = load_campaign(repo, name)
        evaluation = evaluate(repo, campaign, base_rev=base_rev)
    else:
        campaign, evaluation = evaluated
    records = [
        *evaluation.repeatability.values(),
        *evaluation.adjudications.values(),
        *evaluation.claims.values(),
    ]
    context = {
        f"bundle {name}": campaign.registration.digest,
        f"protocol {name}:protocol.toml": campaign.digest,
    }
    digest = hash_bytes(canonical(evaluation.status)).digest
    html = render_campaign_status_html(
        evaluation.status,
        record_digest=digest,
        context=context,
        name=name,
        records=records,
        protocol=protocol_summary(campaign),
    )
    return Rendered(html, "campaign", digest, context)


def protocol_summary(campaign: Any) -> dict[str, Any]:
    """What a campaign claims, from its registered protocol: the description, conditions
    with their workloads, arms, metric, threshold and accept rule (the top of its page)."""
    p = campaign.protocol
    t = p.timing
    return {
        "description": p.description,
        "digest": campaign.digest,
        "conditions": [
            (
                c.name,
                c.workload,
                campaign.files[c.workload].digest if c.workload in campaign.files else None,
                c.harness,
            )
            for c in p.condition
        ],
        "arms": [(a.name, "baseline" if a.baseline else "candidate", a.runs) for a in p.arm],
        "metric": t.metric,
        "claim": t.claim,
        "min_speedup": t.min_speedup,
        "confidence": t.confidence,
        "estimator": t.estimator,
        "min_runs": t.min_runs,
        "order": t.order,
        "accept": p.accept,
        "non_repeatable_baseline": p.quality.non_repeatable_baseline,
    }


def _repo_entry(root: Repository, digest: str) -> tuple[str, str] | None:
    """(bundle, path) of a registered entry kept in git with content ``digest``: records
    registered as repo entries are addressed by digest too."""
    from ..inventory import load_inventory

    for name, reg in sorted(load_inventory(root).registrations.items()):
        for e in reg.manifest.entries:
            if e.location == "repo" and e.descriptor.digest == digest:
                return name, e.path
    return None


def render_report(
    root: str | os.PathLike[str] | None, target: str, *, base_rev: str | None = None
) -> Rendered:
    """Resolve ``target`` (see the module docstring) and render its page; a campaign's
    history is anchored at ``base_rev`` when given (``evstore report CAMPAIGN --base``)."""
    from ..config import as_repository
    from ..digest import is_digest
    from ..inventory import registration_path

    path = Path(target)
    if base_rev is not None and (path.is_file() or is_digest(target)):
        raise ReportError(
            f"{target}: {{base_rev}} applies to a campaign's report only", parameters=("base_rev",)
        )
    if path.is_file():
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise ReportError(f"{target}: cannot read: {exc.strerror}") from exc
        base: Repository | None = None
        # A record outside any repository renders too; its media are then unavailable.
        with contextlib.suppress(EvidenceStoreError):
            base = as_repository(root if root is not None else path.parent)
        return render_record_bytes(data, source=target, root=base)
    base = as_repository(root)
    if is_digest(target):
        from ..remotes import repository_store

        try:
            data = repository_store(base).get(target)
        except EvidenceStoreError as exc:
            found = _repo_entry(base, target)
            if found is None:
                raise ReportError(f"{target}: cannot read from the store: {exc}") from exc
            return _bundle(base, found[0], found[1])
        return render_record_bytes(data, source=target, root=base)
    name, _, entry = target.partition(":")
    if registration_path(base, name).is_file():
        return _bundle(base, name, entry or None, base_rev=base_rev)
    raise ReportError(
        f"{target}: not a record file, a digest in the store, or a registered bundle in {base}"
    )
