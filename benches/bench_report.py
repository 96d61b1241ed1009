"""Comparison report of a 60 s 720p comparison (1,800 frames): render time and page size.

Encodes (once, cached under the system temp directory) a 60 s 1280x720 30 fps H.264 clip
with 48 kHz stereo AAC, and a candidate with one luma LSB changed in frame 1,700 and a
small audio perturbation. The comparison record carries per-frame metrics for all 1,800
frames with every plane finite (the worst case for the plot: 5,400 points, none elided
as identical); the worst frame is 1,700, so the thumbnails decode 1,701 frames of each
input. Times :func:`evidencestore.report.render_comparison_html` (plots, thumbnails, audio
per block, template) in a warm process, median of 3, and reports the page size.

Target (issue 13): under 5 s and under 5 MB.

Run: ``python benches/bench_report.py [--quick]`` (``--quick``: 10 s instead of 60 s).
"""

from __future__ import annotations

import math
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

WORST = 1700


def _clips(seconds: int) -> tuple[Path, Path]:
    from evidencestore.testing.synth import AudioSpec, VideoSpec, write_clip

    base = Path(tempfile.gettempdir()) / f"evstore-bench-report-{seconds}s"
    base.mkdir(exist_ok=True)
    ref, cand = base / "ref.mkv", base / "cand.mkv"
    video = VideoSpec(width=1280, height=720, rate=30, frames=30 * seconds)
    audio = AudioSpec(samples=48000 * seconds)
    worst = min(WORST, 30 * seconds - 1)

    def nudge(i: int, planes: Any) -> Any:
        if i == worst:
            planes = planes.copy()
            planes[100, 100] ^= 1
        return planes

    def quieter(start: int, data: Any) -> Any:
        return data * 0.999

    for path, hooks in ((ref, {}), (cand, {"video_hook": nudge, "audio_hook": quieter})):
        if not path.exists():
            t0 = time.perf_counter()
            partial = path.with_suffix(".tmp.mkv")
            write_clip(partial, video=video, audio=audio, **hooks)
            partial.rename(path)
            print(f"encoded {path} in {time.perf_counter() - t0:.1f} s", flush=True)
    return ref, cand


def _record(ref: Path, cand: Path, frames: int) -> Any:
    """A comparison record of the two clips with synthetic, all-finite per-frame metrics."""
    import msgspec

    from evidencestore.media.records import (
        AudioMetrics,
        Check,
        ComparisonMetrics,
        ComparisonRecord,
        DecodedStream,
        Expectations,
        FrameMetrics,
        InputRecord,
        PlaneMetrics,
        StreamEquality,
        Thresholds,
        VideoMetrics,
    )
    from evidencestore.media.source import MediaSource

    worst = min(WORST, frames - 1)
    per_frame = []
    for i in range(frames):
        planes = []
        for p in range(3):
            psnr = 52.0 + 6 * math.sin(i / 40 + p) - (8.0 if i == worst else 0.0)
            mse = 255**2 / 10 ** (psnr / 10)
            planes.append(PlaneMetrics(plane=p, mse=mse, psnr=psnr, identical=False))
        per_frame.append(FrameMetrics(index=i, identical=False, planes=tuple(planes)))
    video = VideoMetrics(
        frames=frames,
        identical_frames=0,
        max_mse=max(p.mse for f in per_frame for p in f.planes),
        min_psnr=min(p.psnr or 0.0 for f in per_frame for p in f.planes),
        identical=False,
        per_frame=tuple(per_frame),
    )
    audio = AudioMetrics(
        samples=48000 * frames // 30,
        channels=2,
        max_abs_diff=0.0004,
        rms_diff=0.0002,
        snr_db=60.0,
        identical=False,
    )
    ok = Check(name="video.frames", ok=True, expected=frames, observed=frames, message="ok")

    def side(path: Path) -> InputRecord:
        # What analyse() records of the video stream's timestamps, read from the packets
        # (no decode), and the continuity check a valid input passes.
        import av

        with av.open(str(path)) as container:
            stream = container.streams.video[0]
            pts = sorted(p.pts for p in container.demux(stream) if p.pts is not None)
            time_base = str(stream.time_base)
        decoded = DecodedStream(
            index=0, type="video", time_base=time_base, frames=len(pts), first_pts=pts[0],
            last_pts=pts[-1], root="blake3:" + "0" * 64,
        )  # fmt: skip
        continuity = msgspec.structs.replace(ok, name="video.continuity")
        src = MediaSource.from_path(path)
        return InputRecord(
            name=str(path), source=src.descriptor, container="matroska", valid=True,
            checks=(ok, continuity), streams=(decoded,),
        )  # fmt: skip

    ref_in, cand_in = side(ref), side(cand)
    record = ComparisonRecord(
        verdict="INCONCLUSIVE",
        reasons=("synthetic metrics for the benchmark",),
        reference=ref_in,
        candidate=cand_in,
        expectations=Expectations(),
        thresholds=Thresholds(),
        equality=(
            StreamEquality(type="video", equal=False, reference=None, candidate=None),
            StreamEquality(type="audio", equal=False, reference=None, candidate=None),
        ),
        metrics=ComparisonMetrics(video=video, audio=audio),
    )
    return record, {ref_in.source.digest: MediaSource.from_path(ref),
                    cand_in.source.digest: MediaSource.from_path(cand)}  # fmt: skip


def main(argv: list[str]) -> int:
    from evidencestore.report import render_comparison_html

    seconds = 10 if "--quick" in argv else 60
    ref, cand = _clips(seconds)
    record, sources = _record(ref, cand, 30 * seconds)
    render_comparison_html(record, sources=sources)  # warm-up: imports, fonts
    times, size = [], 0
    for _ in range(3):
        t0 = time.perf_counter()
        html = render_comparison_html(record, sources=sources)
        times.append(time.perf_counter() - t0)
        size = len(html.encode())
    median = statistics.median(times)
    print("### Comparison report (issue 13)\n")
    print("| clip | frames | render (median of 3) | page size | target |")
    print("|---|---|---|---|---|")
    print(
        f"| {seconds} s 1280x720 H.264 + AAC | {30 * seconds} | {median:.2f} s | "
        f"{size / 1e6:.2f} MB | < 5 s, < 5 MB |"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
