"""Per-token accounting and every output channel, against the reference LLM server whose
schedule and tokens the test sets: the per-token ITL does not depend on how many tokens
an event carries (the event gaps do: the negative control), the count's source is
recorded, reasoning and tool calls are channels, and token verdicts name the channel."""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest

pytest.importorskip("aiohttp")

from evidencestore.campaign.tokens import compare_completions, load_completion
from evidencestore.config import local_store
from evidencestore.runs import run_workload
from evidencestore.runs.models import RunRecord
from evidencestore.runs.streams import event_gaps, examine
from evidencestore.runs.workload import parse_workload
from evidencestore.testing.llm_server import LlmServer, chat_workload


def _run(tmp_path: Path, server: LlmServer, name: str, text: str, **knobs: object) -> RunRecord:
    (tmp_path / "evidence").mkdir(exist_ok=True)
    (tmp_path / "w.toml").write_text(text)
    saved = {k: getattr(server, k) for k in knobs}
    for k, v in knobs.items():
        setattr(server, k, v)
    try:
        return run_workload(tmp_path, tmp_path / "w.toml", arm="a", server=server.url, name=name)[1]
    finally:
        for k, v in saved.items():
            setattr(server, k, v)


def _wl(**kw: object) -> str:
    text = chat_workload(("alpha", "beta"), max_tokens=24, logprobs=False, **kw)  # type: ignore[arg-type]
    return text


def test_per_token_itl_does_not_depend_on_tokens_per_event(
    tmp_path: Path, llm_server: LlmServer
) -> None:
    # vLLM's framing: no token ids unless asked, usage at the end.
    knobs = {"ttft": 0.01, "itl": 0.006, "token_ids": "asked"}
    one = _run(tmp_path, llm_server, "one", _wl(), tokens_per_event=1, **knobs)
    three = _run(tmp_path, llm_server, "three", _wl(), tokens_per_event=3, **knobs)
    for rec in (one, three):
        for r in rec.requests:
            assert r.failure is None, r.message
            assert (r.output_tokens, r.output_tokens_from) == (24, "usage")
    itl1 = statistics.mean(r.itl_s for r in one.requests)  # type: ignore[misc]
    itl3 = statistics.mean(r.itl_s for r in three.requests)  # type: ignore[misc]
    # Same per-token schedule: the ratio is near 1 (the first event's 3 tokens arrive
    # together, so the 3-token run's span is 21 of 23 token gaps: 0.91), never 3.
    assert 0.8 < itl3 / itl1 < 1.1, (itl1, itl3)
    # Negative control: the event gaps (vLLM's ITL list) differ by the chunking, 3x.
    gap1 = statistics.mean(g for r in one.requests for g in event_gaps(r.events))  # type: ignore[arg-type]
    gap3 = statistics.mean(g for r in three.requests for g in event_gaps(r.events))  # type: ignore[arg-type]
    assert 2.5 < gap3 / gap1 < 3.5, (gap1, gap3)


def test_token_count_sources(tmp_path: Path, llm_server: LlmServer) -> None:
    wl = _wl()
    r = _run(tmp_path, llm_server, "ids", wl, tokens_per_event=3).requests[0]
    assert (r.output_tokens, r.output_tokens_from) == (24, "token_ids")
    assert r.events is not None and sum(r.events.tokens) == 24
    # Neither ids nor usage: no count, no per-token metric; TTFT still holds.
    r = _run(tmp_path, llm_server, "none", wl, tokens_per_event=3, token_ids="asked", usage=False)
    (q, _) = r.requests
    assert (q.output_tokens, q.output_tokens_from, q.itl_s, q.tpot_s) == (None, None, None, None)
    assert q.ttft_s is not None and q.failure is None
    # Continuous usage (vLLM's continuous_usage_stats) counts each event.
    cont = wl.replace("stream = true", "stream = true\ncontinuous_usage = true")
    cont = cont.replace("max_tokens = 24", "max_tokens = 9")
    rec = _run(tmp_path, llm_server, "cont", cont, tokens_per_event=3, token_ids="asked",
               continuous_usage=True)  # fmt: skip
    q = rec.requests[0]
    assert q.failure is None, q.message
    assert (q.output_tokens, q.output_tokens_from) == (9, "continuous-usage")
    assert q.events is not None and [k for k in q.events.tokens if k] == [3, 3, 3]


