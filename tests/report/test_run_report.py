"""Run reports: a run bundle's ``run.json`` rendered and opened in headless Chromium."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("jinja2")
pytest.importorskip("matplotlib")

from helpers.browser import assert_clean_page, needs_chromium, open_page, png_variance
from helpers.remotes import run
from helpers.run_records import bundle_run, digest_of, run_record

from evidencestore.digest import hash_bytes
from evidencestore.report.run import render_run_html, request_times
from evidencestore.runs.transport import Observation


def test_request_times_from_monotonic_timings() -> None:
    r = {"timings": {"sent_ns": 1_000_000_000, "first_byte_ns": 1_250_000_000,
                     "last_byte_ns": 5_500_000_000}}  # fmt: skip
    assert request_times(r) == (4.5, 0.25)
    assert request_times({"e2e_s": 2.0}) == (2.0, None)


@needs_chromium
def test_run_report_in_browser(initialized_repo: Path, tmp_path: Path) -> None:
    data = bundle_run(initialized_repo, "baseline-5s-1", run_record())
    out = tmp_path / "run.html"
    code, stdout, err = run(
        "report", "baseline-5s-1", "-o", str(out), "--root", str(initialized_repo)
    )
    assert code == 0, err
    assert f"run report of {hash_bytes(data).digest}" in stdout
    html = out.read_text()
    result = open_page(out)
    assert_clean_page(result, "partial", data, html)
    facts = result.facts
    # E2E and TTFB plots; the failed request contributes no value: 2 warmup + 5 measured.
    assert facts["plots"] == [{"groups": "2", "values": "7"}, {"groups": "2", "values": "7"}]
    text = facts["text"]
    assert "configs: server.yaml" in text and "logs: server.log" in text
    assert "request-5-failure" in facts["ids"] and "#request-5" in facts["anchors"]
    assert "HTTP 500 on request 5" in text
    assert "measured (n = 5)" in html and "warmup (n = 2)" in html
    assert "Run baseline-5s-1" in text
    # Measured E2E: 4.52, 4.33, 4.44, 4.36, 4.47 s (request 5 failed; p90 by nearest rank).
    assert "min 4.330, median 4.440, p90 4.520, max 4.520, mean 4.424" in text


def test_failed_before_inference(initialized_repo: Path, tmp_path: Path) -> None:
    record = run_record("failed-before-inference", n=0)
    html = render_run_html(record, record_digest=digest_of("r"))
    assert 'data-verdict="failed-before-inference"' in html
    assert 'class="verdict v-FAIL"' in html
    assert "No request reached its last byte" in html
    assert "Reason: health check refused: both unified and legacy offload settings" in html
    assert digest_of("server.log") in html and digest_of("workload") in html


@needs_chromium
def test_report_of_a_run_recorded_by_the_library(initialized_repo: Path, tmp_path: Path) -> None:
    import evidencestore.runs.recorder as recorder

    config = tmp_path / "server.yaml"
    config.write_text("offload: unified\n")
    log = tmp_path / "server.log"
    log.write_text("worker 0 exited normally\n")
    run_ = recorder.open_run(
        initialized_repo, "harness-1", arm="baseline", workload=b'name = "w"\n'
    )
    run_.attach_config(config)
    run_.attach_log(log)
    t = 10**12
    for i in range(5):
        failed = i == 3
        first, last = t + 200_000_000, t + (2_000 + 100 * i) * 10**6
        seen = Observation(
            sent_ns=t,
            end_ns=last,
            first_byte_ns=None if failed else first,
            last_byte_ns=None if failed else last,
            status=500 if failed else 200,
            failure="http-status" if failed else None,
            message="HTTP 500 Internal Server Error" if failed else None,
        )
        run_.record_request(
            seen,
            phase="warmup" if i == 0 else "measured",
            payload=b"payload %d" % i,
            body=None if failed else b"output %d" % i,
            repetition=i,
        )
        t = last + 10**6
    _, record = run_.seal()
    out = tmp_path / "harness.html"
    code, _, err = run("report", "harness-1", "-o", str(out), "--root", str(initialized_repo))
    assert code == 0, err
    data = (initialized_repo / "evidence" / "harness-1" / "run.json").read_bytes()
    html = out.read_text()
    result = open_page(out)
    assert_clean_page(result, record.outcome, data, html)
    facts = result.facts
    assert facts["plots"][0] == {"groups": "2", "values": "4"}  # 1 warmup + 3 measured E2E
    assert "HTTP 500 Internal Server Error" in facts["text"]
    assert "request-3-failure" in facts["ids"]
    for desc in (*record.configs.values(), *record.logs.values()):
        assert desc.digest in facts["digests"]


WORKLOAD = """\
[endpoint]
kind = "videos-sync"
path = "/v1/videos/sync"

