"""Attestations: in-toto Statement v1 in DSSE envelopes, ed25519, checked against the store."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
from pathlib import Path

import pytest

pytest.importorskip("cryptography")

from helpers import paths
from helpers.remotes import blob_path, digest_of, run, set_remotes
from helpers.repos import add_bundle, git, init_repo

from evidencestore.attest import (
    PREDICATE_BUNDLE,
    PREDICATE_RECORD,
    AttestationError,
    check_attestation,
    verify_attestation,
)
from evidencestore.dsse import PAYLOAD_TYPE, STATEMENT_TYPE, load_public_key, pae
from evidencestore.remotes import local_store

EXTERNAL = b"raw log line\n" * 500
IN_GIT = b'{"ok": true}\n'


@pytest.fixture
def bundle_repo(tmp_path: Path) -> Path:
    root = init_repo(tmp_path / "repo")
    assert run("init", "--root", str(root))[0] == 0
    add_bundle(root, "run1", {"ext/log.txt": EXTERNAL, "results.json": IN_GIT}, external=("ext/*",))
    return root


@pytest.fixture
def keys(tmp_path: Path) -> tuple[Path, Path]:
    code, out, err = run("attest", "keygen", str(tmp_path / "signing.key"))
    assert code == 0, err
    private, public = tmp_path / "signing.key", tmp_path / "signing.key.pub"
    assert f"public key {public}" in out
    assert private.stat().st_mode & 0o777 == 0o600
    return private, public


def _attest(bundle_repo: Path, target: str, key: Path, out: Path) -> dict[str, object]:
    code, _, err = run(
        "attest", target, "--key", str(key), "-o", str(out), "--root", str(bundle_repo)
    )
    assert code == 0, err
    envelope: dict[str, object] = json.loads(out.read_text())
    return envelope


def _verify(
    bundle_repo: Path, envelope: Path, pub: Path, subject: str = "run1"
) -> tuple[int, str, str]:
    return run(
        "attest", "verify", str(envelope), "--key", str(pub), "--subject", subject,
        "--root", str(bundle_repo),
    )  # fmt: skip


def test_pae_matches_the_dsse_specification() -> None:
    # The example of the DSSE v1 protocol document.
    assert pae("http://example.com/HelloWorld", b"hello world") == (
        b"DSSEv1 29 http://example.com/HelloWorld 11 hello world"
    )


def test_bundle_statement_subjects_and_signature(
    bundle_repo: Path, keys: tuple[Path, Path], tmp_path: Path
) -> None:
    private, public = keys
    env = _attest(bundle_repo, "run1", private, tmp_path / "run1.att.json")
    assert env["payloadType"] == PAYLOAD_TYPE
    payload = base64.b64decode(str(env["payload"]))
    statement = json.loads(payload)
    assert statement["_type"] == STATEMENT_TYPE
    assert statement["predicateType"] == PREDICATE_BUNDLE
    registration = bundle_repo / "evidence" / "run1" / "bundle.json"
    expected = {
        "evidence/run1/bundle.json": registration.read_bytes(),
        "evidence/run1/ext/log.txt": EXTERNAL,
        "evidence/run1/results.json": IN_GIT,
    }
    subjects = {s["name"]: s["digest"] for s in statement["subject"]}
    assert set(subjects) == set(expected)
    from blake3 import blake3

    for name, data in expected.items():
        assert subjects[name] == {
            "sha256": hashlib.sha256(data).hexdigest(),
            "blake3": blake3(data).hexdigest(),
        }
    assert statement["predicate"]["bundle_digest"] == json.loads(registration.read_text())["digest"]
    # The signature covers PAE(payloadType, payload), checked here independently.
    [sig] = env["signatures"]  # type: ignore[misc]
    key = load_public_key(public)
    key.verify(base64.b64decode(sig["sig"]), b"DSSEv1 %d %b %d %b" % (
        len(PAYLOAD_TYPE), PAYLOAD_TYPE.encode(), len(payload), payload))  # fmt: skip
    code, out, err = _verify(bundle_repo, tmp_path / "run1.att.json", public)
    assert code == 0, out + err
    assert "verified" in out and "3 subject(s)" in out


def test_flipped_byte_is_refused(
    bundle_repo: Path, keys: tuple[Path, Path], tmp_path: Path
) -> None:
    private, public = keys
    path = tmp_path / "a.json"
    env = _attest(bundle_repo, "run1", private, path)
    # One bit of the statement changed, re-encoded so the envelope still parses.
    payload = bytearray(base64.b64decode(str(env["payload"])))
    at = payload.index(b"results.json")
    payload[at] ^= 0x01
    env["payload"] = base64.b64encode(bytes(payload)).decode()
    path.write_text(json.dumps(env))
    code, out, _ = _verify(bundle_repo, path, public)
    assert code == 1
    assert "REFUSED" in out and "no valid signature by key" in out
    # A raw byte flipped in the file (inside the signature) is refused too.
    env2 = _attest(bundle_repo, "run1", private, tmp_path / "b.json")
    raw = bytearray((tmp_path / "b.json").read_bytes())
    sig = str(env2["signatures"][0]["sig"])  # type: ignore[index]
    at = raw.index(sig.encode()) + 5
    raw[at] = ord("A") if raw[at] != ord("A") else ord("B")
    (tmp_path / "b.json").write_bytes(bytes(raw))
    code, out, _ = _verify(bundle_repo, tmp_path / "b.json", public)
    assert code == 1 and "no valid signature" in out


def test_wrong_key_is_refused(bundle_repo: Path, keys: tuple[Path, Path], tmp_path: Path) -> None:
    private, _ = keys
    assert run("attest", "keygen", str(tmp_path / "other.key"))[0] == 0
    _attest(bundle_repo, "run1", private, tmp_path / "a.json")
    code, out, _ = _verify(bundle_repo, tmp_path / "a.json", tmp_path / "other.key.pub")
    assert code == 1 and "no valid signature by key" in out
    with pytest.raises(AttestationError, match="no valid signature"):
        check_attestation(bundle_repo, tmp_path / "a.json", tmp_path / "other.key.pub")
    # verify_* returns the report, check_* raises (one convention, package-wide).
    other = load_public_key(tmp_path / "other.key.pub")
    result = verify_attestation(bundle_repo, (tmp_path / "a.json").read_bytes(), other)
    assert not result.ok and result.keyid is None
    assert any("no valid signature by key" in p for p in result.problems)
    good = verify_attestation(
        bundle_repo, (tmp_path / "a.json").read_bytes(), load_public_key(keys[1])
    )
    assert good.ok and good.verified and good.problems == ()
    assert check_attestation(bundle_repo, tmp_path / "a.json", keys[1]).verified == good.verified


def test_missing_or_changed_subject_is_refused(
    bundle_repo: Path, keys: tuple[Path, Path], tmp_path: Path
) -> None:
    private, public = keys
    _attest(bundle_repo, "run1", private, tmp_path / "a.json")
    digest = digest_of(EXTERNAL)
    blob = blob_path(Path(local_store(bundle_repo).root), EXTERNAL)
    os.chmod(blob, 0o644)
    blob.unlink()
    (bundle_repo / "evidence" / "run1" / "results.json").write_bytes(b'{"ok": false}\n')
    code, out, _ = _verify(bundle_repo, tmp_path / "a.json", public)
    assert code == 1
    assert f"subject 'evidence/run1/ext/log.txt' ({digest}): missing" in out
    assert (
        "subject 'evidence/run1/results.json': the bytes in the working tree hash to sha256 " in out
    )
    assert "2 problem(s)" in out


def test_bundle_attestation_verifies_after_fresh_clone_and_pull(
    bundle_repo: Path, keys: tuple[Path, Path], tmp_path: Path
) -> None:
    private, public = keys
    remote = tmp_path / "remote"
    set_remotes(bundle_repo, origin={"url": str(remote)})
    assert run("push", "--root", str(bundle_repo))[0] == 0
    envelope = tmp_path / "run1.att.json"
    _attest(bundle_repo, "run1", private, envelope)
    git(bundle_repo, "add", "-A")
    git(bundle_repo, "commit", "-q", "-m", "evidence")
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(bundle_repo), str(clone))
    code, _, err = run("pull", "--root", str(clone))
    assert code == 0, err
    shutil.rmtree(remote)  # verified from what the pull brought, not read through the remote
    code, out, err = _verify(clone, envelope, public)
    assert code == 0, out + err
    assert "3 subject(s) match the repository" in out


def test_record_by_digest(bundle_repo: Path, keys: tuple[Path, Path], tmp_path: Path) -> None:
    private, public = keys
    # The kind comes from the decoded record (evidencestore.records), never from keys:
    # a real campaign status is named, a look-alike is not.
    status = (paths.DATA / "legacy_records/status.json").read_bytes()
    desc = local_store(bundle_repo).put(status)
    env = _attest(bundle_repo, desc.digest, private, tmp_path / "s.json")
    statement = json.loads(base64.b64decode(str(env["payload"])))
    assert statement["subject"][0]["name"] == desc.digest
    assert statement["predicate"]["kind"] == "evidencestore/campaign-status"
    assert _verify(bundle_repo, tmp_path / "s.json", public, desc.digest)[0] == 0
    fake = local_store(bundle_repo).put(b'{"metadata": {"kind": "campaign-status"}, "cells": []}')
    env = _attest(bundle_repo, fake.digest, private, tmp_path / "f.json")
    assert "kind" not in json.loads(base64.b64decode(str(env["payload"])))["predicate"]


def test_usage_and_key_errors(bundle_repo: Path, keys: tuple[Path, Path], tmp_path: Path) -> None:
    private, public = keys
    code, _, err = run("attest", "run1", "--root", str(bundle_repo))
    assert code == 2 and "--key KEY is required" in err
    code, _, err = run("attest", "run1", "--key", str(public), "--root", str(bundle_repo))
    assert code == 2 and "not an unencrypted PEM private key" in err
    code, _, err = run("attest", "nope", "--key", str(private), "--root", str(bundle_repo))
    assert code == 2 and "nope: not a registered bundle, a digest in the store, or a file" in err
    code, _, err = run("attest", "keygen", str(private))
    assert code == 2 and "already exists; refusing to overwrite" in err
    (tmp_path / "junk.json").write_text("not json")
    code, out, _ = _verify(bundle_repo, tmp_path / "junk.json", public)
    assert code == 1 and "not a DSSE envelope" in out


def test_file_in_repository(bundle_repo: Path, keys: tuple[Path, Path], tmp_path: Path) -> None:
    private, public = keys
    path = bundle_repo / "notes" / "claim.json"
    path.parent.mkdir()
    claim = (paths.DATA / "legacy_records/claim.json").read_bytes()
    path.write_bytes(claim)
    env = _attest(bundle_repo, str(path), private, tmp_path / "c.json")
    statement = json.loads(base64.b64decode(str(env["payload"])))
    assert statement["subject"][0]["name"] == "notes/claim.json"
    assert statement["predicate"] == {
        "kind": "evidencestore/campaign-claim",
        "size": path.stat().st_size,
    }
    assert _verify(bundle_repo, tmp_path / "c.json", public, str(path))[0] == 0
    path.write_bytes(claim.replace(b'"ratio": 1.5', b'"ratio": 9.99'))
    code, out, _ = _verify(bundle_repo, tmp_path / "c.json", public, str(path))
    assert code == 1 and "subject 'notes/claim.json': the bytes in the working tree" in out
    outside = tmp_path / "outside.json"
    outside.write_text("{}")
    code, _, err = run("attest", str(outside), "--key", str(private), "--root", str(bundle_repo))
    assert code == 2 and "outside the repository" in err


def test_expected_subject_and_predicate_type(
    bundle_repo: Path, keys: tuple[Path, Path], tmp_path: Path
) -> None:
    """Run A's envelope presented as run B's is refused; what verified is printed."""
    private, public = keys
    add_bundle(bundle_repo, "run2", {"results.json": b'{"ok": "also"}\n'})
    _attest(bundle_repo, "run1", private, tmp_path / "a.json")
    reg = json.loads((bundle_repo / "evidence/run1/bundle.json").read_text())
    code, out, _ = _verify(bundle_repo, tmp_path / "a.json", public, "run1")
    assert code == 0
    kid = load_public_key(public)
    from evidencestore.dsse import key_id

    assert out.startswith(
        f"verified: {tmp_path / 'a.json'} is about run1 ({reg['digest']}), signed by key "
        f"{key_id(kid)} ({public}); 3 subject(s) match the repository; predicate "
        f"{PREDICATE_BUNDLE}"
    )
    code, out, _ = _verify(bundle_repo, tmp_path / "a.json", public, "run2")
    assert code == 1 and "REFUSED" in out
    assert "the statement is about bundle 'run1', not 'run2'" in out
    assert "subject 'evidence/run1/results.json' is not part of bundle 'run2'" in out
    # The decisive problem first (issue 38: it came last, after one line per subject).
    first = out.splitlines()[1]
    assert "the statement is about bundle 'run1', not 'run2'" in first, out
    assert "does not name evidence/run2/bundle.json" in out
    # A record digest: the bundle statement is not a record statement about it.
    digest = digest_of(b"another record\n")
    code, out, _ = _verify(bundle_repo, tmp_path / "a.json", public, digest)
    assert code == 1 and f"expected '{PREDICATE_RECORD}' for a record digest" in out
    assert f"no subject has digest {digest}" in out
    # A record statement presented for a bundle.
    desc = local_store(bundle_repo).put(b'{"kind": "campaign-claim"}')
    _attest(bundle_repo, desc.digest, private, tmp_path / "r.json")
    code, out, _ = _verify(bundle_repo, tmp_path / "r.json", public, "run1")
    assert code == 1 and "is not a bundle, run or test-result attestation" in out
    assert _verify(bundle_repo, tmp_path / "r.json", public, desc.digest)[0] == 0
    # The expected subject is required, and must name something.
    code, _, err = run(
        "attest",
        "verify",
        str(tmp_path / "a.json"),
        "--key",
        str(public),
        "--root",
        str(bundle_repo),
    )
    assert code == 2 and "verify needs --subject TARGET" in err
    code, _, err = _verify(bundle_repo, tmp_path / "a.json", public, "no-such-bundle")
    assert code == 2 and "expected subject 'no-such-bundle': not a registered bundle" in err
    with pytest.raises(AttestationError, match="the statement is about bundle 'run1'"):
        check_attestation(bundle_repo, tmp_path / "a.json", public, expected="run2")


def test_resealed_bundle_is_not_the_attested_one(
    bundle_repo: Path, keys: tuple[Path, Path], tmp_path: Path
) -> None:
    private, public = keys
    _attest(bundle_repo, "run1", private, tmp_path / "a.json")
    reg_path = bundle_repo / "evidence/run1/bundle.json"
    reg = json.loads(reg_path.read_text())
    reg["manifest"]["metadata"]["created"] = "2001-01-01T00:00:00Z"
    from evidencestore._canonical import decode, pretty
    from evidencestore.bundle import seal
    from evidencestore.models import BundleManifest

    manifest = decode(json.dumps(reg["manifest"]).encode(), BundleManifest)
    reg_path.write_bytes(pretty(seal(manifest)))
    code, out, _ = _verify(bundle_repo, tmp_path / "a.json", public, "run1")
    assert code == 1 and "it changed after signing" in out
