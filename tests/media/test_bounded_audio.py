"""Bounded audio lengths at the surface: ``media check`` / ``compare`` exit codes and
output, the comparison record and its HTML report (issue 37, items 1 and 4)."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.media import AudioSpec, VideoSpec, clip

from evidencestore.cli import main
from evidencestore.media.comparison import compare

EXPECT = "[audio]\nsample_rate = 48000\nchannels = 2\nsamples = 48000\n"


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    d = tmp_path_factory.mktemp("bounded")
    (d / "expect.toml").write_text(EXPECT)
    return {
        "expect": str(d / "expect.toml"),
        "adts": clip(d, "a.aac", audio=AudioSpec(samples=48000)),
        "adts2": clip(d, "b.aac", audio=AudioSpec(samples=48000)),
        "cut": clip(d, "c.aac", audio=AudioSpec(samples=48000 - 500)),
        "mp4": clip(d, "a.m4a", audio=AudioSpec(samples=48000), format="mp4"),
        "mp4cut": clip(d, "c.m4a", audio=AudioSpec(samples=47999), format="mp4"),
    }


def test_media_check_says_inconclusive_and_names_the_bound(
    files: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    for name in ("adts", "cut"):  # 500 samples short cannot be seen: the same answer
        code = main(["media", "check", files[name], "--expect", files["expect"]])
        out = capsys.readouterr().out
        assert code == 3, out
        assert f"{files[name]}: INCONCLUSIVE" in out
        assert "length bounded, not verified: up to " in out and " ms at 48000 Hz" in out
        assert "raw ADTS: no edit list, no end trimming" in out
        code = main(["media", "check", files[name], "--expect", files["expect"],
                     "--audio-length", "bounded"])  # fmt: skip
        out = capsys.readouterr().out
        assert code == 0 and ": PASS" in out and "length bounded, not verified" in out
    # A length the container states: PASS, and one sample short FAILs (negative control).
    assert main(["media", "check", files["mp4"], "--expect", files["expect"]]) == 0
    assert main(["media", "check", files["mp4cut"], "--expect", files["expect"]]) == 1
    assert "not verified" not in capsys.readouterr().out


def test_compare_of_equal_bounded_outputs_is_never_pass_by_default(
    files: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["media", "compare", files["adts"], files["adts2"], "--expect", files["expect"]]
    html = tmp_path / "r.html"
    code = main([*argv, "--html", str(html)])
    out = capsys.readouterr().out
    assert code == 3 and out.startswith("INCONCLUSIVE")
    assert "reference: audio stream #0: length bounded, not verified" in out
    assert 'audio_length = "bounded"' in out
    assert "length bounded, not verified" in html.read_text()
    assert main([*argv, "--audio-length", "bounded"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("PASS") and "candidate: audio stream #0: length bounded" in out
    # The record says which policy it was judged under.
    from evidencestore.media.expectations import load_expectations

    record = compare(files["adts"], files["adts2"], load_expectations(files["expect"]),
                     audio_length="bounded")  # fmt: skip
    assert record.verdict == "PASS" and record.audio_length == "bounded"
    assert record.reference.bounds and record.reference.bounds == record.candidate.bounds


def test_a_decode_shorter_than_the_request_fails_even_when_bounded(tmp_path: Path) -> None:
    from evidencestore.media.expectations import check
    from evidencestore.media.records import AudioExpectation, Expectations

    short = clip(tmp_path, "s.aac", audio=AudioSpec(samples=48000 - 2048))
    exp = Expectations(audio=AudioExpectation(samples=48000))
    for policy in ("exact", "bounded"):
        result = check(short, exp, audio_length=policy)  # type: ignore[arg-type]
        assert result.verdict == "FAIL" and not result.bounds


def test_fragmented_mp4_without_a_priming_edit_presents_the_priming(tmp_path: Path) -> None:
    """FFmpeg's fragmented MP4 with ``empty_moov`` (no room for the priming edit list)
    presents AAC's 1024 priming samples as audio and holds the first video frame that much
    longer: what the file presents is not what was asked for, and the check says so;
    ``delay_moov`` writes the edit list and PASSes."""
    from evidencestore.media.expectations import check
    from evidencestore.media.records import AudioExpectation, Expectations, VideoExpectation
    from evidencestore.testing.synth import write_interleaved

    exp = Expectations(video=VideoExpectation(frame_rate=24, frames=6),
                       audio=AudioExpectation(samples=12000))  # fmt: skip
    video = VideoSpec(width=64, height=48, rate=24, frames=6)
    for flags, verdict in (("frag_keyframe+empty_moov", "FAIL"),
                           ("frag_keyframe+delay_moov", "PASS")):  # fmt: skip
        path = write_interleaved(tmp_path / f"{verdict}.mp4", video=video,
                                 audio=[AudioSpec(samples=12000)], format="mp4",
                                 container_options={"movflags": flags})  # fmt: skip
        result = check(path, exp)
        assert result.verdict == verdict
        if verdict == "FAIL":
            samples = next(c for c in result.checks if c.name == "audio.samples")
            assert "1024 samples too many" in samples.message
