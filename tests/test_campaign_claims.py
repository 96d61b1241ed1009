"""Speedup claims over HTTP against the reference server, whose delays are known.

The run is the unit; acceptance means faster (``min_speedup`` 1.0 unless declared); the
job flow's polling resolution is recorded and bounds the claim; drift is named and
interleaving can be required; ``campaign plan`` sizes a campaign from baseline runs.
No repository git history is needed here (claims do not read it), so campaigns live in
plain directories.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("aiohttp")
pytest.importorskip("av")
pytest.importorskip("scipy")

from evidencestore.cli import main
from evidencestore.runs import load_run
from evidencestore.testing.video_server import VideoServer, sample_workload, serve_video

TINY = {"size": "64x48", "fps": 8, "warmup": 1, "measured": 3, "seconds": (1,)}


@pytest.fixture(scope="module")
def server() -> Iterator[VideoServer]:
    with serve_video() as s:
        yield s


def _protocol(arms: dict[str, int], timing: str = "", workload: str | None = None) -> str:
    lines = ['name = "p"', "", "[timing]", timing, "", "[[condition]]", 'name = "c"',
             'workload = "workload.toml"']  # fmt: skip
    for i, (arm, runs) in enumerate(arms.items()):
        lines += ["", "[[arm]]", f'name = "{arm}"', f"runs = {runs}"]
        if i == 0:
            lines.append("baseline = true")
    return "\n".join(lines) + "\n"


class Repo:
    """An evidence repository with one campaign ``NAME`` and the reference server."""

    def __init__(self, root: Path, server: VideoServer, capsys: Any) -> None:
        self.root, self.server, self.capsys = root, server, capsys

    def init(self, name: str, protocol: str, workload: str) -> None:
        src = self.root.parent / f"{name}-src"
        src.mkdir()
        (src / "workload.toml").write_text(workload)
        # a protocol is registered under its own name
        (src / "protocol.toml").write_text(protocol.replace('name = "p"', f'name = "{name}"', 1))
        (self.root / "evidence").mkdir(parents=True, exist_ok=True)
        argv = ["campaign", "init", name, "--protocol", str(src / "protocol.toml")]
        assert main([*argv, "--root", str(self.root)]) == 0

    def run(self, campaign: str, arm: str, name: str, latency: float) -> None:
        self.server.latency = latency
        try:
            code = main(
                ["-q", "run", str(self.root / "evidence" / campaign / "workload.toml"),
                 "--arm", arm, "--server", self.server.url, "--name", name,
                 "--campaign", campaign, "--condition", "c", "--root", str(self.root)]
            )  # fmt: skip
        finally:
            self.server.latency = 0.0
        assert code == 0

    def cli(self, *argv: str) -> tuple[int, str]:
        self.capsys.readouterr()
        code = main([*argv, "--root", str(self.root)])
        out, _ = self.capsys.readouterr()
        return code, out

    def claim(self, campaign: str, arm: str) -> tuple[int, dict[str, Any], str]:
        code, out = self.cli("campaign", "claim", campaign, "--condition", "c", "--arm", arm,
                             "--json")  # fmt: skip
        code2, text = self.cli("campaign", "claim", campaign, "--condition", "c", "--arm", arm)
        assert code == code2
        return code, json.loads(out), text


@pytest.fixture
def repo(tmp_path: Path, server: VideoServer, capsys: pytest.CaptureFixture[str]) -> Repo:
    return Repo(tmp_path / "repo", server, capsys)


def test_slower_and_equal_candidates_are_not_accepted(repo: Repo) -> None:
    repo.init("speed", _protocol({"base": 3, "slower": 3, "equal": 3}), sample_workload(**TINY))  # type: ignore[arg-type]
    for i in (1, 2, 3):
        repo.run("speed", "base", f"b{i}", 0.05)
        repo.run("speed", "slower", f"s{i}", 0.08)
        repo.run("speed", "equal", f"e{i}", 0.05)
    code, claim, text = repo.claim("speed", "slower")
    assert code == 1
    assert claim["verdict"] == "NOT_CLEARED" and claim["stands"] is False
    assert claim["min_speedup"] == 1.0 and claim["clears"] is False
    assert claim["speedup"]["high"] < 1.0  # a deceleration, and the interval says so
    assert "NOT claimed: the interval does not clear the threshold (min_speedup 1)" in text
    assert "does NOT clear min_speedup 1" in text
    assert "runs used: 3 base (9 requests" in text and "3 slower (9 requests" in text
    code, claim, text = repo.claim("speed", "equal")
    assert code == 1 and claim["verdict"] == "NOT_CLEARED"
    assert claim["speedup"]["low"] <= 1.0 and "min_speedup 1" in text
    code, out = repo.cli("campaign", "status", "speed", "--json")
    status = json.loads(out)
    assert code == 1 and status["verdict"] == "NOT_ACCEPTED"
    cells = {c["arm"]: c for c in status["cells"]}
    for arm in ("slower", "equal"):
        # Below the threshold with every run done: rejected, nothing "remains".
        assert cells[arm]["conclusion"] == "rejected"
        assert any(
            r.startswith(f"c: candidate {arm} speedup interval starts at")
            and r.endswith("not above timing.min_speedup = 1")
            for r in cells[arm]["reasons"]
        )
        assert not any(f"candidate {arm}" in r for r in status["remaining"])
    assert cells["slower"]["qualified"] is False and cells["equal"]["qualified"] is False


def test_non_inferiority_is_declared_and_no_timing_claim_says_so(repo: Repo) -> None:
    wl = sample_workload(**TINY)  # type: ignore[arg-type]
    repo.init("noninf", _protocol({"base": 3, "equal": 3}, "min_speedup = 0.5"), wl)
    repo.init("lossless", _protocol({"base": 3, "equal": 3}, "claim = false"), wl)
    for campaign in ("noninf", "lossless"):
        for i in (1, 2, 3):
            repo.run(campaign, "base", f"{campaign}-b{i}", 0.05)
            repo.run(campaign, "equal", f"{campaign}-e{i}", 0.05)
    code, claim, text = repo.claim("noninf", "equal")
    assert code == 0 and claim["verdict"] == "STANDS" and claim["min_speedup"] == 0.5
    assert claim["speedup"]["low"] > 0.5 and "the claim stands (min_speedup 0.5)" in text
    code, claim, text = repo.claim("lossless", "equal")
    assert code == 1 and claim["verdict"] == "NO_TIMING_CLAIM" and claim["speedup"] is not None
    assert claim["min_speedup"] is None and "no timing claim: the protocol declares none" in text
    code, out = repo.cli("campaign", "status", "lossless", "--json")
    status = json.loads(out)
    assert status["verdict"] == "NOT_ACCEPTED"  # no git history here: runs are uncommitted
    assert all("speedup" not in r for r in status["remaining"])
    assert any("makes no timing claim" in n and "outputs only" in n for n in status["notes"])
    cells = {c["arm"]: c for c in status["cells"]}
    assert cells["equal"]["qualified"] is True  # lossless, and no speedup asked of it


def test_one_slow_baseline_run_widens_the_interval(repo: Repo) -> None:
    repo.init("slowrun", _protocol({"base": 3, "equal": 3}), sample_workload(**TINY))  # type: ignore[arg-type]
    for i, latency in enumerate((0.04, 0.04, 0.12), start=1):  # b3 three times slower
        repo.run("slowrun", "base", f"b{i}", latency)
        repo.run("slowrun", "equal", f"e{i}", 0.04)
    code, claim, _ = repo.claim("slowrun", "equal")
    s = claim["speedup"]
    assert code == 1 and claim["verdict"] == "NOT_CLEARED"
    assert s["low"] <= 1.0 <= s["high"]  # pooled requests said 1.45 [1.08, 1.95]
    assert claim["df"] < 4.5  # degrees of freedom from runs, not from 18 requests
    assert claim["run_spread_baseline"] > 5 * claim["within_spread_baseline"]
    values = {rv["run"]: rv["value"] for rv in claim["runs"]}
    for name, value in values.items():
        times = [r.e2e_s for r in load_run(repo.root, name).requests if r.phase == "measured"]
        assert value == pytest.approx(math.exp(sum(math.log(t) for t in times) / len(times)))


def _job_workload(**extra: Any) -> str:
    text = sample_workload(kind="videos-job", path="/v1/videos", **TINY)  # type: ignore[arg-type]
    text = text.replace("poll_interval = 0.05\n", "")  # the default polling
    for key, value in extra.items():
        text = text.replace('path = "/v1/videos"\n', f'path = "/v1/videos"\n{key} = {value}\n')
    return text


def test_job_flow_true_ratio_is_claimed_within_its_bound(repo: Repo) -> None:
    repo.init("jobs", _protocol({"base": 3, "fast": 3}), _job_workload())
    for i in (1, 2, 3):
        repo.run("jobs", "base", f"b{i}", 0.25)
        repo.run("jobs", "fast", f"f{i}", 0.20)
    for name in ("b1", "f1"):
        record = load_run(repo.root, name)
        assert all(r.resolution_s is not None and r.polls >= 1 for r in record.requests)
    code, claim, text = repo.claim("jobs", "fast")
    s, b = claim["speedup"], claim["bounded"]
    assert 1.1 < s["ratio"] < 1.4, claim  # 0.25 / 0.20 on the server; never 2.0
    assert b["low"] <= s["low"] and b["high"] >= s["high"]
    assert b["low"] < 1.25 < b["high"] * 1.05  # the truth, within the stated bound
    assert claim["resolution_s"] is not None and claim["resolution_s"] < 0.05
    assert claim["verdict"] == "STANDS" and code == 0
    assert "within the measurement resolution" in text


def test_coarse_polling_leaves_the_claim_unresolved(repo: Repo) -> None:
    # Polling every 0.3 s cannot tell 0.05 s from 0.10 s: the claim says so.
    workload = _job_workload(poll_min=0.3, poll_interval=0.3)
    repo.init("coarse", _protocol({"base": 3, "fast": 3}), workload)
    for i in (1, 2, 3):
        repo.run("coarse", "base", f"b{i}", 0.10)
        repo.run("coarse", "fast", f"f{i}", 0.05)
    code, claim, text = repo.claim("coarse", "fast")
    assert code == 1 and claim["verdict"] == "UNRESOLVED" and claim["stands"] is False
    assert claim["resolution_s"] >= 0.3
    assert any("could change within the measurement resolution" in n for n in claim["notes"])
    assert "NOT claimed: the measurement resolution could change the verdict" in text


def test_drift_is_named_and_interleaving_pairs_runs(repo: Repo) -> None:
    wl = sample_workload(**TINY)  # type: ignore[arg-type]
    repo.init("drift", _protocol({"base": 3, "fast": 3}), wl)
    repo.init("inter", _protocol({"base": 3, "fast": 3}, 'order = "interleaved"'), wl)
    for i in (1, 2, 3):
        repo.run("drift", "base", f"d-b{i}", 0.10)
    for i in (1, 2, 3):
        repo.run("drift", "fast", f"d-f{i}", 0.03)
        repo.run("inter", "base", f"i-b{i}", 0.10)
        repo.run("inter", "fast", f"i-f{i}", 0.03)
    code, claim, text = repo.claim("drift", "fast")
    assert code == 0 and claim["order"] == "baseline-first"
    assert any("drift" in n and "cannot be told apart" in n for n in claim["notes"])
    assert "note: every base run started before every fast run" in text
    code, claim, text = repo.claim("inter", "fast")
    assert code == 0 and claim["order"] == "alternating"
    assert claim["estimator"] == "paired-log-t" and claim["df"] == 2.0
    assert claim["pairs"] == [[f"i-b{i}", f"i-f{i}"] for i in (1, 2, 3)]
    assert "pair i-b1 / i-f1" in text
    repo.run("inter", "fast", "i-f4", 0.03)  # two candidate runs in a row
    code, claim, _ = repo.claim("inter", "fast")
    assert code == 1 and claim["verdict"] == "REFUSED" and claim["order"] == "mixed"
    assert (
        "requires interleaved runs" in claim["reasons"][0] and "i-f4 (fast)" in claim["reasons"][0]
    )


def test_plan_sizes_the_campaign_from_baseline_runs(repo: Repo) -> None:
    repo.init("plan", _protocol({"base": 4, "fast": 3}), sample_workload(**TINY))  # type: ignore[arg-type]
    code, out = repo.cli("campaign", "plan", "plan")
    assert code == 1 and "at least 2 are needed" in out
    for i in (1, 2, 3, 4):
        repo.run("plan", "base", f"b{i}", 0.05)
    code, out = repo.cli("campaign", "plan", "plan", "--json", "--ratio", "1.05", "--ratio", "2")
    plan = json.loads(out)
    (cond,) = plan["conditions"]
    assert code == 0 and plan["ok"] is True
    assert cond["baseline_runs"] == ["b1", "b2", "b3", "b4"]
    assert cond["aa_includes_one"] is True
    assert cond["aa"]["low"] <= 1.0 <= cond["aa"]["high"]
    assert cond["aa_halves"] == [["b1", "b2"], ["b3", "b4"]]  # earlier against later
    rows = {r["ratio"]: r for r in cond["rows"]}
    assert rows[2.0]["runs_needed"] is not None and rows[2.0]["runs_needed"] <= 3
    assert (
        rows[1.05]["runs_needed"] is None or rows[1.05]["runs_needed"] >= rows[2.0]["runs_needed"]
    )
    code, out = repo.cli("campaign", "plan", "plan")
    assert code == 0 and "A/A check" in out and "includes 1.0" in out and "runs per arm" in out
    code, out = repo.cli("campaign", "plan", "plan", "--power", "1.5")
    assert code == 2
