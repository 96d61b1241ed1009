"""One judge, whoever recorded the response: the same bytes served over real HTTP to the
runner, handed to ``RunRecorder.record_request``, and imported from a harness directory
give the same request record (apart from the recorder's own fields)."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

import msgspec
import pytest
from helpers import paths

pytest.importorskip("aiohttp")
pytest.importorskip("av")

from evidencestore.config import Repository, as_repository
from evidencestore.digest import hash_bytes
from evidencestore.runs import load_run, open_run, run_workload
from evidencestore.runs import runner as runner_module
from evidencestore.runs.endpoints import endpoint_for
from evidencestore.runs.importing import ImportResult, harness_dir, open_import
from evidencestore.runs.judge import Expected, Slot, judge
from evidencestore.runs.models import RequestRecord
from evidencestore.runs.transport import Observation
from evidencestore.runs.workload import expectations_for, load_workload
from evidencestore.testing.http import serve_app
from evidencestore.testing.synth import AudioSpec, VideoSpec, write_clip

MB = 1 << 20
TOKENIZER = (paths.DATA / "vllm" / "tokenizer.json").read_bytes()
BIG = 300 * MB  # past the judge's 256 MiB read-back bound
LIMIT = 64 << 10  # the "over max_output_size" workload's limit
_PATHS = {"videos-sync": "/v1/videos/sync", "json": "/v1/generate", "chat": "/v1/chat/completions"}


def _sse(events: list[dict[str, Any]]) -> bytes:
    return b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in events) + (
        b"data: [DONE]\n\n"
    )


def _tokens_per_event() -> list[bytes]:
    """A chat stream whose events carry three tokens each, sent as two chunks of two
    events and one of the rest (so events share a chunk's arrival too)."""
    events = [
        {"choices": [{"index": 0, "delta": {"content": text}, "token_ids": ids}]}
        for text, ids in (("abc", [1, 2, 3]), ("def", [4, 5, 6]), ("ghi", [7, 8, 9]))
    ]
    events.append(
        {"choices": [{"index": 0, "delta": {"content": "jk"}, "token_ids": [10, 11],
                      "finish_reason": "length"}]}
    )  # fmt: skip
    data = _sse(events)
    cut = [0, data.index(b"\n\n", data.index(b"\n\n") + 2) + 2, len(data) - 20, len(data)]
    return [data[a:b] for a, b in itertools.pairwise(cut)]


def _uncounted() -> list[bytes]:
    """A chat stream whose server counts nothing (no token ids, no usage): the
    workload's pinned tokenizer counts its text."""
    events = [
        {"choices": [{"index": 0, "delta": {"content": text}}]}
        for text in ("The quick", " brown fox", " jumps over")
    ]
    events.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    data = _sse(events)
    return [data[: len(data) // 2], data[len(data) // 2 :]]


def _big_stream() -> Iterator[bytes]:
    """A 300 MB SSE stream, made a megabyte at a time (never held whole)."""
    event = b'data: {"choices":[{"index":0,"delta":{"content":"x"}}]}\n\n'
    block = event * ((MB - 16) // len(event))
    block += b":" + b"p" * (MB - len(block) - 3) + b"\n\n"  # a comment pads it to 1 MiB
    assert len(block) == MB
    for _ in range(BIG // MB):
        yield block


def _clips(tmp: Path) -> dict[str, bytes]:
    video = VideoSpec(width=64, height=48, rate=8, frames=8)
    ok = write_clip(tmp / "ok.mp4", video=video, audio=AudioSpec(samples=48000))
    short = write_clip(tmp / "short-audio.mp4", video=video, audio=AudioSpec(samples=24000))
    good = Path(ok).read_bytes()
    return {"ok": good, "truncated": good[: len(good) // 2], "short": Path(short).read_bytes()}


class Case:
    def __init__(
        self,
        kind: str,
        chunks: Any,
        media_type: str,
        check_media: bool = False,
        tokenizer: str | None = None,
        max_output: int = 512 * MB,
    ):
        self.kind, self.chunks, self.media_type = kind, chunks, media_type
        self.check_media = check_media
        self.tokenizer = tokenizer  # the digest of the tokenizer the workload pins
        self.max_output = max_output  # the workload's [run] max_output_size

    def body(self) -> Iterator[bytes]:
        yield from (self.chunks() if callable(self.chunks) else self.chunks)

    def workload(self) -> str:
        lines = [
            "[endpoint]", f'kind = "{self.kind}"', f'path = "{_PATHS[self.kind]}"',
            *(['model = "m"', "stream = true"] if self.kind == "chat" else []),
            *(["[endpoint.tokenizer]", f'digest = "{self.tokenizer}"'] if self.tokenizer else []),
            "", "[run]", "warmup = 0", "measured = 1", "timeout = 120",
            f"check_media = {'true' if self.check_media else 'false'}",
            f"max_output_size = {self.max_output}", "", "[[request]]",
        ]  # fmt: skip
        if self.kind == "chat":
            lines += ['prompt = "p"', "max_tokens = 64"]
        else:
            lines += ['prompt = "a fox"', 'size = "64x48"', "seconds = 1", "fps = 8"]
        return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def cases(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Case]:
    clips = _clips(tmp_path_factory.mktemp("clips"))
    return {
        "valid clip": Case("videos-sync", [clips["ok"]], "video/mp4", check_media=True),
        "truncated clip": Case("videos-sync", [clips["truncated"]], "video/mp4", True),
        "clip with short audio": Case("videos-sync", [clips["short"]], "video/mp4", True),
        "malformed JSON": Case("json", [b'{"frames": [1, 2', b", 3"], "application/json"),
        "300 MB stream": Case("chat", _big_stream, "text/event-stream"),
        "tokens per event": Case("chat", _tokens_per_event(), "text/event-stream"),
        "uncounted stream": Case(
            "chat", _uncounted(), "text/event-stream", tokenizer=hash_bytes(TOKENIZER).digest
        ),
        # 100 KiB in 10 KiB chunks, past a limit of 64 KiB: nothing of it is kept
        "over max_output_size": Case(
            "videos-sync",
            [bytes([k]) * (10 << 10) for k in range(10)],
            "video/mp4",
            True,
            max_output=LIMIT,
        ),
    }


@pytest.fixture(scope="module")
def case_server(cases: dict[str, Case]) -> Iterator[tuple[str, dict[str, str]]]:
    from aiohttp import web

    current: dict[str, str] = {}

    async def health(request: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def output(request: web.Request) -> web.StreamResponse:
        await request.read()
        case = cases[current["case"]]
        resp = web.StreamResponse(headers={"Content-Type": case.media_type})
        await resp.prepare(request)
        for chunk in case.body():
            await resp.write(chunk)
        await resp.write_eof()
        return resp

    app = web.Application()
    app.router.add_get("/health", health)
    for path in _PATHS.values():
        app.router.add_post(path, output)
    with serve_app(app, name="judge-cases") as port:
        yield f"http://127.0.0.1:{port}", current


def _same(record: RequestRecord) -> dict[str, Any]:
    """A record without the recorder's own fields: how it stored the payload it was
    handed (its digest must agree, its media type is the recorder's)."""
    out = msgspec.to_builtins(record)
    out["payload"].pop("media_type", None)  # omitted when it is the default
    return out  # type: ignore[no-any-return]


def _import_kept(root: Path, directory: Path, name: str) -> RequestRecord:
    """An importer in one file: a harness that kept each response's bytes (``body``),
    the request it sent (``payload``), what it saw (``observation.json``) and its
    workload; its records come from the one judge."""
    repo = as_repository(root)
    source = harness_dir(directory, "kept")
    opened = open_import(repo, name, source, arm="a", workload="workload.toml")
    assert not isinstance(opened, ImportResult)
    recorder, _ = opened
    seen = Observation(**json.loads(source.read("observation.json", "a kept harness")))
    store = recorder.store
    wl = load_workload(directory / "workload.toml", store=store).workload
    payload = store.put_file(directory / "payload", "application/octet-stream")
    seen, body = recorder.keep_output(seen, directory / "body")  # the runner's size rule
    expected = Expected(
        request=wl.request[0],
        stream=wl.endpoint.stream,
        media=expectations_for(wl, 0) if wl.run.check_media else None,
        tokenizer=recorder.workload_tokenizer(),
    )
    endpoint = endpoint_for(wl.endpoint.kind)
    record = recorder.add(
        judge(
            endpoint, seen, body, expected, store=store, slot=Slot(0, "measured"), payload=payload
        )
    )
    recorder.seal()
    return record


@pytest.mark.parametrize(
    "case",
    ["valid clip", "truncated clip", "clip with short audio", "malformed JSON",
     "300 MB stream", "tokens per event", "uncounted stream", "over max_output_size"],
)  # fmt: skip
def test_the_same_bytes_get_the_same_record_whoever_recorded_them(
    case: str,
    cases: dict[str, Case],
    case_server: tuple[str, dict[str, str]],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    url, current = case_server
    current["case"] = case
    c = cases[case]
    root = tmp_path / "repo"
    (root / "evidence").mkdir(parents=True)
    if c.tokenizer:  # pinned by digest: every recorder reads it from the store
        pytest.importorskip("tokenizers")
        Repository(root).local_store().put(TOKENIZER, "application/json")
    wl = tmp_path / "w.toml"
    wl.write_text(c.workload())
    seen: list[Observation] = []
    real_judge = runner_module.judge

    def spy(endpoint: Any, observation: Observation, *args: Any, **kw: Any) -> RequestRecord:
        seen.append(observation)
        return real_judge(endpoint, observation, *args, **kw)

    monkeypatch.setattr(runner_module, "judge", spy)
    _, run = run_workload(root, wl, arm="a", server=url, name="http")
    [over_http] = run.requests
    [observation] = seen
    store = Repository(root).local_store()
    # the whole body was kept, then judged; or, past the limit, nothing of it
    assert (over_http.body is None) == (case == "over max_output_size")
    payload = store.get(over_http.payload.digest)

    # The harness kept the same bytes in a file (written as they came, never held).
    kept = tmp_path / "kept"
    kept.mkdir()
    with open(kept / "body", "wb") as fh:
        for chunk in c.body():
            fh.write(chunk)
    (kept / "payload").write_bytes(payload)
    (kept / "workload.toml").write_bytes(wl.read_bytes())
    fields = asdict(observation)
    fields["chunk_ns"], fields["chunk_end"] = (
        list(observation.chunk_ns),
        list(observation.chunk_end),
    )
    (kept / "observation.json").write_text(json.dumps(fields))

    exp = expectations_for(load_workload(wl, store=store).workload, 0) if c.check_media else None

    def by_harness_given(body: bytes | Path, name: str) -> RequestRecord:
        harness = open_run(root, name, arm="a", workload=wl.read_bytes())
        record = harness.record_request(
            observation,
            phase="measured",
            payload=payload,
            body=body,
            expectations=exp,
            llm="chat" if c.kind == "chat" else None,
            spec=load_workload(wl, store=store).workload.request[0],
        )
        harness.seal()
        return record

    by_harness = by_harness_given(kept / "body", "harness")
    if case != "300 MB stream":  # ... and as bytes in memory
        in_memory = by_harness_given((kept / "body").read_bytes(), "harness-bytes")
        assert _same(in_memory) == _same(over_http)
    if case == "over max_output_size":
        # no recorder kept the body, nor any part of it past the limit (an importer
        # keeps the harness's files as they are: that is checked before it runs)
        body = (kept / "body").read_bytes()
        assert len(body) == 100 << 10 and not store.has(hash_bytes(body).digest)
        sizes = [b.size for b in store.upkeep.iter_blobs()]
        assert sizes and max(sizes) <= LIMIT
        assert list(store.upkeep.iter_temporaries()) == []
    imported = _import_kept(root, kept, "imported")

    assert _same(by_harness) == _same(over_http) == _same(imported)
    assert over_http.payload.digest == by_harness.payload.digest == imported.payload.digest
    assert load_run(root, "harness").requests == (by_harness,)
    # ... and the record is the one the bytes deserve.
    verdict = (over_http.failure, over_http.media.verdict if over_http.media else None)
    assert (
        verdict
        == {
            "valid clip": (None, "PASS"),
            "truncated clip": ("invalid-media", "FAIL"),
            "clip with short audio": ("invalid-media", "FAIL"),
            "malformed JSON": ("invalid-response", None),
            "300 MB stream": ("too-large", None),
            "tokens per event": (None, None),
            "uncounted stream": (None, None),
            "over max_output_size": ("too-large", None),
        }[case]
    )
    if case == "300 MB stream":
        assert over_http.body.size == BIG and over_http.message == (
            f"a streamed output of {BIG} bytes is larger than {256 * MB}"
        )
    if case == "over max_output_size":
        assert over_http.message == (
            f"the output is larger than the limit of {LIMIT} bytes; nothing past it was "
            "kept ([run] max_output_size)"
        )
    if case == "clip with short audio":
        assert over_http.media is not None and "audio.samples" in over_http.media.failed_checks
    if case == "tokens per event":
        events = over_http.events
        assert events is not None and list(events.tokens) == [3, 3, 3, 2, 0]
        assert over_http.output_tokens == 11 and over_http.output_tokens_from == "token_ids"
        # two events completed in the first chunk share its arrival
        assert events.offsets_us[0] == events.offsets_us[1] and over_http.ttft_s is not None
    if case == "uncounted stream":
        # The server counted nothing: each recorder counts by the workload's tokenizer
        # (the recorder was not handed it), so output tokens and TPOT agree.
        assert over_http.output_tokens_from == by_harness.output_tokens_from == "tokenizer"
        assert over_http.output_tokens == by_harness.output_tokens == imported.output_tokens
        assert over_http.output_tokens is not None and over_http.output_tokens > 3
        assert over_http.tpot_s is not None and over_http.tpot_s == by_harness.tpot_s
