"""The untracked per-user configuration merged over ``evstore.toml`` (issue 12, item 9)."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from helpers.repos import add_bundle, git, init_repo

from evidencestore.cli import main
from evidencestore.config import load_config
from evidencestore.errors import ConfigError


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_local_files_merge_over_the_tracked_one(tmp_path: Path) -> None:
    (tmp_path / "evstore.toml").write_text(
        '[remotes.shared]\nurl = "s3://team/ev"\nattempts = 2\n'
        '[remotes.shared.options]\nregion = "eu"\n'
    )
    (tmp_path / "evstore.local.toml").write_text(
        '[remotes.shared.options]\nendpoint_url = "http://127.0.0.1:9000"\n'
        '[remotes.mine]\nurl = "/scratch/ev"\n'
    )
    (tmp_path / ".evstore").mkdir()
    (tmp_path / ".evstore/config.toml").write_text("[remotes.shared]\nattempts = 7\n")
    config = load_config(tmp_path)
    assert list(config.remotes) == ["shared", "mine"]
    shared = config.remotes["shared"]
    assert (shared.url, shared.attempts) == ("s3://team/ev", 7)  # the later file wins
    assert shared.options == {"region": "eu", "endpoint_url": "http://127.0.0.1:9000"}
    assert list(load_config(tmp_path, local=False).remotes) == ["shared"]


def test_a_bad_local_file_is_named(tmp_path: Path) -> None:
    (tmp_path / "evstore.local.toml").write_text("[remotes.x]\nurl = 'https://u:p@host/'\n")
    with pytest.raises(ConfigError, match=r"evstore.local.toml: remote 'x': the URL embeds"):
        load_config(tmp_path)


def test_remote_add_local_survives_a_branch_switch(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = init_repo(tmp_path / "repo")
    assert _run(capsys, "init", "--root", str(root))[0] == 0
    add_bundle(root, "b", {"ext/x.bin": b"x" * 64, "r.txt": b"r"}, external=("ext/*",))
    git(root, "add", "-A")
    git(root, "commit", "-qm", "base")
    mirror = tmp_path / "mirror"
    code, out, _ = _run(
        capsys, "remote", "add", "mirror", str(mirror), "--local", "--root", str(root)
    )
    assert code == 0 and ".evstore/config.toml" in out
    assert "mirror" not in (root / "evstore.toml").read_text()  # nothing leaks into git
    assert git(root, "status", "--porcelain") == ""
    git(root, "checkout", "-q", "-b", "other")
    code, out, _ = _run(capsys, "remote", "list", "--root", str(root))
    assert code == 0 and out.startswith(f"mirror\t{mirror}")
    code, out, _ = _run(capsys, "push", "--remote", "mirror", "--root", str(root))
    assert code == 0 and "1 of 1 blobs transferred" in out
    # a tracked add keeps the per-user remote out of evstore.toml
    assert _run(capsys, "remote", "add", "team", str(tmp_path / "t"), "--root", str(root))[0] == 0
    tracked = tomllib.loads((root / "evstore.toml").read_text())
    assert list(tracked["remotes"]) == ["team"]
    assert list(load_config(root).remotes) == ["team", "mirror"]
    code, out, _ = _run(capsys, "remote", "remove", "mirror", "--root", str(root))
    assert code == 0 and ".evstore/config.toml" in out
    assert list(load_config(root).remotes) == ["team"]


def test_tracked_bundle_settings_survive_remote_add(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "evidence").mkdir()
    (tmp_path / "evstore.toml").write_text("[bundle]\nmax_git_file_size = 10\n")
    assert _run(capsys, "remote", "add", "r", str(tmp_path / "r"), "--root", str(tmp_path))[0] == 0
    assert load_config(tmp_path).bundle.max_git_file_size == 10
