"""Regression tests for review findings on the media validators (one section per finding)."""

from __future__ import annotations

import math
from fractions import Fraction
from pathlib import Path
from typing import Any

import av
import msgspec
import numpy as np
import pytest
from media_helpers import (
    AV_EXPECT,
    AudioSpec,
    VideoSpec,
    checks_by_name,
    clip,
    failed,
    lossless,
    multi_audio_clip,
)

from evidencestore._cli import main
from evidencestore.errors import MediaError
from evidencestore.media import (
    analyse,
    check,
    check_report,
    compare,
    load_expectations,
    load_thresholds,
    with_overrides,
)
from evidencestore.media.comparison import compatibility, not_measurable
from evidencestore.media.decode import _row_bytes, video_frame_digest
from evidencestore.media.expectations import expectations_from_mapping
from evidencestore.media.records import (
    AudioExpectation,
    Expectations,
    Thresholds,
    VideoExpectation,
)
from evidencestore.testing.synth import video_planes

AUDIO_4800 = Expectations(audio=AudioExpectation(sample_rate=48000, channels=2, samples=4800))


# ------------------------------------------------- 1. the request must give a length


def test_missing_length_is_a_failing_check_so_equal_truncation_cannot_pass(
    tmp_path: Path,
) -> None:
    no_length = Expectations(
        video=VideoExpectation(width=64, height=64, frame_rate=30),
        audio=AudioExpectation(sample_rate=48000, channels=2),
    )
    short = dict(video=lossless(frames=7), audio=AudioSpec(samples=12000))
    a = clip(tmp_path, "a.mp4", **short)
    b = clip(tmp_path, "b.mp4", **short)
    record = compare(a, b, no_length)
    assert record.verdict == "FAIL"
    assert {"video.length", "audio.length"} <= failed(record.reference.checks)
    assert any("must give frames or duration" in r for r in record.reasons)
    # A kind with no section at all is not silently unchecked either.
    only_video = Expectations(video=VideoExpectation(frames=7, frame_rate=30))
    assert "audio.length" in failed(check(a, only_video).checks)


