"""Runs over real HTTP against the reference video server: complete runs and every fault."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("aiohttp")
pytest.importorskip("av")

from evidencestore.cli import main
from evidencestore.config import local_store
from evidencestore.inventory import load_registration, registration_path
from evidencestore.runs import load_run
from evidencestore.storage._local import INCOMING_DIR
from evidencestore.testing import assert_bundle
from evidencestore.testing.video_server import VideoServer, sample_workload, serve_video

TINY = {"size": "64x48", "fps": 8}


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _workload(tmp_path: Path, name: str = "workload.toml", **kw: Any) -> Path:
    path = tmp_path / name
    path.write_text(sample_workload(**{**TINY, **kw}))
    return path


def _run(
    capsys: pytest.CaptureFixture[str],
    repo: Path,
    wl: Path,
    fresh_video_server: VideoServer,
    name: str,
    *extra: str,
) -> tuple[int, str, str]:
    return _cli(
        capsys,
        "run",
        str(wl),
        "--arm",
        "baseline",
        "--server",
        fresh_video_server.url,
        "--name",
        name,
        "--root",
        str(repo),
        *extra,
    )


def _show(capsys: pytest.CaptureFixture[str], repo: Path, name: str) -> dict[str, Any]:
    code, out, _ = _cli(capsys, "run", "show", name, "--json", "--root", str(repo))
    assert code == 0
    result: dict[str, Any] = json.loads(out)
    return result


def _store_sizes(repo: Path) -> list[int]:
    store = local_store(repo)
    return [info.size for info in store.upkeep.iter_blobs()]


def test_complete_run_at_5_and_15_seconds(
    tmp_path: Path, repo: Path, fresh_video_server: VideoServer, capsys: pytest.CaptureFixture[str]
) -> None:
    wl = _workload(tmp_path, warmup=2, measured=3, seconds=(5, 15))
    code, out, _ = _run(
        capsys,
        repo,
        wl,
        fresh_video_server,
        "baseline-5s-1",
        "--server-log",
        str(tmp_path / "server.log"),
    )
    assert code == 0, out
    assert "complete, 10 requests (4 warmup, 6 measured), 0 failed" in out
    shown = _show(capsys, repo, "baseline-5s-1")
    assert shown["outcome"] == "complete"
    assert [r["phase"] for r in shown["requests"]] == ["warmup"] * 4 + ["measured"] * 6
    assert [r["request"] for r in shown["requests"]] == [0, 1] * 5
    assert all(
        r["failure"] is None and r["e2e_s"] > 0 and r["media"] == "PASS" for r in shown["requests"]
    )
    assert shown["phases"]["measured"]["e2e_s"]["n"] == 6
    record = load_run(repo, "baseline-5s-1")
    assert record.arm == "baseline" and record.outcome == "complete"
    assert record.server.ok and record.server.model_ids == ("reference-video",)
    assert list(record.logs) == ["logs/server.log"]
    assert shown["logs"] == {"logs/server.log": record.logs["logs/server.log"].digest}
    assert record.workload_digest == record.workload.digest
    for r in record.requests:
        assert (
            r.status == 200
            and r.body is not None
            and r.declared_length == r.received == r.body.size
        )
        assert r.sent_ns < r.headers_ns <= r.first_byte_ns <= r.last_byte_ns <= r.end_ns  # type: ignore[operator]
        # e2e from when the request was due (issue 25: client-side queueing included)
        assert r.intended_ns is not None and r.intended_ns <= r.sent_ns
        assert r.e2e_s == (r.last_byte_ns - r.intended_ns) / 1e9  # type: ignore[operator]
        assert r.send_lag_s == (r.sent_ns - r.intended_ns) / 1e9
    # the 15 s output is longer than the 5 s one, and each was checked against its request
    five, fifteen = record.requests[4], record.requests[5]
    assert five.body is not None and fifteen.body is not None and fifteen.body.size > five.body.size
    reg = load_registration(registration_path(repo, "baseline-5s-1"))
    assert reg.manifest.metadata.annotations["kind"] == "run"
    paths = {e.path: e for e in reg.manifest.entries}
    assert paths["run.json"].location == "repo"
    assert paths["requests/00004/output"].descriptor.digest == five.body.digest
    assert (
        paths["requests/00004/check.json"].descriptor.annotations["org.evidencestore.media.verdict"]
        == "PASS"
    )
    assert_bundle(repo, "baseline-5s-1")
    code, out, _ = _cli(capsys, "run", "show", "baseline-5s-1", "--root", str(repo))
    assert (
        code == 0 and "measured: 6 requests, 6 ok, failures: none" in out and "E2E s (n=6)" in out
    )


def test_rerun_sends_the_same_payloads(
    tmp_path: Path, repo: Path, fresh_video_server: VideoServer, capsys: pytest.CaptureFixture[str]
) -> None:
    wl = _workload(tmp_path, warmup=0, measured=2, seconds=(1, 2))
    assert _run(capsys, repo, wl, fresh_video_server, "r1")[0] == 0
    assert _run(capsys, repo, wl, fresh_video_server, "r2")[0] == 0
    a, b = load_run(repo, "r1"), load_run(repo, "r2")
    assert [r.payload.digest for r in a.requests] == [r.payload.digest for r in b.requests]
    assert a.requests[0].payload.digest != a.requests[1].payload.digest
    assert a.workload_digest == b.workload_digest
    # the reference server is deterministic: the same outputs too
    assert [r.body.digest for r in a.requests if r.body] == [
        r.body.digest for r in b.requests if r.body
    ]
    code, out, _ = _cli(capsys, "run", "diff", "r1", "r2", "--json", "--root", str(repo))
    assert code == 0 and json.loads(out)["differences"] == []


def test_truncated_audio_is_invalid_media(
    tmp_path: Path, repo: Path, fresh_video_server: VideoServer, capsys: pytest.CaptureFixture[str]
) -> None:
    fresh_video_server.short_audio_on = {3}
    wl = _workload(tmp_path, warmup=1, measured=3, seconds=(1,))
    code, out, _ = _run(capsys, repo, wl, fresh_video_server, "short-audio")
    assert code == 1 and "partial" in out
    shown = _show(capsys, repo, "short-audio")
    assert shown["outcome"] == "partial"
    assert [r["failure"] for r in shown["requests"]] == [None, None, "invalid-media", None]
    bad = load_run(repo, "short-audio").requests[2]
    assert bad.status == 200 and bad.body is not None  # HTTP success, still a failed request
    assert (
        bad.media is not None
        and bad.media.verdict == "FAIL"
        and "audio.samples" in bad.media.failed_checks
    )
    assert bad.message is not None and "samples short" in bad.message
    assert bad.e2e_s is None
    assert shown["phases"]["measured"]["e2e_s"]["n"] == 2
    assert shown["failures"] == [
        {
            "label": "request 0 measured #1",
            "index": 2,
            "phase": "measured",
            "request": 0,
            "repetition": 1,
            "failure": "invalid-media",
            "status": 200,
            "message": bad.message,
        }
    ]


def test_short_video_is_invalid_media(
    tmp_path: Path, repo: Path, fresh_video_server: VideoServer, capsys: pytest.CaptureFixture[str]
) -> None:
    fresh_video_server.short_video_on = True
    wl = _workload(tmp_path, warmup=0, measured=1, seconds=(1,))
    assert _run(capsys, repo, wl, fresh_video_server, "short-video")[0] == 1
    record = load_run(repo, "short-video")
    assert record.outcome == "partial"  # inference ran; its only output is invalid
    [r] = record.requests
    assert (
        r.failure == "invalid-media"
        and r.media is not None
        and "video.frames" in r.media.failed_checks
    )


def test_server_refusing_at_startup(
    tmp_path: Path, repo: Path, fresh_video_server: VideoServer, capsys: pytest.CaptureFixture[str]
) -> None:
    fresh_video_server.startup_error = "both unified and legacy offload settings given"
    wl = _workload(tmp_path)
    log = tmp_path / "server.log"
    code, out, _ = _run(
        capsys, repo, wl, fresh_video_server, "rank-local", "--server-log", str(log)
    )
    assert code == 1
    assert (
        "failed-before-inference" in out and "both unified and legacy offload settings given" in out
    )
    assert fresh_video_server.requests == 0  # no inference request was sent
    record = load_run(repo, "rank-local")
    assert record.outcome == "failed-before-inference" and record.requests == ()
    assert record.server.health.status == 503 and not record.server.ok
    from evidencestore.digest import hash_file

    assert record.logs["logs/server.log"].digest == hash_file(log).digest
    assert b"both unified and legacy" in local_store(repo).get(
        record.logs["logs/server.log"].digest
    )
    assert_bundle(repo, "rank-local")
    shown = _show(capsys, repo, "rank-local")
    assert shown["outcome"] == "failed-before-inference" and shown["requests"] == []


def test_connection_refused_is_recorded(
    tmp_path: Path, repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with serve_video() as gone:
        url = gone.url
    wl = _workload(tmp_path)
    code, out, _ = _cli(
        capsys, "run", str(wl), "--arm", "a", "--server", url, "--name", "down", "--root", str(repo)
    )
    assert code == 1 and "never-started" in out  # issue 38: an operator's error
    record = load_run(repo, "down")
    assert record.server.health.status is None and record.server.health.error
    assert record.outcome == "never-started" and record.server.health.unreached == "refused"


def test_connection_dropped_mid_body_leaves_nothing_partial(
    tmp_path: Path, repo: Path, fresh_video_server: VideoServer, capsys: pytest.CaptureFixture[str]
) -> None:
    fresh_video_server.drop_on = {2}
    wl = _workload(tmp_path, warmup=0, measured=3, seconds=(1,))
    assert _run(capsys, repo, wl, fresh_video_server, "dropped")[0] == 1
    record = load_run(repo, "dropped")
    assert record.outcome == "partial"
    bad = record.requests[1]
    assert bad.failure == "truncated" and bad.body is None
    assert bad.declared_length is not None and 0 < bad.received < bad.declared_length
    assert bad.received not in _store_sizes(repo)
    assert list((local_store(repo).root / INCOMING_DIR).iterdir()) == []
    assert_bundle(repo, "dropped")


def test_no_response_within_the_timeout_is_a_timeout_failure(
    tmp_path: Path, repo: Path, fresh_video_server: VideoServer, capsys: pytest.CaptureFixture[str]
) -> None:
    fresh_video_server.first_byte_delay = 30.0
    # The headers come once the body is rendered: up to 1.3 s under load for the first
    # encode in a fresh process (at a 0.5 s timeout the status was then never seen).
    wl = _workload(tmp_path, warmup=0, measured=1, seconds=(1,), timeout=3.0)
    assert _run(capsys, repo, wl, fresh_video_server, "slow")[0] == 1
    [r] = load_run(repo, "slow").requests
    assert r.failure == "timeout" and r.status == 200 and r.first_byte_ns is None
    assert r.message == "no complete response within 3.0 s"


def test_http_500(
    tmp_path: Path, repo: Path, fresh_video_server: VideoServer, capsys: pytest.CaptureFixture[str]
) -> None:
    fresh_video_server.fail_on = {2}
    wl = _workload(tmp_path, warmup=1, measured=2, seconds=(1,))
    assert _run(capsys, repo, wl, fresh_video_server, "five-hundred")[0] == 1
    record = load_run(repo, "five-hundred")
    assert [r.failure for r in record.requests] == [None, "http-status", None]
    assert record.requests[1].status == 500 and record.requests[1].media is None
    assert (
        record.requests[1].message is not None and "injected failure" in record.requests[1].message
    )
    assert record.requests[1].body is not None  # what the server said is kept
    assert record.counts["measured"].failures == {"http-status": 1}
    assert record.counts["warmup"].ok == 1


def test_job_flow(
    tmp_path: Path, repo: Path, fresh_video_server: VideoServer, capsys: pytest.CaptureFixture[str]
) -> None:
    wl = _workload(
        tmp_path, kind="videos-job", path="/v1/videos", warmup=0, measured=2, seconds=(1,)
    )
    assert _run(capsys, repo, wl, fresh_video_server, "jobs")[0] == 0
    record = load_run(repo, "jobs")
    assert all(
        r.job_id and r.polls >= 1 and r.path == f"/v1/videos/{r.job_id}/content"
        for r in record.requests
    )
    assert all(r.media is not None and r.media.verdict == "PASS" for r in record.requests)


def test_job_that_never_completes_is_bounded_by_the_timeout(
    tmp_path: Path, repo: Path, fresh_video_server: VideoServer, capsys: pytest.CaptureFixture[str]
) -> None:
    fresh_video_server.never_complete = True
    wl = _workload(
        tmp_path,
        kind="videos-job",
        path="/v1/videos",
        warmup=0,
        measured=1,
        seconds=(1,),
        timeout=0.4,
    )
    assert _run(capsys, repo, wl, fresh_video_server, "stuck")[0] == 1
    [r] = load_run(repo, "stuck").requests
    assert r.failure == "timeout" and r.job_id == "video_000001" and r.polls >= 1


def test_json_endpoint(
    tmp_path: Path, repo: Path, fresh_video_server: VideoServer, capsys: pytest.CaptureFixture[str]
) -> None:
    wl = _workload(tmp_path, kind="json", path="/v1/generate", warmup=0, measured=1, seconds=(1,))
    assert _run(capsys, repo, wl, fresh_video_server, "json")[0] == 0
    [r] = load_run(repo, "json").requests
    sent = json.loads(local_store(repo).get(r.payload.digest))
    assert sent == {
        "fps": 8,
        "prompt": "a red fox running through snow",
        "seconds": 1.0,
        "seed": 42,
        "size": "64x48",
    }


def test_configs_and_diff(
    tmp_path: Path, repo: Path, fresh_video_server: VideoServer, capsys: pytest.CaptureFixture[str]
) -> None:
    wl = _workload(tmp_path, warmup=0, measured=1, seconds=(1,))
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "a" / "engine.yaml").write_text(
        "offload:\n  resident_layers: 0\n  strategy: layerwise\n"
    )
    (tmp_path / "b" / "engine.yaml").write_text(
        "offload:\n  resident_layers: 16\n  strategy: resident\n"
    )
    (tmp_path / "a" / "launch.sh").write_text("serve --x\n")
    (tmp_path / "b" / "launch.sh").write_text("serve --y\n")
    for arm in ("a", "b"):
        cfgs = [
            "--config",
            str(tmp_path / arm / "engine.yaml"),
            "--config",
            str(tmp_path / arm / "launch.sh"),
        ]
        assert _run(capsys, repo, wl, fresh_video_server, f"arm-{arm}", *cfgs)[0] == 0
    code, out, _ = _cli(capsys, "run", "diff", "arm-a", "arm-b", "--json", "--root", str(repo))
    assert code == 1  # different: exit 1, as `evstore diff`
    diffs = [d for d in json.loads(out)["differences"] if d["section"] == "config"]
    ra, rb = load_run(repo, "arm-a"), load_run(repo, "arm-b")
    assert diffs == [
        {
            "section": "config",
            "key": "configs/engine.yaml:offload.resident_layers",
            "a": 0,
            "b": 16,
        },
        {
            "section": "config",
            "key": "configs/engine.yaml:offload.strategy",
            "a": "layerwise",
            "b": "resident",
        },
        {
            "section": "config",
            "key": "configs/launch.sh",
            "a": ra.configs["configs/launch.sh"].digest,
            "b": rb.configs["configs/launch.sh"].digest,
        },
    ]
    code, out, _ = _cli(capsys, "run", "diff", "arm-a", "arm-b", "--root", str(repo))
    assert "config configs/engine.yaml:offload.resident_layers: 0 -> 16" in out


def test_campaign_fields(
    tmp_path: Path, repo: Path, fresh_video_server: VideoServer, capsys: pytest.CaptureFixture[str]
) -> None:
    wl = _workload(tmp_path, warmup=0, measured=1, seconds=(1,))
    code, _, err = _run(
        capsys, repo, wl, fresh_video_server, "c1", "--campaign", "offload", "--condition", "5s"
    )
    assert code == 2
    assert "evstore campaign init offload --protocol FILE" in err
    assert not registration_path(repo, "c1").exists() and fresh_video_server.requests == 0
    from evidencestore.campaign.protocol import init_campaign

    proto = tmp_path / "protocol.toml"
    proto.write_text(
        'name = "offload"\n[[condition]]\nname = "5s"\nworkload = "workload.toml"\n'
        '[[arm]]\nname = "baseline"\nbaseline = true\nruns = 2\n'
        '[[arm]]\nname = "resident-16"\nruns = 1\n'
    )
    campaign = init_campaign(repo, "offload", proto)
    # The run must fit the protocol, checked before anything is sent.
    for extra, message in (
        (
            ("--condition", "15s"),
            "--condition '15s': campaign 'offload' declares the conditions 5s",
        ),
        ((), "--campaign needs --condition"),
    ):
        code, _, err = _run(
            capsys, repo, wl, fresh_video_server, "c0", "--campaign", "offload", *extra
        )
        assert code == 2 and message in err, err
    other = _workload(tmp_path, "other.toml", warmup=0, measured=2, seconds=(1,))
    code, _, err = _run(
        capsys, repo, other, fresh_video_server, "c0", "--campaign", "offload", "--condition", "5s"
    )
    assert code == 2 and "but campaign 'offload' binds condition '5s' to workload.toml" in err
    assert fresh_video_server.requests == 0
    assert (
        _run(
            capsys, repo, wl, fresh_video_server, "c1", "--campaign", "offload", "--condition", "5s"
        )[0]
        == 0
    )
    record = load_run(repo, "c1")
    assert (record.campaign, record.condition) == ("offload", "5s")
    assert record.protocol_digest == campaign.digest


def test_usage_errors(
    tmp_path: Path, repo: Path, fresh_video_server: VideoServer, capsys: pytest.CaptureFixture[str]
) -> None:
    wl = _workload(tmp_path, warmup=0, measured=1, seconds=(1,))
    code, _, err = _cli(
        capsys, "run", str(wl), "--arm", "a", "--server", "ftp://x", "--root", str(repo)
    )
    assert code == 2 and "--server 'ftp://x': expected an http:// or https:// URL" in err
    code, _, err = _cli(
        capsys, "run", str(wl), "--server", fresh_video_server.url, "--root", str(repo)
    )
    assert code == 2 and "--arm" in err
    assert _run(capsys, repo, wl, fresh_video_server, "once")[0] == 0
    code, _, err = _run(capsys, repo, wl, fresh_video_server, "once")
    assert code == 2 and "bundle 'once' is already registered" in err
    code, _, err = _run(
        capsys, repo, wl, fresh_video_server, "cfg", "--config", str(tmp_path / "nope.yaml")
    )
    assert code == 2 and "nope.yaml: no such file" in err
    code, _, err = _cli(
        capsys,
        "run",
        str(tmp_path / "none.toml"),
        "--arm",
        "a",
        "--server",
        fresh_video_server.url,
        "--root",
        str(repo),
    )
    assert code == 2 and "none.toml: cannot read: No such file or directory" in err
    code, _, err = _cli(capsys, "run", "show", "missing", "--root", str(repo))
    assert code == 2 and "missing" in err
    code, _, err = _cli(capsys, "run", "show", "once", "--bogus", "--root", str(repo))
    assert code == 2 and "unrecognized arguments: --bogus" in err
    assert fresh_video_server.requests == 1  # only the one good run sent anything


def test_redirects_are_not_followed(
    tmp_path: Path, repo: Path, fresh_video_server: VideoServer, capsys: pytest.CaptureFixture[str]
) -> None:
    with serve_video() as elsewhere:
        fresh_video_server.redirect_to = elsewhere.url
        wl = _workload(tmp_path, warmup=0, measured=1, seconds=(1,))
        assert _run(capsys, repo, wl, fresh_video_server, "redirected")[0] == 1
        assert elsewhere.requests == 0  # nothing but the given server is contacted
    [r] = load_run(repo, "redirected").requests
    assert r.failure == "http-status" and r.status == 302


def test_concurrency_and_progress(
    tmp_path: Path, repo: Path, fresh_video_server: VideoServer
) -> None:
    from evidencestore.runs import run_workload
    from evidencestore.runs.models import RequestRecord

    text = sample_workload(**TINY, warmup=1, measured=2, seconds=(1, 2)).replace(
        "timeout = 120", "timeout = 120\nconcurrency = 2"
    )
    wl = tmp_path / "c.toml"
    wl.write_text(text)
    seen: list[tuple[int, int, str]] = []

    def progress(k: int, n: int, record: RequestRecord) -> None:
        seen.append((k, n, record.phase))

    _, record = run_workload(
        repo, wl, arm="a", server=fresh_video_server.url, name="conc", progress=progress
    )
    assert record.outcome == "complete"
    assert [r.index for r in record.requests] == list(range(6))
    assert [r.phase for r in record.requests] == ["warmup"] * 2 + ["measured"] * 4
    assert sorted(seen) == [(k, 6, "warmup" if k <= 2 else "measured") for k in range(1, 7)]
    # every warmup request finished before the first measured one was sent
    last_warmup = max(r.end_ns for r in record.requests if r.phase == "warmup")
    assert all(r.sent_ns > last_warmup for r in record.requests if r.phase == "measured")


def test_workload_without_audio_section_still_checks_audio_length(
    tmp_path: Path, repo: Path, fresh_video_server: VideoServer, capsys: pytest.CaptureFixture[str]
) -> None:
    text = sample_workload(**TINY, warmup=0, measured=2, seconds=(1,))
    wl = tmp_path / "noaudio.toml"
    wl.write_text(text.replace("[audio]\nsample_rate = 48000\nchannels = 2\n", ""))
    fresh_video_server.short_audio_on = {2}
    assert _run(capsys, repo, wl, fresh_video_server, "no-audio-section")[0] == 1
    ok, short = load_run(repo, "no-audio-section").requests
    assert ok.failure is None and ok.media is not None and ok.media.verdict == "PASS"
    assert short.failure == "invalid-media" and short.media is not None
    assert (
        "audio.duration" in short.media.failed_checks
        or "audio.samples" in short.media.failed_checks
    )


def test_failed_job(
    tmp_path: Path, repo: Path, fresh_video_server: VideoServer, capsys: pytest.CaptureFixture[str]
) -> None:
    fresh_video_server.fail_on = True
    wl = _workload(
        tmp_path, kind="videos-job", path="/v1/videos", warmup=0, measured=1, seconds=(1,)
    )
    assert _run(capsys, repo, wl, fresh_video_server, "job-failed")[0] == 1
    [r] = load_run(repo, "job-failed").requests
    assert (
        r.failure == "http-status"
        and r.message is not None
        and "job video_000001 failed" in r.message
    )


def test_interrupted_run_leaves_no_temporaries(
    tmp_path: Path, repo: Path, fresh_video_server: VideoServer
) -> None:
    from evidencestore.runs import run_workload
    from evidencestore.runs.models import RequestRecord

    wl = _workload(tmp_path, warmup=0, measured=3, seconds=(1,))

    def interrupt(k: int, n: int, record: RequestRecord) -> None:
        if k == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_workload(
            repo, wl, arm="a", server=fresh_video_server.url, name="interrupted", progress=interrupt
        )
    assert list((local_store(repo).root / INCOMING_DIR).iterdir()) == []
    assert not registration_path(repo, "interrupted").exists()


def test_connection_closed_before_the_response(
    tmp_path: Path, repo: Path, fresh_video_server: VideoServer, capsys: pytest.CaptureFixture[str]
) -> None:
    fresh_video_server.reset_on = {1}
    wl = _workload(tmp_path, warmup=1, measured=1, seconds=(1,))
    assert _run(capsys, repo, wl, fresh_video_server, "reset")[0] == 1
    record = load_run(repo, "reset")
    first, second = record.requests
    assert first.failure == "connect" and first.status is None and first.headers_ns is None
    assert second.failure is None and record.outcome == "partial"
    assert record.counts["warmup"].failures == {"connect": 1}


def test_progress_on_a_terminal(
    tmp_path: Path,
    repo: Path,
    fresh_video_server: VideoServer,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import sys

    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    wl = _workload(tmp_path, warmup=1, measured=1, seconds=(1,))
    code, _, err = _run(capsys, repo, wl, fresh_video_server, "tty")
    assert code == 0
    assert "\rrun tty: 0/2 requests, 0 sent (checking the server)\x1b[K" in err
    assert "\rrun tty: 0/2 requests, 1 sent\x1b[K" in err  # before the first one is done
    assert "\rrun tty: 2/2 requests, 2 sent, " in err and err.endswith("\r\x1b[K")


def test_campaign_bundle_without_protocol(
    tmp_path: Path, repo: Path, fresh_video_server: VideoServer, capsys: pytest.CaptureFixture[str]
) -> None:
    from evidencestore.bundle import create_bundle

    (tmp_path / "notes.md").write_text("no protocol here\n")
    create_bundle(repo, "camp", [tmp_path / "notes.md"], store=local_store(repo))
    wl = _workload(tmp_path, warmup=0, measured=1, seconds=(1,))
    code, _, err = _run(
        capsys, repo, wl, fresh_video_server, "c2", "--campaign", "camp", "--condition", "5s"
    )
    assert code == 2
    assert "bundle 'camp' has no protocol.toml entry" in err
    assert "run `evstore campaign init camp --protocol FILE` first" in err
    assert fresh_video_server.requests == 0
