"""CI-grade output of ``evstore verify`` and the guard-rails of issue 12 (items 1-7, 11)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from helpers import paths
from helpers.repos import add_bundle, git, init_repo, make_files

from evidencestore.cli import main
from evidencestore.digest import hash_bytes


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _fresh_checkout(root: Path, n: int = 30) -> None:
    """A bundle with ``n`` store entries, then the local store removed (a CI checkout)."""
    add_bundle(
        root,
        "big",
        {**{f"ext/b{i:02d}.bin": bytes([i]) * 100 for i in range(n)}, "r.json": b"{}"},
        external=("ext/*",),
    )
    shutil.rmtree(root / ".evstore")


# -- item 1: unavailable entries collapse into one notice -------------------------------
def test_unavailable_entries_collapse_into_one_notice(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _fresh_checkout(tmp_path)
    code, out, _ = _run(capsys, "verify", "--root", str(tmp_path), "--github")
    assert code == 0
    lines = out.splitlines()
    assert not [ln for ln in lines if ln.startswith("::warning")]
    [notice] = [ln for ln in lines if ln.startswith("::notice")]
    assert "30 store entries of 1 bundle (3000 bytes) are not in the local store" in notice
    assert "evstore pull" in notice and "--remote NAME or --require-available" in notice
    # the library's view words the same notice in its parameters: the CLI words its flags
    from evidencestore.config import Repository
    from evidencestore.verify import verify_repository
    from evidencestore.verify.render import RegisteredEntries, View

    report = verify_repository(tmp_path, store=Repository(tmp_path).local_store())
    view = View(report, tmp_path, RegisteredEntries.on_disk(report, tmp_path))
    said = view.unavailable_notice()
    assert said is not None and said.endswith(
        "run `evstore pull` first, or verify with remote NAME or require_available"
    )

    code, out, _ = _run(capsys, "verify", "--root", str(tmp_path), "--github", "--unavailable=each")
    assert code == 0 and len([ln for ln in out.splitlines() if ln.startswith("::warning")]) == 30

    code, out, _ = _run(
        capsys, "verify", "--root", str(tmp_path), "--github", "--unavailable", "error"
    )
    assert code == 1
    errors = [ln for ln in out.splitlines() if ln.startswith("::error")]
    assert len(errors) == 30 and all("title=evstore unavailable" in e for e in errors)

    code, out, _ = _run(capsys, "verify", "--root", str(tmp_path))
    assert code == 0
    assert "notice: 30 store entries of 1 bundle (3000 bytes) are not in the local store" in out
    assert "warning:" not in out


# -- item 2: shallow clones and --base -----------------------------------------------------
def test_base_missing_from_a_shallow_clone_says_how_to_fetch_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    origin = init_repo(tmp_path / "origin")
    add_bundle(origin, "a", {"x.txt": b"x"})
    git(origin, "add", "-A")
    git(origin, "commit", "-qm", "one")
    add_bundle(origin, "b", {"y.txt": b"y"})
    git(origin, "add", "-A")
    git(origin, "commit", "-qm", "two")
    clone = tmp_path / "clone"
    subprocess.run(
        ["git", "clone", "-q", "--depth", "1", f"file://{origin}", str(clone)], check=True
    )
    code, out, err = _run(capsys, "verify", "--root", str(clone), "--base", "HEAD~1", "--github")
    assert code == 2
    assert "revision 'HEAD~1' is not in this shallow clone" in err
    assert "fetch-depth: 0" in err and "git fetch origin HEAD~1" in err
    assert out.startswith("::error title=evstore --base::--base HEAD~1: revision")
    code, _, err = _run(capsys, "verify", "--root", str(clone), "--base", "origin/nope")
    assert code == 2 and "`git fetch origin nope`" in err and "shallow" in err


# -- item 3: annotation paths, --json FILE, step summary ------------------------------------
def test_annotation_paths(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    top = init_repo(tmp_path / "top")
    ml = top / "ml"
    (ml / "evidence").mkdir(parents=True)
    reg = add_bundle(ml, "s", {"ext/v.bin": b"v" * 10, "r.txt": b"r"}, external=("ext/*",))
    (ml / "evidence/s/r.txt").write_bytes(b"R")
    shutil.rmtree(ml / ".evstore")
    (ml / "evidence/broken").mkdir()
    (ml / "evidence/broken/bundle.json").write_text("{")
    monkeypatch.chdir(top)
    code, out, _ = _run(
        capsys,
        "verify",
        "--root",
        "ml",
        "--github",
        "--unavailable",
        "each",
        "--bundle",
        "s",
        "--bundle",
        "broken",
    )
    assert code == 1
    assert "::error file=ml/evidence/s/r.txt,title=evstore hash-mismatch::" in out
    # the store entry points at its line in bundle.json
    lines = (ml / "evidence/s/bundle.json").read_text().splitlines()
    line = 1 + next(i for i, t in enumerate(lines) if t.strip() == '"path": "ext/v.bin",')
    assert (
        f"::warning file=ml/evidence/s/bundle.json,line={line},title=evstore unavailable::" in out
    )
    # an invalid registration: the path once, and no false unknown-bundle
    assert "file=ml/evidence/broken/bundle.json,title=evstore invalid-registration" in out
    assert "evidence/broken/evidence" not in out and "unknown-bundle" not in out
    assert reg.digest  # the bundle itself was sound


def test_json_file_with_github_and_step_summary(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    add_bundle(tmp_path, "ok1", {"a.txt": b"a"})
    add_bundle(tmp_path, "bad", {"b.txt": b"b"})
    (tmp_path / "evidence/bad/b.txt").write_bytes(b"B")
    summary = tmp_path / "summary.md"
    summary.write_text("earlier step\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    report = tmp_path / "report.json"
    code, out, _ = _run(
        capsys, "verify", "--root", str(tmp_path), "--github", "--json", str(report)
    )
    assert code == 1
    assert json.loads(report.read_text())["totals"]["errors"] == 1
    assert out.splitlines()[-1].startswith("evstore: 2 bundles, 2 entries, 1 hash checked")
    text = summary.read_text()
    assert text.startswith("earlier step\n### evstore verify: FAILED")
    assert "| bad | 1 | 0 | 0 | FAILED |" in text and "| ok1 | 1 | 1 | 0 | ok |" in text
    assert "| error | hash-mismatch | `evidence/bad/b.txt` |" in text
    code, _, err = _run(capsys, "verify", "--root", str(tmp_path), "--github", "--json")
    assert code == 2 and "give --json a FILE" in err


# -- item 4: exit codes, positive remote statement, repeated paths, plurals ------------------
def test_verify_exit_codes_and_wording(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _run(capsys, "init", "--root", str(tmp_path))[0] == 0
    code, out, _ = _run(capsys, "verify", "--root", str(tmp_path))
    assert code == 0 and out.rstrip().endswith(
        "0 bundles, 0 entries, 0 hashes checked, 0 unavailable, 0 errors, 0 warnings\nverified"
    )
    assert "holds no bundle yet" in out
    shutil.rmtree(tmp_path / "evidence")  # a fresh clone: git keeps no empty directory
    assert _run(capsys, "verify", "--root", str(tmp_path))[0] == 0
    add_bundle(tmp_path, "one", {"a.txt": b"a"})
    code, _, err = _run(capsys, "verify", "--root", str(tmp_path), "--bundle", "nope")
    assert code == 2 and "--bundle 'nope': no such bundle registered (registered: one)" in err
    code, out, _ = _run(capsys, "verify", "--root", str(tmp_path))
    assert "1 bundle, 1 entry, 1 hash checked, 0 unavailable, 0 errors, 0 warnings" in out
    (tmp_path / "evidence/one/a.txt").write_bytes(b"A")
    code, out, _ = _run(capsys, "verify", "--root", str(tmp_path))
    [finding] = [ln for ln in out.splitlines() if "hash-mismatch" in ln]
    assert finding.count("a.txt") == 1  # the path is not repeated


def test_bundle_line_fails_with_its_repository_wide_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    init_repo(tmp_path)
    add_bundle(tmp_path, "c", {"a.txt": b"a"})
    git(tmp_path, "add", "-A")
    git(tmp_path, "commit", "-qm", "base")
    reg = tmp_path / "evidence/c/bundle.json"
    data = json.loads(reg.read_text())
    data["manifest"]["metadata"]["producer"] = "someone else"
    reg.write_text(json.dumps(data, indent=2))
    code, out, _ = _run(capsys, "verify", "--root", str(tmp_path), "--base", "HEAD")
    assert code == 1
    assert "  c: 1 entry, 1 hashed, 0 unavailable: FAILED" in out
    assert "bundle-changed" in out.split("  c:", 1)[1]


def test_verify_remote_says_positively_what_it_holds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    add_bundle(tmp_path, "r", {"ext/a.bin": b"a" * 50, "ext/b.bin": b"b" * 50}, external=("ext/*",))
    remote = tmp_path / "remote"
    assert _run(capsys, "remote", "add", "m", str(remote), "--root", str(tmp_path))[0] == 0
    assert _run(capsys, "push", "--root", str(tmp_path))[0] == 0
    code, out, _ = _run(capsys, "verify", "--root", str(tmp_path), "--remote", "m")
    assert code == 0
    assert "notice: remote 'm': 2 of 2 store entries present, with the right size" in out
    code, out, _ = _run(capsys, "verify", "--root", str(tmp_path), "--remote", "m", "--github")
    assert "::notice title=evstore::remote 'm': 2 of 2 store entries present" in out


# -- item 5: bundle create guard-rails -------------------------------------------------------
def test_bundle_create_dry_run_and_glob_warnings(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert _run(capsys, "init")[0] == 0
    make_files(tmp_path / "res", {"sub/a.mp4": b"v" * 300, "log.txt": b"log"})
    (tmp_path / "res/empty").mkdir()
    code, out, err = _run(
        capsys,
        "bundle",
        "create",
        "x",
        "res",
        "--external",
        "sub/*",
        "--external",
        "*.mp4",
        "--dry-run",
    )
    assert code == 0
    assert re.search(r"^store\s+300  res/sub/a\.mp4  <- res/sub/a\.mp4$", out, re.M)
    assert re.search(r"^git\s+3  res/log\.txt", out, re.M)
    assert "would have 2 entries (1 in git, 3 bytes; 1 in the store, 300 bytes)" in out
    assert "external pattern 'sub/*' matches no file" in err
    assert "external pattern '*.mp4' matches" not in err
    assert "res/empty: empty directory, adds nothing" in err
    assert not (tmp_path / "evidence/x").exists()
    code, _, err = _run(capsys, "bundle", "create", "y", "res", "--external", "/data/*", "-n")
    assert "'/data/*' is absolute: it is matched against source paths" in err


def test_max_git_file_size(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert _run(capsys, "init")[0] == 0
    with open("evstore.toml", "a") as fh:
        fh.write("\n[bundle]\nmax_git_file_size = 100\n")
    make_files(tmp_path / "res", {"big.bin": b"b" * 101, "small.txt": b"s"})
    code, _, err = _run(capsys, "bundle", "create", "x", "res")
    assert code == 2
    assert "1 file would go to git over max_git_file_size = 100 bytes" in err
    assert "res/big.bin (101 bytes)" in err and not (tmp_path / "evidence/x").exists()
    code, out, _ = _run(capsys, "bundle", "create", "x", "res", "--dry-run")
    assert code == 1 and "res/big.bin  <- res/big.bin  (over max_git_file_size)" in out
    code, out, _ = _run(capsys, "bundle", "create", "x", "res", "--external", "*.bin")
    assert code == 0 and "(1 in git, 1 in the store)" in out


# -- item 6: outside an evidence repository ---------------------------------------------------
def test_outside_an_evidence_repository_commands_refuse(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    init_repo(tmp_path)
    make_files(tmp_path, {"v.mp4": b"v"})
    monkeypatch.chdir(tmp_path)
    for argv in (
        ("bundle", "create", "x", "v.mp4", "--external", "*"),
        ("verify",),
        ("bundle", "list"),
        ("push",),
    ):
        code, _, err = _run(capsys, *argv)
        assert code == 2, argv
        assert "not an evidence repository (run `evstore init`)" in err, argv
    assert not (tmp_path / ".evstore").exists() and not (tmp_path / "evidence").exists()


# -- item 7: check-proof anchoring ------------------------------------------------------------
def test_check_proof_needs_an_anchor(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # two repositories side by side (a folder inside one would be that one: find_root)
    real_root, forged_root = tmp_path / "real", tmp_path / "forged"
    real = add_bundle(real_root, "p", {f"f{i}.txt": str(i).encode() for i in range(3)})
    add_bundle(forged_root, "p", {"f0.txt": b"fake", "f1.txt": b"1"})
    code, out, _ = _run(capsys, "prove", "p", "f0.txt", "--root", str(forged_root))
    proof = tmp_path / "proof.json"
    proof.write_text(out)
    code, out, err = _run(capsys, "check-proof", str(proof))
    assert code == 1 and out == ""
    assert "proof NOT ANCHORED: self-consistent" in err and "--digest" in err
    code, _, err = _run(
        capsys, "check-proof", str(proof), "--bundle", "p", "--root", str(real_root)
    )
    assert code == 1 and f"expected {real.digest}" in err
    code, _, err = _run(capsys, "check-proof", str(proof), "--digest", real.digest)
    assert code == 1 and f"expected {real.digest}" in err
    code, out, _ = _run(capsys, "prove", "p", "f0.txt", "--root", str(real_root))
    proof.write_text(out)
    code, out, _ = _run(
        capsys, "check-proof", str(proof), "--bundle", "p", "--root", str(real_root)
    )
    assert code == 0 and "anchored by the registration of bundle 'p'" in out


# -- item 8 (part): hash --check, hash -, bundle list --json -----------------------------------
def test_hash_check_reads_its_own_output_and_b3sum(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    make_files(tmp_path, {"a.bin": b"abc", "b.bin": b"xyz"})
    code, out, _ = _run(capsys, "hash", "a.bin", "b.bin")
    (tmp_path / "sums").write_text(out)
    hexd = hash_bytes(b"xyz").digest.removeprefix("blake3:")
    (tmp_path / "b3").write_text(f"{hexd}  b.bin\n")
    assert _run(capsys, "hash", "--check", "sums") == (0, "a.bin: OK\nb.bin: OK\n", "")
    assert _run(capsys, "hash", "-c", "b3")[:2] == (0, "b.bin: OK\n")
    (tmp_path / "b.bin").write_bytes(b"xyZ")
    code, out, err = _run(capsys, "hash", "--check", "sums")
    assert code == 1 and "b.bin: FAILED (content differs)" in out and "1 file of 2 FAILED" in err
    (tmp_path / "a.bin").write_bytes(b"abcd")
    code, out, _ = _run(capsys, "hash", "--check", "sums")
    assert "a.bin: FAILED (size is 4 bytes, expected 3)" in out
    (tmp_path / "junk").write_text("not a digest line\n")
    code, _, err = _run(capsys, "hash", "--check", "junk")
    assert code == 2 and "junk:1: not a digest line" in err


def test_hash_stdin(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    import io

    class Stdin:
        buffer = io.BytesIO(b"hello")

    monkeypatch.setattr("sys.stdin", Stdin)
    code, out, _ = _run(capsys, "hash", "-")
    assert code == 0 and out == f"{hash_bytes(b'hello').digest}  5  -\n"


def test_bundle_list_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    reg = add_bundle(tmp_path, "l", {"a.txt": b"aa", "ext/b.bin": b"bbb"}, external=("ext/*",))
    code, out, _ = _run(capsys, "bundle", "list", "--json", "--root", str(tmp_path))
    assert code == 0
    assert json.loads(out)["bundles"] == [
        {
            "name": "l",
            "digest": reg.digest,
            "entries": 2,
            "store_entries": 1,
            "size": 5,
            "created": "2026-11-30T00:00:00Z",
            "references": [],
        }
    ]


# -- item 11: schema names, missing-extra hints ------------------------------------------------
def test_schema_without_name_lists_and_unknown_fails(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "schema")
    assert code == 0 and "registration" in out.splitlines() and "{" not in out
    code, out, err = _run(capsys, "schema", "nope")
    assert code == 2 and out == "" and "unknown schema 'nope' (schemas: registration" in err
    code, out, _ = _run(capsys, "schema", "verify-report")
    assert code == 0 and json.loads(out)["$id"].endswith("verify-report.schema.json")


@pytest.mark.parametrize(
    ("exc", "extra"),
    [
        (ImportError("Install s3fs to access S3"), "s3"),
        (ModuleNotFoundError("No module named 'aiohttp'", name="aiohttp"), "http"),
    ],
)
def test_missing_extras_name_the_pip_command(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    exc: ImportError,
    extra: str,
) -> None:
    from evidencestore import remotes
    from evidencestore.errors import StorageError

    (tmp_path / "evidence").mkdir()

    def wrapped(*args: object, **kwargs: object) -> None:  # as FsspecBlobStore wraps it
        raise StorageError(f"s3://b: cannot open this location: {exc}") from exc

    def bare(*args: object, **kwargs: object) -> None:
        raise exc

    for fake in (wrapped, bare):
        monkeypatch.setattr(remotes, "pull", fake)
        code, _, err = _run(capsys, "pull", "--root", str(tmp_path))
        assert code == 2 and f"pip install 'evidencestore[{extra}]'" in err, err


def test_the_example_workflow_runs_real_commands() -> None:
    """docs/ci/github-workflow.yml: every evstore command in it parses; it installs from
    git (never a package index the package is not on) with the extras the commands need,
    checks stored content (pull first, unavailable entries are errors, full history for
    --base) and checks every campaign against the base branch."""
    import shlex

    yaml = pytest.importorskip("yaml")
    from evidencestore.cli import build_parser

    doc = yaml.safe_load((paths.DOCS / "ci/github-workflow.yml").read_text())
    steps = doc["jobs"]["verify"]["steps"]
    assert steps[0]["with"]["fetch-depth"] == 0
    lines = [
        line.strip()
        for s in steps
        for line in re.sub(r"\$\{\{[^}]*\}\}", "X", s.get("run", "")).splitlines()
    ]
    [install] = [ln for ln in lines if ln.startswith("pip install")]
    assert "evidencestore[run,campaign,s3] @ git+" in install
    text = " ".join(re.sub(r"\$\{\{[^}]*\}\}", "X", s.get("run", "")) for s in steps)
    commands = [
        shlex.split(part.split("||")[0].strip().removeprefix("code=0;").strip())
        for part in re.split(r"\n|;(?= *evstore)", "\n".join(
            re.sub(r"\$\{\{[^}]*\}\}", "X", s.get("run", "")).replace(">\n", " ")
            for s in steps
        ))
        if "evstore " in part and not part.strip().startswith("#")
    ]  # fmt: skip
    commands = [c[c.index("evstore") :] for c in commands if "evstore" in c]
    assert [c[1:3] if c[1] == "campaign" else c[1:2] for c in commands] == [
        ["pull"],
        ["verify"],
        ["campaign", "verify"],
        ["campaign", "status"],
    ]
    assert text.count("--base") == 3
    parser = build_parser()
    for argv in commands:
        parser.parse_args(argv[1:])
    verify = parser.parse_args(commands[1][1:])
    assert verify.github and verify.unavailable == "error" and verify.json == "evstore-report.json"
    assert verify.base == "origin/$BASE"
    for argv in commands[2:]:
        assert parser.parse_args(argv[1:]).base == "origin/$BASE"


def test_check_repository_names_each_path_once(tmp_path: Path) -> None:
    from evidencestore.errors import VerificationError
    from evidencestore.verify import check_repository

    add_bundle(tmp_path, "ltx", {"video/ref.mp4": b"v"})
    (tmp_path / "evidence/ltx/video/ref.mp4").write_bytes(b"V")
    with pytest.raises(VerificationError) as info:
        check_repository(tmp_path)
    [line] = [ln for ln in str(info.value).splitlines() if "hash-mismatch" in ln]
    assert line.strip().startswith("ltx: hash-mismatch: evidence/ltx/video/ref.mp4: content")
    assert line.count("video/ref.mp4") == 1
