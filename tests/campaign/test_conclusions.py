"""Conclusions per arm, the protocol's acceptance rule, withdrawal records and the
baseline's repeatability first: real runs over HTTP against the reference video server,
real git history, every command through the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("aiohttp")
pytest.importorskip("av")

from helpers.campaigns import OFFLOAD, Campaign, commit, init_git_repo, write_protocol

from evidencestore.cli import main
from evidencestore.testing.video_server import VideoServer


def _protocol(name: str, accept: str, *, first: bool = False) -> str:
    return (
        "\n".join(
            [
                f'name = "{name}"',
                f'accept = "{accept}"',
                "[timing]",
                "claim = false",
                "[quality]",
                f"repeatability_first = {'true' if first else 'false'}",
                "[[condition]]",
                'name = "5s"',
                'workload = "workloads/5s.toml"',
                "[[arm]]",
                'name = "baseline"',
                "baseline = true",
                "runs = 2",
                "[[arm]]",
                'name = "rank-local"',
                "runs = 1",
                "[[arm]]",
                'name = "resident-16"',
                "runs = 1",
            ]
        )
        + "\n"
    )


def _setup(
    tmp_path: Path, video_server: VideoServer, capsys: pytest.CaptureFixture[str], accept: str
) -> Campaign:
    root = tmp_path / "repo"
    init_git_repo(root)
    src = write_protocol(tmp_path / "p", _protocol("h3", accept))
    assert main(["campaign", "init", "h3", "--protocol", str(src), "--root", str(root)]) == 0
    commit(root, "protocol", ".gitignore", "evidence/h3")
    c = Campaign(root, video_server, capsys)
    assert c.run("h3", "5s", "baseline", "b1") == 0
    assert c.run("h3", "5s", "baseline", "b2") == 0
    assert c.run("h3", "5s", "rank-local", "r1") == 0
    assert c.run("h3", "5s", "resident-16", "x1", startup_error=OFFLOAD) == 1
    commit(root, "runs", "evidence")
    return c


def _status(c: Campaign) -> tuple[int, dict[str, object], dict[str, dict[str, object]]]:
    code, out, _ = c.cli("campaign", "status", "h3", "--json")
    status = json.loads(out)
    return code, status, {a["arm"]: a for a in status["arms"]}


def test_start_up_failure_keeps_its_arm_open_until_withdrawn(
    tmp_path: Path, video_server: VideoServer, capsys: pytest.CaptureFixture[str]
) -> None:
    c = _setup(tmp_path, video_server, capsys, "every-arm")
    code, status, arms = _status(c)
    assert code == 1 and status["verdict"] == "NOT_ACCEPTED"
    assert {k: a["conclusion"] for k, a in arms.items()} == {
        "baseline": "qualified", "rank-local": "qualified", "resident-16": "open",
    }  # fmt: skip
    assert arms["resident-16"]["reasons"] == [
        "5s: candidate resident-16 has 0 of 1 required runs",
        "5s: candidate resident-16 run x1 failed (failed-before-inference)",
    ]
    assert status["remaining"] == arms["resident-16"]["reasons"]
    code, out, _ = c.cli("campaign", "status", "h3")
    lines = out.splitlines()
    # The verdict and the conclusions per arm come first.
    assert lines[1:5] == [
        "verdict NOT_ACCEPTED (accept = every-arm)",
        "  baseline (baseline): qualified",
        "  rank-local (candidate): qualified",
        "  resident-16 (candidate): open",
    ]
    code, out, _ = c.cli("campaign", "withdraw", "h3", "--arm", "baseline", "--reason", "x",
                         "--record", "w0")  # fmt: skip
    assert code == 2
    code, out, _ = c.cli(
        "campaign", "withdraw", "h3", "--arm", "resident-16", "--reason",
        "server cannot start with both offload settings", "--record", "withdraw-resident-16",
    )  # fmt: skip
    assert code == 0
    code, status, arms = _status(c)
    assert status["verdict"] == "NOT_ACCEPTED"  # not committed: no effect yet
    assert arms["resident-16"]["conclusion"] == "open"
    commit(c.root, "withdraw resident-16", "evidence/withdraw-resident-16")
    code, status, arms = _status(c)
    assert code == 0 and status["verdict"] == "ACCEPTED", status
    assert arms["resident-16"]["conclusion"] == "withdrawn"
    assert arms["resident-16"]["reasons"] == [
        "arm 'resident-16' withdrawn by 'withdraw-resident-16': server cannot start with "
        "both offload settings"
    ]
    assert [(w["run"], w["code"]) for w in status["withdrawn"]] == [("x1", "withdrawn")]
    assert status["remaining"] == []
    code, out, _ = c.cli("campaign", "verify", "h3", "--json")
    result = json.loads(out)
    assert code == 0 and sorted(result["runs"]) == ["b1", "b2", "r1"]
    assert [w["run"] for w in result["withdrawn"]] == ["x1"]


def test_any_arm_rule_accepts_with_one_qualified_arm(
    tmp_path: Path, video_server: VideoServer, capsys: pytest.CaptureFixture[str]
) -> None:
    c = _setup(tmp_path, video_server, capsys, "any-arm")
    code, status, arms = _status(c)
    assert code == 0 and status["verdict"] == "ACCEPTED"
    assert status["accept"] == "any-arm"
    assert arms["rank-local"]["conclusion"] == "qualified"
    assert arms["resident-16"]["conclusion"] == "open"  # still listed, with what remains
    assert "5s: candidate resident-16 has 0 of 1 required runs" in status["remaining"]


def test_repeatability_first_excludes_an_early_candidate_run(
    tmp_path: Path, video_server: VideoServer, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "repo"
    init_git_repo(root)
    src = write_protocol(tmp_path / "p", _protocol("h3", "any-arm", first=True))
    assert main(["campaign", "init", "h3", "--protocol", str(src), "--root", str(root)]) == 0
    commit(root, "protocol", ".gitignore", "evidence/h3")
    c = Campaign(root, video_server, capsys)
    assert c.run("h3", "5s", "baseline", "b1") == 0
    assert c.run("h3", "5s", "rank-local", "early") == 0
    commit(root, "b1 and an early candidate", "evidence")
    assert c.run("h3", "5s", "baseline", "b2") == 0
    commit(root, "b2", "evidence")
    assert c.run("h3", "5s", "rank-local", "r1") == 0
    commit(root, "r1", "evidence")
    code, out, _ = c.cli("campaign", "verify", "h3", "--json")
    result = json.loads(out)
    assert code == 1
    (finding,) = result["findings"]
    assert (finding["run"], finding["code"]) == ("early", "before-repeatability")
    assert "after 0 complete baseline run(s)" in finding["message"]  # b1 came with it
    code, status, arms = _status(c)
    assert status["verdict"] == "ACCEPTED" and arms["rank-local"]["conclusion"] == "qualified"
    cell = next(x for x in status["cells"] if x["arm"] == "rank-local")
    assert cell["runs_done"] == 1  # r1 only