def test_cli_refuses_expectations_without_a_length(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = clip(tmp_path, "a.mp4", video=VideoSpec(), audio=AudioSpec())
    assert main(["media", "check", path, "--width", "64", "--frames", "15"]) == 2
    err = capsys.readouterr().err
    assert "no length" in err and "samples or duration" in err and "a.mp4" in err
    assert "Traceback" not in err
    assert main(["media", "compare", path, path, "--width", "64", "--samples", "24000"]) == 2
    assert "frames or duration" in capsys.readouterr().err


def test_frames_and_duration_together_must_agree(tmp_path: Path) -> None:
    with pytest.raises(MediaError, match="inconsistent video length"):
        expectations_from_mapping({"video": {"frame_rate": 30, "frames": 15, "duration": 1.0}})
    with pytest.raises(MediaError, match="inconsistent audio length"):
        expectations_from_mapping(
            {"audio": {"sample_rate": 48000, "samples": 24000, "duration": 1.0}}
        )
    # Without a requested rate the declared one is used, at check time.
    path = clip(tmp_path, "v.mp4", video=VideoSpec())
    result = check(path, Expectations(video=VideoExpectation(frames=15, duration=1.0)))
    assert "video.length" in failed(result.checks)
    agree = check(path, Expectations(video=VideoExpectation(frames=15, duration=0.5)))
    assert agree.verdict == "PASS", failed(agree.checks)


# ------------------------------------------------- 2. every stream, not only the first


def test_second_audio_track_is_compared_and_checked(tmp_path: Path) -> None:
    ref = multi_audio_clip(tmp_path / "ref.mkv")
    same = multi_audio_clip(tmp_path / "same.mkv")
    nudged = multi_audio_clip(tmp_path / "nudged.mkv", nudge=(1, 100))
    assert compare(ref, same, AUDIO_4800).verdict == "PASS"
    record = compare(ref, nudged, AUDIO_4800)
    assert record.verdict == "INCONCLUSIVE", record.reasons
    assert [(e.pair, e.equal) for e in record.equality] == [(0, True), (1, False)]
    assert record.metrics is not None and len(record.metrics.extra_audio) == 1
    assert record.metrics.extra_audio[0].pair == 1
    assert not record.metrics.extra_audio[0].identical
    # A truncated second track makes the file invalid.
    short = multi_audio_clip(tmp_path / "short.mkv", samples=(4800, 2400))
    bad = check(short, AUDIO_4800)
    assert bad.verdict == "FAIL"
    assert [c.stream for c in bad.checks if c.name == "audio.samples" and not c.ok] == [1]


def test_different_number_of_streams_is_unavailable(tmp_path: Path) -> None:
    two = multi_audio_clip(tmp_path / "two.mkv")
    one = multi_audio_clip(tmp_path / "one.mkv", samples=(4800,))
    record = compare(two, one, AUDIO_4800)
    assert record.verdict == "UNAVAILABLE"
    assert "compat.audio.streams" in {c.name for c in record.compatibility if not c.ok}


# ------------------------------------------------- 3. playlists may not open other files


def test_playlist_referencing_a_local_file_is_not_followed(tmp_path: Path) -> None:
    segment = clip(tmp_path, "seg.ts", video=VideoSpec(), format="mpegts")
    playlist = tmp_path / "pl.m3u8"
    for line in (f"file:{segment}", segment):
        playlist.write_text(
            "#EXTM3U\n#EXT-X-TARGETDURATION:1\n#EXTINF:0.5,\n" + line + "\n#EXT-X-ENDLIST\n"
        )
        report = analyse(playlist)
        assert not report.decoded
        result = check(playlist, Expectations(video=VideoExpectation(frames=15)))
        assert result.verdict == "FAIL"
        assert not checks_by_name(result.checks)["open"].ok


# ------------------------------------------------- 4. timing checks need frame records


def test_report_without_frame_records_fails_loudly(tmp_path: Path) -> None:
    path = clip(tmp_path, "a.mp4", video=VideoSpec(), audio=AudioSpec())
    checks = check_report(analyse(path, keep_frames=False), AV_EXPECT)
    assert {"video.frame_records", "audio.frame_records"} <= failed(checks)
    assert not failed(check_report(analyse(path), AV_EXPECT))


# ------------------------------------------------- 5. undecodable metadata


def test_invalid_utf8_metadata_is_not_a_traceback(tmp_path: Path) -> None:
    path = tmp_path / "m.mkv"
    with av.open(str(path), "w") as container:
        container.metadata["title"] = "EVSTOREPLACEHOLDER"
        stream = container.add_stream("ffv1", rate=30)
        stream.width = stream.height = 16
        stream.pix_fmt = "yuv420p"
        for i in range(2):
            frame = av.VideoFrame.from_ndarray(video_planes(i, 16, 16), format="yuv420p")
            frame.pts = i
            for packet in stream.encode(frame):
                container.mux(packet)
        for packet in stream.encode(None):
            container.mux(packet)
    data = path.read_bytes()
    at = data.index(b"EVSTOREPLACEHOLDER")
    path.write_bytes(data[:at] + b"\xff\xfe" + data[at + 2 :])
    result = check(path, Expectations(video=VideoExpectation(frames=2, frame_rate=30)))
    c = checks_by_name(result.checks)
    assert c["open"].ok and c["decode.errors"].ok and c["video.frames"].ok


# ------------------------------------------------- 6. expectation and threshold values


@pytest.mark.parametrize(
    "data",
    [
        {"video": {"duration": math.nan}},
        {"video": {"duration": math.inf}},
        {"audio": {"duration": math.inf}},
        {"video": {"frames": -1}},
        {"video": {"width": 0}},
        {"audio": {"samples": -5}},
        {"audio": {"sample_rate": 0}},
        {"audio": {"codec_frame_size": -1}},
        {"audio": {"codec_frame_size": 10**7}},
    ],
)
def test_invalid_expectation_values_are_refused(data: dict[str, Any]) -> None:
    with pytest.raises(MediaError, match="expectations"):
        expectations_from_mapping(data)


def test_nan_flags_and_thresholds_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(MediaError):
        with_overrides(None, video={"duration": math.nan})
    (tmp_path / "e.toml").write_text("[audio]\nduration = inf\n")
    with pytest.raises(MediaError, match="finite"):
        load_expectations(tmp_path / "e.toml")
    for text in ("video_psnr_min = nan", "audio_snr_min = inf", "[perceptual_max]\nlpips = nan"):
        (tmp_path / "t.toml").write_text(text + "\n")
        with pytest.raises(MediaError, match=r"t\.toml"):
            load_thresholds(tmp_path / "t.toml")
    with pytest.raises(ValueError, match="finite"):
        Thresholds(video_psnr_min=math.nan)
    path = clip(tmp_path, "a.wav", audio=AudioSpec(codec="pcm_s16le"))
    assert main(["media", "check", path, "--audio-duration", "nan"]) == 2
    assert "Traceback" not in capsys.readouterr().err


# ------------------------------------------------- 7. palette formats


def _pal8(palette_byte: int) -> Any:
    frame = av.VideoFrame(8, 4, "pal8")
    index, palette = frame.planes
    index.update(bytes(range(index.buffer_size)))
    palette.update(bytes([palette_byte]) * palette.buffer_size)
    return frame


def test_pal8_digest_covers_the_palette() -> None:
    assert _row_bytes(_pal8(1))[1] == 1024
    assert video_frame_digest(_pal8(1)) != video_frame_digest(_pal8(2))
    assert video_frame_digest(_pal8(1)) == video_frame_digest(_pal8(1))
    assert not_measurable(av.VideoFormat("pal8")) is not None


# ------------------------------------------------- 8. odd-width packed 4:2:2


@pytest.mark.parametrize(("fmt", "row"), [("yuyv422", 12), ("uyvy422", 12), ("y210le", 24)])
def test_odd_width_packed_422_hashes_the_last_macropixel(fmt: str, row: int) -> None:
    def frame(last: int) -> Any:
        f = av.VideoFrame(5, 2, fmt)
        (plane,) = f.planes
        data = bytearray(plane.buffer_size)
        for y in range(2):
            data[y * plane.line_size + row - 1] = last
        plane.update(bytes(data))
        return f

    assert _row_bytes(frame(0)) == (row,)
    assert video_frame_digest(frame(0)) != video_frame_digest(frame(7))


# ------------------------------------------------- 9. colour metadata


def _tagged(tmp_path: Path, name: str, colorspace: int) -> str:
    path = str(tmp_path / name)
    with av.open(path, "w") as container:
        stream = container.add_stream("libx264", rate=30, options={"qp": "0"})
        stream.width = stream.height = 32
        stream.pix_fmt = "yuv420p"
        stream.codec_context.colorspace = colorspace
        for i in range(3):
            frame = av.VideoFrame.from_ndarray(video_planes(i, 32, 32), format="yuv420p")
            frame.pts = i
            frame.time_base = Fraction(1, 30)
            frame.colorspace = colorspace
            for packet in stream.encode(frame):
                container.mux(packet)
        for packet in stream.encode(None):
            container.mux(packet)
    return path


def test_colour_tags_are_hashed_and_must_match(tmp_path: Path) -> None:
    bt709 = _tagged(tmp_path, "709.mkv", 1)
    bt601 = _tagged(tmp_path, "601.mkv", 5)
    a, b = analyse(bt709), analyse(bt601)
    assert (a.decoded[0].colorspace, b.decoded[0].colorspace) == (1, 5)
    assert a.decoded[0].root != b.decoded[0].root
    expect = Expectations(video=VideoExpectation(frames=3, frame_rate=30))
    record = compare(bt709, bt601, expect)
    assert record.verdict == "UNAVAILABLE"
    assert [c.name for c in compatibility(a, b) if not c.ok] == ["compat.video.colorspace"]


# ------------------------------------------------- 10. audio root independent of framing


def test_audio_root_does_not_depend_on_container_framing(tmp_path: Path) -> None:
    spec = AudioSpec(codec="pcm_s16le", samples=30000)
    wav = analyse(clip(tmp_path, "a.wav", audio=spec)).decoded[0]
    mkv = analyse(clip(tmp_path, "a.mkv", audio=spec)).decoded[0]
    small = analyse(
        clip(tmp_path, "b.mkv", audio=AudioSpec(codec="pcm_s16le", samples=30000, frame_size=300))
    ).decoded[0]
    assert len({wav.frames, mkv.frames, small.frames}) > 1  # framing really differs
    assert wav.root == mkv.root == small.root
    assert wav.content_digest == mkv.content_digest == small.content_digest
    other = analyse(clip(tmp_path, "c.wav", audio=AudioSpec(codec="pcm_s16le", samples=29999)))
    assert other.decoded[0].root != wav.root


# ------------------------------------------------- 11. a file changed while checked


def test_file_rewritten_during_decode_is_an_error(tmp_path: Path) -> None:
    path = clip(tmp_path, "a.mkv", video=VideoSpec())
    touched: list[int] = []

    def rewrite(_index: int, _frame: Any) -> None:
        if not touched:
            touched.append(1)
            with open(path, "ab") as f:
                f.write(b"\0" * 16)

    with pytest.raises(MediaError, match="changed while it was being checked"):
        analyse(path, on_frame=rewrite)


# ------------------------------------------------- 12. smaller findings


def test_video_timing_without_a_frame_rate_is_an_explicit_failure(tmp_path: Path) -> None:
    report = analyse(clip(tmp_path, "v.mp4", video=VideoSpec()))
    streams = tuple(msgspec.structs.replace(s, frame_rate=None) for s in report.probe.streams)
    report = msgspec.structs.replace(
        report, probe=msgspec.structs.replace(report.probe, streams=streams)
    )
    checks = checks_by_name(check_report(report, Expectations(video=VideoExpectation(frames=15))))
    assert not checks["video.continuity"].ok
    assert "no frame rate known" in checks["video.continuity"].message


def test_thresholds_file_keeps_default_perceptual_limits(tmp_path: Path) -> None:
    (tmp_path / "t.toml").write_text("[perceptual_max]\nother = 0.5\n")
    assert load_thresholds(tmp_path / "t.toml").perceptual_max == {"lpips": 0.01, "other": 0.5}
    (tmp_path / "u.toml").write_text("[perceptual_max]\nlpips = 0.02\n")
    assert load_thresholds(tmp_path / "u.toml").perceptual_max == {"lpips": 0.02}


@pytest.mark.parametrize("fmt", ["rgb565le", "x2rgb10le", "p010le", "y210le", "pal8"])
def test_packed_or_shifted_formats_are_not_measured(fmt: str) -> None:
    assert not_measurable(av.VideoFormat(fmt)) is not None


@pytest.mark.parametrize("fmt", ["yuv420p", "yuv420p10le", "nv12", "rgb24", "rgba64le", "gray"])
def test_plane_formats_are_measured(fmt: str) -> None:
    assert not_measurable(av.VideoFormat(fmt)) is None


def test_unequal_unmeasurable_frames_are_unavailable(tmp_path: Path) -> None:
    paths = []
    for name, nudge in (("a.nut", False), ("b.nut", True)):
        path = str(tmp_path / name)
        with av.open(path, "w") as container:
            stream = container.add_stream("rawvideo", rate=30)
            stream.width = stream.height = 8
            stream.pix_fmt = "rgb565le"
            for i in range(2):
                arr = np.full((8, 8), 0x1234 + i, dtype="<u2")
                if nudge and i == 1:
                    arr[0, 0] ^= 1
                frame = av.VideoFrame(8, 8, "rgb565le")
                (plane,) = frame.planes
                rows = np.zeros((8, plane.line_size // 2), dtype="<u2")
                rows[:, :8] = arr
                plane.update(rows.tobytes())
                frame.pts = i
                frame.time_base = Fraction(1, 30)
                for packet in stream.encode(frame):
                    container.mux(packet)
            for packet in stream.encode(None):
                container.mux(packet)
        paths.append(path)
    expect = Expectations(video=VideoExpectation(frames=2, frame_rate=30))
    assert compare(paths[0], paths[0], expect).verdict == "PASS"
    record = compare(paths[0], paths[1], expect)
    assert record.verdict == "UNAVAILABLE", record.reasons
    assert any("not measurable" in r for r in record.reasons)


def test_raw_adts_aac_priming_is_allowed_but_truncation_is_not(tmp_path: Path) -> None:
    expect = Expectations(audio=AudioExpectation(sample_rate=48000, channels=2, duration=0.5))
    ok = check(clip(tmp_path, "a.aac", audio=AudioSpec()), expect)
    assert ok.report.probe.container == "aac"
    assert ok.verdict == "PASS", failed(ok.checks)
    assert checks_by_name(ok.checks)["audio.padding"].observed >= 1024  # priming kept
    short = check(clip(tmp_path, "s.aac", audio=AudioSpec(samples=22000)), expect)
    assert "audio.samples" in failed(short.checks)
