"""Timestamp checks at the container's own resolution (issue 37, item 2).

Matroska and WebM store timestamps in 1 ms units: a 1/24 s frame starts at a rounded
millisecond and its duration (41.667 ms) is stored truncated (41 ms), so an honest file at
24 fps "ends" at 0.999 s. Media encoded here by PyAV at every common frame rate must PASS
the timestamp checks; the same files one frame short, or with a one-frame gap, must FAIL
them (the negative controls: the tolerance is no wider than the container's rounding).
"""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
from helpers.media import AudioSpec, VideoSpec, checks_by_name, clip, failed

from evidencestore.media.expectations import check
from evidencestore.media.records import AudioExpectation, Expectations, VideoExpectation

RATES = ("24000/1001", "24", "30000/1001", "30", "50", "60000/1001", "60")
FRAMES = 12
TIMESTAMP_CHECKS = {
    "video.first_timestamp",
    "video.continuity",
    "video.last_timestamp",
    "video.end_time",
    "video.declared_duration",
}
# (container format, suffix, video codec, audio codec)
CONTAINERS = [
    ("webm", "webm", "libvpx-vp9", "libopus"),
    ("matroska", "mkv", "libx264", "aac"),
]


def _expect(rate: str, frames: int = FRAMES) -> Expectations:
    return Expectations(
        video=VideoExpectation(width=64, height=48, frame_rate=rate, frames=frames),
        audio=AudioExpectation(sample_rate=48000, samples=24000),
    )


def _video(codec: str, rate: str, frames: int = FRAMES) -> VideoSpec:
    options = {"preset": "ultrafast"} if codec == "libx264" else {}
    return VideoSpec(codec=codec, width=64, height=48, rate=Fraction(rate), frames=frames,
                     options=options)  # fmt: skip


def _video_gap(rate: str, after: int = FRAMES // 2) -> Any:
    """Shift every video packet from frame ``after`` on by one frame (a one-frame gap)."""

    def hook(packet: Any) -> Any:
        if packet.stream.type == "video" and packet.pts is not None:
            step = int(1 / (Fraction(rate) * packet.time_base))
            if packet.pts >= after * step:
                packet.pts += step
                packet.dts += step
        return packet

    return hook


@pytest.mark.parametrize("rate", RATES)
@pytest.mark.parametrize(("fmt", "suffix", "vcodec", "acodec"), CONTAINERS)
def test_honest_matroska_and_webm_pass_at_every_rate(
    tmp_path: Path, fmt: str, suffix: str, vcodec: str, acodec: str, rate: str
) -> None:
    path = clip(
        tmp_path, f"honest.{suffix}", video=_video(vcodec, rate),
        audio=AudioSpec(codec=acodec, samples=24000), format=fmt,
    )  # fmt: skip
    result = check(path, _expect(rate))
    c = checks_by_name(result.checks)
    assert not failed(result.checks) & (TIMESTAMP_CHECKS | {"audio.continuity"}), [
        x.message for x in result.checks if not x.ok
    ]
    assert result.report.decoded[0].time_base == "1/1000"
    end = c["video.end_time"]
    # The rule and its reason are stated: 1 ms timestamps, rounded, duration truncated.
    on_grid = (Fraction(1) / Fraction(rate) / Fraction(1, 1000)).denominator == 1
    if on_grid:  # 50 fps: 20 ms frames are whole milliseconds, so the rule stays exact
        assert "tolerance half a tick" in end.message
        assert end.observed == pytest.approx(end.expected)
    else:
        assert "tolerance one and a half quanta (0.001500 s)" in end.message, end.message
        assert "Matroska/WebM stores 1 ms timestamps" in end.message
    # Opus in WebM states its length (DiscardPadding): the whole file PASSes. AAC in
    # Matroska cannot (no end trimming): bounded, INCONCLUSIVE, never FAIL for timestamps.
    assert result.verdict == ("PASS" if acodec == "libopus" else "INCONCLUSIVE")
    assert bool(result.bounds) == (acodec == "aac")


@pytest.mark.parametrize("rate", RATES)
@pytest.mark.parametrize(("fmt", "suffix", "vcodec", "acodec"), CONTAINERS)
def test_one_frame_short_or_a_one_frame_gap_still_fails(
    tmp_path: Path, fmt: str, suffix: str, vcodec: str, acodec: str, rate: str
) -> None:
    audio = AudioSpec(codec=acodec, samples=24000)
    short = clip(tmp_path, f"short.{suffix}", video=_video(vcodec, rate, FRAMES - 1),
                 audio=audio, format=fmt)  # fmt: skip
    result = check(short, _expect(rate))
    assert result.verdict == "FAIL"
    assert {"video.frames", "video.end_time", "video.last_timestamp"} <= failed(result.checks)
    gap = clip(tmp_path, f"gap.{suffix}", video=_video(vcodec, rate), audio=audio, format=fmt,
               packet_hook=_video_gap(rate))  # fmt: skip
    result = check(gap, _expect(rate))
    assert result.verdict == "FAIL"
    assert {"video.continuity", "video.end_time"} <= failed(result.checks)
    c = checks_by_name(result.checks)
    assert c["video.continuity"].observed == 1
    assert "gap of" in c["video.continuity"].message


def _shift_audio(samples: int) -> Any:
    def hook(packet: Any) -> Any:
        if packet.stream.type == "audio":
            shift = int(Fraction(samples, 48000) / packet.time_base)
            packet.pts += shift
            packet.dts += shift
        return packet

    return hook


def test_audio_continuity_in_matroska_tolerates_its_rounding_not_a_gap(tmp_path: Path) -> None:
    # PCM frames of 1024 samples (21.333 ms) starting 16 samples (0.333 ms) in: every
    # stored time is rounded to 1 ms and the first, the anchor, rounds to 0; the frames
    # then deviate from the ideal by up to 0.833 ms, beyond half a tick (the old rule,
    # a false FAIL in FFmpeg-CLI .mka files) and within one quantum.
    audio = AudioSpec(codec="pcm_s16le", samples=24000)
    expect = Expectations(audio=AudioExpectation(sample_rate=48000, samples=24000))
    path = clip(tmp_path, "a.mka", audio=audio, format="matroska", packet_hook=_shift_audio(16))
    result = check(path, expect)
    assert result.verdict == "PASS", [x.message for x in result.checks if not x.ok]
    c = checks_by_name(result.checks)["audio.continuity"]
    assert c.observed == 0 and "tolerance one quantum (0.001000 s)" in c.message
    worst = Fraction(c.message.split("largest deviation ")[1].split(" s")[0])
    assert Fraction(1, 2000) < worst <= Fraction(1, 1000)
    # Negative control: one audio frame (1024 samples) missing in the middle is a gap.
    spec = AudioSpec(codec="pcm_s16le", samples=24000 - 1024)

    def gap(packet: Any) -> Any:
        packet = _shift_audio(16)(packet)
        if packet.pts * packet.time_base >= Fraction(1, 4):
            packet.pts += 1024
            packet.dts += 1024
        return packet

    bad = check(clip(tmp_path, "g.mka", audio=spec, format="matroska", packet_hook=gap), expect)
    assert bad.verdict == "FAIL"
    assert "audio.continuity" in failed(bad.checks)
    assert "gap of 0.02" in checks_by_name(bad.checks)["audio.continuity"].message
