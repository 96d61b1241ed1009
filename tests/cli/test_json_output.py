"""``--json`` on push, pull and gc; pull failures naming bundle and path; -q / -v (issue 12)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from helpers.repos import add_bundle

from evidencestore.cli import main
from evidencestore.digest import hash_bytes


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    add_bundle(root, "j", {"ext/a.bin": b"a" * 300, "r.txt": b"r"}, external=("ext/*",))
    assert main(["remote", "add", "m", str(tmp_path / "remote"), "--root", str(root)]) == 0
    return root


def test_push_and_pull_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = _repo(tmp_path)
    code, out, _ = _run(capsys, "push", "--json", "--root", str(root))
    assert code == 0
    doc = json.loads(out)
    assert (doc["action"], doc["target"], doc["blobs"], doc["transferred"], doc["bytes"]) == (
        "push",
        "remote 'm'",
        1,
        1,
        300,
    )
    assert doc["failures"] == []
    shutil.rmtree(root / ".evstore")
    code, out, _ = _run(capsys, "pull", "--json", "--root", str(root))
    doc = json.loads(out)
    assert code == 0 and (doc["action"], doc["transferred"], doc["present"]) == ("pull", 1, 0)


def test_pull_failure_names_bundle_and_path(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _repo(tmp_path)
    (tmp_path / "remote").mkdir()
    shutil.rmtree(root / ".evstore")
    digest = hash_bytes(b"a" * 300).digest
    code, out, err = _run(capsys, "pull", "--root", str(root))
    assert code == 2
    [line] = [ln for ln in err.splitlines() if digest in ln]
    assert line.strip().startswith(f"j:ext/a.bin: {digest} could not be fetched: ")
    code, out, err = _run(capsys, "pull", "--json", "--root", str(root))
    doc = json.loads(out)
    assert code == 2 and doc["transferred"] == 0
    [failure] = doc["failures"]
    assert failure.startswith("j:ext/a.bin: ") and digest in failure


def test_gc_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "repo"
    add_bundle(root, "g", {"r.txt": b"r"})
    from evidencestore.config import local_store

    orphan = local_store(root).put(b"orphan" * 10)
    code, out, _ = _run(capsys, "gc", "--grace", "0", "--json", "--root", str(root))
    assert code == 0
    doc = json.loads(out)
    assert doc["deleted"] is False
    assert [b["digest"] for b in doc["garbage"]] == [orphan.digest]
    assert doc["garbage"][0]["size"] == 60 and "line" in doc


def test_global_quiet_and_verbose(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "repo"
    add_bundle(root, "q", {"a.txt": b"a"})
    add_bundle(root, "w", {"b.txt": b"b"})
    (root / "evidence/w/b.txt").write_bytes(b"B")
    code, out, _ = _run(capsys, "-q", "verify", "--root", str(root))
    assert code == 1
    lines = out.splitlines()
    assert lines[0] == "  w: 1 entry, 0 hashed, 0 unavailable: FAILED"  # no header, no ok line
    assert not [ln for ln in lines if ln.startswith("  q:")]
    assert lines[-1] == "verification FAILED"
    add_bundle(root, "s", {"ext/c.bin": b"c", "d.txt": b"d"}, external=("ext/*",))
    shutil.rmtree(root / ".evstore")
    code, out, _ = _run(capsys, "verify", "--root", str(root), "--bundle", "s")
    assert "warning: unavailable" not in out and "notice: 1 store entry of 1 bundle" in out
    code, out, _ = _run(capsys, "-v", "verify", "--root", str(root), "--bundle", "s")
    assert "    warning: unavailable: store entry 'ext/c.bin'" in out
