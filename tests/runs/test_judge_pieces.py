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
