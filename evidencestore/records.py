"""The one registry of record kinds: kind -> struct, media type, schema; one decoder.

Every record evidencestore stores as JSON (a run, a media check, a comparison, the
campaign's repeatability, adjudication, claim, status, void and withdrawal records) is a msgspec struct tagged
``kind`` (``tag_field``), so one tagged-union decoder turns a record's bytes into its
type, and reports and attestations dispatch on that type instead of sniffing keys.

Stored records are never rewritten, so one legacy branch reads what earlier versions
wrote without a tag: media check reports and comparison records omitted their default
``kind``. An untagged object is read as a comparison record when it has ``reference``
and ``candidate``, as a check report when it has ``checks`` and ``report``; nothing else
is guessed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeAlias

import msgspec

from .campaign.models import (
    Adjudication,
    Claim,
    Repeatability,
    RunVoid,
    StatusRecord,
    Withdrawal,
)
from .errors import ManifestError, UnknownRecordKind
from .media.records import CheckReport, ComparisonRecord
from .models import Model
from .runs.models import RunRecord

__all__ = [
    "KINDS",
    "Record",
    "RecordKind",
    "UnknownRecordKind",
    "decode_record",
    "kind_of",
    "legacy_tag_schema",
    "record_kind",
    "schema_tags",
]

Record: TypeAlias = (
    RunRecord
    | CheckReport
    | ComparisonRecord
    | Repeatability
    | Adjudication
    | Claim
    | StatusRecord
    | RunVoid
    | Withdrawal
)


@dataclass(frozen=True)
class RecordKind:
    """One kind of record: its tag (the ``kind`` field), a short label, its struct, the
    media type it is stored under, and the stem of its schema in ``schemas/``."""

    tag: str
    label: str
    type: type[Model]
    media_type: str
    schema: str


def _tag(type_: type[Model]) -> str:
    tag = type_.__struct_config__.tag
    assert isinstance(tag, str), type_
    return tag


def _kind(type_: type[Model], label: str, schema: str) -> RecordKind:
    return RecordKind(
        tag=_tag(type_),
        label=label,
        type=type_,
        media_type=f"application/vnd.evidencestore.{label}+json",
        schema=schema,
    )


KINDS: tuple[RecordKind, ...] = (
    _kind(RunRecord, "run", "run-record"),
    _kind(CheckReport, "media-check", "media-check"),
    _kind(ComparisonRecord, "media-comparison", "comparison-record"),
    _kind(Repeatability, "campaign-repeatability", "campaign-repeatability"),
    _kind(Adjudication, "campaign-adjudication", "campaign-adjudication"),
    _kind(Claim, "campaign-claim", "campaign-claim"),
    _kind(StatusRecord, "campaign-status", "campaign-status"),
    _kind(RunVoid, "campaign-void", "campaign-void"),
    _kind(Withdrawal, "campaign-withdrawal", "campaign-withdrawal"),
)
_BY_TYPE = {k.type: k for k in KINDS}


def kind_of(record: Record | type[Record]) -> RecordKind:
    """The kind of a record (or record type)."""
    return _BY_TYPE[record if isinstance(record, type) else type(record)]


def _legacy_type(value: object) -> type[Model] | None:
    """The one legacy branch: the type of a record written without its tag."""
    if not isinstance(value, dict) or "kind" in value:
        return None
    if value.keys() >= {"reference", "candidate"}:
        return ComparisonRecord
    if value.keys() >= {"checks", "report"}:
        return CheckReport
    return None


def decode_record(data: bytes, source: str) -> Record:
    """Decode a stored record of any kind, strictly (unknown fields, duplicate keys and
    nesting bombs refused), by its tag or, untagged, by the legacy branch. Raises
    :class:`ManifestError` naming ``source`` (:class:`UnknownRecordKind` for a ``kind``
    no record has)."""
    from ._canonical import decode, loads_json

    try:
        return decode(data, Record)  # type: ignore[arg-type]
    except msgspec.ValidationError as exc:  # a DecodeError too: caught first
        first = exc
    except msgspec.DecodeError as exc:
        raise ManifestError(f"{source}: not a JSON record: {exc}") from None
    try:
        value = loads_json(data)
    except msgspec.DecodeError as exc:
        raise ManifestError(f"{source}: not a JSON record: {exc}") from None
    kind = value.get("kind") if isinstance(value, dict) else None
    if kind is not None and not any(k.tag == kind for k in KINDS):
        raise UnknownRecordKind(
            f"{source}: record kind {kind!r} is not one evidencestore knows "
            f"({', '.join(k.tag for k in KINDS)})",
            kind,
        )
    tagged = next((k for k in KINDS if k.tag == kind), None)
    if tagged is not None:
        raise ManifestError(f"{source}: not a valid {tagged.label} record: {first}") from None
    legacy = _legacy_type(value)
    if legacy is None:
        raise ManifestError(f"{source}: not a record evidencestore knows: {first}") from None
    try:
        result: Record = decode(data, legacy)  # type: ignore[assignment]
    except msgspec.ValidationError as exc:
        label = _BY_TYPE[legacy].label
        raise ManifestError(f"{source}: not a valid {label} record: {exc}") from None
    return result


def record_kind(data: bytes) -> RecordKind | None:
    """The kind of a stored record, or None when the bytes are not a valid record."""
    try:
        return kind_of(decode_record(data, "record"))
    except ManifestError:
        return None


def schema_tags() -> dict[str, str]:
    """Struct names mapped to their tag, for the schema generator: a record written
    without its tag is read as the default kind (the legacy branch), so the schemas
    give ``kind`` as optional with that default."""
    return {k.type.__name__: k.tag for k in KINDS}


def legacy_tag_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` with each tagged record's ``kind`` optional, defaulting to its tag."""
    tags = schema_tags()
    for name, definition in schema.get("$defs", {}).items():
        tag = tags.get(name)
        if tag is None:
            continue
        definition["properties"]["kind"]["default"] = tag
        required = [f for f in definition.get("required", []) if f != "kind"]
        if required:
            definition["required"] = required
        else:
            definition.pop("required", None)
    return schema
