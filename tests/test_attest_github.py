"""sha256 beside blake3 in every subject of every statement kind, so GitHub's
``actions/attest`` and ``gh attestation verify`` bind them; and the local steps of the
GitHub workflow in docs/attestations.md, run as written (jq, sha256sum)."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("securesystemslib")

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from helpers.paths import DATA, ROOT
from helpers.remotes import run
from helpers.repos import add_bundle, init_repo

from evidencestore.attest import statement_for
from evidencestore.campaign.setaside import sign_set_aside
from evidencestore.dsse import sign_run
from evidencestore.inventory import load_registration, registration_path
from evidencestore.remotes import local_store

TOP = ROOT
RECORDS = DATA / "legacy_records"
HEX64 = re.compile(r"[0-9a-f]{64}")


@pytest.fixture
def subjects_repo(tmp_path: Path) -> Path:
    root = init_repo(tmp_path / "repo")
    assert run("init", "--root", str(root))[0] == 0
    add_bundle(root, "run1", {"ext/log.txt": b"raw\n" * 300, "results.json": b'{"ok": 1}\n'},
               external=("ext/*",))  # fmt: skip
    notes = root / "notes"
    notes.mkdir()
    for name in ("claim.json", "comparison.json", "status.json", "run.json", "check.json"):
        shutil.copyfile(RECORDS / name, notes / name)
    return root


def _bytes_of(repo: Path, name: str) -> bytes:
    """A subject's bytes, read here: a repository file, else a store entry by its path
    (``evidence/<bundle>/<entry>``) or digest."""
    if (repo / name).is_file():
        return (repo / name).read_bytes()
    if name.startswith("blake3:"):
        return local_store(repo).get(name)
    _, bundle, entry = name.split("/", 2)
    reg = load_registration(registration_path(repo, bundle))
    [e] = [e for e in reg.manifest.entries if e.path == entry]
    return local_store(repo).get(e.descriptor.digest, e.descriptor.size)


def test_every_statement_kind_carries_sha256(subjects_repo: Path) -> None:
    status = local_store(subjects_repo).put((RECORDS / "status.json").read_bytes())
    statements = [statement_for(subjects_repo, "run1"), statement_for(subjects_repo, status.digest)]
    statements += [
        statement_for(subjects_repo, str(subjects_repo / "notes" / n))
        for n in ("claim.json", "comparison.json")
    ]
    for target in (
        "run1",
        status.digest,
        *(str(subjects_repo / "notes" / n) for n in ("comparison.json", "run.json", "check.json")),
    ):
        statements.append(statement_for(subjects_repo, target, predicate="test-result"))
    key = Ed25519PrivateKey.generate()
    reg = load_registration(registration_path(subjects_repo, "run1"))

    def sha(e: object) -> str:
        body = _bytes_of(subjects_repo, f"evidence/run1/{e.path}")  # type: ignore[attr-defined]
        return hashlib.sha256(body).hexdigest()

    data = (subjects_repo / "evidence/run1/results.json").read_bytes()
    from evidencestore._canonical import decode
    from evidencestore.dsse import Statement

    for env in (
        sign_run("run1", data, {}, key, reg.manifest.entries, sha),
        sign_set_aside("run1", "results.json", data, key),
    ):
        statements.append(decode(base64.b64decode(env.payload), Statement))
    assert len(statements) == 11
    for st in statements:
        for s in st.subject:
            assert set(s.digest) == {"sha256", "blake3"}, (st.predicate_type, s.name)
            assert HEX64.fullmatch(s.digest["sha256"])
            if not s.name.endswith("run.json") or st.predicate_type.endswith("test-result/v0.1"):
                body = _bytes_of(subjects_repo, s.name)
                assert s.digest["sha256"] == hashlib.sha256(body).hexdigest(), s.name
    # A run signature needs every entry's SHA-256: none is signed with blake3 alone.
    from evidencestore.errors import AttestationError

    with pytest.raises(AttestationError, match="needs their SHA-256"):
        sign_run("run1", data, {}, key, reg.manifest.entries)


def _workflow_block() -> str:
    page = (TOP / "docs" / "attestations.md").read_text()
    mark = "<!-- run: tests/test_attest_github.py"
    block = page[page.index(mark) :].split("```sh\n", 1)[1].split("```", 1)[0]
    assert "evstore attest run1 --statement --predicate test-result" in block
    return block


@pytest.mark.skipif(shutil.which("jq") is None, reason="jq is not installed")
def test_the_workflow_steps_of_the_docs_run_as_written(subjects_repo: Path, tmp_path: Path) -> None:
    shim = tmp_path / "bin"
    shim.mkdir()
    (shim / "evstore").write_text(f'#!/bin/sh\nexec {sys.executable} -m evidencestore "$@"\n')
    (shim / "evstore").chmod(0o755)
    env = {
        **os.environ,
        "PATH": f"{shim}{os.pathsep}{os.environ['PATH']}",
        "PYTHONPATH": f"{TOP}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
    }
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", _workflow_block()],
                          cwd=subjects_repo, env=env, capture_output=True, text=True,
                          timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines() == ["evidence/run1/bundle.json: OK"]
    predicate = json.loads((subjects_repo / "predicate.json").read_text())
    assert predicate["result"] == "PASSED"
    import google.protobuf.json_format as pb_json
    from in_toto_attestation.predicates.test_result.v0 import test_result_pb2

    parsed = pb_json.ParseDict(predicate, test_result_pb2.TestResult())  # type: ignore[attr-defined]
    assert list(parsed.passed_tests) == ["ext/log.txt", "results.json"]
    registration = (subjects_repo / "evidence/run1/bundle.json").read_bytes()
    assert (subjects_repo / "subjects.sha256").read_text() == (
        f"{hashlib.sha256(registration).hexdigest()}  evidence/run1/bundle.json\n"
    )
    # Negative control: the registration changed, and the checksum GitHub binds fails.
    (subjects_repo / "evidence/run1/bundle.json").write_bytes(registration + b" ")
    check = subprocess.run(["sha256sum", "-c", "subjects.sha256"], cwd=subjects_repo,
                           capture_output=True, text=True)  # fmt: skip
    assert check.returncode == 1 and "evidence/run1/bundle.json: FAILED" in check.stdout
