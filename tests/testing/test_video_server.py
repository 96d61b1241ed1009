"""The reference video server's encode cost: a repeated request takes as long as its first
encode (the machine's load included), or exactly ``encode_time`` when that is set. The
sleeps are recorded, not timed: no wall-clock assert."""

from __future__ import annotations

import shutil
from collections.abc import Iterator

import pytest

pytest.importorskip("av")

from evidencestore.testing import video_server
from evidencestore.testing.video_server import VideoServer

FIELDS = {"size": "64x48", "seconds": "1", "fps": "8", "seed": "42"}


@pytest.fixture
def server() -> Iterator[VideoServer]:
    s = VideoServer()
    yield s
    shutil.rmtree(s._tmp, ignore_errors=True)


@pytest.fixture
def slept(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """What the server's encodes slept, in seconds (nothing really sleeps)."""
    calls: list[float] = []
    monkeypatch.setattr(video_server.time, "sleep", calls.append)
    return calls


def test_a_repeated_request_costs_its_first_encode(server: VideoServer, slept: list[float]) -> None:
    first = server.render(FIELDS, 1)
    assert slept == []  # the first one encoded for real
    [(_, took)] = server._cache.values()
    assert server.render(FIELDS, 2) == first
    assert slept == [took] and took > 0


def test_encode_time_sets_what_a_repeated_request_costs(
    server: VideoServer, slept: list[float]
) -> None:
    first = server.render(FIELDS, 1)
    for encode_time in (0.0, 0.25):
        server.encode_time = encode_time
        assert server.render(FIELDS, 2) == first  # the same bytes
    server.encode_time = None
    server.render(FIELDS, 3)
    [(_, took)] = server._cache.values()
    assert slept == [0.0, 0.25, took]
    server.cache = True  # a caching server answers a repeat at once, whatever encode_time is
    server.encode_time = 0.25
    server.render(FIELDS, 4)
    assert slept == [0.0, 0.25, took]
