"""Open-loop load: ``[run] request_rate`` with ``burstiness`` (vllm bench serve's
semantics, seeded), each request's intended and actual send time, the schedule's slip."""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest

pytest.importorskip("aiohttp")

import itertools

from evidencestore.errors import ConfigError
from evidencestore.runs import run_workload
from evidencestore.runs.arrivals import arrival_offsets
from evidencestore.runs.models import RunRecord
from evidencestore.runs.workload import parse_workload
from evidencestore.testing.llm_server import LlmServer, chat_workload


def _gaps(offsets: list[float]) -> list[float]:
    return [b - a for a, b in itertools.pairwise(offsets)]


def test_schedule_is_seeded_gamma_with_the_asked_mean() -> None:
    a = arrival_offsets(4000, 20.0, 1.0, seed=3)
    assert a == arrival_offsets(4000, 20.0, 1.0, seed=3) and a[0] == 0.0
    assert a != arrival_offsets(4000, 20.0, 1.0, seed=4)
    poisson = _gaps(a)
    assert statistics.mean(poisson) == pytest.approx(1 / 20, rel=0.05)
    # Poisson: exponential gaps, coefficient of variation 1; shape 4: 1/sqrt(4).
    assert statistics.stdev(poisson) / statistics.mean(poisson) == pytest.approx(1.0, rel=0.06)
    regular = _gaps(arrival_offsets(4000, 20.0, 4.0, seed=3))
    assert statistics.mean(regular) == pytest.approx(1 / 20, rel=0.05)
    assert statistics.stdev(regular) / statistics.mean(regular) == pytest.approx(0.5, rel=0.06)
    bursty = _gaps(arrival_offsets(4000, 20.0, 0.25, seed=3))
    assert statistics.stdev(bursty) / statistics.mean(bursty) == pytest.approx(2.0, rel=0.1)
    assert arrival_offsets(5, "inf") == [0.0] * 5
    assert arrival_offsets(3, float("inf")) == [0.0] * 3


def test_workload_fields() -> None:
    base = chat_workload(("a",))
    run = parse_workload(
        base.replace(
            "[run]", "[run]\nrequest_rate = 10\nburstiness = 0.5\narrival_seed = 9"
        ).encode(),
        "w.toml",
    ).run
    assert (run.request_rate, run.burstiness, run.arrival_seed) == (10.0, 0.5, 9)
    run = parse_workload(
        base.replace("[run]", '[run]\nrequest_rate = "inf"').encode(), "w.toml"
    ).run
    assert run.request_rate == "inf"
    with pytest.raises(ConfigError, match="request_rate"):
        parse_workload(base.replace("[run]", "[run]\nrequest_rate = 0").encode(), "w.toml")
    with pytest.raises(ConfigError, match="burstiness"):
        parse_workload(base.replace("[run]", "[run]\nburstiness = -1").encode(), "w.toml")


def _run(tmp_path: Path, llm: LlmServer, name: str, run: str, **knobs: object) -> RunRecord:
    (tmp_path / "evidence").mkdir(exist_ok=True)
    text = chat_workload(tuple(f"p{i}" for i in range(8)), max_tokens=4, logprobs=False)
    (tmp_path / "w.toml").write_text(text.replace("concurrency = 1\n", run + "\n"))
    saved = {k: getattr(llm, k) for k in knobs}
    for k, v in knobs.items():
        setattr(llm, k, v)
    try:
        return run_workload(tmp_path, tmp_path / "w.toml", arm="a", server=llm.url, name=name)[1]
    finally:
        for k, v in saved.items():
            setattr(llm, k, v)


def test_open_loop_sends_on_schedule_not_on_completion(
    tmp_path: Path, llm_server: LlmServer, capsys: pytest.CaptureFixture[str]
) -> None:
    rec = _run(tmp_path, llm_server, "open",
               "concurrency = 64\nrequest_rate = 40\narrival_seed = 5", ttft=0.3)  # fmt: skip
    rs = sorted(rec.requests, key=lambda r: r.index)
    assert all(r.failure is None for r in rs), [r.message for r in rs]
    # The intended send times are the seeded schedule, exactly.
    due = arrival_offsets(8, 40.0, 1.0, seed=5)
    t0 = rs[0].intended_ns
    assert t0 is not None
    assert [r.intended_ns - t0 for r in rs] == [round(d * 1e9) for d in due]  # type: ignore[operator]
    assert all(r.sent_ns >= r.intended_ns for r in rs)  # type: ignore[operator]
    # Sent while earlier requests were still being answered: the loop is open.
    assert any(b.sent_ns < a.last_byte_ns for a, b in itertools.pairwise(rs))  # type: ignore[operator]
    load = rec.load
    assert load is not None and load.request_rate == 40.0 and load.achieved_rate is not None
    from evidencestore.cli import main

    capsys.readouterr()
    assert main(["run", "show", "open", "--root", str(tmp_path)]) == 0
    assert "open loop: 40 requests/s asked" in capsys.readouterr().out
    assert load.send_lag_max_s == max(r.send_lag_s for r in rs)  # type: ignore[type-var]