[run]
warmup = 1
measured = 3
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
def test_report_of_a_run_against_the_reference_server(
    initialized_repo: Path, tmp_path: Path
) -> None:
    import evidencestore.runs.runner as runner
    import evidencestore.testing.video_server as video_module

    workload = tmp_path / "workload.toml"
    workload.write_text(WORKLOAD)
    with video_module.serve_video(short_audio_on={3}) as server:
        _, record = runner.run_workload(
            initialized_repo, workload, arm="baseline", server=server.url, name="ref-run"
        )
    assert record.outcome == "partial"
    [bad] = [r for r in record.requests if r.failure is not None]
    assert bad.failure == "invalid-media"
    out = tmp_path / "ref-run.html"
    assert run("report", "ref-run", "-o", str(out), "--root", str(initialized_repo))[0] == 0
    html = out.read_text()
    data = (initialized_repo / "evidence" / "ref-run" / "run.json").read_bytes()
    result = open_page(out)
    assert_clean_page(result, "partial", data, html)
    facts = result.facts
    assert f"request-{bad.index}-failure" in facts["ids"]
    assert "invalid-media" in facts["text"]
    assert facts["plots"][0] == {"groups": "2", "values": "3"}  # 1 warmup + 2 measured
    assert "server.url" in facts["text"] and server.url in facts["text"]


def test_failed_before_inference_banner_shows_the_server_s_reason() -> None:
    record = run_record("failed-before-inference", n=0)
    said = "server failed to start: both unified and legacy offload settings given"
    record["server"] = {**record["server"], "message": said}
    html = render_run_html(record, record_digest=digest_of("r"))
    banner = html[html.index('id="verdict"') : html.index("</div>", html.index('id="verdict"'))]
    assert f"The server said: {said}" in banner
    assert "every request succeeded" not in html
    assert f"No request was sent: {said}" in html
    # A complete run with no failure still says so.
    ok = render_run_html(run_record("complete", n=3), record_digest=digest_of("r"))
    assert "every request succeeded" in ok and "The server said" not in ok


def _two_requests() -> dict[str, Any]:
    """Requests 0 (fast) and 1 (slow), one warmup and three measured each."""
    record = run_record("complete", n=0)
    requests = []
    t = 10**12
    for i, (phase, which) in enumerate(
        [("warmup", 0), ("warmup", 1)] + [("measured", w) for _ in range(3) for w in (0, 1)]
    ):
        took = (1 if which == 0 else 5) * 10**9 + i * 10**6
        requests.append(
            {**{k: v for k, v in run_record(n=1)["requests"][0].items()},
             "index": i, "phase": phase, "request": which, "repetition": i,
             "sent_ns": t, "first_byte_ns": t + 10**8, "last_byte_ns": t + took,
             "end_ns": t + took, "e2e_s": took / 1e9, "ttfb_s": 0.1,
             "body": {"digest": digest_of(f"two {i}"), "size": 10}}
        )  # fmt: skip
        t += took + 10**6
    record["requests"] = requests
    return record


def test_latency_plot_has_one_box_per_request_with_warmup_apart() -> None:
    html = render_run_html(_two_requests(), record_digest=digest_of("r"))
    for label in (
        "request 0 \u00b7 measured (n = 3)",
        "request 1 \u00b7 measured (n = 3)",
        "request 0 \u00b7 warmup (n = 1)",
        "request 1 \u00b7 warmup (n = 1)",
    ):
        assert label in html
    # Measured boxes first, warmup after them.
    assert html.index("request 1 \u00b7 measured") < html.index("request 0 \u00b7 warmup")
    assert 'data-groups="4" data-values="8"' in html


@needs_chromium
def test_run_report_scales_at_phone_width(initialized_repo: Path, tmp_path: Path) -> None:
    data = bundle_run(initialized_repo, "two-requests", _two_requests())
    out = tmp_path / "two.html"
    assert run("report", "two-requests", "-o", str(out), "--root", str(initialized_repo))[0] == 0
    result = open_page(out, widths=(390,))
    assert result.errors == [] and result.failed == []
    facts = result.facts
    assert facts["plots"][0] == {"groups": "4", "values": "8"}
    # Every plot is scaled to the page (not cropped, not scrolled) at 390 px.
    assert facts["svgs"] and all(100 < w <= 390 and h > 50 for w, h in facts["svgs"])
    assert all(x <= 0 for x in facts["figureOverflow"])
    assert facts["scrollWidth"] <= 390
    # Labels legible at phone width (issue 38: scaled to 4-5 px before): at least 8 px.
    assert facts["plotFontPx"] >= 8, facts["plotFontPx"]
    assert png_variance(result.screenshots[390]) > 100
    assert data
