"""The published test vectors (``schemas/vectors/``) are what the package computes, for
every construction of ``schemas/CANONICAL.md``; the independent JavaScript verifier
checks the same files (``tests/test_reference_verifier.py``)."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest
from helpers import paths

from evidencestore._canonical import canonical, decode_exact, loads_json
from evidencestore.digest import hash_bytes
from evidencestore.errors import ManifestError
from evidencestore.inventory import decode_registration
from evidencestore.merkle import (
    header_digest,
    leaf_hash,
    merkle_root,
    registration_hashes,
    stored_leaf_hashes,
    verify_inclusion,
)
from evidencestore.models import BundleHeader, Entry, InclusionProof

VECTORS = paths.SCHEMAS / "vectors"


def load(name: str) -> list[dict[str, Any]]:
    cases: list[dict[str, Any]] = json.loads((VECTORS / name).read_bytes())
    return cases


def test_the_committed_vectors_are_what_the_generator_writes() -> None:
    import importlib.util

    spec = importlib.util.spec_from_file_location("vectors", VECTORS / "generate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for name, data in module.generate().items():
        assert (VECTORS / name).read_bytes() == data, f"{name} is stale: run generate.py"


def test_blob_vectors_hash_to_their_digests() -> None:
    for case in load("blob.json"):
        h = hash_bytes(bytes.fromhex(case["input_hex"]))
        assert (h.digest, h.size) == (case["digest"], case["size"]), case["name"]


def test_canonical_text() -> None:
    names = set()
    for case in load("canonical.json"):
        names.add(case["name"])
        try:
            value = loads_json(case["input"].encode())
        except msgspec.DecodeError:
            assert "canonical" not in case, case["name"]
            continue
        if any(isinstance(v, float) for v in _scalars(value)):
            assert "canonical" not in case, case["name"]  # no floats in hashed structures
            continue
        assert canonical(value).decode() == case["canonical"], case["name"]
    assert {"duplicate key", "unpaired high surrogate", "keys by code point, not UTF-16"} <= names


def _scalars(value: Any) -> list[Any]:
    if isinstance(value, dict):
        return [s for v in value.values() for s in _scalars(v)]
    if isinstance(value, list):
        return [s for v in value for s in _scalars(v)]
    return [value]


def test_leaves_hash_as_they_stand() -> None:
    for case in load("leaf.json"):
        data = json.dumps(case["entry"]).encode()
        assert canonical(loads_json(data)).decode() == case["canonical"], case["name"]
        assert stored_leaf_hashes([case["entry"]])[0].hex() == case["leaf"], case["name"]
        entry, exact = decode_exact(canonical(loads_json(data)), Entry)
        # the struct's leaf equals the document's unless a default is written in it
        assert (leaf_hash(entry).hex() == case["leaf"]) == exact, case["name"]


def test_nodes_roots_and_audit_paths() -> None:
    for case in load("node.json"):
        left, right = bytes.fromhex(case["left"]), bytes.fromhex(case["right"])
        assert merkle_root([left, right]).hex() == case["node"]
    sizes = []
    for case in load("root.json"):
        leaves = [bytes.fromhex(h) for h in case["leaves"]]
        sizes.append(len(leaves))
        assert [leaf_hash(msgspec.convert(e, Entry)).hex() for e in case["entries"]] == case[
            "leaves"
        ]
        assert merkle_root(leaves).hex() == case["root"]
        for i, path in enumerate(case["audit_paths"]):
            from evidencestore.merkle import root_from_proof

            got = root_from_proof(leaves[i], i, len(leaves), [bytes.fromhex(p) for p in path])
            assert got is not None and got.hex() == case["root"]
    assert sizes == [0, 1, 2, 3, 5, 8]


def test_header_vectors_encode_and_digest_as_published() -> None:
    for case in load("header.json"):
        h = case["header"]
        assert canonical(h).decode() == case["canonical"], case["name"]
        header, exact = decode_exact(canonical(h), BundleHeader)
        assert (header_digest(header) == case["digest"]) == exact, case["name"]


@pytest.mark.parametrize("case", load("proof.json"), ids=lambda c: c["name"])
def test_proof_vectors_verify_as_published(case: dict[str, Any]) -> None:
    data = json.dumps(case["proof"]).encode()
    proof, exact = decode_exact(data, InclusionProof)
    problems = verify_inclusion(proof, case["trusted"], None if exact else loads_json(data))
    assert (problems == []) == case["valid"], problems


@pytest.mark.parametrize("case", load("registration.json"), ids=lambda c: c["name"])
def test_registrations(case: dict[str, Any]) -> None:
    try:
        reg = decode_registration(json.dumps(case["registration"]).encode(), case["name"])
    except ManifestError:
        assert not case["valid"]
        return
    assert (registration_hashes(reg) == (reg.root, reg.digest)) == case["valid"]
