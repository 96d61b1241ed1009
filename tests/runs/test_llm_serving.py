"""LLM serving over real HTTP against the reference LLM server: chat and completions
streamed as server-sent events, timings from the socket, failure classes, token-exact
verdicts in a campaign, and the determinism check across batch sizes."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("aiohttp")

from evidencestore.campaign.protocol import load_campaign
from evidencestore.campaign.status import evaluate
from evidencestore.campaign.tokens import compare_completions, determinism, load_completion
from evidencestore.cli import main
from evidencestore.config import local_store
from evidencestore.runs import load_run, run_workload
from evidencestore.runs.streams import Completion, examine, sse_events, token_times
from evidencestore.runs.workload import parse_workload
from evidencestore.testing.llm_server import LlmServer, chat_workload


def _repo(tmp_path: Path, text: str) -> Path:
    (tmp_path / "evidence").mkdir(exist_ok=True)
    wl = tmp_path / "w.toml"
    wl.write_text(text)
    return wl


def _run(tmp_path: Path, server: LlmServer, name: str, **knobs: object):  # type: ignore[no-untyped-def]
    saved = {k: getattr(server, k) for k in knobs}
    for k, v in knobs.items():
        setattr(server, k, v)
    try:
        return run_workload(tmp_path, tmp_path / "w.toml", arm="a", server=server.url, name=name)[1]
    finally:
        for k, v in saved.items():
            setattr(server, k, v)


def test_chat_stream_timings_and_tokens(tmp_path: Path, llm_server: LlmServer) -> None:
    _repo(tmp_path, chat_workload(("alpha",), max_tokens=12))
    log_from = len(llm_server.log)
    rec = _run(tmp_path, llm_server, "r", ttft=0.05, itl=0.01, role_chunk=True, tokens_per_event=3)
    assert rec.outcome == "complete", rec.reason
    (r,) = rec.requests
    assert r.failure is None and r.finish_reason == "length"
    assert (r.output_tokens, r.output_tokens_from) == (12, "token_ids")
    assert r.events is not None
    # role-only chunk first (0 tokens), then 4 events of 3 tokens, finish, usage, [DONE]
    assert r.events.tokens == (0, 3, 3, 3, 3, 0, 0, 0)
    assert r.ttft_s is not None and r.itl_s is not None and r.tpot_s is not None
    # TTFT is the first content event, not the role-only chunk (sent at once).
    assert r.events.offsets_us[0] < r.events.offsets_us[1]
    assert r.ttft_s == pytest.approx(
        r.events.offsets_us[1] / 1e6 + (r.sent_ns - r.intended_ns) / 1e9, abs=2e-6
    )  # type: ignore[operator]
    assert r.ttft_s >= 0.05
    # ITL per token: (e2e - ttft) / (tokens - 1), AIPerf's ITL and vLLM's TPOT.
    offs = r.events.offsets_us
    assert r.e2e_s is not None
    assert r.itl_s == pytest.approx((r.e2e_s - r.ttft_s) / 11, abs=1e-6)
    assert r.tpot_s == pytest.approx((offs[4] - offs[1]) / 1e6 / 11, abs=1e-6)
    times = token_times(r.events)
    assert len(times) == 12 and times == sorted(times)
    assert r.send_lag_s is not None and r.send_lag_s >= 0
    # The output is evidence: raw stream and completion by digest, tokens as the server's.
    store = local_store(tmp_path)
    assert r.completion is not None and r.body is not None
    assert r.body.media_type == "text/event-stream"
    comp = load_completion(store, r.completion.digest)
    assert comp.token_ids == tuple(llm_server.tokens("alpha", 7, 12, 0))
    assert comp.text == "".join(f" w{t}" for t in comp.token_ids)
    assert comp.logprobs is not None and len(comp.logprobs) == 12
    reg = json.loads((tmp_path / "evidence/r/bundle.json").read_text())
    paths = {e["path"] for e in reg["manifest"]["entries"]}
    assert "requests/00000/completion.json" in paths and "requests/00000/output" in paths
    # The server's own log: the recorded TTFT matches when it wrote the first token.
    written = [t for n, pos, t in llm_server.log[log_from:] if pos == 0]
    assert len(written) == 1
    assert abs((written[0] - r.sent_ns) / 1e9 - r.events.offsets_us[1] / 1e6) < 0.02
    load = rec.load
    assert load is not None and load.send_lag_median_s == pytest.approx(r.send_lag_s)
    assert load.client_bound == (
        load.send_lag_median_s > load.max_send_lag_s or load.cpu_fraction >= 0.9
    )


def test_completions_and_non_streamed(tmp_path: Path, llm_server: LlmServer) -> None:
    _repo(tmp_path, chat_workload(("p",), kind="completions", max_tokens=5))
    rec = _run(tmp_path, llm_server, "c")
    assert rec.outcome == "complete", rec.reason
    comp = load_completion(local_store(tmp_path), rec.requests[0].completion.digest)  # type: ignore[union-attr]
    assert comp.token_ids == tuple(llm_server.tokens("p", 7, 5, 0))
    (tmp_path / "w.toml").write_text(chat_workload(("p",), max_tokens=5, stream=False))
    rec = _run(tmp_path, llm_server, "n", ttft=0.02)
    assert rec.outcome == "complete", rec.reason
    assert rec.requests[0].output_tokens == 5
    # Not streamed: no first token time, so no TTFT, ITL or TPOT (not the whole response).
    r = rec.requests[0]
    assert (r.ttft_s, r.itl_s, r.tpot_s) == (None, None, None) and r.e2e_s is not None


def test_stream_failure_classes(tmp_path: Path, llm_server: LlmServer) -> None:
    _repo(tmp_path, chat_workload(("x",), max_tokens=8))
    dropped = _run(tmp_path, llm_server, "drop", drop_at=3).requests[0]
    assert dropped.failure == "incomplete"
    assert "without `data: [DONE]`" in (dropped.message or "")
    assert dropped.ttft_s is None and dropped.e2e_s is None
    err = _run(tmp_path, llm_server, "err", error_at=2).requests[0]
    assert err.failure == "stream-error" and "injected error mid-stream" in (err.message or "")
    http = _run(tmp_path, llm_server, "http", fail_on=True).requests[0]
    assert http.failure == "http-status" and http.status == 500
    assert load_run(tmp_path, "drop").counts["measured"].failures == {"incomplete": 1}


def test_error_json_mid_stream_and_max_tokens() -> None:
    req = parse_workload(chat_workload(("x",), max_tokens=1).encode(), "w.toml").request[0]
    stream = (
        b'data: {"choices":[{"delta":{"content":"a"}}]}\n\ndata: {"error":{"message":"oom"}}\n\n'
    )
    out = examine(stream, [1], [len(stream)], req, stream=True, chat=True)
    assert out.failure == "stream-error" and "oom" in (out.message or "")
    two = (
        b'data: {"choices":[{"delta":{"content":"a"},"token_ids":[1,2]}]}\r\n\r\n'
        b'data: {"choices":[{"delta":{},"finish_reason":"length"}]}\r\n\r\ndata: [DONE]\r\n\r\n'
    )
    out = examine(two, [1], [len(two)], req, stream=True, chat=True)
    assert out.failure == "invalid-response" and "more than max_tokens = 1" in (out.message or "")
    assert [e.end for e in sse_events(two)][-1] == len(two)


def test_token_verdicts() -> None:
    a = Completion(text=" a b", token_ids=(1, 2, 3), logprobs=(-0.1, -0.2, -0.3))
    assert compare_completions("k", "base", "cand", a, a).verdict == "PASS"
    lp = Completion(text=" a b", token_ids=(1, 2, 3), logprobs=(-0.1, -0.25, -0.3))
    v = compare_completions("k", "base", "cand", a, lp)
    assert v.verdict == "INCONCLUSIVE" and v.logprob_max_abs_diff == pytest.approx(0.05)
    d = Completion(text=" a c", token_ids=(1, 2, 9, 9))
    v = compare_completions("request 0", "base", "cand", a, d)
    assert v.verdict == "FAIL" and v.position == 2
    assert v.reasons[0] == (
        "request 0: first divergent token at position 2 (content token 2): 'base' continues 3, "
        "'cand' continues 9 9"
    )
    t1, t2 = Completion(text="hello"), Completion(text="help!")
    v = compare_completions("k", "a", "b", t1, t2)
    assert v.verdict == "FAIL" and v.position == 3 and "character" in v.reasons[0]


PROTOCOL = """name = "spec-decode"

