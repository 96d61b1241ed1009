"""Every registered campaign record renders with ``evstore report`` (by bundle,
``bundle:path`` and digest), from the record alone, checked in headless Chromium at
1280 px and 390 px: a real campaign recorded over HTTP, with a start-up failure
withdrawn and a mistaken run voided, its status registered with every record behind it."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest

pytest.importorskip("aiohttp")
pytest.importorskip("av")
pytest.importorskip("jinja2")
pytest.importorskip("matplotlib")

from helpers.browser import assert_clean_page, needs_chromium, open_page
from helpers.campaigns import FAST, OFFLOAD, SLOW, commit, init_git_repo, lsb_render, write_protocol
from helpers.remotes import run

from evidencestore.cli import main
from evidencestore.testing.video_server import serve_video

PROTOCOL = """name = "h3"
description = "lossless acceleration, two candidates and one that fails at start-up"
[timing]
min_runs = 3
[[condition]]
name = "5s"
workload = "workloads/5s.toml"
[[arm]]
name = "baseline"
baseline = true
runs = 3
[[arm]]
name = "rank-local"
runs = 3
[[arm]]
name = "lsb-audio"
runs = 1
[[arm]]
name = "resident-16"
runs = 1
"""


@pytest.fixture(scope="module")
def campaign_records_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("records")
    root = tmp / "repo"
    init_git_repo(root)
    src = write_protocol(tmp / "p", PROTOCOL)
    assert main(["campaign", "init", "h3", "--protocol", str(src), "--root", str(root)]) == 0
    commit(root, "protocol", ".gitignore", "evidence/h3")
    workload = str(root / "evidence/h3/workloads/5s.toml")
    with serve_video() as server:

        def rec(arm: str, name: str, **knobs: object) -> int:
            for k, v in knobs.items():
                setattr(server, k, v)
            try:
                return main(["-q", "run", workload, "--arm", arm, "--server", server.url,
                             "--name", name, "--campaign", "h3", "--condition", "5s",
                             "--root", str(root)])  # fmt: skip
            finally:
                server.__dict__.pop("render", None)
                server.latency, server.startup_error = 0.0, None

        for i in (1, 2, 3):
            assert rec("baseline", f"baseline-{i}", latency=SLOW[i - 1]) == 0
            assert rec("rank-local", f"rank-local-{i}", latency=FAST[i - 1]) == 0
        assert rec("lsb-audio", "lsb-audio-1", render=lsb_render()) == 0
        assert rec("resident-16", "resident-16-1", startup_error=OFFLOAD) == 1
        assert rec("baseline", "baseline-4", startup_error="wrong host") == 1
    commit(root, "runs", "evidence")
    argv = ["--root", str(root)]
    assert run("campaign", "withdraw", "h3", "--arm", "resident-16", "--reason",
               "the server cannot start with both offload settings", "--record",
               "h3-withdraw-resident-16", *argv)[0] == 0  # fmt: skip
    assert run("campaign", "void", "h3", "--run", "baseline-4", "--reason",
               "launched against the wrong host", "--record", "h3-void-baseline-4", *argv)[0] == 0  # fmt: skip
    commit(root, "set aside", "evidence")
    code, out, err = run("campaign", "status", "h3", "--register", "h3-status-1", *argv)
    assert code == 1, out + err  # lsb-audio is rejected under every-arm
    commit(root, "status", "evidence/h3-status-1")
    return root


def _show(root: Path, target: str, out: Path) -> tuple[str, str]:
    code, stdout, err = run("report", target, "-o", str(out), "--root", str(root))
    assert code == 0, err
    return out.read_text(), stdout + err


SHOTS = os.environ.get("EVSTORE_REPORT_SHOTS")  # a directory to keep screenshots in


@needs_chromium
@pytest.mark.parametrize(
    ("target", "kind", "verdict"),
    [
        ("h3-status-1", "campaign", "NOT_ACCEPTED"),
        ("h3-status-1:status.json", "campaign", "NOT_ACCEPTED"),
        ("h3-status-1:claims/5s-rank-local.json", "claim", "STANDS"),
        ("h3-status-1:repeatability/5s.json", "repeatability", "PASS"),
        ("h3-status-1:adjudications/5s-lsb-audio.json", "adjudication", "FAIL"),
        ("h3-void-baseline-4", "void", None),
        ("h3-withdraw-resident-16", "withdrawal", None),
        ("h3", "campaign", "NOT_ACCEPTED"),
    ],
)
def test_every_record_kind_renders(
    campaign_records_repo: Path, tmp_path: Path, target: str, kind: str, verdict: str | None
) -> None:
    out = tmp_path / "page.html"
    html, _ = _show(campaign_records_repo, target, out)
    bundle, _, path = target.partition(":")
    reg = json.loads((campaign_records_repo / "evidence" / bundle / "bundle.json").read_text())
    entries = {e["path"]: e for e in reg["manifest"]["entries"]}
    if path:
        record = (campaign_records_repo / "evidence" / bundle / path).read_bytes()
    elif kind == "campaign" and bundle == "h3":
        record = b""
    else:
        json_entries = [p for p in entries if p.endswith(".json")]
        record = b"".join(
            (campaign_records_repo / "evidence" / bundle / p).read_bytes() for p in json_entries
        )
    result = open_page(out, (390, 1280), full=True)
    facts = result.facts
    if kind in ("campaign", "claim"):  # pages with plots
        assert verdict is not None
        assert_clean_page(result, verdict, record, html)
    else:
        assert result.failed == [] and result.errors == []
        assert [u for u in result.requests if not u.startswith(("file://", "data:"))] == []
        assert facts["verdict"] == verdict
        shown = set(facts["digests"])
        assert set(re.findall(r"blake3:[0-9a-f]{64}", record.decode())) <= shown
        assert set(facts["anchors"]) <= {"#" + i for i in facts["ids"]}
    assert facts["scrollWidth"] <= 390, f"{target}: overflows sideways at 390 px"
    text = facts["text"]
    if kind == "campaign":
        # The verdict and the conclusion of every arm before anything else.
        head = text[: text.index("Conditions")]
        for arm, word in (("baseline", "qualified"), ("rank-local", "qualified"),
                          ("lsb-audio", "rejected"), ("resident-16", "withdrawn")):  # fmt: skip
            assert f"{arm}\ncandidate\n{word}" in head or f"{arm}\nbaseline\n{word}" in head, head
        if target != "h3-status-1:status.json":  # the status with its claims beside it
            assert "min_speedup 1" in text
            assert {"threshold": "1", "intervals": "1"} in facts["plots"]
            assert {"groups": "3", "values": "21"} in facts["plots"]  # latency per arm
        assert "baseline-4: voided by 'h3-void-baseline-4': launched against the wrong host" in text
        assert "Runs and comparisons cited" not in text
    if kind == "claim":
        assert "Speedup " in text and "STANDS; the low end" in text and "min_speedup 1" in text
        assert "rank-local-1" in text and "baseline-1" in text  # runs by name
    if kind == "repeatability":
        assert "3 baseline runs compared with the first: repeatable-exact." in text
    if kind == "adjudication":
        assert "against baseline run baseline-1" in text
    if kind == "void":
        assert "Run baseline-4 is set aside: launched against the wrong host" in text
    if kind == "withdrawal":
        assert "Arm resident-16 is withdrawn: the server cannot start" in text
    if SHOTS:
        for width, png in result.screenshots.items():
            name = f"{target.replace(':', '_').replace('/', '_')}-{width}.png"
            Path(SHOTS).mkdir(parents=True, exist_ok=True)
            (Path(SHOTS) / name).write_bytes(png)


def test_record_by_digest_renders(campaign_records_repo: Path, tmp_path: Path) -> None:
    reg = json.loads((campaign_records_repo / "evidence/h3-status-1/bundle.json").read_text())
    entry = next(e for e in reg["manifest"]["entries"] if e["path"] == "claims/5s-rank-local.json")
    html, _ = _show(campaign_records_repo, entry["descriptor"]["digest"], tmp_path / "claim.html")
    assert 'data-report="campaign-record"' in html and "STANDS" in html
    # A record file outside any repository renders too, from the record alone.
    lone = tmp_path / "lone" / "claim.json"
    lone.parent.mkdir()
    shutil.copyfile(campaign_records_repo / "evidence/h3-status-1/claims/5s-rank-local.json", lone)
    code, _, err = run("report", str(lone), "-o", str(tmp_path / "lone.html"))
    assert code == 0, err
