"""DSSE through securesystemslib: envelopes written before it (the legacy corpus, run
signatures made by hand-written PAE) still verify, key ids are unchanged, and what it
signs now verifies independently (pyca/cryptography and a hand-written PAE)."""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path

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
    generate_key,
    key_id,
    load_private_key,
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


def test_key_files_keep_their_format_and_other_tools_read_them(tmp_path: Path) -> None:
    """``attest keygen`` (securesystemslib's CryptoSigner) writes PKCS#8 and
    SubjectPublicKeyInfo PEM as before: pyca/cryptography and securesystemslib's own
    ``file2:`` loader read them, and the key id is SHA-256 of the raw public key."""
    from securesystemslib.signer import CryptoSigner, SSlibKey

    private, public = generate_key(tmp_path / "k")
    assert private.read_bytes().startswith(b"-----BEGIN PRIVATE KEY-----\n")
    assert public.read_bytes().startswith(b"-----BEGIN PUBLIC KEY-----\n")
    assert private.stat().st_mode & 0o777 == 0o600
    raw = serialization.load_pem_private_key(private.read_bytes(), None)
    assert isinstance(raw, Ed25519PrivateKey)
    kid = hashlib.sha256(_raw(raw)).hexdigest()
    assert key_id(load_public_key(public)) == key_id(load_public_key(private)) == kid
    sslib = SSlibKey.from_crypto(load_public_key(public), keyid=kid)
    signer = CryptoSigner.from_priv_key_uri(f"file2:{private}", sslib)
    statement = Statement(subject=(Subject(name="a", digest={"sha256": "00" * 32}),),
                          predicate_type="urn:x")  # fmt: skip
    assert sign_statement(statement, load_private_key(private)).signatures[0].keyid == kid
    assert signer.public_key.keyid == kid


def test_key_file_errors_are_unchanged(tmp_path: Path) -> None:
    from cryptography.hazmat.primitives.asymmetric import ec

    from evidencestore.errors import AttestationError

    generate_key(tmp_path / "k")
    with pytest.raises(AttestationError, match="k: already exists; refusing to overwrite a key"):
        generate_key(tmp_path / "k")
    other = ec.generate_private_key(ec.SECP256R1())
    (tmp_path / "ec").write_bytes(other.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ))  # fmt: skip
    (tmp_path / "ec.pub").write_bytes(other.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    ))  # fmt: skip
    (tmp_path / "junk").write_text("junk")
    cases = [
        (load_private_key, "ec", "ec: expected an ed25519 private key"),
        (load_public_key, "ec.pub", "ec.pub: expected an ed25519 public key"),
        (load_public_key, "ec", "ec: expected an ed25519 private key"),
        (load_private_key, "k.pub", "k.pub: not an unencrypted PEM private key ("),
        (load_public_key, "junk", "junk: not a PEM public key ("),
        (load_private_key, "none", "none: cannot read private key: No such file"),
        (load_public_key, "none", "none: cannot read public key: No such file"),
    ]
    for load, name, message in cases:
        with pytest.raises(AttestationError) as info:
            load(tmp_path / name)
        assert str(info.value).startswith(f"{tmp_path / name}"), str(info.value)
        assert message in str(info.value), (name, str(info.value))
