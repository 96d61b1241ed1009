"""Campaign reports: a campaign status rendered and opened in headless Chromium."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("jinja2")
pytest.importorskip("matplotlib")

from report_browser import assert_clean_page, chromium_path, open_page

from evidencestore.digest import hash_bytes
from evidencestore.report import render_report
from evidencestore.report.campaign import render_campaign_status_html

needs_chromium = pytest.mark.skipif(
    chromium_path() is None,
    reason="headless Chromium (Debian package 'chromium') is not installed",
)


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
    rendered = render_report(None, str(path))
    assert rendered.kind == "campaign" and rendered.digest == hash_bytes(data).digest
    out = tmp_path / "campaign.html"
    out.write_text(rendered.html)
    result = open_page(out)
    assert_clean_page(result, "NOT_ACCEPTED", data, rendered.html)
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
