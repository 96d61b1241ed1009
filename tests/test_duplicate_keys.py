"""Duplicate JSON keys are refused wherever evidence is decoded (registrations,
inclusion proofs, records, expectations), naming the file and the key's JSON path."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec
import pytest
from helpers.remotes import run

from evidencestore._canonical import decode, loads_json, pretty
from evidencestore.errors import ManifestError, MediaError
from evidencestore.inventory import (
    decode_registration,
    load_inventory,
    load_registration,
    registration_path,
)
from evidencestore.media.expectations import load_expectations
from evidencestore.merkle import inclusion_proof
from evidencestore.models import Registration
from evidencestore.remotes import local_store
from evidencestore.verify import verify_repository


def _dup_size(victim_repo: Path) -> Path:
    """Give the second entry's descriptor a second, larger ``size`` before the real one."""
    path = registration_path(victim_repo, "victim")
    text = path.read_text()
    first = text.index('"size": 2')
    path.write_text(text[:first] + '"size": 999999, ' + text[first:])
    return path


@pytest.mark.parametrize(
    ("doc", "where"),
    [
        ('{"a": 1, "a": 2}', "$.a"),
        ('{"x": [{"b": 1}, {"c": {"d": 1, "d": 1}}]}', "$.x[1].c.d"),
        ('{"k": {"\\u0061": 1, "a": 2}}', "$.k.a"),  # escapes name the same key
    ],
)
def test_duplicates_refused_with_their_path(doc: str, where: str) -> None:
    with pytest.raises(msgspec.DecodeError, match="duplicate key") as info:
        loads_json(doc.encode())
    assert str(info.value).endswith(f"at {where}")


def test_distinct_keys_and_the_written_form_decode(victim_repo: Path) -> None:
    data = registration_path(victim_repo, "good").read_bytes()
    reg = decode(data, Registration)
    assert pretty(reg) == data
    # other whitespace and key order take the exact path, and still decode
    reordered = json.dumps(json.loads(data), sort_keys=True, indent=3).encode()
    assert decode(reordered, Registration) == reg


def test_registration_with_duplicate_size_is_refused(victim_repo: Path) -> None:
    path = _dup_size(victim_repo)
    # msgspec alone keeps the last value (2): the registration would verify
    assert msgspec.json.decode(path.read_bytes(), type=Registration).manifest.entries
    with pytest.raises(ManifestError) as info:
        decode_registration(path.read_bytes(), str(path))
    assert str(info.value) == (
        f"{path}: malformed JSON: duplicate key 'size' at $.manifest.entries[1].descriptor.size"
    )
    inventory = load_inventory(victim_repo)
    assert "victim" not in inventory.registrations
    report = verify_repository(victim_repo, store=local_store(victim_repo))
    assert not report.ok
    messages = [f.message for f in report.findings] + [
        f.message for b in report.bundles for f in b.findings
    ]
    assert any("duplicate key 'size'" in m for m in messages), messages


def test_cli_verify_fails_on_duplicate_key(victim_repo: Path) -> None:
    _dup_size(victim_repo)
    code, out, err = run("verify", "--root", str(victim_repo))
    assert code == 1
    assert "duplicate key 'size'" in out + err
    assert "internal error" not in out + err


def test_inclusion_proof_with_duplicate_key_is_refused(victim_repo: Path, tmp_path: Path) -> None:
    reg = load_registration(registration_path(victim_repo, "victim"))
    out = pretty(inclusion_proof(reg.manifest, "x.txt")).decode()
    proof: dict[str, Any] = json.loads(out)
    good = tmp_path / "proof.json"
    good.write_text(out)
    code, _, err = run("check-proof", str(good), "--bundle", "victim", "--root", str(victim_repo))
    assert code == 0, err
    text = out.replace('"bundle": "victim"', '"bundle": "other", "bundle": "victim"', 1)
    assert text != out and "bundle" in proof
    bad = tmp_path / "dup-proof.json"
    bad.write_text(text)
    code, _, err = run("check-proof", str(bad), "--bundle", "victim", "--root", str(victim_repo))
    assert code == 2
    assert f"{bad}: not an inclusion proof: duplicate key 'bundle' at $.bundle" in err


def test_expectations_with_duplicate_key_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "expect.json"
    path.write_text('{"video": {"frames": 10, "frames": 12}}')
    with pytest.raises(MediaError, match=r"expect\.json: not valid JSON: duplicate key 'frames'"):
        load_expectations(path)


def test_fast_path_agrees_with_the_exact_path(victim_repo: Path) -> None:
    """A file in the written form and the same file re-indented decode the same,
    and a duplicate is caught in either form."""
    path = _dup_size(victim_repo)
    text = path.read_text()
    compact = json.dumps(json.loads(text)).encode()  # json.loads keeps the last: no dup
    assert decode(compact, Registration).manifest.entries[1].descriptor.size == 2
    for form in (text.encode(), text.replace("\n", "").encode()):
        with pytest.raises(msgspec.DecodeError, match="duplicate key 'size'"):
            decode(form, Registration)


def test_record_with_duplicate_key_is_refused_by_the_report() -> None:
    pytest.importorskip("jinja2")
    from evidencestore.report import ReportError, render_record_bytes

    record = b'{"kind": "evidencestore/run", "outcome": "complete", "outcome": "failed"}'
    with pytest.raises(ReportError, match=r"rec\.json: not a JSON record: duplicate key 'outcome'"):
        render_record_bytes(record, source="rec.json", root=None)
