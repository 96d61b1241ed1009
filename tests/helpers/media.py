"""Shared helpers for the media tests: clips encoded with PyAV at test time."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("av")
pytest.importorskip("numpy")

from evidencestore.media.records import (
    AudioExpectation,
    Check,
    Expectations,
    VideoExpectation,
)
from evidencestore.testing.synth import AudioSpec, VideoSpec, audio_samples, write_clip

__all__ = [
    "AV_EXPECT",
    "AV_EXPECT_TOML",
    "AudioSpec",
    "VideoSpec",
    "audio_gap_hook",
    "checks_by_name",
    "clip",
    "failed",
    "lossless",
    "multi_audio_clip",
    "nudge_frame",
]

# 0.5 s: 15 frames of 64x64 yuv420p at 30 fps, 24000 stereo samples at 48 kHz.
AV_EXPECT = Expectations(
    video=VideoExpectation(width=64, height=64, pix_fmt="yuv420p", frame_rate=30, frames=15),
    audio=AudioExpectation(sample_rate=48000, channels=2, duration=0.5),
)
# The same expectations as an --expect file.
AV_EXPECT_TOML = """\
[video]
width = 64
height = 64
pix_fmt = "yuv420p"
frame_rate = 30
frames = 15

[audio]
sample_rate = 48000
channels = 2
duration = 0.5
"""


def lossless(**kw: Any) -> VideoSpec:
    """H.264 at qp 0: decoded frames equal the encoder's input (LSB changes survive)."""
    return VideoSpec(options={"qp": "0", "preset": "ultrafast"}, **kw)


def clip(
    tmp_path: Path,
    name: str,
    *,
    video: VideoSpec | None = None,
    audio: AudioSpec | None = None,
    **kw: Any,
) -> str:
    """Encode ``name`` under ``tmp_path``."""
    return write_clip(tmp_path / name, video=video, audio=audio, **kw)


def nudge_frame(index: int, y: int = 10, x: int = 10) -> Any:
    """A video hook flipping the least significant bit of one luma sample of one frame."""

    def hook(i: int, planes: Any) -> Any:
        if i == index:
            planes = planes.copy()
            planes[y, x] ^= 1
        return planes

    return hook


def audio_gap_hook(at: Fraction = Fraction(1, 4), gap: Fraction = Fraction(1, 10)) -> Any:
    """A packet hook shifting every audio packet from ``at`` seconds by ``gap`` seconds."""

    def hook(packet: Any) -> Any:
        late = packet.pts is not None and packet.pts * packet.time_base >= at
        if packet.stream.type == "audio" and late:
            shift = int(gap / packet.time_base)
            packet.pts += shift
            packet.dts += shift
        return packet

    return hook


def checks_by_name(checks: tuple[Check, ...]) -> dict[str, Check]:
    """Index checks by name (first stream of each name)."""
    out: dict[str, Check] = {}
    for c in checks:
        out.setdefault(c.name, c)
    return out


def failed(checks: tuple[Check, ...]) -> set[str]:
    """Names of the checks that failed."""
    return {c.name for c in checks if not c.ok}


def multi_audio_clip(
    path: Path,
    samples: tuple[int, ...] = (4800, 4800),
    nudge: tuple[int, int] | None = None,
) -> str:
    """A Matroska file with one 16-bit PCM stereo track per entry of ``samples`` (48 kHz);
    ``nudge=(track, sample)`` changes one sample of one track by one LSB."""
    import av
    import numpy as np

    out = str(path)
    with av.open(out, "w") as container:
        streams = []
        for _ in samples:
            stream = container.add_stream("pcm_s16le", rate=48000)
            stream.layout = "stereo"
            streams.append(stream)
        for track, (stream, total) in enumerate(zip(streams, samples, strict=True)):
            done = 0
            while done < total:
                n = min(1024, total - done)
                data = np.round(audio_samples(done, n, 2, 48000, 440.0) * 32767).astype(np.int16)
                if nudge is not None and nudge[0] == track and done <= nudge[1] < done + n:
                    data[0, nudge[1] - done] ^= 1
                frame = av.AudioFrame.from_ndarray(
                    np.ascontiguousarray(data.T.reshape(1, -1)), format="s16", layout="stereo"
                )
                frame.sample_rate = 48000
                frame.pts = done
                frame.time_base = Fraction(1, 48000)
                for packet in stream.encode(frame):
                    container.mux(packet)
                done += n
            for packet in stream.encode(None):
                container.mux(packet)
    return out
