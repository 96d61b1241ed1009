"""The CLI's conventions (issue 27): global options before or after the command, the
``evstore.toml`` template, run commands' output, verify totals that agree."""

import json
import re
import tomllib
from pathlib import Path

import pytest
from helpers.repos import add_bundle

from evidencestore.cli import main
from evidencestore.config import CONFIG_TEMPLATE, load_config, load_config_file


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_root_before_the_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = tmp_path / "repo"
    assert _run(capsys, "init", "--root", str(repo))[0] == 0
    add_bundle(repo, "b1", {"a.txt": b"alpha"})
    monkeypatch.chdir(tmp_path)  # not inside the repository: only --root finds it
    code, out, err = _run(capsys, "--root", str(repo), "verify", "--json")
    assert code == 0, err
    assert json.loads(out)["totals"]["bundles"] == 1
    code, out, _ = _run(capsys, f"--root={repo}", "verify", "--json")
    assert code == 0 and json.loads(out)["totals"]["bundles"] == 1
    # after the command, as before
    code, out, _ = _run(capsys, "verify", "--root", str(repo), "--json")
    assert code == 0 and json.loads(out)["totals"]["bundles"] == 1
    # both, the same: fine; different: a usage error naming both
    assert _run(capsys, "--root", str(repo), "verify", "--root", str(repo))[0] == 0
    code, _, err = _run(capsys, "--root", str(repo), "verify", "--root", str(tmp_path))
    assert code == 2 and "--root given twice" in err and str(tmp_path) in err
    # a nested group and `run show` take it too
    code, _, err = _run(capsys, "--root", str(repo), "remote", "list")
    assert code == 0, err
    code, _, err = _run(capsys, "--root", str(repo), "run", "show", "b1")
    assert code == 2 and "b1" in err and "invalid choice" not in err
    code, _, err = _run(capsys, "--root", str(tmp_path / "nope"), "verify")
    assert code == 2 and "not a directory" in err


