"""Comparison reports: generated from records made here (PyAV-encoded media), opened in
headless Chromium with the network cut off."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("jinja2")
pytest.importorskip("matplotlib")

from helpers.browser import assert_clean_page, needs_chromium, open_page, png_variance
from helpers.media import AudioSpec, clip, lossless, nudge_frame
from helpers.remotes import run
from helpers.repos import init_repo

from evidencestore._canonical import pretty
from evidencestore.bundle import create_bundle
from evidencestore.media.comparison import compare
from evidencestore.media.records import (
    AudioExpectation,
    ComparisonRecord,
    Expectations,
    Thresholds,
    VideoExpectation,
)
from evidencestore.media.source import MediaSource
from evidencestore.media.store import record_bytes
from evidencestore.remotes import local_store
from evidencestore.report import render_comparison_html, render_report

FRAMES = 90
SAMPLES = 144000  # 3 s at 48 kHz
CLICK_AT = 24000  # one sample, 0.5 s in: audio block 23 of 1024 samples
EXPECT = Expectations(
    video=VideoExpectation(width=64, height=64, pix_fmt="yuv420p", frame_rate=30, frames=FRAMES),
    audio=AudioExpectation(sample_rate=48000, channels=2, samples=SAMPLES),
)


def _click(start: int, data: Any) -> Any:
    if start <= CLICK_AT < start + data.shape[1]:
        data = data.copy()
        data[:, CLICK_AT - start] += 0.005
    return data


@pytest.fixture(scope="module")
def comparison_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = init_repo(tmp_path_factory.mktemp("repo") / "r")
    assert run("init", "--root", str(root))[0] == 0
    audio = AudioSpec(codec="pcm_s16le", samples=SAMPLES)
    media = root / ".staging" / "media"
    media.mkdir(parents=True)
    clip(media, "ref.mkv", video=lossless(frames=FRAMES), audio=audio)
    clip(
        media,
        "cand.mkv",
        video=lossless(frames=FRAMES),
        audio=audio,
        video_hook=nudge_frame(75),
        audio_hook=_click,
    )
    create_bundle(
        root,
        "media",
        [media / "ref.mkv", media / "cand.mkv"],
        store=local_store(root),
        external=["*.mkv"],
        created="2026-12-01T00:00:00Z",
    )
    return root


def _record(comparison_repo: Path, cand: str = "cand.mkv", **kw: Any) -> ComparisonRecord:
    media = comparison_repo / ".staging" / "media"
    return compare(
        MediaSource.from_path(media / "ref.mkv"),
        MediaSource.from_path(media / cand),
        EXPECT,
        **kw,
    )


def _bundle_record(comparison_repo: Path, name: str, record: ComparisonRecord) -> Path:
    out = comparison_repo / ".staging" / name
    out.mkdir(parents=True)
    (out / "comparison.json").write_bytes(record_bytes(record))
    create_bundle(
        comparison_repo,
        name,
        [out / "comparison.json"],
        store=local_store(comparison_repo),
        created="2026-12-01T00:00:00Z",
    )
    return out / "comparison.json"


@pytest.fixture(scope="module")
def differing(comparison_repo: Path) -> tuple[ComparisonRecord, Path]:
    record = _record(comparison_repo)
    _bundle_record(comparison_repo, "cmp-lsb", record)
    out = comparison_repo.parent / "lsb.html"
    code, stdout, err = run("report", "cmp-lsb", "-o", str(out), "--root", str(comparison_repo))
    assert code == 0, err
    assert "comparison report of blake3:" in stdout
    return record, out


def _assert_clean_page(result: Any, record: ComparisonRecord, html: str) -> None:
    assert_clean_page(result, record.verdict, pretty(record), html)
    assert result.facts["scrollWidth"] <= 1280


@needs_chromium
def test_lsb_change_in_frame_75_is_worst_frame_and_plot_minimum(
    differing: tuple[ComparisonRecord, Path],
) -> None:
    record, out = differing
    assert record.verdict == "INCONCLUSIVE"
    # Independently of the page: frame 75 is the only frame that differs.
    assert record.metrics is not None and record.metrics.video is not None
    psnr = [
        min((p.psnr for p in f.planes if p.psnr is not None), default=None)
        for f in record.metrics.video.per_frame
    ]
    assert [i for i, v in enumerate(psnr) if v is not None] == [75]
    html = out.read_text()
    result = open_page(out)
    _assert_clean_page(result, record, html)
    facts = result.facts
    assert facts["worst"] == ["75"]
    video_plot, audio_plot = facts["plots"][0], facts["plots"][1]
    assert video_plot == {"frames": "90", "identicalFrames": "89", "minFrame": "75"}
    assert "worst-frame-75" in facts["ids"]  # the plot's marked minimum
    assert audio_plot["maxBlock"] == str(CLICK_AT // 1024)
    # Reference, candidate and amplified difference of frame 75, at native size.
    assert [img[:2] for img in facts["imgs"]] == [[64, 64]] * 3
    assert all(img[2] > 0 for img in facts["imgs"])
    assert "Worst frame: frame 75" in facts["text"]
    assert "largest 1, amplified 255x" in facts["text"]  # the thumbnails are of frame 75
    assert result.pdf.startswith(b"%PDF") and len(result.pdf) > 20_000  # print media
    assert "89 of 90" in facts["text"]
    assert "INCONCLUSIVE" in facts["text"] and "not a no-degradation certificate" in facts["text"]
    bundle_digest = next(d for w, d in _provenance(html) if w == "bundle cmp-lsb")
    assert bundle_digest in facts["digests"]


def _provenance(html: str) -> list[tuple[str, str]]:
    rows = re.findall(r"<tr><td><code>([^<]+)</code></td><td><span class=\"digest-row\">"
                      r"<code class=\"digest\" data-digest=\"(blake3:[0-9a-f]{64})\"", html)  # fmt: skip
    return [(w, d) for w, d in rows]


@needs_chromium
def test_phone_width_has_no_horizontal_overflow(differing: tuple[ComparisonRecord, Path]) -> None:
    _, out = differing
    result = open_page(out, widths=(390,))
    assert result.errors == [] and result.failed == []
    assert result.facts["scrollWidth"] <= 390  # wide tables scroll inside their wrappers
    assert png_variance(result.screenshots[390]) > 100


@needs_chromium
def test_identical_pair_shows_every_frame_identical(comparison_repo: Path) -> None:
    record = _record(comparison_repo, cand="ref.mkv")
    assert record.verdict == "PASS" and record.metrics is None
    path = _bundle_record(comparison_repo, "cmp-same", record)
    out = comparison_repo.parent / "same.html"
    assert run("report", str(path), "-o", str(out))[0] == 0
    result = open_page(out)
    _assert_clean_page(result, record, out.read_text())
    facts = result.facts
    assert facts["identicalAll"] == [str(FRAMES)]
    assert facts["plots"][0] == {"frames": str(FRAMES), "identicalFrames": str(FRAMES)}
    assert facts["worst"] == []
    assert f"all {FRAMES} of {FRAMES} decoded frames are exactly equal" in facts["text"]
    assert "Every decoded sample identical" in facts["text"]


def test_threshold_violation_reads_fail_with_the_failed_check(comparison_repo: Path) -> None:
    record = _record(comparison_repo, thresholds=Thresholds(video_psnr_min=90.0))
    assert record.verdict == "FAIL"
    html = render_comparison_html(record, root=comparison_repo)
    assert 'data-verdict="FAIL"' in html and 'class="verdict v-FAIL"' in html
    assert '<tr class="failed"><td><code>threshold.video_psnr_min</code>' in html
    assert "threshold 90 dB" in html  # drawn on the plot


def test_media_compare_writes_html(comparison_repo: Path) -> None:
    media = comparison_repo / ".staging" / "media"
    out = comparison_repo.parent / "cli.html"
    rec = comparison_repo.parent / "cli.json"
    code, _, err = run(
        "media", "compare", str(media / "ref.mkv"), str(media / "cand.mkv"),
        "--expect", str(_expect_file(comparison_repo)), "--html", str(out), "--record", str(rec),
    )  # fmt: skip
    assert code == 3, err
    html = out.read_text()
    assert 'data-verdict="INCONCLUSIVE"' in html and 'data-min-frame="75"' in html
    # The page names the digest of the record file written beside it.
    from evidencestore.digest import hash_bytes

    assert hash_bytes(rec.read_bytes()).digest in html
    assert html.count("<img ") == 3


def _expect_file(comparison_repo: Path) -> Path:
    path = comparison_repo.parent / "expect.json"
    path.write_bytes(pretty(EXPECT))
    return path


def test_record_outside_repository_names_missing_media(
    comparison_repo: Path, tmp_path: Path
) -> None:
    record = _record(comparison_repo)
    path = tmp_path / "c.json"
    path.write_bytes(record_bytes(record))
    rendered = render_report(None, str(path))
    assert rendered.kind == "comparison"
    assert "Thumbnails omitted: media not available" in rendered.html
    # the title shows the names, not this machine's absolute paths (the table keeps them)
    assert record.reference.name == str(comparison_repo / ".staging" / "media" / "ref.mkv")
    assert "<title>ref.mkv vs cand.mkv</title>" in rendered.html
    inside = render_comparison_html(record, root=comparison_repo)
    assert "<title>.staging/media/ref.mkv vs .staging/media/cand.mkv</title>" in inside
    assert record.reference.source.digest in rendered.html
    assert "<img " not in rendered.html


def test_report_target_errors(comparison_repo: Path, tmp_path: Path) -> None:
    code, _, err = run(
        "report", "no-such-thing", "-o", str(tmp_path / "x.html"), "--root", str(comparison_repo)
    )
    assert code == 2
    assert "no-such-thing: not a record file, a digest in the store, or a registered bundle" in err
    other = tmp_path / "other.json"
    other.write_text('{"kind": "something-else"}')
    code, _, err = run("report", str(other), "-o", str(tmp_path / "x.html"))
    assert code == 2 and "record kind 'something-else' has no report" in err
    code, _, err = run(
        "report", "media", "-o", str(tmp_path / "x.html"), "--root", str(comparison_repo)
    )
    assert code == 2 and "bundle 'media' holds no run record" in err
    code, _, err = run(
        "report", "media:nope", "-o", str(tmp_path / "x.html"), "--root", str(comparison_repo)
    )
    assert code == 2 and "bundle 'media' has no entry 'nope'" in err
    assert not (tmp_path / "x.html").exists()


class _MeanAbs:
    """A stand-in perceptual scorer: mean absolute RGB difference, with provenance."""

    name = "lpips"
    batch_size = 8

    def score(self, reference: Any, candidate: Any) -> list[float]:
        import numpy as np

        diff = np.abs(reference.astype(np.int16) - candidate.astype(np.int16))
        return [float(d.mean()) for d in diff]

    def provenance(self) -> dict[str, str]:
        return {"weights": "blake3:" + "ab" * 32, "library": "test 1.0"}


def test_perceptual_scores_plotted_with_threshold_and_weights(comparison_repo: Path) -> None:
    record = _record(comparison_repo, scorers=[_MeanAbs()])
    assert record.metrics is not None and record.metrics.video is not None
    html = render_comparison_html(record, root=comparison_repo)
    # The LPIPS-style plot marks its largest frame, draws its threshold, names its weights.
    worst = max(range(FRAMES), key=lambda i: record.metrics.video.per_frame[i].perceptual["lpips"])  # type: ignore[union-attr]
    assert f'data-max-frame="{worst}"' in html
    assert "maximum 0.01" in html and "Per-frame lpips" in html
    assert "blake3:" + "ab" * 32 in html and "largest lpips" in html


def test_report_of_a_record_digest_in_the_store(comparison_repo: Path, tmp_path: Path) -> None:
    from evidencestore.media.store import store_record

    record = _record(comparison_repo)
    desc = store_record(record, local_store(comparison_repo))
    out = tmp_path / "by-digest.html"
    code, stdout, err = run("report", desc.digest, "-o", str(out), "--root", str(comparison_repo))
    assert code == 0, err
    assert f"comparison report of {desc.digest}" in stdout
    html = out.read_text()
    assert f'data-digest="{desc.digest}"' in html
    assert html.count("<img ") == 3  # media resolved from the repository's store by digest


@needs_chromium
def test_audio_failure_has_an_audio_section_that_says_why(tmp_path: Path) -> None:
    """Both AAC/MP4 outputs 500 samples short: the comparison FAILs on audio, and the
    Audio section shows samples expected, presented, and where the gap is."""
    from evidencestore.testing.synth import write_clip

    short = AudioSpec(codec="aac", samples=47500)
    ref = write_clip(tmp_path / "ref.mp4", audio=short, format="mp4")
    cand = write_clip(tmp_path / "cand.mp4", audio=short, format="mp4")
    exp = Expectations(audio=AudioExpectation(sample_rate=48000, channels=2, samples=48000))
    record = compare(ref, cand, exp)
    assert record.verdict == "FAIL"
    html = render_comparison_html(record)
    out = tmp_path / "audio.html"
    out.write_text(html)
    result = open_page(out, widths=(1280, 390))
    assert result.errors == [] and result.failed == []
    text = result.facts["text"]
    assert "Audio: why it is invalid" in text
    assert "audio-invalid" in result.facts["ids"]
    for role in ("reference", "candidate"):
        assert f"{role}: " in text
    assert "samples expected" in text and "48000" in text
    assert "samples presented" in text and "47500" in text
    assert "500 (10.4 ms)" in text
    assert "500 samples missing at the end: from 0.989583 s to 1.000000 s" in text
    assert "MP4/MOV sample table" in text
    assert result.facts["scrollWidth"] <= 1280


def test_audio_metrics_name_presented_and_decoded_samples(tmp_path: Path) -> None:
    """AAC in MP4 presents exactly the 48,000 samples asked for and decodes whole 1024-sample
    frames (48,128 with priming trimmed): the page says 48,000 presented, as the request
    and the check do, and what was compared beyond them."""
    from evidencestore.testing.synth import write_clip

    aac = AudioSpec(codec="aac", samples=48000)
    ref = write_clip(tmp_path / "ref.mp4", audio=aac, format="mp4")
    cand = write_clip(tmp_path / "cand.mp4", audio=aac, format="mp4", audio_hook=_click)
    exp = Expectations(audio=AudioExpectation(sample_rate=48000, channels=2, samples=48000))
    record = compare(ref, cand, exp)
    assert record.metrics is not None and record.metrics.audio is not None
    decoded = record.metrics.audio.samples
    assert decoded > 48000  # the decoder's padding is compared too
    html = render_comparison_html(record)
    text = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))
    assert "48,000 x 2 channels samples presented" in text  # value, then its label
    assert (
        f"{decoded:,} decoded (the presented ones and {decoded - 48000:,} of codec padding) "
        "samples compared"
    ) in text
    assert f"{decoded} x 2" not in text
