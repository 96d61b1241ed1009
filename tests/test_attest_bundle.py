"""Attestation bundles (``*.intoto.jsonl``): ``attest --bundle`` appends one DSSE envelope
a line, ``attest verify`` checks every line and names the line of every problem."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

pytest.importorskip("securesystemslib")

from helpers.remotes import run
from helpers.repos import add_bundle, init_repo

from evidencestore.attest import (
    PREDICATE_BUNDLE,
    PREDICATE_RECORD,
    PREDICATE_TEST_RESULT,
    verify_attestation_bundle,
)
from evidencestore.dsse import load_public_key
from evidencestore.remotes import local_store


@pytest.fixture
def keyed_repo(tmp_path: Path) -> Path:
    root = init_repo(tmp_path / "repo")
    assert run("init", "--root", str(root))[0] == 0
    add_bundle(root, "run1", {"ext/log.txt": b"log\n" * 100, "results.json": b"{}\n"},
               external=("ext/*",))  # fmt: skip
    add_bundle(root, "run2", {"results.json": b'{"two": 2}\n'})
    assert run("attest", "keygen", str(tmp_path / "k"))[0] == 0
    return root


def _append(repo: Path, target: str, bundle: Path, *extra: str) -> str:
    code, _, err = run(
        "attest", target, "--key", str(repo.parent / "k"), "--bundle", str(bundle),
        "--root", str(repo), *extra,
    )  # fmt: skip
    assert code == 0, err
    return err


def _verify(repo: Path, bundle: Path, *subjects: str) -> tuple[int, str]:
    args = [a for s in subjects for a in ("--subject", s)]
    code, out, err = run(
        "attest", "verify", str(bundle), "--key", str(repo.parent / "k.pub"), *args,
        "--root", str(repo),
    )  # fmt: skip
    return code, out + err


def _written(repo: Path, tmp_path: Path) -> tuple[Path, str]:
    record = local_store(repo).put(b'{"note": "a record"}')
    bundle = tmp_path / "out.intoto.jsonl"
    assert "(line 1)" in _append(repo, "run1", bundle)
    assert "(line 2)" in _append(repo, "run1", bundle, "--predicate", "test-result")
    assert "(line 3)" in _append(repo, record.digest, bundle)
    return bundle, record.digest


def test_lines_written_and_verified(keyed_repo: Path, tmp_path: Path) -> None:
    bundle, digest = _written(keyed_repo, tmp_path)
    lines = bundle.read_bytes().split(b"\n")
    assert len(lines) == 4 and lines[-1] == b""  # three lines, each newline-terminated
    types = [
        json.loads(base64.b64decode(json.loads(line)["payload"]))["predicateType"]
        for line in lines[:3]
    ]
    assert types == [PREDICATE_BUNDLE, PREDICATE_TEST_RESULT, PREDICATE_RECORD]
    code, out = _verify(keyed_repo, bundle, "run1", digest)
    assert code == 0, out
    assert f"verified: {bundle}: 3 attestation(s)" in out
    assert "line 2: about run1, 1 subject(s) match; predicate " + PREDICATE_TEST_RESULT in out
    assert f"line 3: about {digest}" in out
    result = verify_attestation_bundle(
        keyed_repo, bundle.read_bytes(), load_public_key(keyed_repo.parent / "k.pub"),
        expected=("run1", digest),
    )  # fmt: skip
    assert result.ok and [x.line for x in result.lines] == [1, 2, 3]


def test_a_tampered_line_is_refused_by_its_number(keyed_repo: Path, tmp_path: Path) -> None:
    bundle, digest = _written(keyed_repo, tmp_path)
    lines = bundle.read_bytes().split(b"\n")
    env = json.loads(lines[1])
    statement = json.loads(base64.b64decode(env["payload"]))
    statement["predicate"]["result"] = "FAILED"
    env["payload"] = base64.b64encode(json.dumps(statement).encode()).decode()
    lines[1] = json.dumps(env).encode()
    bundle.write_bytes(b"\n".join(lines))
    code, out = _verify(keyed_repo, bundle, "run1", digest)
    assert code == 1 and "REFUSED" in out
    assert f"{bundle} line 2: no valid signature by key" in out
    assert "line 1" not in out and "line 3" not in out  # the others still verify
    # A line that is not an envelope, and a Sigstore bundle line, named too.
    lines[1] = b'{"not": "an envelope"}'
    lines.insert(
        3, b'{"mediaType": "application/vnd.dev.sigstore.bundle.v0.3+json", "dsseEnvelope": {}}'
    )
    bundle.write_bytes(b"\n".join(lines))
    code, out = _verify(keyed_repo, bundle, "run1", digest)
    assert code == 1 and f"{bundle} line 2: not a DSSE envelope" in out
    assert f"{bundle} line 4: a Sigstore bundle" in out


def test_every_line_must_be_about_an_expected_subject(keyed_repo: Path, tmp_path: Path) -> None:
    bundle, digest = _written(keyed_repo, tmp_path)
    code, out = _verify(keyed_repo, bundle, "run1")
    assert (
        code == 1 and f"{bundle} line 3: predicate type '{PREDICATE_RECORD}' is not a bundle" in out
    )
    code, out = _verify(keyed_repo, bundle, "run1", digest, "run2")
    assert code == 1 and f"{bundle}: no verified line is about run2" in out


def test_bad_bundles_and_usage(keyed_repo: Path, tmp_path: Path) -> None:
    empty = tmp_path / "empty.intoto.jsonl"
    empty.write_bytes(b"")
    code, out = _verify(keyed_repo, empty, "run1")
    assert code == 1 and "no attestation (an empty bundle)" in out
    torn = tmp_path / "torn.intoto.jsonl"
    torn.write_bytes(b'{"payload": "')
    code, _, err = run(
        "attest", "run1", "--key", str(keyed_repo.parent / "k"), "--bundle", str(torn),
        "--root", str(keyed_repo),
    )  # fmt: skip
    assert code == 2 and "last line is not terminated by a newline" in err
    assert torn.read_bytes() == b'{"payload": "'  # nothing appended
    code, _, err = run(
        "attest", "run1", "--key", str(keyed_repo.parent / "k"), "--bundle", str(torn), "-o",
        str(tmp_path / "x.json"), "--root", str(keyed_repo),
    )  # fmt: skip
    assert code == 2 and "not both" in err
    one = tmp_path / "one.json"
    assert run("attest", "run1", "--key", str(keyed_repo.parent / "k"), "-o", str(one),
               "--root", str(keyed_repo))[0] == 0  # fmt: skip
    code, out = _verify(keyed_repo, one, "run1", "run2")
    assert code == 2 and "one --subject for an envelope" in out
