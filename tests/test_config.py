"""Remote configuration in ``evstore.toml``: credentials are refused, options and retry
settings are bounded, and configuring a remote opens nothing."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers.cli import cli
from helpers.remotes import run, set_remotes

from evidencestore.config import RemoteConfig, load_config


# credentials never in evstore.toml
@pytest.mark.parametrize(
    "option",
    [
        "headers.Authorization=Bearer X",
        "headers.X-Auth-Token=t",
        "client_kwargs.headers.Cookie=session=1",
        "headers.X-Goog-Api-Key=k",
        "cookies.session=1",
        "proxy_auth=u:p",
        "api_key=k",
        "session_token=t",
        "private_key=k",
        "endpoint_url=http://user:pw@127.0.0.1:9000",
        'endpoints=["https://u:p@h/x"]',
    ],
)
def test_remote_add_refuses_more_credentials(tmp_path: Path, option: str) -> None:
    code, _, err = run(
        "remote", "add", "origin", "s3://bkt", "--option", option, "--root", str(tmp_path)
    )
    assert code == 2, err
    assert "credential in evstore.toml" in err
    assert not (tmp_path / "evstore.toml").exists()


def test_remote_url_with_userinfo_refused(tmp_path: Path) -> None:
    code, _, err = run("remote", "add", "w", "https://u:secret@h/x", "--root", str(tmp_path))
    assert code == 2 and "embeds a user name or password" in err and "secret" not in err
    (tmp_path / "evstore.toml").write_text(
        '[remotes.o]\nurl = "s3://b"\noptions = { list = [ { api_key = "x" } ] }\n'
    )
    code, _, err = run("remote", "list", "--root", str(tmp_path))
    assert code == 2 and "option 'list.0.api_key' would store a credential" in err, err


def test_headers_without_secrets_are_fine(tmp_path: Path) -> None:
    code, _, err = run(
        "remote", "add", "w", "https://h/x", "--option", "headers.Accept=*/*",
        "--root", str(tmp_path),
    )  # fmt: skip
    assert code == 0, err
    assert load_config(tmp_path).remotes["w"].options == {"headers": {"Accept": "*/*"}}


# errors, never tracebacks
def test_remote_add_unwritable_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Replacing evstore.toml fails (as on a read-only directory): a ConfigError naming
    # the file, and no temporary left behind.
    set_remotes(tmp_path, origin={"url": "x"})

    def refuse(src: Any, dst: Any) -> None:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(os, "replace", refuse)
    for argv in (["remote", "add", "o2", "y"], ["remote", "remove", "origin"]):
        code, _, err = run(*argv, "--root", str(tmp_path))
        assert code == 2, argv
        assert f"{tmp_path / 'evstore.toml'}: cannot write: Permission denied" in err
        assert "Traceback" not in err
        assert sorted(p.name for p in tmp_path.iterdir()) == ["evstore.toml"]


# minor
def test_attempts_bounded(tmp_path: Path) -> None:
    (tmp_path / "evstore.toml").write_text('[remotes.o]\nurl = "s3://b"\nattempts = 21\n')
    code, _, err = run("remote", "list", "--root", str(tmp_path))
    assert code == 2 and "attempts" in err
    assert RemoteConfig(url="x", attempts=20).attempts == 20


def test_configuring_s3_remote_does_not_import_s3fs(tmp_path: Path) -> None:
    pytest.importorskip("s3fs")
    set_remotes(
        tmp_path, s3={"url": "s3://bucket/x", "options": {"endpoint_url": "http://127.0.0.1:9"}}
    )
    code = (
        "import sys\n"
        "from evidencestore.remotes import configured_remotes, repository_store\n"
        f"remotes = configured_remotes({str(tmp_path)!r})\n"
        f"repository_store({str(tmp_path)!r})\n"
        "assert 's3fs' not in sys.modules, 'imported before use'\n"
        "assert remotes[0].store.atomic_put\n"
        "assert 's3fs' in sys.modules\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize(
    ("local", "target"), [(True, ".evstore/config.toml"), (False, "evstore.toml")]
)
def test_a_secret_refusal_names_the_file_it_would_go_to(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], local: bool, target: str
) -> None:
    root = str(tmp_path)
    assert cli(capsys, "init", "--root", root)[0] == 0
    flag = ["--local"] if local else []
    code, _, err = cli(capsys, "remote", "add", "mine", "s3://b/p", "--option",
                        "aws_secret_access_key=x", *flag, "--root", root)  # fmt: skip
    assert code == 2 and f"would store a credential in {target};" in err, err
    code, _, err = cli(capsys, "remote", "add", "mine", "https://u:pw@example.org/s", *flag,
                        "--root", root)  # fmt: skip
    assert code == 2 and f"would store a credential in {target}:" in err, err
    assert not (tmp_path / ".evstore" / "config.toml").exists()  # nothing written
