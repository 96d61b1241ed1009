"""Campaign reports: a campaign status rendered and opened in headless Chromium."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from helpers import paths

pytest.importorskip("jinja2")
pytest.importorskip("matplotlib")

from helpers.browser import assert_clean_page, needs_chromium, open_page

from evidencestore.digest import hash_bytes
from evidencestore.errors import ReportError
from evidencestore.report import render_report
from evidencestore.report.campaign import render_campaign_status_html


def _d(text: str) -> str:
    return hash_bytes(text.encode()).digest


def _status(accepted: bool = False) -> dict[str, Any]:
    cells = [
        {"condition": "5s", "arm": "baseline", "runs_done": 2, "runs_required": 2,
         "runs_failed": 0, "repeatability": "repeatable-exact", "lossless": None,
         "speedup": None, "runs": [_d("b1"), _d("b2")]},
        {"condition": "5s", "arm": "rank-local", "runs_done": 1, "runs_required": 1,
         "runs_failed": 0, "lossless": "PASS",
         "speedup": {"ratio": 1.42, "low": 1.3, "high": 1.55, "confidence": 0.95, "n": 3},
         "runs": [_d("c1")], "comparisons": [_d("cmp1")]},
        {"condition": "15s", "arm": "baseline", "runs_done": 2, "runs_required": 2,
         "runs_failed": 0, "lossless": None, "speedup": None, "runs": [_d("b3"), _d("b4")]},
        {"condition": "15s", "arm": "rank-local", "runs_done": 0, "runs_required": 1,
         "runs_failed": 1, "lossless": None, "speedup": None, "runs": [_d("c2")]},
    ]  # fmt: skip
    return {
        "campaign": "h3-lossless",
        "protocol": _d("protocol"),
        "verdict": "ACCEPTED" if accepted else "NOT_ACCEPTED",
        "remaining": [] if accepted else ["15s: candidate rank-local has 0 of 1 required runs"],
        "cells": cells,
    }


@needs_chromium
def test_campaign_report_in_browser(tmp_path: Path) -> None:
    data = json.dumps(_status(), sort_keys=True).encode()
    path = tmp_path / "status.json"
    path.write_bytes(data)
    # `evstore report FILE` renders records by their decoded type (evidencestore.records):
    # this page fixture's shape is no stored record, so the page is rendered directly.
    with pytest.raises(ReportError, match="status.json: not a record evidencestore knows"):
        render_report(None, str(path))
    html = render_campaign_status_html(_status(), record_digest=hash_bytes(data).digest)
    stored = (paths.DATA / "legacy_records/status.json").read_bytes()
    (tmp_path / "real.json").write_bytes(stored)
    rendered = render_report(None, str(tmp_path / "real.json"))
    assert rendered.kind == "campaign" and rendered.digest == hash_bytes(stored).digest
    out = tmp_path / "campaign.html"
    out.write_text(html)
    result = open_page(out)
    assert_clean_page(result, "NOT_ACCEPTED", data, html)
    facts = result.facts
    assert "15s: candidate rank-local has 0 of 1 required runs" in facts["text"]
    assert facts["plots"] == [{"intervals": "1"}]
    assert "1.420\u00d7 [1.300, 1.550] (95%), n = 3" in facts["text"]
    # Each cell links to an anchor holding the run or comparison digest it cites.
    ids = set(facts["ids"])
    for cell in ("cell-5s-baseline", "cell-5s-rank-local", "cell-15s-rank-local"):
        assert cell in ids
    anchor = "d-" + _d("cmp1").removeprefix("blake3:")[:16]
    assert f"#{anchor}" in facts["anchors"] and anchor in ids
    assert "1 failed" in facts["text"]


def test_accepted_status() -> None:
    html = render_campaign_status_html(_status(accepted=True), name="h3")
    assert 'data-verdict="ACCEPTED"' in html and 'class="verdict v-PASS"' in html
    assert "every condition is qualified" in html


def _campaign_records() -> tuple[Any, list[Any]]:
    import evidencestore.campaign.models as models

    protocol = _d("protocol")
    run = {name: _d(name) for name in ("b1", "b2", "c1", "c2")}
    cell = models.CellStatus
    status = models.StatusRecord(
        campaign="h3-lossless",
        protocol_digest=protocol,
        verdict="NOT_ACCEPTED",
        remaining=("15s: candidate rank-local has 0 of 1 required runs",),
        cells=(
            cell(condition="5s", arm="baseline", baseline=True, runs_required=2, runs_done=2,
                 runs_failed=0, failed_runs=(), repeatability="exact", lossless=None,
                 speedup=None, qualified=True),
            cell(condition="5s", arm="rank-local", baseline=False, runs_required=1,
                 runs_done=1, runs_failed=0, failed_runs=(), repeatability=None,
                 lossless="PASS", speedup=models.Speedup(ratio=1.42, low=1.3, high=1.55),
                 qualified=True),
            cell(condition="15s", arm="baseline", baseline=True, runs_required=2,
                 runs_done=2, runs_failed=0, failed_runs=(), repeatability="exact",
                 lossless=None, speedup=None, qualified=True),
            cell(condition="15s", arm="rank-local", baseline=False, runs_required=1,
                 runs_done=0, runs_failed=1, failed_runs=("rank-local-15s-1",),
                 repeatability=None, lossless=None, speedup=None, qualified=False),
        ),
        excluded=(models.Exclusion(run="late-run", code="before-protocol",
                                   message="registered before the protocol"),),
    )  # fmt: skip
    comparison = models.OutputComparison(
        key="request 0 measured 0", verdict="PASS", reference=_d("out-b"),
        candidate=_d("out-c"), reasons=("exactly equal",), record=_d("cmp-record"),
    )  # fmt: skip
    adjudication = models.Adjudication(
        protocol_digest=protocol, condition="5s", arm="rank-local", verdict="PASS",
        reasons=("every output exactly equal",), baseline_runs=(run["b1"], run["b2"]),
        candidate_runs=(run["c1"],), baseline_repeatable=True, comparisons=(comparison,),
    )  # fmt: skip
    values = models.RunValue
    claim = models.Claim(
        protocol_digest=protocol, condition="5s", arm="rank-local", baseline_arm="baseline",
        refused=False, reasons=(), confidence=0.95,
        speedup=models.Speedup(ratio=1.42, low=1.3, high=1.55), n_baseline=6, n_candidate=3,
        runs=(values(run="b1", digest=run["b1"], arm="baseline", values=(4.4, 4.5, 4.6),
                     mean=4.5, cv=0.02),
              values(run="c1", digest=run["c1"], arm="rank-local", values=(3.1, 3.2, 3.2),
                     mean=3.17, cv=0.018)),
    )  # fmt: skip
    repeatability = models.Repeatability(
        protocol_digest=protocol, condition="5s", runs=(run["b1"], run["b2"]),
        run_names=("b1", "b2"), exact=True, comparisons=(),
    )  # fmt: skip
    return status, [repeatability, adjudication, claim]


@needs_chromium
def test_campaign_status_records_in_browser(tmp_path: Path) -> None:
    from evidencestore._canonical import canonical

    status, records = _campaign_records()
    html = render_campaign_status_html(
        status, records=records, context={"protocol": _d("protocol")}
    )
    out = tmp_path / "status.html"
    out.write_text(html)
    result = open_page(out)
    everything = b"".join(canonical(r) for r in (status, *records))
    assert_clean_page(result, "NOT_ACCEPTED", everything, html)
    facts = result.facts
    assert len(facts["ids"]) == len(set(facts["ids"]))
    for rid in ("claim-5s-rank-local", "adjudication-5s-rank-local", "repeatability-5s"):
        assert rid in facts["ids"] and f"#{rid}" in facts["anchors"]
    # The comparison record and every run record cited land on an anchor of their own.
    for name in ("cmp-record", "b1", "b2", "c1"):
        assert "d-" + _d(name).removeprefix("blake3:")[:16] in facts["ids"]
    text = facts["text"]
    assert "failed run: rank-local-15s-1" in text and "not qualified" in text
    assert "late-run: registered before the protocol" in text
    # The speedup interval, then the claim's runs as latency distributions per arm.
    assert facts["plots"] == [{"intervals": "1"}, {"groups": "2", "values": "6"}]
    assert "1.420\u00d7 [1.300, 1.550] (95%), n = 6 baseline / 3 candidate" in text
    assert "4.400, 4.500, 4.600" in text  # each run's measured values, cited by digest


PROTOCOL = """\
name = "h3"

