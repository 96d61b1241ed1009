"""The independent verifier (``schemas/reference/verify.mjs``, JavaScript under Node,
written from ``schemas/CANONICAL.md`` alone) recomputes every registration, leaf, root,
bundle digest and inclusion proof of the legacy corpus (written by 0c7be23) and of a
repository the suite builds now with every record kind, and every test vector. Skipped
only where Node is absent; CI installs it (``.ci/run``)."""

from __future__ import annotations

import contextlib
import io
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from helpers import paths

from evidencestore.cli import main
from tests.helpers.corpus import LEGACY, generated_corpus, registrations

REFERENCE = paths.SCHEMAS / "reference"
VECTORS = REFERENCE.parent / "vectors"

pytestmark = pytest.mark.skipif(shutil.which("node") is None, reason="Node.js is not installed")


@pytest.fixture(scope="module")
def node_verifier() -> Path:
    if not (REFERENCE / "node_modules" / "@noble" / "hashes").is_dir():
        npm = shutil.which("npm")
        assert npm, "schemas/reference has no node_modules and npm is absent: run npm ci there"
        subprocess.run([npm, "ci", "--no-audit", "--no-fund"], cwd=REFERENCE, check=True,
                       capture_output=True, timeout=300)  # fmt: skip
    return REFERENCE / "verify.mjs"


def run_node(verifier: Path, *args: str | Path) -> tuple[int, dict[str, Any], str]:
    done = subprocess.run(
        ["node", str(verifier), *map(str, args)], capture_output=True, text=True, timeout=300
    )
    summary = json.loads(done.stdout) if done.stdout.strip() else {}
    return done.returncode, summary, done.stderr


def test_every_vector(node_verifier: Path) -> None:
    code, summary, err = run_node(node_verifier, "--vectors", VECTORS)
    assert (code, summary["mismatches"], err) == (0, 0, "")
    assert summary["vectors"] == 75


def test_the_legacy_corpus(node_verifier: Path) -> None:
    code, summary, err = run_node(
        node_verifier, LEGACY / "repo", "--proofs", LEGACY / "proofs",
        "--attestations", LEGACY / "attestations",
    )  # fmt: skip
    assert (code, err) == (0, "")
    assert summary["registrations"] == summary["roots"] == summary["digests"] == 25
    assert summary["leaves"] == summary["proofs_recomputed"] == 209
    assert summary["proofs_checked"] == 157
    assert (summary["attestations"], summary["subjects"]) == (2, 6)


def _prove_all(repo: Path, out: Path) -> int:
    """``evstore prove`` of every entry of every registration, as the CLI prints it."""
    n = 0
    for reg in registrations(repo.parent):
        name = reg.parent.name
        for i, entry in enumerate(json.loads(reg.read_bytes())["manifest"]["entries"]):
            raw = io.BytesIO()
            text = io.TextIOWrapper(raw, encoding="utf-8")
            with contextlib.redirect_stdout(text):
                assert main(["prove", name, entry["path"], "--root", str(repo)]) == 0
            text.flush()
            (out / name).mkdir(parents=True, exist_ok=True)
            (out / name / f"{i}.json").write_bytes(raw.getvalue())
            n += 1
    return n


def test_a_repository_of_every_record_kind_built_now(
    node_verifier: Path, tmp_path_factory: pytest.TempPathFactory, tmp_path: Path
) -> None:
    corpus = generated_corpus(tmp_path_factory)
    proofs = tmp_path / "proofs"
    n = _prove_all(corpus / "repo", proofs)
    code, summary, err = run_node(
        node_verifier, corpus / "repo", "--proofs", proofs,
        "--attestations", corpus / "attestations",
    )  # fmt: skip
    assert (code, err) == (0, "")
    assert summary["registrations"] == summary["roots"] == summary["digests"] == 25
    assert summary["proofs_checked"] == summary["proofs_recomputed"] == summary["leaves"] == n
    assert summary["blobs"] == n  # every entry's bytes, the store's included, re-hashed
    # the legacy two, and the campaign verdict as a test-result (registration, status.json)
    assert n > 150 and (summary["attestations"], summary["subjects"]) == (3, 8)


def test_one_changed_byte_of_one_manifest_is_a_mismatch(
    node_verifier: Path, tmp_path: Path
) -> None:
    """Negative control: the verifier can fail, and names what failed."""
    repo = tmp_path / "repo"
    shutil.copytree(LEGACY / "repo", repo)
    reg = repo / "evidence/many-types/bundle.json"
    data = bytearray(reg.read_bytes())
    at = data.index(b'"path": "') + len(b'"path": "')
    data[at] = ord("X") if data[at] != ord("X") else ord("Y")  # one byte of one entry path
    reg.write_bytes(bytes(data))
    code, summary, err = run_node(node_verifier, repo)
    assert code == 1 and summary["ok"] is False
    assert "evidence/many-types/bundle.json: entries hash to root" in err
    assert summary["digests"] == summary["roots"] == 24  # only that bundle differs
    # and a stored proof whose entry lost its explicit default no longer holds
    proofs = tmp_path / "proofs"
    shutil.copytree(LEGACY / "proofs", proofs)
    changed = 0
    for proof in sorted((proofs / "library").glob("*.json")):
        text = proof.read_bytes()
        if b'"media_type": "application/octet-stream"' in text and not changed:
            value = json.loads(text)
            del value["entry"]["descriptor"]["media_type"]
            proof.write_text(json.dumps(value))
            changed += 1
    code, summary, err = run_node(node_verifier, LEGACY / "repo", "--proofs", proofs)
    assert code == 1 and summary["mismatches"] == changed == 1
    assert "does not hash to root" in err
