from pathlib import Path

import pytest
from blake3 import blake3

from evidencestore import merkle
from evidencestore.bundle import make_manifest
from evidencestore.digest import hash_bytes
from evidencestore.models import Descriptor, Entry


def _rfc_root(leaves: list[bytes]) -> bytes:
    """RFC 6962 MTH, written recursively as in the RFC, as an independent reference."""
    n = len(leaves)
    if n == 0:
        return blake3(b"").digest()
    if n == 1:
        return leaves[0]
    k = 1 << ((n - 1).bit_length() - 1)
    return blake3(b"\x01" + _rfc_root(leaves[:k]) + _rfc_root(leaves[k:])).digest()


def _entries(n: int) -> list[Entry]:
    out = []
    for i in range(n):
        h = hash_bytes(str(i).encode())
        out.append(
            Entry(
                path=f"f{i:04d}",
                descriptor=Descriptor(digest=h.digest, size=h.size),
                location="repo",
            )
        )
    return out


@pytest.mark.parametrize("n", [0, 1, 2, 3, 4, 5, 7, 8, 9, 31, 33])
def test_root_matches_rfc_recursion(n: int) -> None:
    leaves = [merkle.leaf_hash(e) for e in _entries(n)]
    assert merkle.merkle_root(leaves) == _rfc_root(leaves)


def test_leaf_is_domain_separated() -> None:
    e = _entries(1)[0]
    from evidencestore._canonical import canonical

    assert merkle.leaf_hash(e) == blake3(b"\x00" + canonical(e)).digest()
    assert merkle.leaf_hash(e) != blake3(canonical(e)).digest()


@pytest.mark.parametrize("n", [1, 2, 3, 5, 8, 13])
def test_every_inclusion_proof_verifies(n: int) -> None:
    m = make_manifest("b", _entries(n), created="2026-01-01T00:00:00Z", producer="t")
    digest = merkle.bundle_digest(m)
    for e in m.entries:
        proof = merkle.inclusion_proof(m, e.path)
        assert proof.root == merkle.entries_root(m.entries)
        assert merkle.verify_inclusion(proof, digest) == []


def test_tampered_proofs_fail() -> None:
    import msgspec

    m = make_manifest("b", _entries(6), created="2026-01-01T00:00:00Z", producer="t")
    proof = merkle.inclusion_proof(m, "f0003")
    other = hash_bytes(b"evil")
    forged_entry = msgspec.structs.replace(
        proof.entry, descriptor=Descriptor(digest=other.digest, size=other.size)
    )
    assert any(
        "does not hash to root" in p
        for p in merkle.verify_inclusion(msgspec.structs.replace(proof, entry=forged_entry))
    )
    wrong_index = msgspec.structs.replace(proof, leaf_index=2)
    assert merkle.verify_inclusion(wrong_index) != []
    short_path = msgspec.structs.replace(proof, audit_path=proof.audit_path[:-1])
    assert any("does not fit" in p for p in merkle.verify_inclusion(short_path))
    renamed = msgspec.structs.replace(proof, bundle="c")
    assert any("bundle header hashes to" in p for p in merkle.verify_inclusion(renamed))
    assert any(
        "expected blake3:" in p for p in merkle.verify_inclusion(proof, "blake3:" + "0" * 64)
    )


def test_digest_recomputable_from_json_alone(tmp_path: Path) -> None:
    """schemas/CANONICAL.md is enough: recompute with the json module and blake3 only."""
    import json

    from helpers.repos import add_bundle

    add_bundle(
        tmp_path,
        "doc",
        {"a.txt": b"a", "sub/b.csv": b"b", "c.bin": b"c"},
        external=("*.bin",),
        refs=("PR-1",),
    )
    doc = json.loads((tmp_path / "evidence/doc/bundle.json").read_text())

    def canon(obj: object) -> bytes:
        return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()

    def h(data: bytes) -> bytes:
        return blake3(data).digest()

    def mth(leaves: list[bytes]) -> bytes:
        if len(leaves) == 1:
            return leaves[0]
        k = 1 << ((len(leaves) - 1).bit_length() - 1)
        return h(b"\x01" + mth(leaves[:k]) + mth(leaves[k:]))

    m = doc["manifest"]
    root = mth([h(b"\x00" + canon(e)) for e in m["entries"]])
    assert "blake3:" + root.hex() == doc["root"]
    header = {
        "metadata": m["metadata"],
        "name": m["name"],
        "root": doc["root"],
        "schema_version": m.get("schema_version", 1),
    }
    assert "blake3:" + h(b"\x02" + canon(header)).hex() == doc["digest"]
