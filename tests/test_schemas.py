import json
from pathlib import Path

import pytest

from evidencestore import _schemas
from evidencestore.cli import main


def test_committed_schemas_match_models() -> None:
    stale = _schemas.stale()
    assert stale == [], f"schemas out of date, run `evstore schema --write`: {stale}"


def test_schema_check_detects_drift(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["schema", "--write", "--dir", str(tmp_path)]) == 0
    assert main(["schema", "--check", "--dir", str(tmp_path)]) == 0
    path = tmp_path / "registration.schema.json"
    doc = json.loads(path.read_text())
    doc["$defs"]["Descriptor"]["properties"].pop("size")
    path.write_text(json.dumps(doc))
    capsys.readouterr()
    assert main(["schema", "--check", "--dir", str(tmp_path)]) == 1
    assert "registration.schema.json is out of date" in capsys.readouterr().err


def test_registration_schema_constrains_digest() -> None:
    doc = json.loads(_schemas.generate()["registration.schema.json"])
    desc = doc["$defs"]["Descriptor"]
    assert desc["properties"]["digest"]["pattern"] == "^blake3:[0-9a-f]{64}$"
    assert desc["additionalProperties"] is False
    assert set(desc["required"]) == {"digest", "size"}
