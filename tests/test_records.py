"""Record kinds have one owner (evidencestore.records): one tagged union, one legacy branch.

The fixtures in tests/data/legacy_records/ are the exact bytes main at 3d0e3f5 stored
(written by generate.py there, from that commit's code): comparison records and check
reports without their ``kind`` (omitted as a default), run and campaign records with it.
"""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pytest
from helpers import paths

from evidencestore._canonical import canonical, pretty
from evidencestore.campaign.models import Adjudication, Claim, Repeatability, StatusRecord
from evidencestore.errors import ManifestError
from evidencestore.media.records import CheckReport, ComparisonRecord
from evidencestore.records import KINDS, UnknownRecordKind, decode_record, kind_of, record_kind
from evidencestore.runs.models import RunRecord

LEGACY = paths.DATA / "legacy_records"
EXPECTED = {
    "run.json": (RunRecord, "evidencestore/run", True),
    "check.json": (CheckReport, "evidencestore/media-check", False),
    "comparison.json": (ComparisonRecord, "evidencestore/media-comparison", False),
    "repeatability.json": (Repeatability, "evidencestore/campaign-repeatability", True),
    "adjudication.json": (Adjudication, "evidencestore/campaign-adjudication", True),
    "claim.json": (Claim, "evidencestore/campaign-claim", True),
    "status.json": (StatusRecord, "evidencestore/campaign-status", True),
}


def _keeps(new: object, old: object) -> bool:
    """Whether ``new`` holds every key and value of ``old``, at every depth."""
    if isinstance(old, dict):
        return isinstance(new, dict) and all(k in new and _keeps(new[k], v) for k, v in old.items())
    if isinstance(old, list):
        return isinstance(new, list) and len(new) == len(old) and all(map(_keeps, new, old))
    return new == old


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_records_stored_by_main_still_decode(name: str) -> None:
    type_, tag, tagged = EXPECTED[name]
    data = (LEGACY / name).read_bytes()
    assert (b'"kind": "' + tag.encode() + b'"' in data) is tagged
    record = decode_record(data, name)
    assert type(record) is type_ and kind_of(record).tag == tag
    assert record_kind(data) == kind_of(type_)
    # Written again, the record names its kind first, keeps every field and value it was
    # stored with (fields added since come with their defaults), and reads back the same.
    again = pretty(record)
    assert again.startswith(b'{\n  "kind": "' + tag.encode() + b'",\n')
    old, new = json.loads(data), json.loads(again)
    assert new["kind"] == tag and _keeps(new, old)
    assert decode_record(again, name) == record
    assert decode_record(canonical(record), name) == record
    if tagged:  # the tag is the field it replaced: a tagged record's bytes are unchanged
        old_fields = [line for line in data.splitlines() if line.startswith(b'  "')]
        new_fields = [line for line in again.splitlines() if line.startswith(b'  "')]
        assert new_fields[: len(old_fields)][0] == old_fields[0]  # "kind" first in both


def test_the_registry_is_the_one_owner() -> None:
    from evidencestore._schemas import schema_types
    from evidencestore.campaign.models import RunVoid, Withdrawal
    from evidencestore.media.store import MEDIA_TYPES
    from evidencestore.runs.recorder import RUN_MEDIA_TYPE

    # Every kind stored by main, then the void and withdrawal records (issue 24).
    assert [k.type for k in KINDS] == [*(t for t, _, _ in EXPECTED.values()), RunVoid, Withdrawal]
    assert len({k.tag for k in KINDS}) == len(KINDS)
    schemas = schema_types()
    for kind in KINDS:
        assert schemas[kind.schema] is kind.type
        assert kind.type.__struct_config__.tag_field == "kind"
    assert kind_of(RunRecord).media_type == RUN_MEDIA_TYPE
    for type_, media_type in MEDIA_TYPES.items():
        assert kind_of(type_).media_type == media_type


def test_schemas_give_the_tag_as_the_default_kind() -> None:
    """An untagged record reads as its default kind, and the schemas say so."""
    from evidencestore._schemas import generate

    for kind in KINDS:
        schema = json.loads(generate()[f"{kind.schema}.schema.json"])
        definition = schema["$defs"][kind.type.__name__]
        assert definition["properties"]["kind"] == {"default": kind.tag, "enum": [kind.tag]}
        assert "kind" not in definition.get("required", [])