def test_init_writes_a_commented_template(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = _run(capsys, "init", "--root", str(tmp_path))
    assert code == 0 and f"wrote {tmp_path / 'evstore.toml'}" in out
    text = (tmp_path / "evstore.toml").read_text()
    assert text == CONFIG_TEMPLATE
    for setting in ("[store]", "path = ", "[remotes.origin]", "url = ", "max_git_file_size"):
        assert f"# {setting}" in text, setting
    # as written, every setting is commented out: the defaults
    assert load_config(tmp_path) == load_config_file(tmp_path / "missing.toml")
    # uncommented, the template is a valid configuration with what it shows
    setting = re.compile(r"^# (\[|[a-z_]+ = )")
    uncommented = "\n".join(line[2:] for line in text.splitlines() if setting.match(line))
    data = tomllib.loads(uncommented)
    assert data["bundle"]["max_git_file_size"] == 10485760
    (tmp_path / "full.toml").write_text(uncommented)
    full = load_config_file(tmp_path / "full.toml")
    assert full.remotes["origin"].url == "s3://my-bucket/evidence"
    assert full.bundle.max_git_file_size == 10485760
    # adding a remote keeps the commented header
    remote = tmp_path / "remote-dir"
    code, _, err = _run(capsys, "remote", "add", "backup", str(remote), "--root", str(tmp_path))
    assert code == 0, err
    after = (tmp_path / "evstore.toml").read_text()
    assert after.startswith(CONFIG_TEMPLATE.rstrip())
    assert load_config(tmp_path).remotes["backup"].url == str(remote)
    # a second init leaves it alone
    code, out, _ = _run(capsys, "init", "--root", str(tmp_path))
    assert code == 0 and "already exists; left unchanged" in out
    assert (tmp_path / "evstore.toml").read_text() == after


def test_run_show_and_diff_conventions(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("aiohttp")
    pytest.importorskip("av")
    from evidencestore.runs import load_run
    from evidencestore.testing.video_server import sample_workload, serve_video

    repo = tmp_path / "repo"
    (repo / "evidence").mkdir(parents=True)
    wl = tmp_path / "workload.toml"
    wl.write_text(sample_workload(size="64x48", fps=8, warmup=0, measured=3, seconds=(1,)))
    with serve_video() as server:
        for name in ("r1", "r2"):
            argv = ["run", str(wl), "--arm", "a", "--server", server.url, "--name", name]
            assert _run(capsys, "--root", str(repo), *argv)[0] == 0
        server.fail_on = {server.requests + 3}  # r3's third: request 0, repetition #2
        argv = ["run", str(wl), "--arm", "b", "--server", server.url, "--name", "r3"]
        assert _run(capsys, "--root", str(repo), *argv)[0] == 1
    # run diff exits like diff: 0 the same, 1 different (text and JSON alike)
    assert _run(capsys, "run", "diff", "r1", "r2", "--root", str(repo))[0] == 0
    code, out, _ = _run(capsys, "run", "diff", "r1", "r3", "--json", "--root", str(repo))
    assert code == 1 and json.loads(out)["differences"]
    code, out, _ = _run(capsys, "run", "diff", "r1", "r3", "--root", str(repo))
    assert code == 1 and "differences" in out
    # run show says what the spread is, and names requests as campaign status does
    code, out, _ = _run(capsys, "run", "show", "r1", "--root", str(repo))
    assert code == 0 and "±" not in out
    assert "  sd " in out and "(sd: the sample standard deviation over the phase's requests" in out
    failed = [r for r in load_run(repo, "r3").requests if r.failure is not None]
    assert [r.label for r in failed] == ["request 0 measured #2"]
    code, out, _ = _run(capsys, "run", "show", "r3", "--root", str(repo))
    assert f"  request 0 measured #2 (record {failed[0].index}): http-status: " in out
    code, out, _ = _run(capsys, "run", "show", "r3", "--json", "--root", str(repo))
    shown = json.loads(out)
    assert [f["label"] for f in shown["failures"]] == ["request 0 measured #2"]
    assert [r["label"] for r in shown["requests"]] == [f"request 0 measured #{k}" for k in range(3)]


def test_verify_totals_agree_with_what_is_printed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import shutil

    root = tmp_path / "repo"
    files = {f"ext/{i}.bin": bytes([i]) * 10 for i in range(5)}
    add_bundle(root, "s", {**files, "r.txt": b"results"}, external=("ext/*",))
    shutil.rmtree(root / ".evstore")  # a fresh clone: no local store
    code, out, _ = _run(capsys, "verify", "--root", str(root))
    assert code == 0
    assert out.count("notice: 5 store entries of 1 bundle (50 bytes)") == 1
    assert "warning" not in out.replace("0 warnings", "")
    totals = "1 bundle, 6 entries, 1 hash checked, 5 unavailable (not checked: 1 notice), "
    assert totals + "0 errors, 0 warnings" in out
    code, out, _ = _run(capsys, "verify", "--json", "--root", str(root))
    doc = json.loads(out)
    assert doc["totals"]["unavailable"] == 5 and doc["totals"]["warnings"] == 0
    # the JSON keeps every finding: one per unavailable entry, counted in `unavailable`
    found = [f for b in doc["bundles"] for f in b["findings"]]
    assert sorted(f["path"] for f in found if f["code"] == "unavailable") == sorted(files)
    # one warning each: the lines and the totals say the same
    code, out, _ = _run(capsys, "verify", "--unavailable", "each", "--root", str(root))
    assert code == 0 and out.count("    warning: unavailable: ") == 5 and "notice:" not in out
    assert "5 unavailable (not checked: a warning each), 0 errors, 0 other warnings" in out
    # required: they are errors, counted as errors
    code, out, _ = _run(capsys, "verify", "--unavailable", "error", "--json", "--root", str(root))
    doc = json.loads(out)
    assert code == 1 and doc["totals"]["errors"] == 5 and doc["totals"]["unavailable"] == 5
