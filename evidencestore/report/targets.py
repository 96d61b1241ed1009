"""What ``evstore report TARGET`` names, resolved to stored records, and the page for it.

A TARGET is a record file, a record's digest in the store, a bundle name (the run, the
campaign status or the one comparison record it holds; a registered bundle of campaign
records renders its status with every record beside it, from those records alone),
``BUNDLE:PATH`` (one entry of a bundle), or a campaign's protocol bundle (its status is
evaluated from the runs registered now, with every record it was computed from). Every
registered record kind renders: run, comparison, campaign status, claim, repeatability,
adjudication, void and withdrawal. Records are read from the working tree or the
repository store, always verified against the digest that names them, and the page names
that digest. The record's kind decides the page: ``kind`` or ``metadata.kind``.
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

__all__ = ["Rendered", "ReportError", "render_record_bytes", "render_report"]


@dataclass(frozen=True)
class Rendered:
    """A rendered page, what it shows, and the digest of the record it came from."""

    html: str
    kind: str
    digest: str
    context: dict[str, str] = field(default_factory=dict)


COMPARISON = "evidencestore/media-comparison"
RUN = "run"
STATUS = "campaign-status"
_STATUS_KINDS = (STATUS, "evidencestore/campaign-status", "campaign_status", "status")
_CAMPAIGN_RECORDS = frozenset(
    f"evidencestore/campaign-{k}"
    for k in ("claim", "repeatability", "adjudication", "void", "withdrawal")
)
_COMPARISON_KEYS = frozenset({"verdict", "reasons", "reference", "candidate", "thresholds"})


def _kind(value: Any) -> str | None:
    if not isinstance(value, dict):
        return None
    kind = value.get("kind")
    if isinstance(kind, str):
        return kind
    meta = value.get("metadata")
    if isinstance(meta, dict) and isinstance(meta.get("kind"), str):
        return str(meta["kind"])
    if value.keys() >= _COMPARISON_KEYS:
        return COMPARISON  # its default kind is omitted when encoded
    if value.keys() >= {"verdict", "cells", "remaining"}:
        return STATUS
    if value.keys() >= {"outcome", "requests"}:
        return RUN
    return None


def render_record_bytes(
    data: bytes,
    *,
    source: str,
    root: str | os.PathLike[str] | None,
    context: dict[str, str] | None = None,
    records: list[Any] | None = None,
) -> Rendered:
    """Render a stored record (its exact bytes) by its kind; ``records``: the records
    stored beside a campaign status (shown with it)."""
    from ..digest import hash_bytes

    digest = hash_bytes(data).digest
    from .._canonical import loads_json

    try:
        value = loads_json(data)
    except msgspec.DecodeError as exc:
        raise ReportError(f"{source}: not a JSON record: {exc}") from None
    kind = _kind(value)
    context = dict(context or {})
    if kind == COMPARISON:
        from .._canonical import decode
        from ..media.records import ComparisonRecord
        from .comparison import render_comparison_html

        try:
            record = decode(data, ComparisonRecord)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise ReportError(f"{source}: not a valid comparison record: {exc}") from None
        html = render_comparison_html(record, record_digest=digest, root=root, context=context)
        return Rendered(html, "comparison", digest, context)
    if kind in (RUN, "evidencestore/run"):
        from .run import render_run_html

        html = render_run_html(value, record_digest=digest, context=context)
        return Rendered(html, "run", digest, context)
    if kind in _STATUS_KINDS:
        from .campaign import render_campaign_status_html

        html = render_campaign_status_html(
            value, record_digest=digest, context=context, records=records or ()
        )
        return Rendered(html, "campaign", digest, context)
    if kind in _CAMPAIGN_RECORDS:
        from .campaign import render_campaign_record_html

        html = render_campaign_record_html(value, record_digest=digest, context=context)
        return Rendered(html, str(kind).rsplit("-", 1)[-1], digest, context)
    raise ReportError(
        f"{source}: record kind {kind!r} has no report (expected a comparison record, a run "
        "record, a campaign status, claim, repeatability, adjudication, void or withdrawal "
        "record)"
    )


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


_REPORTED = frozenset({COMPARISON, RUN, "evidencestore/run", *_STATUS_KINDS, *_CAMPAIGN_RECORDS})
_RECORD_MAX = 64 << 20


def _record_kind(root: Repository, bundle: str, entry: Entry) -> str | None:
    """The kind of a JSON record entry, or None (other entries are not read)."""
    d = entry.descriptor
    is_json = d.media_type.endswith(("/json", "+json")) or entry.path.endswith(".json")
    if not is_json or d.size > _RECORD_MAX:
        return None
    try:
        return _kind(msgspec.json.decode(_entry_bytes(root, bundle, entry)))
    except (ReportError, msgspec.DecodeError):
        return None


def _bundle(root: Repository, name: str, path: str | None) -> Rendered:
    from ..inventory import load_registration, registration_path

    reg = load_registration(registration_path(root, name))
    if path is None and reg.manifest.metadata.annotations.get("kind") == "campaign-protocol":
        return render_campaign(root, name)
    context = {f"bundle {name}": reg.digest}
    entries = reg.manifest.entries
    if path is not None:
        chosen = [e for e in entries if e.path == path]
        if not chosen:
            raise ReportError(f"bundle {name!r} has no entry {path!r}")
    else:
        kinds = {e.path: _record_kind(root, name, e) for e in entries}
        chosen = [e for e in entries if kinds[e.path] in _REPORTED]
        runs = [e for e in chosen if e.path == "run.json"]
        statuses = [e for e in chosen if kinds[e.path] in _STATUS_KINDS]
        if not runs and len(statuses) == 1:
            # A bundle of campaign records: the status, with every record beside it.
            entry = statuses[0]
            siblings = [
                msgspec.json.decode(_entry_bytes(root, name, e))
                for e in chosen
                if kinds[e.path] in _CAMPAIGN_RECORDS
            ]
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
    root: str | os.PathLike[str], name: str, *, evaluated: tuple[Any, Any] | None = None
) -> Rendered:
    """Evaluate the campaign registered as bundle ``name`` (its status and every record it
    was computed from, from the runs registered now) and render its page. ``evaluated``
    is a ``(campaign, evaluation)`` pair already computed by the caller."""
    from .._canonical import canonical
    from ..campaign.protocol import load_campaign
    from ..campaign.status import evaluate
    from ..digest import hash_bytes
    from .campaign import render_campaign_status_html

    if evaluated is None:
        campaign = load_campaign(root, name)
        evaluation = evaluate(root, campaign)
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
        evaluation.status, record_digest=digest, context=context, name=name, records=records
    )
    return Rendered(html, "campaign", digest, context)


def _repo_entry(root: Repository, digest: str) -> tuple[str, str] | None:
    """(bundle, path) of a registered entry kept in git with content ``digest``: records
    registered as repo entries are addressed by digest too."""
    from ..inventory import load_inventory

    for name, reg in sorted(load_inventory(root).registrations.items()):
        for e in reg.manifest.entries:
            if e.location == "repo" and e.descriptor.digest == digest:
                return name, e.path
    return None


def render_report(root: str | os.PathLike[str] | None, target: str) -> Rendered:
    """Resolve ``target`` (see the module docstring) and render its page."""
    from ..config import as_repository
    from ..digest import is_digest
    from ..inventory import registration_path

    path = Path(target)
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
        return _bundle(base, name, entry or None)
    raise ReportError(
        f"{target}: not a record file, a digest in the store, or a registered bundle in {base}"
    )