def test_closed_loop_and_the_cap_make_requests_wait(tmp_path: Path, llm_server: LlmServer) -> None:
    # Negative control: closed loop, one worker: a request is due only when the last ended.
    rec = _run(tmp_path, llm_server, "closed", "concurrency = 1", ttft=0.01)
    rs = sorted(rec.requests, key=lambda r: r.index)
    assert all(b.sent_ns >= a.last_byte_ns for a, b in itertools.pairwise(rs))  # type: ignore[operator]
    assert rec.load is not None and rec.load.request_rate is None
    # All due at once (inf) under a cap of 1: each waits for the one before; the slip
    # (send lag) is recorded and grows with the queue.
    rec = _run(tmp_path, llm_server, "inf", 'concurrency = 1\nrequest_rate = "inf"', ttft=0.01)
    rs = sorted(rec.requests, key=lambda r: r.index)
    assert len({r.intended_ns for r in rs}) == 1
    assert all(b.sent_ns >= a.last_byte_ns for a, b in itertools.pairwise(rs))  # type: ignore[operator]
    lags = [r.send_lag_s for r in rs]
    assert lags == sorted(lags) and lags[-1] > lags[0]  # type: ignore[operator]


def test_condition_as_a_point_of_a_sweep(
    tmp_path: Path, llm_server: LlmServer, capsys: pytest.CaptureFixture[str]
) -> None:
    from evidencestore.campaign.protocol import load_campaign
    from evidencestore.cli import main
    from evidencestore.runs import load_run, load_workload

    root = tmp_path / "repo"
    (root / "evidence").mkdir(parents=True)
    src = tmp_path / "proto"
    (src / "workloads").mkdir(parents=True)
    (src / "workloads/c.toml").write_text(chat_workload(("a", "b"), max_tokens=4))
    conds = "".join(
        f'[[condition]]\nname = "{n}"\nworkload = "workloads/c.toml"\n{k} = {v}\n\n'
        for n, k, v in (("rate-20", "request_rate", 20), ("rate-inf", "request_rate", '"inf"'),
                        ("conc-4", "concurrency", 4))
    )  # fmt: skip
    (src / "protocol.toml").write_text(
        'name = "sw"\n\n[timing]\nmin_runs = 2\nclaim = false\n\n' + conds
        + '[[arm]]\nname = "baseline"\nbaseline = true\nruns = 2\n\n[[arm]]\nname = "x"\n'
    )  # fmt: skip
    assert main(["campaign", "init", "sw", "--protocol", str(src / "protocol.toml"),
                 "--root", str(root)]) == 0  # fmt: skip
    campaign = load_campaign(root, "sw")
    wdir = root / "evidence/sw/workloads"
    point = load_workload(wdir / "c.rate-20.toml").workload
    assert (point.run.request_rate, point.run.concurrency) == (20.0, 1)
    assert load_workload(wdir / "c.rate-inf.toml").workload.run.request_rate == "inf"
    assert load_workload(wdir / "c.conc-4.toml").workload.run.concurrency == 4
    assert point.request == load_workload(wdir / "c.toml").workload.request
    assert len({campaign.workload_digest(c) for c in ("rate-20", "rate-inf", "conc-4")}) == 3

    def run(path: str, cond: str, name: str) -> int:
        return main(["-q", "run", str(wdir / path), "--arm", "baseline", "--server", llm_server.url,
                     "--name", name, "--campaign", "sw", "--condition", cond,
                     "--root", str(root)])  # fmt: skip

    assert run("c.rate-20.toml", "rate-20", "r1") == 0
    rec = load_run(root, "r1")
    assert rec.condition == "rate-20" and rec.load is not None and rec.load.request_rate == 20.0
    capsys.readouterr()
    # The base file is not the point's workload: refused, naming the point's file.
    assert run("c.toml", "rate-20", "r2") != 0
    err = capsys.readouterr().err
    assert "binds condition 'rate-20' to workloads/c.rate-20.toml" in err
