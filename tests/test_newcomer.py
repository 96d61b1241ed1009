"""The frictions a new user hit (issue 38), each fixed and checked against the real thing."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from helpers import paths

from evidencestore.cli import main


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize(
    ("url", "package", "extra"),
    [("gs://bucket/p", "gcsfs", "gcs"), ("az://container/p", "adlfs", "azure")],
)
def test_a_cloud_remote_without_its_package_names_its_extra(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], url: str, package: str, extra: str
) -> None:
    """fsspec's own ImportError, unpatched: the error names the extra (pyproject has it)."""
    if importlib.util.find_spec(package) is not None:
        pytest.skip(f"{package} is installed here")
    root = str(tmp_path)
    assert _cli(capsys, "init", "--root", root)[0] == 0
    assert _cli(capsys, "remote", "add", "cloud", url, "--root", root)[0] == 0
    (tmp_path / "f.bin").write_bytes(b"x" * 10)
    assert _cli(capsys, "bundle", "create", "b", str(tmp_path / "f.bin"), "--external",
                "*", "--root", root)[0] == 0  # fmt: skip
    code, _, err = _cli(capsys, "push", "--remote", "cloud", "--root", root)
    assert code == 2
    assert f"pip install 'evidencestore[{extra}]'" in err and package in err, err
    import tomllib

    pyproject = tomllib.loads((paths.ROOT / "pyproject.toml").read_text())
    extras = pyproject["project"]["optional-dependencies"]
    assert any(dep.startswith(package) for dep in extras[extra])


def test_media_of_an_absent_digest_is_not_found(tmp_path: Path) -> None:
    """``except NotFoundError`` catches it (as any absent digest), ``MediaError`` too; a
    present but corrupt blob stays a MediaError only (the negative control)."""
    pytest.importorskip("av")
    from evidencestore import BlobNotFoundError, MediaError, NotFoundError, media
    from evidencestore.config import init_repository, local_store

    init_repository(tmp_path)
    absent = "blake3:" + "0" * 64
    with pytest.raises(NotFoundError) as info:
        media.check(absent, media.Expectations(), root=tmp_path)
    assert isinstance(info.value, BlobNotFoundError) and isinstance(info.value, MediaError)
    assert absent in str(info.value) and "cannot get media from the store" in str(info.value)
    digest = local_store(tmp_path).put(b"not a video at all").digest
    blob = local_store(tmp_path).path_of(digest)
    blob.chmod(0o644)
    blob.write_bytes(b"not a video at all, changed")
    with pytest.raises(MediaError) as info:
        media.check(digest, media.Expectations(), root=tmp_path)
    assert not isinstance(info.value, NotFoundError)


@pytest.mark.parametrize(
    ("local", "target"), [(True, ".evstore/config.toml"), (False, "evstore.toml")]
)
def test_a_secret_refusal_names_the_file_it_would_go_to(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], local: bool, target: str
) -> None:
    root = str(tmp_path)
    assert _cli(capsys, "init", "--root", root)[0] == 0
    flag = ["--local"] if local else []
    code, _, err = _cli(capsys, "remote", "add", "mine", "s3://b/p", "--option",
                        "aws_secret_access_key=x", *flag, "--root", root)  # fmt: skip
    assert code == 2 and f"would store a credential in {target};" in err, err
    code, _, err = _cli(capsys, "remote", "add", "mine", "https://u:pw@example.org/s", *flag,
                        "--root", root)  # fmt: skip
    assert code == 2 and f"would store a credential in {target}:" in err, err
    assert not (tmp_path / ".evstore" / "config.toml").exists()  # nothing written


