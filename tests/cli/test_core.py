import json
from pathlib import Path

import pytest
from helpers.repos import add_bundle, make_files

from evidencestore.cli import main
from evidencestore.digest import hash_bytes


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_hash_lines(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = make_files(tmp_path, {"a.bin": b"abc", "d/b.bin": b""})
    code, out, _ = _run(capsys, "hash", str(a), str(tmp_path / "d"))
    assert code == 0
    assert out.splitlines() == [
        f"{hash_bytes(b'abc').digest}  3  {a}",
        f"{hash_bytes(b'').digest}  0  {b}",
    ]
    code, _, err = _run(capsys, "hash", str(tmp_path / "missing"))
    assert code == 2 and "missing: No such file or directory" in err


def test_bundle_create_and_verify_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert _run(capsys, "init")[0] == 0  # outside an evidence repository, create refuses
    make_files(tmp_path / "out", {"metrics.json": b"{}", "video.mp4": b"\x00" * 2048})
    code, out, _ = _run(
        capsys,
        "bundle",
        "create",
        "run-7",
        "out",
        "--external",
        "*.mp4",
        "--ref",
        "PR-7",
        "--meta",
        "gpu=H200",
    )
    assert code == 0 and "registered run-7: 2 entries (1 in git, 1 in the store)" in out
    code, out, _ = _run(capsys, "bundle", "create", "run-7", "out")
    assert code == 2
    code, out, _ = _run(capsys, "bundle", "create", "x", "out", "--meta", "novalue")
    assert code == 2
    code, out, _ = _run(capsys, "verify", "--json")
    assert code == 0
    report = json.loads(out)
    assert report["ok"] is True
    assert report["totals"] == {
        "bundles": 1,
        "entries": 2,
        "checked": 2,
        "unavailable": 0,
        "errors": 0,
        "warnings": 0,
    }
    [b] = report["bundles"]
    assert b["name"] == "run-7" and b["findings"] == [] and b["digest"].startswith("blake3:")
    reg = json.loads((tmp_path / "evidence/run-7/bundle.json").read_text())
    assert reg["manifest"]["metadata"]["annotations"] == {"gpu": "H200"}
    assert reg["manifest"]["metadata"]["references"] == ["PR-7"]


def test_verify_failure_formats(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    add_bundle(tmp_path, "b", {"x.txt": b"x", "y.txt": b"y"})
    (tmp_path / "evidence/b/x.txt").write_bytes(b"z")
    (tmp_path / "evidence/b/y.txt").unlink()
    code, out, _ = _run(capsys, "verify", "--root", str(tmp_path))
    assert code == 1
    assert "error: hash-mismatch: evidence/b/x.txt: content hashes to" in out
    assert "error: missing-file: evidence/b/y.txt is missing" in out
    assert out.rstrip().endswith("verification FAILED")
    code, out, _ = _run(capsys, "verify", "--root", str(tmp_path), "--github")
    assert code == 1
    assert "::error file=evidence/b/x.txt,title=evstore hash-mismatch::" in out
    assert "::error file=evidence/b/y.txt,title=evstore missing-file::" in out
    code, out, _ = _run(capsys, "verify", "--root", str(tmp_path), "--json")
    assert code == 1
    report = json.loads(out)
    assert report["ok"] is False and report["totals"]["errors"] == 2
    codes = sorted(f["code"] for f in report["bundles"][0]["findings"])
    assert codes == ["hash-mismatch", "missing-file"]
    for f in report["bundles"][0]["findings"]:
        assert set(f) == {"severity", "code", "message", "bundle", "path", "digest"}


def test_usage_errors_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _run(capsys, "verify", "--bogus")[0] == 2
    assert _run(capsys, "verify", "--root", str(tmp_path / "nope"))[0] == 2
    assert _run(capsys)[0] == 2
    code, _, err = _run(capsys, "verify", "--root", str(tmp_path), "--deep")
    assert code == 2 and "--deep needs --remote" in err


def test_prove_and_check_proof(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    reg = add_bundle(tmp_path, "p", {f"f{i}.txt": str(i).encode() for i in range(7)})
    code, out, _ = _run(capsys, "prove", "p", "f3.txt", "--root", str(tmp_path))
    assert code == 0
    proof = json.loads(out)
    assert (
        proof["bundle_digest"] == reg.digest
        and proof["leaf_index"] == 3
        and proof["tree_size"] == 7
    )
    path = tmp_path / "proof.json"
    path.write_text(out)
    code, out, _ = _run(capsys, "check-proof", str(path), "--digest", reg.digest)
    assert code == 0 and "proof holds: f3.txt" in out
    proof["entry"]["descriptor"]["size"] += 1
    path.write_text(json.dumps(proof))
    code, _, err = _run(capsys, "check-proof", str(path))
    assert code == 1 and "does not hash to root" in err
    path.write_text("{}")
    code, _, err = _run(capsys, "check-proof", str(path))
    assert code == 2 and "not an inclusion proof" in err
    code, _, err = _run(capsys, "prove", "p", "nope.txt", "--root", str(tmp_path))
    assert code == 2 and "has no entry 'nope.txt'" in err


def test_module_entry_point(tmp_path: Path) -> None:
    import subprocess
    import sys

    add_bundle(tmp_path, "m", {"a": b"a"})
    proc = subprocess.run(
        [sys.executable, "-m", "evidencestore", "verify", "--root", str(tmp_path)],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    assert "1 bundle, 1 entry, 1 hash checked" in proc.stdout


def test_init_creates_config_store_and_evidence_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / ".gitignore").write_text("build/")
    assert _run(capsys, "init", "--root", str(tmp_path))[0] == 0
    from evidencestore.config import load_config

    assert (tmp_path / "evstore.toml").is_file()
    assert load_config(tmp_path).store.path == ".evstore"
    assert (tmp_path / ".gitignore").read_text() == "build/\n.evstore/\nevstore.local.toml\n"
    assert (tmp_path / "evidence").is_dir()
    code, out, _ = _run(capsys, "init", "--root", str(tmp_path))
    assert code == 0 and "already exists" in out
    assert (tmp_path / ".gitignore").read_text() == "build/\n.evstore/\nevstore.local.toml\n"


def test_os_errors_are_reported_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(capsys, "prove", "nope", "x", "--root", str(tmp_path))
    assert code == 2
    assert (
        err.strip() == f"evstore: error: {tmp_path}/evidence/nope/bundle.json: no such registration"
    )
    code, _, err = _run(capsys, "check-proof", str(tmp_path / "missing.json"))
    assert code == 2
    assert (
        err.strip()
        == f"evstore: error: {tmp_path}/missing.json: cannot read: No such file or directory"
    )


def test_unexpected_exception_is_an_internal_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import evidencestore.verify as verify

    def boom(*args: object, **kwargs: object) -> None:
        raise TypeError("simulated bug")

    monkeypatch.setattr(verify, "verify_repository", boom)
    code, _, err = _run(capsys, "verify", "--root", str(tmp_path))
    assert code == 2  # never 1, which CI would read as "verification failed"
    assert "evstore: internal error: TypeError: simulated bug" in err
    monkeypatch.setenv("EVSTORE_DEBUG", "1")
    with pytest.raises(TypeError):
        main(["verify", "--root", str(tmp_path)])


def test_missing_optional_dependency_names_the_extra(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import evidencestore.verify as verify

    def needs_av(*args: object, **kwargs: object) -> None:
        raise ModuleNotFoundError("No module named 'av'", name="av")

    monkeypatch.setattr(verify, "verify_repository", needs_av)
    code, _, err = _run(capsys, "verify", "--root", str(tmp_path))
    assert code == 2
    assert (
        "this command needs 'av', which is not installed: pip install 'evidencestore[media]'" in err
    )


def test_hash_of_a_directory_follows_links_out_of_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_bytes(b"linked from elsewhere")
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "link").symlink_to(outside)
    assert main(["hash", str(tmp_path / "d")]) == 0
    digest = hash_bytes(b"linked from elsewhere").digest
    assert f"{digest}  21  {tmp_path / 'd' / 'link'}" in capsys.readouterr().out
