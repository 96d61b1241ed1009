"""A short, self-contained media comparison for ``make run``."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["demo_comparison"]


def demo_comparison(workdir: str | os.PathLike[str]) -> str:
    """Encode three short clips in ``workdir``, compare them, and return a summary.

    A baseline H.264 + AAC MP4; the same content remuxed as faststart (identical decoded
    content, different bytes: PASS); a candidate with one pixel one LSB off in one frame
    (lossless H.264, so the change survives: INCONCLUSIVE); and one whose audio was
    truncated (FAIL against the expected duration).
    """
    from .compare import compare
    from .records import AudioExpectation, Expectations, VideoExpectation
    from .synth import AudioSpec, VideoSpec, write_clip

    out = Path(workdir)
    out.mkdir(parents=True, exist_ok=True)
    video = VideoSpec(width=64, height=64, frames=15, options={"qp": "0", "preset": "ultrafast"})
    audio = AudioSpec(samples=24000)

    def nudge(index: int, planes: object) -> object:
        if index == 7:
            planes = planes.copy()  # type: ignore[attr-defined]
            planes[10, 10] ^= 1  # type: ignore[index]
        return planes

    base = write_clip(out / "baseline.mp4", video=video, audio=audio)
    faststart = write_clip(
        out / "faststart.mp4", video=video, audio=audio, container_options={"movflags": "faststart"}
    )
    nudged = write_clip(out / "nudged.mp4", video=video, audio=audio, video_hook=nudge)  # type: ignore[arg-type]
    short = write_clip(out / "short.mp4", video=video, audio=AudioSpec(samples=12000))
    expect = Expectations(
        video=VideoExpectation(width=64, height=64, pix_fmt="yuv420p", frame_rate=30, frames=15),
        audio=AudioExpectation(sample_rate=48000, channels=2, duration=0.5),
    )
    lines = [
        "media comparisons (expectations: 64x64 yuv420p 30 fps x 15 frames, 0.5 s stereo 48 kHz)"
    ]
    for label, cand in (
        ("faststart remux", faststart),
        ("one LSB nudged", nudged),
        ("short audio", short),
    ):
        record = compare(base, cand, expect)
        lines.append(f"  baseline vs {label:<16} {record.verdict:<13} {record.reasons[0]}")
    return "\n".join(lines)