def test_status_remote_presence_note_is_a_line_of_its_own(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = str(tmp_path / "repo")
    assert _cli(capsys, "init", "--root", root)[0] == 0
    assert _cli(capsys, "remote", "add", "origin", str(tmp_path / "remote"), "--root", root)[0] == 0
    (tmp_path / "f.bin").write_bytes(b"x" * 100)
    assert _cli(capsys, "bundle", "create", "b", str(tmp_path / "f.bin"), "--external", "*",
                "--root", root)[0] == 0  # fmt: skip
    assert _cli(capsys, "push", "--root", root)[0] == 0
    code, out, err = _cli(capsys, "verify", "--remote", "origin", "--root", root)
    assert code == 0 and out.endswith("\nverified\n"), out
    assert "remote 'origin': 1 of 1 store entry present, with the right size\n" in out
    code, out, err = _cli(capsys, "status", "--remote", "origin", "--root", root)
    assert code == 0 and out.endswith("\n") and err.startswith("(presence by size only;"), err


def test_make_run_shows_no_caching_finding(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The demo's run against the reference video server: a repeated request costs what
    its first did, so the output-caching audit finds nothing; the same run against the
    server with --cache finds caching (the negative control)."""
    pytest.importorskip("aiohttp")
    pytest.importorskip("av")
    from evidencestore import _demo
    from evidencestore.config import init_repository
    from evidencestore.runs import load_run
    from evidencestore.testing.video_server import serve_video

    init_repository(tmp_path)
    (tmp_path / "out").mkdir()
    monkeypatch.chdir(tmp_path)
    assert _demo.run_demo(tmp_path) is True
    out = capsys.readouterr().out
    audits = {a.name: a for a in load_run(tmp_path, "baseline-demo-1").audits}
    assert audits["output-caching"].examined > 0 and audits["output-caching"].findings == ()
    assert "audit output-caching: 0 finding(s)" in out and "possible output caching" not in out
    with serve_video(cache=True) as server:
        code = main(["-q", "run", "out/workload.toml", "--arm", "baseline", "--server",
                     server.url, "--name", "cached"])  # fmt: skip
    assert code == 0
    cached = {a.name: a for a in load_run(tmp_path, "cached").audits}["output-caching"]
    assert cached.findings and "possible output caching" in cached.findings[0].message


def test_run_show_states_the_client_bound_line_either_way(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("aiohttp")
    from evidencestore.testing.llm_server import chat_workload, serve_llm

    root = str(tmp_path)
    assert _cli(capsys, "init", "--root", root)[0] == 0
    text = chat_workload(("one", "two"), max_tokens=4)
    (tmp_path / "free.toml").write_text(text)
    # A send-lag limit no client meets: the same run is then client-bound (the control).
    (tmp_path / "bound.toml").write_text(text.replace("[run]\n", "[run]\nmax_send_lag = 1e-12\n"))
    with serve_llm() as server:
        for name in ("free", "bound"):
            code, _, err = _cli(capsys, "-q", "run", str(tmp_path / f"{name}.toml"), "--arm", "a",
                                "--server", server.url, "--name", name, "--root", root)  # fmt: skip
            assert code == 0, err
    from evidencestore.runs import load_run

    code, out, _ = _cli(capsys, "run", "show", "free", "--root", root)
    assert code == 0
    [line] = [x for x in out.splitlines() if "client-bound" in x]
    load = load_run(root, "free").load
    assert load is not None
    if load.client_bound:  # a saturated CPU (a loaded test machine) makes it so
        assert line.startswith("client-bound: "), line
    else:
        assert line.startswith("not client-bound: client CPU ") and "median send lag " in line
    code, out, _ = _cli(capsys, "run", "show", "bound", "--root", root)
    [line] = [x for x in out.splitlines() if "client-bound" in x]
    assert line.startswith("client-bound: median send lag"), line


def _git(root: Path, *args: str) -> str:
    import os
    import subprocess

    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.org",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.org",
           "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}  # fmt: skip
    return subprocess.run(
        ["git", "-C", str(root), *args], env=env, capture_output=True, text=True, check=True
    ).stdout


def test_a_base_status_is_the_same_on_every_clone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`status --base` names the base by the protocol's commit: the same text with
    `--base main` here, `--base origin/main` in a clone, and after the base moved on;
    the protocol's description, conditions and rule head the report, which takes --base."""
    pytest.importorskip("aiohttp")
    import shutil

    src = paths.DOCS / "quickstart" / "llm"
    a = tmp_path / "a"
    a.mkdir()
    _git(a, "init", "-q", "-b", "main")
    assert _cli(capsys, "-q", "init", "--root", str(a))[0] == 0
    for f in src.iterdir():
        shutil.copy(f, a / f.name)
    assert _cli(capsys, "campaign", "init", "kv-fp8", "--protocol", str(a / "protocol.toml"),
                "--root", str(a))[0] == 0  # fmt: skip
    _git(a, "add", "-A")
    _git(a, "commit", "-qm", "protocol")
    added = _git(a, "rev-parse", "HEAD").strip()

    def status(root: Path, base: str) -> str:
        code, out, err = _cli(capsys, "campaign", "status", "kv-fp8", "--base", base, "--json",
                              "--root", str(root))  # fmt: skip
        assert code == 1, err  # no runs yet: NOT_ACCEPTED
        return out

    here = status(a, "main")
    assert (
        f"the protocol's commit {added[:12]} is on the protected branch (the base revision)" in here
    )
    b = tmp_path / "b"
    _git(tmp_path, "clone", "-q", str(a), str(b))
    assert status(b, "origin/main") == here
    (a / "notes.txt").write_text("the base moves on\n")
    _git(a, "add", "notes.txt")
    _git(a, "commit", "-qm", "unrelated")
    assert status(a, "main") == here  # the tip moved; what the status rests on did not
    page = tmp_path / "kv.html"
    code, _, err = _cli(capsys, "report", "kv-fp8", "--base", "main", "-o", str(page),
                        "--root", str(a))  # fmt: skip
    assert code == 0, err
    html = page.read_text()
    top = html[: html.index('id="conclusions"')]
    assert "fp8 KV cache: the same tokens as the baseline" in top
    assert "<b>chat</b>: <code>chat.toml</code>" in top and "no timing claim" in top
    assert "every-arm" in top and "<b>kv-fp8</b> (candidate): 1 run(s)" in top