[timing]
min_runs = 2
confidence = 0.95

[quality]
non_repeatable_baseline = "inconclusive"

[[condition]]
name = "1s"
workload = "workloads/1s.toml"

[[arm]]
name = "baseline"
baseline = true
runs = 2

[[arm]]
name = "rank-local"
runs = 2
"""

WORKLOAD = """\
[endpoint]
kind = "videos-sync"
path = "/v1/videos/sync"

[run]
warmup = 1
measured = 2
timeout = 60

[audio]
sample_rate = 48000
channels = 2

[[request]]
prompt = "a red fox running through snow"
size = "64x64"
seconds = 1
fps = 10
seed = 42
"""


@needs_chromium
def test_report_of_a_campaign_run_against_the_reference_server(tmp_path: Path) -> None:
    from helpers.remotes import run
    from helpers.repos import init_repo

    import evidencestore.campaign.protocol as protocol_mod
    import evidencestore.campaign.status as status_mod
    import evidencestore.runs.runner as runner
    import evidencestore.testing.video_server as video_module

    root = init_repo(tmp_path / "repo")
    assert run("init", "--root", str(root))[0] == 0
    src = tmp_path / "protocol"
    (src / "workloads").mkdir(parents=True)
    (src / "protocol.toml").write_text(PROTOCOL)
    (src / "workloads" / "1s.toml").write_text(WORKLOAD)
    campaign = protocol_mod.init_campaign(root, "h3", src / "protocol.toml")
    from evidencestore.campaign import campaign_rules

    with video_module.serve_video() as server:
        for name, arm in (("b-1", "baseline"), ("c-1", "rank-local"), ("b-2", "baseline"),
                          ("c-2", "rank-local")):  # fmt: skip
            # min_runs counts runs: two per arm, so the claim has an interval to draw
            runner.run_workload(
                root, src / "workloads" / "1s.toml", arm=arm, server=server.url, name=name,
                campaign=campaign_rules(root, "h3"), protocol_digest=campaign.digest,
                condition="1s",
            )  # fmt: skip
    evaluation = status_mod.evaluate(root, campaign)
    out = tmp_path / "h3.html"
    code, stdout, err = run("report", "h3", "-o", str(out), "--root", str(root))
    assert code == 0, err
    assert stdout.startswith("campaign report of blake3:")
    html = out.read_text()
    from evidencestore._canonical import canonical

    records = [
        evaluation.status,
        *evaluation.repeatability.values(),
        *evaluation.adjudications.values(),
        *evaluation.claims.values(),
    ]
    result = open_page(out)
    assert_clean_page(
        result, evaluation.status.verdict, b"".join(canonical(r) for r in records), html
    )
    facts = result.facts
    assert len(facts["ids"]) == len(set(facts["ids"]))
    assert {"cell-1s-baseline", "cell-1s-rank-local"} <= set(facts["ids"])
    for sentence in evaluation.status.remaining:
        assert sentence in facts["text"]
    assert campaign.digest in facts["digests"]
    for claim in evaluation.claims.values():
        for value in claim.runs:  # every run a claim used, with its digest and an anchor
            assert "d-" + value.digest.removeprefix("blake3:")[:16] in facts["ids"]

    # `campaign status --html` writes the same page from its own evaluation.
    again = tmp_path / "status.html"
    code, stdout, err = run("campaign", "status", "h3", "--html", str(again), "--root", str(root))
    assert code == (0 if evaluation.status.verdict == "ACCEPTED" else 1), err
    assert f"wrote {again}" in err and evaluation.status.verdict in stdout
    assert again.read_text() == html
