"""Bad registrations become findings naming the file and field, never tracebacks."""

import json
from pathlib import Path
from typing import Any

import pytest

from evidencestore.inventory import load_inventory, registration_path
from evidencestore.remotes import local_store
from evidencestore.verify import verify_repository


def _edit(victim_repo: Path, fn: Any) -> None:
    path = registration_path(victim_repo, "victim")
    doc = json.loads(path.read_text())
    fn(doc)
    path.write_text(json.dumps(doc))


def _errors(victim_repo: Path) -> list[tuple[str, str]]:
    report = verify_repository(victim_repo, store=local_store(victim_repo))
    errors = [f for b in report.bundles for f in b.findings if f.severity == "error"]
    errors += [f for f in report.findings if f.severity == "error"]
    assert not report.ok
    assert {f.bundle for f in errors} == {"victim"}, errors
    assert [b.name for b in report.bundles if b.ok] == ["good"]
    return [(f.code, f.message) for f in errors]


def _entries(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return doc["manifest"]["entries"]  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    ("edit", "code", "needle"),
    [
        (lambda d: d.update(extra=1), "invalid-registration", "unknown field `extra`"),
        (
            lambda d: d["manifest"].update(colour="red"),
            "invalid-registration",
            "unknown field `colour` - at `$.manifest`",
        ),
        (
            lambda d: _entries(d)[0].update(path=5),
            "invalid-registration",
            "Expected `str`, got `int` - at `$.manifest.entries[0].path`",
        ),
        (
            lambda d: _entries(d)[1]["descriptor"].update(size="12"),
            "invalid-registration",
            "at `$.manifest.entries[1].descriptor.size`",
        ),
        (
            lambda d: _entries(d)[1]["descriptor"].update(size=-1),
            "invalid-registration",
            ">= 0 - at `$.manifest.entries[1].descriptor.size`",
        ),
        (
            lambda d: _entries(d)[0]["descriptor"].update(digest="sha256:" + "0" * 64),
            "invalid-registration",
            "at `$.manifest.entries[0].descriptor.digest`",
        ),
        (lambda d: d.update(digest="blake3:XYZ"), "invalid-registration", "at `$.digest`"),
        (
            lambda d: _entries(d)[0].update(location="cloud"),
            "invalid-registration",
            "at `$.manifest.entries[0].location`",
        ),
        (
            lambda d: d["manifest"].update(schema_version=2),
            "invalid-registration",
            "at `$.manifest.schema_version`",
        ),
        (
            lambda d: d["manifest"]["metadata"].update(created="yesterday"),
            "invalid-registration",
            "at `$.manifest.metadata.created`",
        ),
        (
            lambda d: d["manifest"].pop("entries"),
            "invalid-registration",
            "missing required field `entries`",
        ),
        (
            lambda d: _entries(d)[0]["descriptor"].update(size=2),
            "root-mismatch",
            "registration says",
        ),
        (
            lambda d: d["manifest"].update(name="other"),
            "name-mismatch",
            "manifest name 'other' disagrees with its directory 'victim'",
        ),
    ],
)
def test_bad_registration_fields(victim_repo: Path, edit: Any, code: str, needle: str) -> None:
    _edit(victim_repo, edit)
    matching = [m for c, m in _errors(victim_repo) if c == code and needle in m]
    assert matching, _errors(victim_repo)
    if code == "invalid-registration":
        assert "evidence/victim/bundle.json" in matching[0]


@pytest.mark.parametrize(
    ("path", "needle"),
    [
        ("../escape.txt", "'..' segment"),
        ("/etc/passwd", "is absolute"),
        ("a\\b.txt", "backslash"),
        ("a\x00b", "NUL"),
        ("a//b.txt", "empty segment"),
        ("x.txt", "appears more than once"),
    ],
)
def test_bad_entry_paths(victim_repo: Path, path: str, needle: str) -> None:
    import msgspec

    from evidencestore._canonical import pretty
    from evidencestore.bundle import seal
    from evidencestore.inventory import load_registration

    reg = load_registration(registration_path(victim_repo, "victim"))
    entries = list(reg.manifest.entries)
    entries[1] = msgspec.structs.replace(entries[1], path=path)
    manifest = msgspec.structs.replace(reg.manifest, entries=tuple(entries))
    # properly re-sealed, so only the path itself is wrong
    registration_path(victim_repo, "victim").write_bytes(pretty(seal(manifest)))
    report = verify_repository(victim_repo, store=local_store(victim_repo))
    msgs = [f.message for b in report.bundles for f in b.findings if f.severity == "error"]
    assert any(needle in m and repr(path) in m for m in msgs), msgs
    assert not report.ok


def test_malformed_json(victim_repo: Path) -> None:
    registration_path(victim_repo, "victim").write_text('{"digest": ')
    [(code, msg)] = _errors(victim_repo)
    assert (
        code == "invalid-registration"
        and "malformed JSON" in msg
        and "evidence/victim/bundle.json" in msg
    )


def test_missing_registration_and_stray_file(victim_repo: Path) -> None:
    registration_path(victim_repo, "victim").unlink()
    (victim_repo / "evidence" / "README.md").write_text("hi")
    report = verify_repository(victim_repo, store=local_store(victim_repo))
    codes = sorted(f.code for f in report.findings)
    assert codes == ["missing-registration", "stray-file"]


def test_empty_and_absent_evidence_dir(tmp_path: Path) -> None:
    absent = load_inventory(tmp_path)
    assert [f.code for f in absent.findings] == ["no-evidence-dir"]
    (tmp_path / "evidence").mkdir()
    empty = load_inventory(tmp_path)
    assert [(f.code, f.severity) for f in empty.findings] == [("empty-evidence-dir", "info")]
    assert verify_repository(tmp_path).ok  # zero bundles verify (issue 12), with a notice
    assert absent.findings[0].severity == "error"  # no evstore.toml either: not a repository