[timing]
min_runs = 2
claim = false

[quality]
non_repeatable_baseline = "inconclusive"

[[condition]]
name = "det"
workload = "workloads/det.toml"

[[condition]]
name = "nondet"
workload = "workloads/nondet.toml"

[[arm]]
name = "baseline"
baseline = true
runs = 2

[[arm]]
name = "eagle"
runs = 1

[[arm]]
name = "kv-fp8"
runs = 1
"""


def test_chat_campaign_token_exact(
    tmp_path: Path, llm_server: LlmServer, capsys: pytest.CaptureFixture[str]
) -> None:
    """The issue's Done-when: baseline, a lossless candidate (PASS), a lossy one that
    diverges at token 17 (FAIL at 17), a nondeterministic baseline (repeatability)."""
    root = tmp_path / "repo"
    (root / "evidence").mkdir(parents=True)
    src = tmp_path / "proto"
    (src / "workloads").mkdir(parents=True)
    (src / "workloads/det.toml").write_text(chat_workload(("one", "two"), max_tokens=24))
    (src / "workloads/nondet.toml").write_text(chat_workload(("three",), max_tokens=24))
    (src / "protocol.toml").write_text(PROTOCOL)
    assert main(["campaign", "init", "spec-decode", "--protocol", str(src / "protocol.toml"),
                 "--root", str(root)]) == 0  # fmt: skip

    def run(cond: str, arm: str, name: str, **knobs: object) -> int:
        saved = {k: getattr(llm_server, k) for k in knobs}
        for k, v in knobs.items():
            setattr(llm_server, k, v)
        try:
            return main(["-q", "run", str(root / f"evidence/spec-decode/workloads/{cond}.toml"),
                         "--arm", arm, "--server", llm_server.url, "--name", name, "--campaign",
                         "spec-decode", "--condition", cond, "--root", str(root)])  # fmt: skip
        finally:
            for k, v in saved.items():
                setattr(llm_server, k, v)

    for i in (1, 2):
        assert run("det", "baseline", f"base-det-{i}") == 0
        assert run("nondet", "baseline", f"base-nondet-{i}", nondeterministic=True) == 0
    assert run("det", "eagle", "eagle-det", tokens_per_event=4, role_chunk=True) == 0
    assert run("det", "kv-fp8", "kv-det", diverge_at=17) == 0
    assert run("nondet", "eagle", "eagle-nondet") == 0
    ev = evaluate(root, load_campaign(root, "spec-decode"))
    assert ev.repeatability["det"].exact is True
    assert ev.adjudications["det/eagle"].verdict == "PASS"
    kv = ev.adjudications["det/kv-fp8"]
    assert kv.verdict == "FAIL"
    assert {c.token_position for c in kv.comparisons} == {17}
    assert (
        "first divergent token at position 17 (content token 17): 'base-det-1' continues"
        in kv.reasons[0]
    )
    rep = ev.repeatability["nondet"]
    assert rep.exact is False and rep.comparisons[0].verdict == "FAIL"
    assert ev.adjudications["nondet/eagle"].verdict in ("INCONCLUSIVE", "FAIL")
    capsys.readouterr()
    code = main(["campaign", "status", "spec-decode", "--json", "--root", str(root)])
    status = json.loads(capsys.readouterr().out)
    assert code == 1
    cells = {(c["condition"], c["arm"]): c for c in status["cells"]}
    assert cells[("det", "eagle")]["lossless"] == "PASS"
    assert cells[("det", "kv-fp8")]["lossless"] == "FAIL"
    assert cells[("nondet", "baseline")]["repeatability"] == "not-exact"
    nondet = cells[("nondet", "baseline")]
    assert nondet["conclusion"] == "rejected"
    assert any("nondet: baseline is not repeatable-exact" in r for r in nondet["reasons"])


def test_determinism_across_batch_sizes(
    tmp_path: Path, llm_server: LlmServer, capsys: pytest.CaptureFixture[str]
) -> None:
    store_root = tmp_path
    prompts = tuple(f"prompt {i}" for i in range(4))
    _repo(store_root, chat_workload(prompts, max_tokens=6, concurrency=1))
    one = _run(store_root, llm_server, "c1", batch_dependent=True, itl=0.002)
    (store_root / "w.toml").write_text(chat_workload(prompts, max_tokens=6, concurrency=4))
    four = _run(store_root, llm_server, "c4", batch_dependent=True, itl=0.002)
    four_ok = _run(store_root, llm_server, "c4ok", itl=0.002)
    store = local_store(store_root)
    bad = determinism(store, [("c1", one, 1), ("c4", four, 4)])
    assert bad.deterministic is False
    assert max(p.distinct for p in bad.prompts) == 2
    good = determinism(store, [("c1", one, 1), ("c4ok", four_ok, 4)])
    assert good.deterministic is True and [p.distinct for p in good.prompts] == [1, 1, 1, 1]
    # The same through the CLI, concurrency read from each run's workload.
    assert main(["-q", "run", "determinism", "c1", "c4ok", "--root", str(store_root)]) == 0
    capsys.readouterr()
    assert main(["run", "determinism", "c1", "c4", "--json", "--root", str(store_root)]) == 1
    shown = json.loads(capsys.readouterr().out)
    assert shown["concurrency"] == [1, 4] and shown["deterministic"] is False
    assert any("distinct outputs across concurrencies [1, 4]" in r for r in shown["reasons"])


def test_reference_server_cli() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "evidencestore.testing.llm_server", "--ttft", "0.01",
         "--tokens-per-event", "2", "--role-chunk"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:")
        import urllib.request

        body = json.dumps({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 4,
                           "stream": True}).encode()  # fmt: skip
        req = urllib.request.Request(url + "/v1/chat/completions", data=body,
                                     headers={"Content-Type": "application/json"})  # fmt: skip
        with urllib.request.urlopen(req, timeout=10) as resp:
            events = sse_events(resp.read())
        assert events[-1].data == b"[DONE]"
        first = json.loads(events[0].data)
        assert first["choices"][0]["delta"] == {"role": "assistant", "content": ""}
        assert len(json.loads(events[1].data)["choices"][0]["token_ids"]) == 2
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(timeout=10)


def _claim_campaign(tmp_path: Path, metric: str) -> Path:
    root = tmp_path / "repo"
    (root / "evidence").mkdir(parents=True)
    src = tmp_path / "proto"
    (src / "workloads").mkdir(parents=True)
    (src / "workloads/c.toml").write_text(chat_workload(("a", "b"), max_tokens=8, measured=3))
    (src / "protocol.toml").write_text(
        f'name = "ttft"\n\n[timing]\nmin_runs = 2\nmetric = "{metric}"\n\n'
        '[[condition]]\nname = "c"\nworkload = "workloads/c.toml"\n\n'
        '[[arm]]\nname = "baseline"\nbaseline = true\nruns = 2\n\n[[arm]]\nname = "fast"\nruns = 2\n'
    )
    assert main(["campaign", "init", "ttft", "--protocol", str(src / "protocol.toml"),
                 "--root", str(root)]) == 0  # fmt: skip
    return root


@pytest.mark.parametrize(
    ("metric", "slow", "fast"),
    [
        ("ttft", {"ttft": 0.08, "itl": 0.001}, {"ttft": 0.02, "itl": 0.001}),
        ("itl", {"itl": 0.012}, {"itl": 0.003, "tokens_per_event": 2}),
        ("output_throughput", {"itl": 0.012}, {"itl": 0.003}),
    ],
)
def test_claim_on_llm_metric(
    tmp_path: Path,
    llm_server: LlmServer,
    capsys: pytest.CaptureFixture[str],
    metric: str,
    slow: dict[str, float],
    fast: dict[str, float],
) -> None:
    root = _claim_campaign(tmp_path, metric)

    def run(arm: str, name: str, knobs: dict[str, float]) -> None:
        saved = {k: getattr(llm_server, k) for k in knobs}
        for k, v in knobs.items():
            setattr(llm_server, k, v)
        try:
            assert main(["-q", "run", str(root / "evidence/ttft/workloads/c.toml"), "--arm", arm,
                         "--server", llm_server.url, "--name", name, "--campaign", "ttft",
                         "--condition", "c", "--root", str(root)]) == 0  # fmt: skip
        finally:
            for k, v in saved.items():
                setattr(llm_server, k, v)

    for i in (1, 2):
        run("baseline", f"b{i}", slow)
        run("fast", f"f{i}", fast)
    capsys.readouterr()
    main(["campaign", "claim", "ttft", "--condition", "c", "--arm", "fast", "--json",
          "--root", str(root)])  # fmt: skip
    claim = json.loads(capsys.readouterr().out)
    assert claim["metric"] == metric and claim["refused"] is False, claim["reasons"]
    assert claim["speedup"]["ratio"] > 1.0
    runs = {rv["run"]: rv for rv in claim["runs"]}
    b1 = load_run(root, "b1")
    if metric == "output_throughput":
        ok = [r for r in b1.requests if r.phase == "measured"]
        span = (max(r.last_byte_ns for r in ok) - min(r.intended_ns for r in ok)) / 1e9  # type: ignore[type-var,operator]
        assert runs["b1"]["value"] == pytest.approx(span / sum(r.output_tokens for r in ok))  # type: ignore[misc]
    else:
        field = {"ttft": "ttft_s", "itl": "itl_s"}[metric]
        assert sorted(runs["b1"]["values"]) == sorted(getattr(r, field) for r in b1.requests)
    p = {(x["arm"], x["q"]): x for x in claim["percentiles"]}
    assert p[("baseline", 0.5)]["n"] == 12 and p[("baseline", 0.5)]["value"] is not None
    # 12 requests cannot bound a p99 two-sided at 95 %: it says how many it would take.
    assert p[("baseline", 0.99)]["low"] is None and p[("baseline", 0.99)]["needed"] == 368
    main(["campaign", "claim", "ttft", "--condition", "c", "--arm", "fast", "--root", str(root)])
    text = capsys.readouterr().out
    assert f"speedup on {metric} " in text
    assert "  baseline     p99 " in text and "(no interval: 12 requests, 368 needed)" in text


def test_run_show_llm_metrics(
    tmp_path: Path, llm_server: LlmServer, capsys: pytest.CaptureFixture[str]
) -> None:
    _repo(tmp_path, chat_workload(("a", "b"), max_tokens=6, measured=2))
    _run(tmp_path, llm_server, "s", itl=0.002)
    capsys.readouterr()
    assert main(["run", "show", "s", "--json", "--root", str(tmp_path)]) == 0
    shown = json.loads(capsys.readouterr().out)
    measured = shown["phases"]["measured"]
    assert measured["ttft_s"]["n"] == 4 and measured["output_tokens"] == 24
    assert measured["itl_s"]["median"] is not None and shown["unchecked"] == 0
    assert shown["load"]["max_send_lag_s"] == 0.001
    assert main(["run", "show", "s", "--root", str(tmp_path)]) == 0
    text = capsys.readouterr().out
    assert "  TTFT s (n=4): min " in text and "  output tokens: 24" in text


def test_inter_token_latencies_spread_over_multi_token_events() -> None:
    from evidencestore.runs.models import EventTimes
    from evidencestore.runs.streams import inter_token_latencies, stream_metrics

    ev = EventTimes(offsets_us=(100, 1000, 7000, 8000), tokens=(0, 1, 3, 0))
    assert token_times(ev) == pytest.approx([0.001, 0.003, 0.005, 0.007])
    assert inter_token_latencies(ev) == pytest.approx([0.002, 0.002, 0.002])
    m = stream_metrics([100_000, 1_000_000, 7_000_000, 8_000_000], [0, 1, 3, 0], 0, 4)
    assert m.ttft_s == pytest.approx(0.001)  # not the role-only event at 0.1 ms
    assert m.itl_s == pytest.approx(0.002) and m.tpot_s == pytest.approx(0.002)


def test_video_server_cli_exposes_every_knob() -> None:
    from evidencestore.testing import video_server

    proc = subprocess.Popen(
        [sys.executable, "-m", "evidencestore.testing.video_server", "--fail-on", "all",
         "--startup-error", "no GPU", "--ignore-seed", "--latency", "0.01"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        import urllib.error
        import urllib.request

        with pytest.raises(urllib.error.HTTPError) as info:
            urllib.request.urlopen(url + "/health", timeout=10)
        assert info.value.code == 503 and b"no GPU" in info.value.read()
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(timeout=10)
    # Every knob of the server is an option.
    vs = video_server.VideoServer()
    shutil.rmtree(vs._tmp)
    knobs = {k for k, v in vars(vs).items()
             if not k.startswith("_") and k not in ("model", "log_path", "sample_rate",
             "channels", "requests", "arrivals_ns", "log_lines", "port")}  # fmt: skip
    exposed = {*video_server._VALUE_KNOBS, *video_server._SET_KNOBS, *video_server._FLAGS}
    assert knobs == exposed
    from evidencestore.testing import llm_server

    llm_knobs = {k for k in vars(llm_server.LlmServer()) if not k.startswith("_")} - {
        "model", "vocab", "port", "requests", "in_flight", "log", "prompts", "request_ids",
        "arrivals", "fail_on", "usage", "diverge_on"}  # fmt: skip
    flags = {"role_chunk", "nondeterministic", "batch_dependent", "cache", "ignore_seed",
             "continuous_usage"}  # fmt: skip
    assert llm_knobs == set(llm_server._KNOBS) | flags


def test_prompts_from_jsonl_and_sampled_lengths(tmp_path: Path, llm_server: LlmServer) -> None:
    from evidencestore.errors import ConfigError
    from evidencestore.runs import load_workload

    (tmp_path / "evidence").mkdir()
    (tmp_path / "prompts.jsonl").write_text(
        '{"prompt": "first"}\n{"messages": [{"role": "user", "content": "second"}], '
        '"max_tokens": 3}\n\n{"prompt": "third"}\n'
    )
    head = chat_workload(("inline",), max_tokens=4).split("\n[[request]]")[0]
    (tmp_path / "w.toml").write_text(
        head + '\n[[request]]\nprompt = "inline"\nmax_tokens = 4\n\n'
        '[prompts]\npath = "prompts.jsonl"\ncount = 2\nmax_tokens = 5\nmax_tokens_max = 9\n'
        "seed = 3\nrequest_seed = 11\n"
    )
    loaded = load_workload(tmp_path / "w.toml")
    reqs = loaded.workload.request
    assert [r.prompt for r in reqs] == ["inline", "first", None]
    assert reqs[2].messages is not None and reqs[2].messages[0].content == "second"
    assert reqs[2].max_tokens == 3 and 5 <= (reqs[1].max_tokens or 0) <= 9
    assert reqs[1].seed == 11
    # The same workload gives the same requests (sampled from its seed).
    assert load_workload(tmp_path / "w.toml").workload.request == reqs
    rec = _run(tmp_path, llm_server, "jsonl")
    assert rec.outcome == "complete", rec.reason
    assert [r.output_tokens for r in rec.requests] == [4, reqs[1].max_tokens, 3]
    # Synthetic prompts of sampled input lengths, no file.
    (tmp_path / "s.toml").write_text(
        head + "\n[prompts]\ncount = 5\ninput_tokens = 3\ninput_tokens_max = 6\nmax_tokens = 2\n"
    )
    syn = load_workload(tmp_path / "s.toml").workload.request
    assert len(syn) == 5 and all(3 <= len((r.prompt or "").split()) <= 6 for r in syn)
    assert len({r.prompt for r in syn}) == 5
    (tmp_path / "bad.jsonl").write_text('{"prompt": "a"}\n{"nothing": 1}\n')
    (tmp_path / "b.toml").write_text(head + '\n[prompts]\npath = "bad.jsonl"\n')
    with pytest.raises(ConfigError, match=r"\[prompts\]: line 2: give exactly one of"):
        load_workload(tmp_path / "b.toml")


def test_event_takes_the_arrival_of_the_chunk_completing_it() -> None:
    req = parse_workload(chat_workload(("x",), max_tokens=4).encode(), "w.toml").request[0]
    e1 = b'data: {"choices":[{"delta":{"content":"a"}}]}\n\n'
    e2 = b'data: {"choices":[{"delta":{"content":"b"},"finish_reason":"length"}]}\n\n'
    done = b"data: [DONE]\n\n"
    data = e1 + e2 + done
    # chunk 1 ends inside e1, chunk 2 completes e1 and e2, chunk 3 carries [DONE]
    out = examine(data, [100, 200, 300], [10, len(e1 + e2), len(data)], req, stream=True, chat=True)
    assert out.failure is None
    assert out.event_ns == (200, 200, 300) and out.event_tokens == (1, 1, 0)
    # No token ids, logprobs or usage: the count is unknown, never the number of events.
    assert out.completion.text == "ab" and out.output_tokens_from is None
    assert out.output_tokens is None


def test_token_ids_from_vllm_logprob_tokens() -> None:
    req = parse_workload(chat_workload(("x",), kind="completions").encode(), "w.toml").request[0]
    ev = (
        b'data: {"choices":[{"text":" a b","logprobs":{"tokens":["token_id:5","token_id:9"],'
        b'"token_logprobs":[-0.5,-0.25]},"finish_reason":"length"}],'
        b'"usage":{"completion_tokens":2}}\n\ndata: [DONE]\n\n'
    )
    out = examine(ev, [1], [len(ev)], req, stream=True, chat=False)
    assert out.failure is None and out.completion.token_ids == (5, 9)
    assert out.completion.logprobs == (-0.5, -0.25) and out.event_tokens == (2, 0)
    assert (out.output_tokens, out.output_tokens_from) == (2, "token_ids")


def test_harness_records_an_llm_stream_itself(tmp_path: Path) -> None:
    """A harness that drove the server itself records the stream with its chunk arrivals;
    the record is read back as the runner's own, and compares token-exactly."""
    from evidencestore.runs import Observation, open_run
    from evidencestore.runs.models import RequestSpec

    (tmp_path / "evidence").mkdir()
    e1 = b'data: {"choices":[{"delta":{"role":"assistant","content":""}}]}\n\n'
    e2 = b'data: {"choices":[{"delta":{"content":" a"},"token_ids":[4]}]}\n\n'
    e3 = b'data: {"choices":[{"delta":{"content":" b c"},"token_ids":[7,8],"finish_reason":"length"}]}\n\n'
    body = e1 + e2 + e3 + b"data: [DONE]\n\n"
    ends = [len(e1), len(e1 + e2), len(body)]
    run = open_run(tmp_path, "h", arm="a", workload=b'[endpoint]\nkind = "chat"\npath = "/"\n')
    seen = Observation(sent_ns=1_000_000, first_byte_ns=2_000_000, last_byte_ns=9_000_000,
                       end_ns=9_000_000, status=200, media_type="text/event-stream",
                       chunk_ns=[2_000_000, 5_000_000, 9_000_000], chunk_end=ends)  # fmt: skip
    rec = run.record_request(seen, phase="measured", payload=b"{}", body=body, llm="chat",
                             spec=RequestSpec(prompt="x", max_tokens=3))  # fmt: skip
    assert rec.failure is None and rec.output_tokens == 3
    assert rec.events is not None and rec.events.offsets_us == (1000, 4000, 8000, 8000)
    assert rec.ttft_s == pytest.approx(0.004) and rec.itl_s == pytest.approx(0.002)
    _, record = run.seal()
    comp = load_completion(local_store(tmp_path), record.requests[0].completion.digest)  # type: ignore[union-attr]
    assert comp.token_ids == (4, 7, 8) and comp.text == " a b c"
