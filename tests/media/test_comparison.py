"""Comparison verdicts (DESIGN.md precedence), metrics, scorers and records."""

from __future__ import annotations

import math
from fractions import Fraction
from pathlib import Path

import av
import msgspec
import numpy as np
import pytest
from helpers.media import (
    AV_EXPECT,
    AudioSpec,
    VideoSpec,
    clip,
    failed,
    lossless,
    multi_audio_clip,
    nudge_frame,
)

from evidencestore._canonical import decode
from evidencestore.errors import MediaError
from evidencestore.media import MEDIA_SCHEMA_TYPES, FrameScorer, analyse, check, compare
from evidencestore.media.comparison import compatibility, not_measurable
from evidencestore.media.records import (
    AudioExpectation,
    ComparisonRecord,
    Expectations,
    Thresholds,
    VideoExpectation,
)
from evidencestore.media.store import record_entry, store_record
from evidencestore.remotes import local_store
from evidencestore.storage import MemoryBlobStore
from evidencestore.testing.synth import video_planes

VIDEO = lossless()
AUDIO = AudioSpec()


@pytest.fixture(scope="module")
def clips(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    d = tmp_path_factory.mktemp("clips")
    return {
        "base": clip(d, "base.mp4", video=VIDEO, audio=AUDIO),
        "faststart": clip(
            d, "fs.mp4", video=VIDEO, audio=AUDIO, container_options={"movflags": "faststart"}
        ),
        "nudged": clip(d, "nudged.mp4", video=VIDEO, audio=AUDIO, video_hook=nudge_frame(7)),
        "short_a": clip(d, "short_a.mp4", video=VIDEO, audio=AudioSpec(samples=12000)),
        "short_b": clip(
            d,
            "short_b.mkv",
            video=VIDEO,
            audio=AudioSpec(samples=12000),
        ),
    }


def test_identical_decoded_outputs_pass(clips: dict[str, str]) -> None:
    record = compare(clips["base"], clips["faststart"], AV_EXPECT)
    assert record.verdict == "PASS", record.reasons
    assert record.reference.source.digest != record.candidate.source.digest  # different bytes
    assert [(e.type, e.equal) for e in record.equality] == [("video", True), ("audio", True)]
    assert record.metrics is None  # nothing to measure
    assert record.reference.valid and record.candidate.valid
    assert {"evidencestore", "pyav", "libavcodec", "numpy"} <= record.versions.keys()


def test_both_truncated_the_same_fail_for_both(clips: dict[str, str]) -> None:
    record = compare(clips["short_a"], clips["short_b"], AV_EXPECT)
    assert record.verdict == "FAIL"
    # They are exactly equal to each other, and that does not help.
    assert all(e.equal for e in record.equality)
    assert "audio.samples" in failed(record.reference.checks)
    assert "audio.samples" in failed(record.candidate.checks)
    assert any(r.startswith("reference: audio.samples") for r in record.reasons)
    assert any(r.startswith("candidate: audio.samples") for r in record.reasons)
    assert record.metrics is None


def test_invalid_candidate_fails_even_when_metrics_would_be_fine(clips: dict[str, str]) -> None:
    record = compare(clips["base"], clips["short_a"], AV_EXPECT)
    assert record.verdict == "FAIL"
    assert record.reference.valid and not record.candidate.valid


def test_one_lsb_change_is_inconclusive_with_exact_metrics(clips: dict[str, str]) -> None:
    record = compare(clips["base"], clips["nudged"], AV_EXPECT)
    assert record.verdict == "INCONCLUSIVE"
    video, audio = record.equality
    assert (video.equal, video.first_difference) == (False, 7)
    assert audio.equal
    assert record.metrics is not None and record.metrics.video is not None
    v = record.metrics.video
    assert (v.frames, v.identical_frames, v.identical) == (15, 14, False)
    frame7 = v.per_frame[7]
    assert not frame7.identical
    luma = frame7.planes[0]
    assert luma.mse == pytest.approx(1 / (64 * 64))
    assert luma.psnr == pytest.approx(10 * math.log10(255**2 * 64 * 64))
    assert v.min_psnr == pytest.approx(luma.psnr)
    # Identical planes: PSNR infinite, written as null with identical=true, no cap.
    assert frame7.planes[1].psnr is None and frame7.planes[1].identical
    assert all(p.psnr is None and p.identical for p in v.per_frame[0].planes)
    assert record.metrics.audio is not None and record.metrics.audio.identical
    assert record.metrics.audio.snr_db is None
    assert all(c.ok for c in record.threshold_checks)
    assert "not a no-degradation certificate" in record.reasons[0]


def test_violated_threshold_fails(clips: dict[str, str]) -> None:
    strict = Thresholds(video_psnr_min=100.0)
    record = compare(clips["base"], clips["nudged"], AV_EXPECT, strict)
    assert record.verdict == "FAIL"
    assert failed(record.threshold_checks) == {"threshold.video_psnr_min"}
    assert record.thresholds.video_psnr_min == 100.0


def test_geometry_mismatch_is_unavailable_without_metrics(tmp_path: Path) -> None:
    expect = Expectations(video=VideoExpectation(frames=2, frame_rate=30))
    a = clip(tmp_path, "720.mp4", video=VideoSpec(width=1280, height=720, frames=2))
    b = clip(tmp_path, "704.mp4", video=VideoSpec(width=1280, height=704, frames=2))
    record = compare(a, b, expect)
    assert record.verdict == "UNAVAILABLE"
    assert failed(record.compatibility) == {"compat.video.height"}
    height = next(c for c in record.compatibility if c.name == "compat.video.height")
    assert (height.expected, height.observed) == (720, 704)
    assert record.metrics is None and record.threshold_checks == ()


def test_sample_rate_mismatch_is_unavailable(tmp_path: Path) -> None:
    expect = Expectations(audio=AudioExpectation(channels=2, duration=0.5))
    a = clip(tmp_path, "48.wav", audio=AudioSpec(codec="pcm_s16le", rate=48000, samples=24000))
    b = clip(tmp_path, "44.wav", audio=AudioSpec(codec="pcm_s16le", rate=44100, samples=22050))
    record = compare(a, b, expect)
    assert record.reference.valid and record.candidate.valid
    assert record.verdict == "UNAVAILABLE"
    assert "compat.audio.sample_rate" in failed(record.compatibility)
    assert record.metrics is None


def test_audio_metrics_for_a_one_lsb_pcm_change(tmp_path: Path) -> None:
    def bump(start: int, data: np.ndarray) -> np.ndarray:
        if start == 0:
            data = data.copy()
            data[1, 5] += np.float32(1 / 32767)
        return data

    spec = AudioSpec(codec="pcm_s16le")
    expect = Expectations(audio=AudioExpectation(sample_rate=48000, channels=2, samples=24000))
    record = compare(
        clip(tmp_path, "a.wav", audio=spec),
        clip(tmp_path, "b.wav", audio=spec, audio_hook=bump),
        expect,
    )
    assert record.verdict == "INCONCLUSIVE"
    assert record.metrics is not None and record.metrics.audio is not None
    a = record.metrics.audio
    assert (a.samples, a.channels, a.identical) == (24000, 2, False)
    assert a.max_abs_diff == pytest.approx(1 / 32768)
    assert a.rms_diff == pytest.approx(math.sqrt((1 / 32768) ** 2 / 48000))
    assert a.snr_db is not None and a.snr_db > 80
    assert record.metrics.video is None


def test_opus_in_ogg_and_webm_compare_equal(tmp_path: Path) -> None:
    expect = Expectations(audio=AudioExpectation(sample_rate=48000, duration=0.5))
    ogg = clip(tmp_path, "a.ogg", audio=AudioSpec(codec="libopus"))
    webm = clip(tmp_path, "a.webm", audio=AudioSpec(codec="libopus"))
    record = compare(ogg, webm, expect)
    assert record.verdict == "PASS", record.reasons


class MeanAbsDiff:
    """A trivial perceptual scorer: mean absolute RGB difference per frame."""

    name = "mad"
    batch_size = 4

    def __init__(self) -> None:
        self.shapes: list[tuple[int, ...]] = []

    def score(self, reference: np.ndarray, candidate: np.ndarray) -> list[float]:
        assert reference.dtype == np.uint8 and reference.shape == candidate.shape
        self.shapes.append(reference.shape)
        diff = np.abs(reference.astype(np.int16) - candidate.astype(np.int16))
        return [float(x) for x in diff.mean(axis=(1, 2, 3))]

    def provenance(self) -> dict[str, str]:
        return {"weights": "none", "version": "test"}


def test_scorer_hook_records_scores_and_never_passes(clips: dict[str, str]) -> None:
    scorer = MeanAbsDiff()
    assert isinstance(scorer, FrameScorer)
    loose = Thresholds(perceptual_max={"mad": 1.0})
    record = compare(clips["base"], clips["nudged"], AV_EXPECT, loose, scorers=[scorer])
    assert record.verdict == "INCONCLUSIVE"  # threshold met: still not PASS
    assert [s[0] for s in scorer.shapes] == [4, 4, 4, 3]
    assert scorer.shapes[0][1:] == (64, 64, 3)
    assert record.metrics is not None and record.metrics.video is not None
    v = record.metrics.video
    scores = [f.perceptual["mad"] for f in v.per_frame]
    assert scores[0] == 0.0 and scores[7] > 0.0
    assert v.perceptual["mad"].max == pytest.approx(max(scores))
    assert v.perceptual["mad"].mean == pytest.approx(sum(scores) / 15)
    assert record.scorers == {"mad": {"weights": "none", "version": "test"}}
    check = next(c for c in record.threshold_checks if c.name == "threshold.perceptual.mad")
    assert check.ok and check.expected == 1.0

    strict = Thresholds(perceptual_max={"mad": 0.0})
    record = compare(clips["base"], clips["nudged"], AV_EXPECT, strict, scorers=[MeanAbsDiff()])
    assert record.verdict == "FAIL"
    assert failed(record.threshold_checks) == {"threshold.perceptual.mad"}


def test_record_is_a_blob_and_a_bundle_entry(clips: dict[str, str]) -> None:
    record = compare(clips["base"], clips["nudged"], AV_EXPECT)
    store = MemoryBlobStore()
    desc = store_record(record, store)
    assert desc.media_type == "application/vnd.evidencestore.media-comparison+json"
    assert desc.annotations["org.evidencestore.media.verdict"] == "INCONCLUSIVE"
    back = decode(store.get(desc.digest), ComparisonRecord)
    assert back == record
    entry = record_entry(record, "comparisons/base-vs-nudged.json", store)
    assert entry.location == "store" and entry.descriptor.digest == desc.digest
    assert back.reference.source.digest == record.reference.source.digest
    assert back.thresholds == Thresholds()  # defaults written out explicitly
    assert b'"video_psnr_min":40.0' in store.get(desc.digest)


def test_schema_types_generate_json_schemas() -> None:
    assert {"comparison-record", "media-report", "expectations", "thresholds"} <= set(
        MEDIA_SCHEMA_TYPES
    )
    for cls in MEDIA_SCHEMA_TYPES.values():
        schema = msgspec.json.schema(cls)
        assert "$defs" in schema


def test_inputs_by_digest_come_from_the_repository_store(
    tmp_path: Path, clips: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = tmp_path / "repo"
    (repo / "evidence").mkdir(parents=True)
    store = local_store(repo)
    desc = store.put_file(clips["base"])
    monkeypatch.chdir(repo)
    record = compare(desc.digest, clips["faststart"], AV_EXPECT)
    assert record.verdict == "PASS"
    assert record.reference.source.digest == desc.digest
    assert record.reference.name == desc.digest
    with pytest.raises(MediaError, match="cannot get media from the store"):
        compare("blake3:" + "0" * 64, clips["base"], AV_EXPECT)


AUDIO_4800 = Expectations(audio=AudioExpectation(sample_rate=48000, channels=2, samples=4800))


# every stream, not only the first
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


# colour metadata
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


# smaller findings
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


def test_equal_video_beside_unequal_audio_is_measured_without_reading_samples(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pair whose video roots match has each plane's metrics of identical samples (MSE 0,
    no PSNR) without reading them: the same record a sample-by-sample measurement gives."""
    from evidencestore._canonical import canonical
    from evidencestore.media import comparison
    from evidencestore.media.source import resolve

    def blip(first: int, data: np.ndarray) -> np.ndarray:
        data = data.copy()
        if first == 0:
            data[0, 100:200] += 0.01
        return data

    a = clip(tmp_path, "a.mp4", video=VIDEO, audio=AUDIO)
    b = clip(tmp_path, "b.mp4", video=VIDEO, audio=AUDIO, audio_hook=blip)
    shortcut = compare(a, b, AV_EXPECT)
    kinds = {e.type: e.equal for e in shortcut.equality}
    assert kinds == {"video": True, "audio": False}
    assert shortcut.metrics is not None  # measured (the audio blip fails a threshold)
    got = shortcut.metrics.video
    assert got is not None and got.identical and got.frames == 15 and got.max_mse == 0.0
    assert [len(f.planes) for f in got.per_frame] == [3] * 15
    measured = comparison._video_metrics(resolve(a), resolve(b), (), 0)  # every sample read
    assert canonical(measured) == canonical(got)

    # The shortcut really reads no sample; an unequal pair still does.
    def no_samples(frame: object) -> list[tuple[np.ndarray, int]]:
        raise AssertionError("samples read")

    monkeypatch.setattr(comparison, "_plane_arrays", no_samples)
    assert canonical(compare(a, b, AV_EXPECT)) == canonical(shortcut)
    nudged = clip(tmp_path, "n.mp4", video=VIDEO, audio=AUDIO, video_hook=nudge_frame(2))
    with pytest.raises(AssertionError, match="samples read"):
        compare(a, nudged, AV_EXPECT)
