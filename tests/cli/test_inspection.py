"""``evstore show``, ``status``, ``diff``, ``checkout`` and ``cat BUNDLE:PATH`` (issue 12, item 8)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.cli import cli
from helpers.repos import add_bundle

from evidencestore.cli import main
from evidencestore.config import local_store
from evidencestore.digest import hash_bytes


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


FILES = {"ext/v.bin": b"v" * 1000, "r.json": b'{"fps": 24}\n'}


@pytest.fixture
def base_next_repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    add_bundle(root, "base", FILES, external=("ext/*",), refs=("PR-1",))
    add_bundle(
        root,
        "next",
        {"ext/v.bin": b"w" * 1000, "r.json": b'{"fps": 24}\n', "new.txt": b"n"},
        external=("ext/*",),
    )
    return root


def test_show_prints_the_registration_as_json(
    base_next_repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = _run(capsys, "show", "base", "--json", "--root", str(base_next_repo))
    assert code == 0
    doc = json.loads(out)
    reg = json.loads((base_next_repo / "evidence/base/bundle.json").read_text())
    assert doc["digest"] == reg["digest"] and doc["metadata"]["references"] == ["PR-1"]
    assert doc["entries"] == [
        {
            "path": "ext/v.bin",
            "location": "store",
            "size": 1000,
            "digest": hash_bytes(b"v" * 1000).digest,
            "media_type": "application/octet-stream",
            "available": True,
        },
        {
            "path": "r.json",
            "location": "repo",
            "size": 12,
            "digest": hash_bytes(FILES["r.json"]).digest,
            "media_type": "application/json",
        },
    ]
    local_store(base_next_repo).delete(hash_bytes(b"v" * 1000).digest)
    code, out, _ = _run(capsys, "show", "base", "--root", str(base_next_repo))
    assert code == 0 and f"digest   {reg['digest']}" in out and "ref      PR-1" in out
    assert "store          1000" in out and "ext/v.bin  (not in the local store)" in out
    code, _, err = _run(capsys, "show", "bsae", "--root", str(base_next_repo))
    assert code == 2 and "did you mean 'base'?" in err


def test_status_says_what_is_missing_locally_and_on_a_remote(
    base_next_repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    remote = tmp_path / "remote"
    assert _run(capsys, "remote", "add", "r", str(remote), "--root", str(base_next_repo))[0] == 0
    assert _run(capsys, "push", "base", "--root", str(base_next_repo))[0] == 0
    local_store(base_next_repo).delete(hash_bytes(b"v" * 1000).digest)
    code, out, err = _run(capsys, "status", "--remote", "r", "--root", str(base_next_repo))
    assert code == 0
    assert out.splitlines() == [
        "base: 1 store entry, 1 not in the local store (1000 bytes), all on remote 'r'",
        "  not local: ext/v.bin",
        "next: 1 store entry, all in the local store, 1 not on remote 'r'",
        "  not on r: ext/v.bin",
    ]
    assert "presence by size only" in err
    code, out, _ = _run(capsys, "status", "next", "--json", "--root", str(base_next_repo))
    assert json.loads(out)["bundles"] == [
        {"name": "next", "store_entries": 1, "missing_locally": [], "missing_locally_bytes": 0}
    ]


def test_diff_lists_added_changed_removed_and_exits_1(
    base_next_repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = _run(capsys, "diff", "base", "next", "--root", str(base_next_repo))
    assert code == 1
    lines = out.splitlines()
    assert lines[0] == f"+ new.txt  (1 bytes, {hash_bytes(b'n').digest}, repo)"
    old, new = hash_bytes(b"v" * 1000).digest, hash_bytes(b"w" * 1000).digest
    assert lines[1] == f"~ ext/v.bin  ({old} -> {new})"
    assert lines[2] == "~ metadata.references: ['PR-1'] -> []"
    assert lines[3].startswith("1 added, 0 removed, 1 changed (base blake3:")
    code, out, _ = _run(capsys, "diff", "next", "base", "--json", "--root", str(base_next_repo))
    doc = json.loads(out)
    assert [r["path"] for r in doc["removed"]] == ["new.txt"] and doc["added"] == []
    assert code == 1
    code, out, _ = _run(
        capsys,
        "diff",
        "base",
        str(base_next_repo / "evidence/base/bundle.json"),
        "--root",
        str(base_next_repo),
    )
    assert code == 0 and out.startswith("0 added, 0 removed, 0 changed")


def test_checkout_writes_verified_files(
    base_next_repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dest = tmp_path / "out"
    code, out, _ = _run(capsys, "checkout", "base", str(dest), "--root", str(base_next_repo))
    assert code == 0 and "2 files, 1012 bytes, verified" in out
    assert (dest / "ext/v.bin").read_bytes() == b"v" * 1000
    assert (dest / "r.json").read_bytes() == FILES["r.json"]
    code, _, err = _run(capsys, "checkout", "base", str(dest), "--root", str(base_next_repo))
    assert code == 2 and "not an empty directory" in err
    # a corrupt file in git never lands in the target
    target = base_next_repo / "evidence/next/r.json"
    os.chmod(target, 0o644)
    target.write_bytes(b'{"fps": 25}\n')
    dest2 = tmp_path / "out2"
    code, _, err = _run(capsys, "checkout", "next", str(dest2), "--root", str(base_next_repo))
    assert code == 2 and "evidence/next/r.json" in err
    assert not (dest2 / "r.json").exists()
    assert not [p for p in dest2.rglob("*") if p.name.startswith(".")]


def test_cat_entry_and_short_prefix(base_next_repo: Path) -> None:
    def cat(arg: str) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run(
            [sys.executable, "-m", "evidencestore", "cat", arg, "--root", str(base_next_repo)],
            capture_output=True,
        )

    assert cat("base:r.json").stdout == FILES["r.json"]
    assert cat("base:ext/v.bin").stdout == b"v" * 1000
    hexd = hash_bytes(b"w" * 1000).digest[7:]
    assert cat(hexd[:8]).stdout == b"w" * 1000
    assert cat("blake3:" + hexd[:8]).stdout == b"w" * 1000
    proc = cat("base:nope.json")
    assert proc.returncode == 2 and b"has no entry 'nope.json'" in proc.stderr
    proc = cat("abc")
    assert (
        proc.returncode == 2
        and b"invalid digest" in proc.stderr
        and b"at least 6 hex" in proc.stderr
    )
    proc = cat("ffffff")
    assert proc.returncode == 2 and b"no registered entry's digest starts with" in proc.stderr


def test_cat_ambiguous_prefix(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # find two contents whose digests share 6 hex digits (about 2^12 tries expected)
    seen: dict[str, bytes] = {}
    pair: tuple[bytes, bytes] | None = None
    i = 0
    while pair is None:
        data = str(i).encode()
        prefix = hash_bytes(data).digest[7:13]
        if prefix in seen:
            pair = (seen[prefix], data)
        seen[prefix] = data
        i += 1
    add_bundle(tmp_path, "amb", {"a": pair[0], "b": pair[1]})
    prefix = hash_bytes(pair[0]).digest[7:13]
    code, _, err = _run(capsys, "cat", prefix, "--root", str(tmp_path))
    assert code == 2 and "ambiguous prefix, 2 digests start with it" in err


def test_status_remote_presence_note_is_a_line_of_its_own(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = str(tmp_path / "repo")
    assert cli(capsys, "init", "--root", root)[0] == 0
    assert cli(capsys, "remote", "add", "origin", str(tmp_path / "remote"), "--root", root)[0] == 0
    (tmp_path / "f.bin").write_bytes(b"x" * 100)
    assert cli(capsys, "bundle", "create", "b", str(tmp_path / "f.bin"), "--external", "*",
                "--root", root)[0] == 0  # fmt: skip
    assert cli(capsys, "push", "--root", root)[0] == 0
    code, out, err = cli(capsys, "verify", "--remote", "origin", "--root", root)
    assert code == 0 and out.endswith("\nverified\n"), out
    assert "remote 'origin': 1 of 1 store entry present, with the right size\n" in out
    code, out, err = cli(capsys, "status", "--remote", "origin", "--root", root)
    assert code == 0 and out.endswith("\n") and err.startswith("(presence by size only;"), err
