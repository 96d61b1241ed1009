"""What ``schemas/CANONICAL.md`` says of RFC 8785 (JCS), checked against a maintained
JCS implementation (PyPI ``rfc8785``): equal bytes on everything the corpus hashes, and
exactly the two documented exceptions."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from helpers import paths

from evidencestore._canonical import canonical, loads_json
from tests.helpers.corpus import LEGACY, generated_corpus, registrations

rfc8785 = pytest.importorskip("rfc8785")
VECTORS = paths.SCHEMAS / "vectors"


def hashed_objects(corpus: Path) -> list[Any]:
    """Every object a digest of the corpus is computed over: each entry and each
    header of every registration, and each proof's entry and header."""
    out: list[Any] = []
    for reg_path in registrations(corpus):
        reg = loads_json(reg_path.read_bytes())
        m = reg["manifest"]
        out.extend(m["entries"])
        out.append({"metadata": m["metadata"], "name": m["name"], "root": reg["root"],
                    "schema_version": m.get("schema_version", 1)})  # fmt: skip
    for proof_path in sorted((corpus / "proofs").glob("*/*.json")):
        p = loads_json(proof_path.read_bytes())
        out.append(p["entry"])
        out.append({"metadata": p["metadata"], "name": p["bundle"], "root": p["root"],
                    "schema_version": p["schema_version"]})  # fmt: skip
    return out


def test_canonical_equals_jcs_on_the_legacy_corpus() -> None:
    objects = hashed_objects(LEGACY)
    assert len(objects) == 209 + 25 + 2 * 157
    for value in objects:
        assert canonical(value) == rfc8785.dumps(value), value


def test_canonical_equals_jcs_on_a_corpus_built_now(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    objects = hashed_objects(generated_corpus(tmp_path_factory))
    assert len(objects) > 300
    for value in objects:
        assert canonical(value) == rfc8785.dumps(value), value


def test_canonical_equals_jcs_on_the_vectors_it_shares() -> None:
    cases = json.loads((VECTORS / "canonical.json").read_bytes())
    compared = 0
    for case in cases:
        if "canonical" not in case or case["name"] in {
            "keys by code point, not UTF-16",
            "integers",
        }:
            continue
        assert rfc8785.dumps(json.loads(case["input"])).decode() == case["canonical"]
        compared += 1
    assert compared == 4
    for name in ("leaf.json", "header.json"):
        for case in json.loads((VECTORS / name).read_bytes()):
            value = case["entry"] if name == "leaf.json" else case["header"]
            assert rfc8785.dumps(value).decode() == case["canonical"]


def test_the_two_documented_differences() -> None:
    # keys ordered by code point here, by UTF-16 code unit in JCS
    keys = {"\uff61": 1, "\U0001f600": 2}
    assert canonical(keys) == '{"\uff61":1,"\U0001f600":2}'.encode()
    assert rfc8785.dumps(keys) == '{"\U0001f600":2,"\uff61":1}'.encode()
    # the same order whenever no such pair of keys is present
    assert canonical({"\U0001f600": 1, "a": 2}) == rfc8785.dumps({"\U0001f600": 1, "a": 2})
    # integers beyond 2^53 are written exactly here, refused by JCS
    assert canonical({"size": 2**53 + 1}) == b'{"size":9007199254740993}'
    with pytest.raises(rfc8785.IntegerDomainError):
        rfc8785.dumps({"size": 2**53 + 1})
    assert canonical({"size": 2**53 - 1}) == rfc8785.dumps({"size": 2**53 - 1})
