"""DSSE through securesystemslib: envelopes written before it (the legacy corpus, run
signatures made by hand-written PAE) still verify, key ids are unchanged, and what it
signs now verifies independently (pyca/cryptography and a hand-written PAE)."""

from __future__ import annotations

import base64
import hashlib
import json

import pytest

pytest.importorskip("securesystemslib")

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from helpers.paths import DATA

from evidencestore._canonical import canonical, decode
from evidencestore.attest import verify_attestation
from evidencestore.dsse import (
    PAYLOAD_TYPE,
    Statement,
    Subject,
    decode_envelope,
    key_id,
    load_public_key,
    sign_run,
    sign_statement,
    signed_payload,
    verify_run_signature,
)

LEGACY = DATA / "legacy_corpus"
LEGACY_KEYID = "e55489dd5d464648cd65e7fece1e5a65da935d58cad8c4d8771c481ae60397ca"


def _raw(key: Ed25519PrivateKey) -> bytes:
    return key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def _hand_pae(payload_type: str, payload: bytes) -> bytes:
    return b"DSSEv1 %d %b %d %b" % (len(payload_type), payload_type.encode(), len(payload), payload)


def _hand_signed(statement: Statement, key: Ed25519PrivateKey, keyid: str) -> bytes:
    """An envelope as dsse.py wrote it before securesystemslib: hand-written PAE."""
    payload = canonical(statement)
    sig = key.sign(_hand_pae(PAYLOAD_TYPE, payload))
    return json.dumps({
        "payload": base64.b64encode(payload).decode(),
        "payloadType": PAYLOAD_TYPE,
        "signatures": [{"keyid": keyid, "sig": base64.b64encode(sig).decode()}],
    }).encode()  # fmt: skip


def test_the_legacy_corpus_envelopes_still_verify() -> None:
    public = load_public_key(LEGACY / "attestations" / "corpus.key.pub")
    assert key_id(public) == LEGACY_KEYID  # the id every legacy envelope names
    for name in ("ltx-5s-lossless.json", "status-record.json"):
        env = decode_envelope((LEGACY / "attestations" / name).read_bytes(), name)
        assert env.signatures[0].keyid == LEGACY_KEYID
        payload, problem = signed_payload(env, public)
        assert problem is None and payload is not None, name
    # End to end: the status record's statement, its subject re-hashed in the corpus.
    repo = LEGACY / "repo"
    status = repo / "evidence" / "status-fox" / "status.json"
    result = verify_attestation(
        repo, (LEGACY / "attestations" / "status-record.json").read_bytes(), public,
        expected=str(status),
    )  # fmt: skip
    assert result.ok, result.problems
    assert result.keyid == LEGACY_KEYID and result.verified == ("evidence/status-fox/status.json",)
    # Negative control: one byte of the legacy payload changed is refused.
    env = json.loads((LEGACY / "attestations" / "status-record.json").read_bytes())
    payload = bytearray(base64.b64decode(env["payload"]))
    payload[payload.index(b"2757")] = ord("3")
    env["payload"] = base64.b64encode(bytes(payload)).decode()
    bad = verify_attestation(repo, json.dumps(env).encode(), public, expected=str(status))
    assert not bad.ok and any("no valid signature by key" in p for p in bad.problems)


def test_envelopes_signed_now_verify_without_securesystemslib() -> None:
    key = Ed25519PrivateKey.generate()
    statement = Statement(
        subject=(Subject(name="a", digest={"sha256": "00" * 32}),), predicate_type="urn:x"
    )
    env = sign_statement(statement, key)
    [sig] = env.signatures
    assert sig.keyid == hashlib.sha256(_raw(key)).hexdigest() == key_id(key.public_key())
    payload = base64.b64decode(env.payload)
    assert payload == canonical(statement)
    key.public_key().verify(base64.b64decode(sig.sig), _hand_pae(PAYLOAD_TYPE, payload))


def test_run_signatures_made_before_securesystemslib_still_verify() -> None:
    """A run signature as the hand-written DSSE made it judges as before; a key that did
    not sign it, under the same key id, is refused (the library checks the signature, not
    the id)."""
    key = Ed25519PrivateKey.generate()
    kid = key_id(key.public_key())
    data = b'{"kind": "evidencestore/run", "name": "r1"}'
    now = sign_run("r1", data, {"run": "r1"}, key)
    statement = decode(base64.b64decode(now.payload), Statement)
    old = _hand_signed(statement, key, kid)
    keys = {kid: key.public_key()}
    judged = verify_run_signature(old, data, "r1", keys)
    assert (judged.code, judged.keyid, judged.scope) == (None, kid, "manifest"), judged.message
    assert verify_run_signature(canonical(now), data, "r1", keys).code is None
    # A keyless signature (DSSE makes keyid optional) is tried with each allowed key.
    keyless = json.loads(old)
    keyless["signatures"][0]["keyid"] = ""
    assert verify_run_signature(json.dumps(keyless).encode(), data, "r1", keys).code is None
    # Negative controls: another key claiming this id, and changed bytes.
    forger = Ed25519PrivateKey.generate()
    forged = _hand_signed(statement, forger, kid)
    assert verify_run_signature(forged, data, "r1", keys).code == "bad-signature"
    changed = verify_run_signature(old, data + b" ", "r1", keys)
    assert changed.code == "changed-after-signing"
