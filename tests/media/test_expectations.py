"""Checks of one decoded file against the request's expectations."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pytest
from helpers.media import (
    AV_EXPECT,
    AudioSpec,
    VideoSpec,
    audio_gap_hook,
    checks_by_name,
    clip,
    failed,
    lossless,
)

from evidencestore.cli import main
from evidencestore.errors import MediaError
from evidencestore.media import (
    analyse,
    check,
    compare,
    load_expectations,
    load_thresholds,
    verify_report,
    with_overrides,
)
from evidencestore.media.expectations import expectations_from_mapping
from evidencestore.media.records import AudioExpectation, Expectations, Thresholds, VideoExpectation
from evidencestore.media.source import MediaSource

AUDIO_ONLY = Expectations(audio=AudioExpectation(sample_rate=48000, channels=2, duration=0.5))
VIDEO_ONLY = Expectations(
    video=VideoExpectation(width=64, height=64, pix_fmt="yuv420p", frame_rate=30, duration=0.5)
)


@pytest.mark.parametrize("faststart", [False, True])
def test_h264_aac_mp4_passes_with_aac_priming_and_padding(tmp_path: Path, faststart: bool) -> None:
    options = {"movflags": "faststart"} if faststart else None
    path = clip(tmp_path, "a.mp4", video=VideoSpec(), audio=AudioSpec(), container_options=options)
    result = check(path, AV_EXPECT)
    assert result.verdict == "PASS", failed(result.checks)
    c = checks_by_name(result.checks)
    # The priming frame was trimmed by the edit list: audio starts at 0.
    assert (c["audio.first_timestamp"].expected, c["audio.first_timestamp"].observed) == (0.0, 0.0)
    # Tail padding: 24576 decoded for 24000 requested; the sample table presents 24000
    # (judged exactly), and the 576 decoded beyond it are recorded as padding.
    assert (c["audio.samples"].expected, c["audio.samples"].observed) == (24000, 24000)
    assert (c["audio.padding"].expected, c["audio.padding"].observed) == (1024, 576)
    assert "decoded 24576" in c["audio.samples"].message
    assert "MP4/MOV sample table" in c["audio.samples"].message
    assert (c["video.frames"].expected, c["video.frames"].observed) == (15, 15)
    assert c["video.last_timestamp"].observed == pytest.approx(14 / 30)
    assert c["video.end_time"].observed == pytest.approx(0.5)
    assert c["video.continuity"].observed == 0
    assert c["video.declared_frames"].ok and c["video.declared_duration"].ok
    assert c["audio.declared_samples"].ok


@pytest.mark.parametrize(
    ("name", "codec", "padding"),
    [("o.ogg", "libopus", 0), ("o.webm", "libopus", 0), ("o.mp4", "libopus", 648)],
)
def test_opus_in_ogg_webm_mp4_passes(tmp_path: Path, name: str, codec: str, padding: int) -> None:
    result = check(clip(tmp_path, name, audio=AudioSpec(codec=codec)), AUDIO_ONLY)
    assert result.verdict == "PASS", failed(result.checks)
    c = checks_by_name(result.checks)
    assert (c["audio.padding"].expected, c["audio.padding"].observed) == (960, padding)
    if name.endswith(".webm"):
        # 1/1000 time base: frame starts are rounded, within half a tick.
        assert result.report.decoded[0].time_base == "1/1000"
        assert c["audio.continuity"].ok


def test_pcm_in_wav_must_be_exact(tmp_path: Path) -> None:
    ok = check(clip(tmp_path, "p.wav", audio=AudioSpec(codec="pcm_s16le")), AUDIO_ONLY)
    assert ok.verdict == "PASS", failed(ok.checks)
    assert checks_by_name(ok.checks)["audio.padding"].expected == 0
    # One sample too many is not padding for PCM.
    long = check(
        clip(tmp_path, "l.wav", audio=AudioSpec(codec="pcm_s16le", samples=24001)), AUDIO_ONLY
    )
    assert long.verdict == "FAIL"
    c = checks_by_name(long.checks)
    assert not c["audio.samples"].ok
    assert (c["audio.samples"].expected, c["audio.samples"].observed) == (24000, 24001)


def test_video_only_and_audio_only_files(tmp_path: Path) -> None:
    video = check(clip(tmp_path, "v.mkv", video=VideoSpec()), VIDEO_ONLY)
    assert video.verdict == "PASS", failed(video.checks)
    # MKV time base 1/1000: 1/30 s steps are rounded, still within half a tick.
    assert video.report.decoded[0].time_base == "1/1000"
    # A video-only file checked against audio expectations fails by name.
    missing = check(clip(tmp_path, "v2.mp4", video=VideoSpec()), AV_EXPECT)
    assert missing.verdict == "FAIL"
    assert failed(missing.checks) == {"streams.audio"}
    assert "expected an audio stream" in checks_by_name(missing.checks)["streams.audio"].message


def test_truncated_audio_fails_against_the_request(tmp_path: Path) -> None:
    path = clip(tmp_path, "short.mp4", video=VideoSpec(), audio=AudioSpec(samples=12000))
    result = check(path, AV_EXPECT)
    assert result.verdict == "FAIL"
    assert {"audio.samples", "audio.padding", "audio.end_time"} <= failed(result.checks)
    c = checks_by_name(result.checks)
    assert c["audio.samples"].expected == 24000
    assert c["audio.samples"].observed < 24000
    assert "short (truncated)" in c["audio.samples"].message


def test_gap_in_audio_timestamps_fails_continuity(tmp_path: Path) -> None:
    for name in ("gap.mp4", "gap.mkv"):
        path = clip(tmp_path, name, audio=AudioSpec(), packet_hook=audio_gap_hook())
        result = check(path, AUDIO_ONLY)
        assert result.verdict == "FAIL"
        c = checks_by_name(result.checks)
        assert not c["audio.continuity"].ok
        assert c["audio.continuity"].observed == 1
        assert "gap of 0.100000 s" in c["audio.continuity"].message
        # Sample count alone would not have caught it.
        assert c["audio.samples"].ok


def test_faststart_mp4_cut_in_the_middle_fails(tmp_path: Path) -> None:
    path = clip(
        tmp_path,
        "fs.mp4",
        video=VideoSpec(frames=60),
        audio=AudioSpec(samples=96000),
        container_options={"movflags": "faststart"},
    )
    data = Path(path).read_bytes()
    cut = MediaSource.from_bytes(data[: len(data) // 2], name="cut.mp4")
    expect = with_overrides(AV_EXPECT, video={"frames": 60}, audio={"duration": 2.0})
    result = check(cut, expect)
    assert result.verdict == "FAIL"
    bad = failed(result.checks)
    assert {"decode.errors", "video.frames", "video.declared_frames", "audio.samples"} <= bad
    c = checks_by_name(result.checks)
    assert c["video.declared_frames"].expected == 60
    assert "Invalid data" in c["decode.errors"].message


@pytest.mark.parametrize(
    ("content", "check_name", "text"),
    [
        (b"", "open", "empty file (0 bytes)"),
        (np.random.default_rng(0).bytes(4096), "open", "not a readable media container"),
        (b";FFMETADATA1\ntitle=no streams\n", "streams.decodable", "0 audio/video streams"),
    ],
)
def test_unusable_inputs_fail_with_a_clear_message(
    tmp_path: Path, content: bytes, check_name: str, text: str
) -> None:
    path = tmp_path / "input.bin"
    path.write_bytes(content)
    result = check(path, AV_EXPECT)
    assert result.verdict == "FAIL"
    c = checks_by_name(result.checks)
    assert not c[check_name].ok
    assert text in c[check_name].message


def test_wrong_geometry_rate_and_format_are_named(tmp_path: Path) -> None:
    path = clip(
        tmp_path,
        "a.mp4",
        video=VideoSpec(width=32, height=48),
        audio=AudioSpec(rate=44100, samples=22050),
    )
    result = check(path, AV_EXPECT)
    bad = failed(result.checks)
    assert {"video.width", "video.height", "audio.sample_rate"} <= bad
    c = checks_by_name(result.checks)
    assert (c["video.width"].expected, c["video.width"].observed) == (64, 32)
    assert (c["audio.sample_rate"].expected, c["audio.sample_rate"].observed) == (48000, 44100)


def test_expectations_from_toml_json_and_flags(tmp_path: Path) -> None:
    toml = tmp_path / "e.toml"
    toml.write_text(
        '[video]\nwidth = 64\nheight = 64\nframe_rate = "30000/1001"\nframes = 15\n'
        "[audio]\nsample_rate = 48000\nduration = 0.5\n"
    )
    exp = load_expectations(toml)
    assert exp.video is not None and exp.video.frame_rate == "30000/1001"
    jsn = tmp_path / "e.json"
    jsn.write_text(json.dumps({"audio": {"samples": 24000, "channels": 2}}))
    assert load_expectations(jsn).audio == AudioExpectation(samples=24000, channels=2)
    merged = with_overrides(exp, video={"frames": 30, "width": None}, audio={"channels": 1})
    assert merged.video is not None and merged.video.frames == 30 and merged.video.width == 64
    assert merged.audio == AudioExpectation(sample_rate=48000, duration=0.5, channels=1)


def test_bad_expectation_files_are_media_errors(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("[video]\nwidth = 'wide'\n")
    with pytest.raises(MediaError, match=r"bad\.toml: .*width"):
        load_expectations(bad)
    unknown = tmp_path / "unknown.toml"
    unknown.write_text("[video]\nwidht = 64\n")
    with pytest.raises(MediaError, match="widht"):
        load_expectations(unknown)
    rate = tmp_path / "rate.toml"
    rate.write_text("[video]\nframe_rate = 'fast'\n")
    with pytest.raises(MediaError, match="invalid frame rate"):
        load_expectations(rate)


# the request must give a length
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


# timing checks need frame records
def test_report_without_frame_records_fails_loudly(tmp_path: Path) -> None:
    path = clip(tmp_path, "a.mp4", video=VideoSpec(), audio=AudioSpec())
    checks = verify_report(analyse(path, keep_frames=False), AV_EXPECT)
    assert {"video.frame_records", "audio.frame_records"} <= failed(checks)
    assert not failed(verify_report(analyse(path), AV_EXPECT))


# expectation and threshold values
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


# smaller findings
def test_video_timing_without_a_frame_rate_is_an_explicit_failure(tmp_path: Path) -> None:
    report = analyse(clip(tmp_path, "v.mp4", video=VideoSpec()))
    streams = tuple(msgspec.structs.replace(s, frame_rate=None) for s in report.probe.streams)
    report = msgspec.structs.replace(
        report, probe=msgspec.structs.replace(report.probe, streams=streams)
    )
    checks = checks_by_name(verify_report(report, Expectations(video=VideoExpectation(frames=15))))
    assert not checks["video.continuity"].ok
    assert "no frame rate known" in checks["video.continuity"].message


def test_thresholds_file_keeps_default_perceptual_limits(tmp_path: Path) -> None:
    (tmp_path / "t.toml").write_text("[perceptual_max]\nother = 0.5\n")
    assert load_thresholds(tmp_path / "t.toml").perceptual_max == {"lpips": 0.01, "other": 0.5}
    (tmp_path / "u.toml").write_text("[perceptual_max]\nlpips = 0.02\n")
    assert load_thresholds(tmp_path / "u.toml").perceptual_max == {"lpips": 0.02}


def test_raw_adts_aac_priming_is_allowed_but_truncation_is_not(tmp_path: Path) -> None:
    expect = Expectations(audio=AudioExpectation(sample_rate=48000, channels=2, duration=0.5))
    ok = check(clip(tmp_path, "a.aac", audio=AudioSpec()), expect)
    assert ok.report.probe.container == "aac"
    # Every check passes, but raw ADTS cannot state its length: bounded, not PASS.
    assert ok.verdict == "INCONCLUSIVE" and not failed(ok.checks) and ok.bounds
    assert checks_by_name(ok.checks)["audio.padding"].observed >= 1024  # priming kept
    short = check(clip(tmp_path, "s.aac", audio=AudioSpec(samples=22000)), expect)
    assert "audio.samples" in failed(short.checks)


def test_media_of_an_absent_digest_is_not_found(tmp_path: Path) -> None:
    """``except NotFoundError`` catches it (as any absent digest), ``MediaError`` too; a
    present but corrupt blob stays a MediaError only (the negative control)."""
    pytest.importorskip("av")
    from evidencestore import BlobNotFoundError, MediaError, NotFoundError, media
    from evidencestore.config import init_repository, local_store

    init_repository(tmp_path)
    absent = "blake3:" + "0" * 64
    with pytest.raises(NotFoundError) as info:
        media.check(absent, media.Expectations(), root=tmp_path)
    assert isinstance(info.value, BlobNotFoundError) and isinstance(info.value, MediaError)
    assert absent in str(info.value) and "cannot get media from the store" in str(info.value)
    digest = local_store(tmp_path).put(b"not a video at all").digest
    blob = local_store(tmp_path).path_of(digest)
    blob.chmod(0o644)
    blob.write_bytes(b"not a video at all, changed")
    with pytest.raises(MediaError) as info:
        media.check(digest, media.Expectations(), root=tmp_path)
    assert not isinstance(info.value, NotFoundError)
