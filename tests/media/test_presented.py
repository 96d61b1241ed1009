"""Presented audio length: media encoded by PyAV at test time, truncated by 1, 500, 1023
and 1024 samples, judged by what the container presents, not by what the decoder emits.

Which truncations are detectable, and why:

* AAC and Opus in MP4/MOV: all four. The sample table's last entry ends where the encoder's
  samples end (FFmpeg writes the last packet's real duration: 396 samples for 47,500), so
  the presented count is exact even though the edit list is in milliseconds (48 samples)
  and the decoder emits whole 1024-sample (AAC) or 960-sample (Opus) frames.
* Opus in WebM and Ogg: all four. The container declares the end padding (DiscardPadding,
  the last granule position); FFmpeg hands it to the decoder as skip-samples side data and
  the decoder drops it, so the decoded count is the presented count.
* PCM in WAV and MOV: all four. No priming, no padding: every decoded sample is presented.
* Raw ADTS AAC: none of them. Nothing in the stream says where the samples end, so only
  the bound applies (expected <= decoded < expected + one frame + the untrimmed 1024-sample
  priming): a truncation hidden inside the last frame's padding cannot be seen, and the
  check says that the count is a bound, not a presented length.
"""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

pytest.importorskip("av")
pytest.importorskip("numpy")

from evidencestore.media.expectations import check
from evidencestore.media.records import AudioExpectation, Check, Expectations
from evidencestore.testing.synth import AudioSpec, write_clip

REQUEST = 48000
EXPECT = Expectations(audio=AudioExpectation(samples=REQUEST, sample_rate=48000, channels=2))
TRUNCATIONS = (1, 500, 1023, 1024)

# (codec, container format, file suffix, words the audio.samples check names its source by)
EXACT = [
    ("aac", "mp4", "mp4", "MP4/MOV sample table"),
    ("aac", "mov", "mov", "MP4/MOV sample table"),
    ("libopus", "mp4", "mp4", "MP4/MOV sample table"),
    ("libopus", "webm", "webm", "end trimming"),
    ("libopus", "ogg", "ogg", "end trimming"),
    ("pcm_s16le", "wav", "wav", "PCM"),
    ("pcm_s16le", "mov", "mov", "PCM"),
]


def _by_name(checks: tuple[Check, ...]) -> dict[str, Check]:
    return {c.name: c for c in checks}