def test_what_is_not_a_record_is_named() -> None:
    with pytest.raises(UnknownRecordKind, match=r"x\.json: record kind 'claim' is not one") as e:
        decode_record(b'{"kind": "claim", "ratio": 1}', "x.json")
    assert e.value.kind == "claim"
    with pytest.raises(ManifestError, match=r"x\.json: not a valid campaign-claim record: .*"):
        decode_record(b'{"kind": "evidencestore/campaign-claim"}', "x.json")
    with pytest.raises(ManifestError, match=r"x\.json: not a record evidencestore knows"):
        decode_record(b'{"metadata": {"kind": "campaign-status"}, "cells": []}', "x.json")
    with pytest.raises(ManifestError, match=r"x\.json: not a JSON record: .*duplicate key"):
        decode_record(b'{"kind": "evidencestore/run", "arm": "a", "arm": "b"}', "x.json")
    with pytest.raises(ManifestError, match=r"x\.json: not a JSON record"):
        decode_record(b"\x00\x01", "x.json")
    legacy = json.loads((LEGACY / "comparison.json").read_bytes())
    legacy["surprise"] = 1  # the legacy branch is as strict as the tagged one
    with pytest.raises(ManifestError, match="not a valid media-comparison record"):
        decode_record(json.dumps(legacy).encode(), "x.json")
    assert record_kind(b"not json") is None


def test_reports_dispatch_on_the_decoded_type(tmp_path: Path) -> None:
    pytest.importorskip("jinja2")
    from evidencestore.errors import ReportError
    from evidencestore.report import render_record_bytes

    rendered = render_record_bytes(
        (LEGACY / "comparison.json").read_bytes(), source="c.json", root=None
    )
    assert rendered.kind == "comparison" and "FAIL" in rendered.html
    rendered = render_record_bytes((LEGACY / "run.json").read_bytes(), source="r.json", root=None)
    assert rendered.kind == "run"
    rendered = render_record_bytes(
        (LEGACY / "status.json").read_bytes(), source="s.json", root=None
    )
    assert rendered.kind == "campaign"
    # Every registered record kind renders now (issue 24), a claim included ...
    rendered = render_record_bytes((LEGACY / "claim.json").read_bytes(), source="c.json", root=None)
    assert rendered.kind == "claim" and 'data-report="campaign-record"' in rendered.html
    # ... and a kind no record has is still refused by name.
    with pytest.raises(ReportError, match="record kind 'evidencestore/campaign-x' has no rep"):
        render_record_bytes(b'{"kind": "evidencestore/campaign-x"}', source="c.json", root=None)
    # keys that once made a page (a status look-alike) no longer do
    with pytest.raises(ReportError, match="not a record evidencestore knows"):
        render_record_bytes(b'{"verdict": "ACCEPTED", "cells": [], "remaining": []}', source="x",
                            root=None)  # fmt: skip


def test_attestations_name_every_record_kind(tmp_path: Path) -> None:
    pytest.importorskip("cryptography")
    from evidencestore.attest import statement_for
    from evidencestore.bundle import create_bundle
    from evidencestore.config import init_repository

    repo = init_repository(tmp_path / "repo").repository
    src = tmp_path / "records"
    src.mkdir()
    for name in ("comparison.json", "check.json", "status.json", "claim.json"):
        (src / name).write_bytes((LEGACY / name).read_bytes())
    (src / "notes.json").write_text('{"kind": "claim"}')
    (src / "log.txt").write_text("not a record")
    create_bundle(repo, "recs", [src], store=repo.local_store(), external=["*/check.json"])
    statement = statement_for(repo, "recs")
    assert statement.predicate["records"] == {
        "records/check.json": "evidencestore/media-check",
        "records/claim.json": "evidencestore/campaign-claim",
        "records/comparison.json": "evidencestore/media-comparison",
        "records/status.json": "evidencestore/campaign-status",
    }
    assert len(statement.subject) == 7  # the registration and every entry
    one = statement_for(repo, str(repo.root / "evidence/recs/records/comparison.json"))
    assert one.predicate["kind"] == "evidencestore/media-comparison"


def test_run_records_decode_by_type_and_tag() -> None:
    data = (LEGACY / "run.json").read_bytes()
    assert msgspec.json.decode(data, type=RunRecord).name == "r1"
    with pytest.raises(msgspec.ValidationError, match="Invalid value"):
        msgspec.json.decode(data.replace(b'"evidencestore/run"', b'"evidencestore/x"', 1),
                            type=RunRecord)  # fmt: skip