def test_reasoning_channel_and_visible_ttft(tmp_path: Path, llm_server: LlmServer) -> None:
    wl = chat_workload(("alpha",), max_tokens=10, logprobs=False)
    base = _run(tmp_path, llm_server, "base", wl, reasoning=4, itl=0.01).requests[0]
    assert base.failure is None, base.message
    assert base.ttft_s is not None and base.ttft_visible_s is not None
    # The first visible token comes 4 tokens after the first (reasoning) one.
    assert base.ttft_visible_s - base.ttft_s >= 0.035
    store = local_store(tmp_path)
    a = load_completion(store, base.completion.digest)  # type: ignore[union-attr]
    ids = llm_server.tokens("alpha", 7, 10, 0)
    assert a.token_ids == tuple(ids)
    assert a.channel_text("reasoning") == "".join(f" w{t}" for t in ids[:4])
    assert a.text == "".join(f" w{t}" for t in ids[4:])
    assert a.segments == (("reasoning", 4), ("content", 6))
    # A candidate that changes its reasoning only (same answer) FAILs, named there.
    cand = _run(tmp_path, llm_server, "cand", wl, reasoning=4, diverge_at=2, diverge_until=4)
    b = load_completion(store, cand.requests[0].completion.digest)  # type: ignore[union-attr]
    assert b.text == a.text
    v = compare_completions("request 0", "base", "cand", a, b)
    assert v.verdict == "FAIL" and v.position == 2
    assert "(reasoning token 2)" in v.reasons[0]
    # Without token ids, the text fallback says so and names the channel.
    noid_a = _run(tmp_path, llm_server, "na", wl, reasoning=4, token_ids="asked").requests[0]
    noid_b = _run(tmp_path, llm_server, "nb", wl, reasoning=4, token_ids="asked", diverge_at=2,
                  diverge_until=4).requests[0]  # fmt: skip
    ca = load_completion(store, noid_a.completion.digest)  # type: ignore[union-attr]
    cb = load_completion(store, noid_b.completion.digest)  # type: ignore[union-attr]
    assert ca.token_ids is None and ca.text == cb.text
    v = compare_completions("request 0", "base", "cand", ca, cb)
    assert v.verdict == "FAIL"
    assert "text fallback" in v.reasons[0] and "channel reasoning" in v.reasons[0]
    # Negative control: the same server twice is PASS.
    again = _run(tmp_path, llm_server, "again", wl, reasoning=4).requests[0]
    c = load_completion(store, again.completion.digest)  # type: ignore[union-attr]
    assert compare_completions("request 0", "base", "again", a, c).verdict == "PASS"


def test_tool_calls_and_reasoning_field_are_channels() -> None:
    req = parse_workload(chat_workload(("x",), max_tokens=8).encode(), "w.toml").request[0]
    events = [
        b'{"choices":[{"delta":{"role":"assistant","content":""}}]}',
        b'{"choices":[{"delta":{"reasoning":"think"},"token_ids":[1,2]}]}',
        b'{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"c","type":"function",'
        b'"function":{"name":"get","arguments":""}}]},"token_ids":[3]}]}',
        b'{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\\"a\\":1}"}}]},'
        b'"token_ids":[4,5],"finish_reason":"tool_calls"}]}',
    ]
    data = b"".join(b"data: " + e + b"\n\n" for e in events) + b"data: [DONE]\n\n"
    out = examine(data, [1], [len(data)], req, stream=True, chat=True)
    assert out.failure is None, out.message
    c = out.completion
    assert c.text == "" and c.channel_text("reasoning") == "think"
    assert c.channel_text("tool_calls") == '[0]get{"a":1}'
    assert c.segments == (("reasoning", 2), ("tool_calls", 3))
    assert c.channel_at(3) == ("tool_calls", 1)
    # No visible token: visible TTFT is undefined, TTFT is the reasoning event's.
    assert out.visible_ns is None and out.event_tokens[:2] == (0, 2)
    other = [*events[:3], events[3].replace(b'\\"a\\":1', b'\\"a\\":2')]
    data2 = b"".join(b"data: " + e + b"\n\n" for e in other) + b"data: [DONE]\n\n"
    c2 = examine(data2, [1], [len(data2)], req, stream=True, chat=True).completion
    v = compare_completions("request 0", "a", "b", c, c2)
    # Same token ids, different arguments text: named by channel.
    assert v.verdict == "FAIL" and "channel tool_calls" in v.reasons[0]