def _clip(tmp_path: Path, codec: str, fmt: str, suffix: str, samples: int, **kw: object) -> str:
    path = tmp_path / f"{codec}-{samples}.{suffix}"
    return write_clip(path, audio=AudioSpec(codec=codec, samples=samples), format=fmt, **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize(("codec", "fmt", "suffix", "source"), EXACT)
def test_presented_length_is_exact_where_the_container_says(
    tmp_path: Path, codec: str, fmt: str, suffix: str, source: str
) -> None:
    whole = check(_clip(tmp_path, codec, fmt, suffix, REQUEST), EXPECT)
    assert whole.verdict == "PASS", [c.message for c in whole.checks if not c.ok]
    c = _by_name(whole.checks)["audio.samples"]
    assert (c.expected, c.observed) == (REQUEST, REQUEST)
    assert source in c.message and "expected exactly 48000" in c.message
    for short in TRUNCATIONS:
        result = check(_clip(tmp_path, codec, fmt, suffix, REQUEST - short), EXPECT)
        assert result.verdict == "FAIL", (codec, fmt, short)
        c = _by_name(result.checks)["audio.samples"]
        assert not c.ok
        assert (c.expected, c.observed) == (REQUEST, REQUEST - short), (codec, fmt, short)
        assert f"{short} sample{'s' if short > 1 else ''} short (truncated)" in c.message
        assert source in c.message


def test_aac_in_mp4_500_short_fails_although_it_decodes_to_more_than_requested(
    tmp_path: Path,
) -> None:
    """The issue's case: 47,500 samples decode to 48,128 (whole AAC frames) and the edit
    list, in milliseconds, declares 47,472; the sample table says 47,500."""
    result = check(_clip(tmp_path, "aac", "mp4", "mp4", REQUEST - 500), EXPECT)
    stream = result.report.decoded[0]
    assert stream.samples == 48128  # more than requested: the old rule passed it
    assert stream.packet_end == 47500 and stream.skip_start == 1024
    assert result.report.probe.movie_timescale == 1000
    c = _by_name(result.checks)
    assert result.verdict == "FAIL"
    assert c["audio.samples"].observed == 47500
    assert "the edit list declares 47472" in c["audio.samples"].message
    assert "resolution of 1/1000 s, 48 samples" in c["audio.samples"].message
    assert "decoded 48128" in c["audio.samples"].message
    assert c["audio.padding"].observed == 628 and not c["audio.padding"].ok


def _edit_list_trimmed(tmp_path: Path, segment: int) -> str:
    """AAC in MP4 whose last packet keeps its full 1024-sample duration (as muxers that do
    not shorten it write), so only the edit list (48 kHz movie timescale) says where the
    samples end: its segment duration patched to ``segment`` samples."""

    def full(packet: object) -> object:
        packet.duration = 1024  # type: ignore[attr-defined]
        return packet

    path = Path(
        _clip(
            tmp_path,
            "aac",
            "mp4",
            "mp4",
            REQUEST,
            container_options={"movie_timescale": "48000"},
            packet_hook=full,
        )
    )
    data = bytearray(path.read_bytes())
    at = data.find(b"elst")
    assert data[at + 4] == 0  # version 0: 32-bit segment duration
    assert struct.unpack_from(">I", data, at + 12)[0] == 48128  # padding included
    struct.pack_into(">I", data, at + 12, segment)
    out = tmp_path / f"edit-{segment}.mp4"
    out.write_bytes(bytes(data))
    return str(out)


@pytest.mark.parametrize("short", (0, *TRUNCATIONS))
def test_an_edit_list_that_trims_the_end_fixes_the_presented_count(
    tmp_path: Path, short: int
) -> None:
    result = check(_edit_list_trimmed(tmp_path, REQUEST - short), EXPECT)
    c = _by_name(result.checks)["audio.samples"]
    assert c.observed == REQUEST - short
    assert "MP4/MOV edit list" in c.message and "resolution 1/48000 s, 1 sample" in c.message
    assert result.verdict == ("PASS" if short == 0 else "FAIL")


def test_untrimmed_padding_in_mp4_is_presented_and_fails(tmp_path: Path) -> None:
    """Neither the sample table nor the edit list trims the padding: the container
    presents 48,128 samples, 128 more than requested."""
    result = check(_edit_list_trimmed(tmp_path, 48128), EXPECT)
    c = _by_name(result.checks)["audio.samples"]
    assert (c.observed, c.ok) == (48128, False)
    assert "128 samples too many" in c.message


@pytest.mark.parametrize("short", (0, *TRUNCATIONS))
def test_raw_adts_aac_has_only_the_padding_bound(tmp_path: Path, short: int) -> None:
    """Honest or cut by up to 1024 samples, raw ADTS decodes within the padding bound:
    the cut is invisible, so the length is bounded, not verified, and never PASSes
    unless the caller accepts bounded lengths; then the bound is named."""
    path = _clip(tmp_path, "aac", "adts", "aac", REQUEST - short)
    result = check(path, EXPECT)
    assert result.verdict == "INCONCLUSIVE"
    c = _by_name(result.checks)["audio.samples"]
    assert c.ok and c.observed == (49152 if short < 1000 else 48128)
    assert "48000 <= decoded < 50048" in c.message
    assert "no container information on the presented length (raw ADTS" in c.message
    (bound,) = result.bounds
    # The lowest presented count the decode allows: decoded - 2047 (priming + padding).
    assert bound.samples == REQUEST - (c.observed - 2047) == 2047 - (c.observed - REQUEST)
    assert bound.ms == round(bound.samples / 48, 3) and bound.sample_rate == 48000
    assert short <= bound.samples  # the real cut lies within the stated bound
    assert f"up to {bound.samples} samples ({bound.ms:.3f} ms at 48000 Hz)" in bound.text()
    accepted = check(path, EXPECT, audio_length="bounded")
    assert (accepted.verdict, accepted.bounds) == ("PASS", result.bounds)


@pytest.mark.parametrize(
    ("codec", "fmt", "suffix"),
    [("aac", "matroska", "mka"), ("aac", "mpegts", "ts"), ("libopus", "mpegts", "ts")],
)
def test_containers_without_end_trimming_give_a_bound_not_a_pass(
    tmp_path: Path, codec: str, fmt: str, suffix: str
) -> None:
    """AAC in Matroska (FFmpeg writes no DiscardPadding for AAC), AAC and Opus in
    MPEG-TS: 1 or 500 samples short is invisible, so neither honest nor cut PASSes."""
    for short in (0, 1, 500):
        result = check(_clip(tmp_path, codec, fmt, suffix, REQUEST - short), EXPECT)
        assert result.verdict == "INCONCLUSIVE", (short, failed_messages(result.checks))
        assert len(result.bounds) == 1 and result.bounds[0].samples >= short
        assert "bounded, not verified" in _by_name(result.checks)["audio.samples"].message


def failed_messages(checks: tuple[Check, ...]) -> list[str]:
    return [c.message for c in checks if not c.ok]


def test_a_truncation_beyond_the_bound_is_seen_even_without_container_information(
    tmp_path: Path,
) -> None:
    result = check(_clip(tmp_path, "aac", "adts", "aac", REQUEST - 2048), EXPECT)
    c = _by_name(result.checks)["audio.samples"]
    assert result.verdict == "FAIL" and c.observed == 47104
    assert "896 samples short (truncated)" in c.message


@pytest.mark.parametrize(("requested", "verdict"), [(10, "PASS"), (15, "FAIL")])
def test_video_frames_are_counted_after_the_edit_list(
    tmp_path: Path, requested: int, verdict: str
) -> None:
    """15 frames encoded, an edit list (movie timescale 30) presenting the first 10: FFmpeg
    drops the other 5 (their packets are marked discard), the count is the presented one,
    and the container's declared 15 frames are still accounted for."""
    from evidencestore.media.records import VideoExpectation
    from evidencestore.testing.synth import VideoSpec

    path = tmp_path / "v.mp4"
    write_clip(
        path, video=VideoSpec(frames=15), format="mp4", container_options={"movie_timescale": "30"}
    )
    data = bytearray(path.read_bytes())
    at = data.find(b"elst")
    assert struct.unpack_from(">I", data, at + 12)[0] == 15
    struct.pack_into(">I", data, at + 12, 10)
    path.write_bytes(bytes(data))
    exp = Expectations(video=VideoExpectation(width=64, height=64, frame_rate=30, frames=requested))
    result = check(path, exp)
    assert result.verdict == verdict
    c = _by_name(result.checks)
    assert (c["video.frames"].expected, c["video.frames"].observed) == (requested, 10)
    assert "5 frames outside it not presented" in c["video.frames"].message
    assert c["video.declared_frames"].ok and c["video.declared_frames"].observed == 15
    assert result.report.decoded[0].discarded_packets == 5


def test_opus_in_webm_without_padding_states_its_length(tmp_path: Path) -> None:
    """47,688 samples + 312 pre-skip fill 50 Opus frames exactly: no DiscardPadding is
    written, and none means no padding (the Matroska Opus mapping requires it otherwise):
    exact, so the honest file PASSes and one sample less FAILs."""
    expect = Expectations(audio=AudioExpectation(samples=47688, sample_rate=48000))
    honest = check(_clip(tmp_path, "libopus", "webm", "webm", 47688), expect)
    assert honest.report.decoded[0].skip_end in (None, 0)
    assert honest.verdict == "PASS" and not honest.bounds
    assert (
        "no DiscardPadding: no padding to trim" in _by_name(honest.checks)["audio.samples"].message
    )
    short = check(_clip(tmp_path, "libopus", "webm", "webm", 47687), expect)
    assert short.verdict == "FAIL"


def _encoder(name: str) -> bool:
    import av

    try:
        av.codec.Codec(name, "w")
    except Exception:
        return False
    return True


@pytest.mark.skipif(not _encoder("libmp3lame"), reason="no MP3 encoder in this PyAV wheel")
def test_raw_mp3_with_a_lame_header_states_its_length_and_its_start(tmp_path: Path) -> None:
    """The LAME header states the encoder delay and padding (skip samples at both ends):
    the length is exact, and time 0 of a raw stream is its first presented sample (the
    decoder drops 1105 samples of delay before it)."""
    honest = check(_clip(tmp_path, "libmp3lame", "mp3", "mp3", REQUEST), EXPECT)
    assert honest.verdict == "PASS", failed_messages(honest.checks)
    first = _by_name(honest.checks)["audio.first_timestamp"]
    assert "raw MP3 has no timeline origin" in first.message
    short = check(_clip(tmp_path, "libmp3lame", "mp3", "mp3", REQUEST - 1), EXPECT)
    assert (
        short.verdict == "FAIL"
        and "1 sample short" in _by_name(short.checks)["audio.samples"].message
    )


def test_ac3_in_matroska_is_bounded(tmp_path: Path) -> None:
    for short in (0, 1):
        result = check(_clip(tmp_path, "ac3", "matroska", "mka", REQUEST - short), EXPECT)
        assert result.verdict == "INCONCLUSIVE" and result.bounds
        assert "nothing marks the last frame's padding" in result.bounds[0].reason
