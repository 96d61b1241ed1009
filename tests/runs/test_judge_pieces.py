"""A long completion is stored piece by piece, as the very bytes of one encoding."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

import evidencestore.runs.judge as judge_module
from evidencestore.remotes import local_store
from evidencestore.runs.models import RequestSpec
from evidencestore.runs.streams import Channel, Completion, examine


def test_a_long_completion_is_stored_piece_by_piece_as_one_encoding(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = local_store(tmp_path)
    text = 'caf\u00e9 "quoted" \\ back\nslash \U0001f600 \u2028 end\x00' * 3
    completion = Completion(
        text=text,
        token_ids=(1, 2, 3),
        finish_reason="stop",
        output_tokens=3,
        channels=(Channel(name="reasoning", text="why \U0001f914", tokens=1),),
    )
    whole = msgspec.json.encode(completion)
    monkeypatch.setattr(judge_module, "COMPLETION_PIECE", 7)  # pieces cut escapes apart
    desc = judge_module.store_completion(store, completion)
    assert store.get(desc.digest) == whole
    assert desc.size == len(whole)
    assert msgspec.json.decode(store.get(desc.digest), type=Completion) == completion


def test_a_stream_is_read_from_views_of_one_buffer() -> None:
    """The events of a stream held in a bytearray decode as those of the same bytes."""
    data = (
        b': comment\r\nevent: message\ndata: {"choices":[{"delta":{"content":"he"}}]}\n\n'
        b'data: {"choices":[{"delta":{"content":"llo"},\ndata: "finish_reason":"stop"}]}\n\n'
        b"data:  [DONE] \n\n"
    )
    spec = RequestSpec(prompt="x")
    as_bytes = examine(data, [5], [len(data)], spec, stream=True, chat=True)
    as_buffer = examine(bytearray(data), [5], [len(data)], spec, stream=True, chat=True)
    assert as_buffer == as_bytes
    assert as_bytes.failure is None and as_bytes.completion.text == "hello"
    assert as_bytes.completion.finish_reason == "stop" and len(as_bytes.event_ns) == 3


def test_one_huge_event_is_decoded_and_stored_without_copies_of_it(tmp_path: Path) -> None:
    """The memory a 16 MB event takes beyond its bytes (tracemalloc: Python's own
    allocations, so the figure is deterministic): its text is neither decoded nor
    copied while it is read, and stored a piece at a time, as the very bytes of the
    encoding of the decoded completion."""
    import tracemalloc

    size = 16_000_000
    text = (b"lorem ipsum dolor sit amet " * (size // 27 + 1))[:size]
    data = bytearray(b'data: {"choices":[{"delta":{"content":"' + text + b'"}}]}\n\n')
    data += b'data: {"choices":[{"delta":{},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n'
    del text
    store = local_store(tmp_path)
    tracemalloc.start()
    try:
        out = examine(data, [1], [len(data)], RequestSpec(prompt="x"), stream=True, chat=True)
        _, read_peak = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        before, _ = tracemalloc.get_traced_memory()
        desc = judge_module.store_completion(store, out)
        _, store_peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert out.failure is None and len(out.completion.text) == size
    assert read_peak < 0.25 * size  # a piece checked as UTF-8, no decoded text, no copy
    assert store_peak - before < 0.2 * size  # a 1 MiB piece, not the whole encoding
    assert store.get(desc.digest) == msgspec.json.encode(out.completion)
