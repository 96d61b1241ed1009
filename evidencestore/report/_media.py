"""Views of compared media for a report: one frame of each input, audio differences per block.

The inputs are read by digest (from the caller's verified sources or the repository's
store), decoded with the media package's own demux/decode loop, and never altered: the
difference image is computed on the native luma samples, then amplified for display only.
Decoding stops at the frame asked for, so memory stays one frame per input.
"""

from __future__ import annotations

from collections.abc import Iterator
from fractions import Fraction
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

    from ..media.source import MediaSource

__all__ = ["AUDIO_BLOCK", "audio_blocks", "frame_pair"]

AUDIO_BLOCK = 1024


def _frames(source: MediaSource, kind: str, pair: int) -> Iterator[Any]:
    from ..media.decode import decodable, iter_frames
    from ..media.probing import opened
    from ..media.records import DecodeErrorRecord

    with opened(source) as container:
        streams = [s for s in container.streams if s.type == kind and decodable(s)]
        errors: list[DecodeErrorRecord] = []  # decode errors are in the record already
        for _index, frame in iter_frames(container, streams[pair : pair + 1], errors):
            yield frame


def _nth(frames: Iterator[Any], index: int) -> Any:
    for i, frame in enumerate(frames):
        if i == index:
            return frame
    return None


def _luma(frame: Any) -> np.ndarray:
    """The native luma (or first) plane as integers, without colour conversion."""
    import numpy as np

    name = frame.format.name
    if name.startswith(("yuv", "yuvj", "nv", "gray")) and not frame.format.is_big_endian:
        plane = frame.planes[0]
        item = 2 if any(c.bits > 8 for c in frame.format.components) else 1
        dtype = np.dtype(np.uint8) if item == 1 else np.dtype("<u2")
        line = abs(plane.line_size) // item
        arr = np.frombuffer(memoryview(plane), dtype=dtype)[: line * plane.height]
        return arr.reshape(plane.height, line)[:, : frame.width].astype(np.int32)
    gray: np.ndarray = frame.to_ndarray(format="gray").astype(np.int32)
    return gray


def _seek_nth(source: MediaSource, pair: int, index: int, first_pts: int, step: Fraction) -> Any:
    """Frame ``index`` found by seeking to its timestamp ``first_pts + index * step`` and
    decoding forward from the keyframe before it; None when the timestamps do not sit on
    that grid (then the caller decodes from the start)."""
    import av

    from ..media.decode import decodable, iter_frames
    from ..media.probing import opened
    from ..media.records import DecodeErrorRecord

    with opened(source) as container:
        streams = [s for s in container.streams if s.type == "video" and decodable(s)]
        if pair >= len(streams):
            return None
        try:
            container.seek(int(first_pts + step * index), stream=streams[pair], backward=True)
            errors: list[DecodeErrorRecord] = []
            for _i, frame in iter_frames(container, streams[pair : pair + 1], errors):
                if frame.pts is None:
                    return None
                at = (frame.pts - first_pts) / step
                n = round(at)
                if abs(at - n) > Fraction(1, 4) or n > index:
                    return None
                if n == index:
                    return frame
        except av.error.FFmpegError:
            return None
    return None


def frame_pair(
    reference: MediaSource,
    candidate: MediaSource,
    index: int,
    pair: int = 0,
    grid: tuple[int, Fraction] | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, int] | None:
    """Frame ``index`` of both inputs as RGB, the amplified luma difference as RGB, and the
    largest luma difference; None when either input has no such frame.

    ``grid`` ``(first_pts, ticks per frame)``, for inputs whose frame timestamps were
    checked continuous, lets the frame be found by seeking instead of decoding every frame
    before it; a frame off the grid falls back to decoding from the start.
    """
    import numpy as np

    def nth(source: MediaSource) -> Any:
        if grid is not None and index > 0:
            frame = _seek_nth(source, pair, index, grid[0], grid[1])
            if frame is not None:
                return frame
        return _nth(_frames(source, "video", pair), index)

    fr, fc = nth(reference), nth(candidate)
    if fr is None or fc is None:
        return None
    diff = np.abs(_luma(fr) - _luma(fc))
    peak = int(diff.max()) if diff.size else 0
    gain = 255.0 / peak if peak else 0.0
    shown = np.clip(diff * gain, 0, 255).astype(np.uint8)
    return (
        fr.to_ndarray(format="rgb24"),
        fc.to_ndarray(format="rgb24"),
        np.repeat(shown[:, :, None], 3, axis=2),
        peak,
    )


def _all_samples(source: MediaSource, pair: int) -> np.ndarray:
    """Every sample of one audio stream, as the comparison measures them."""
    import numpy as np

    from ..media.comparison import audio_array

    parts = [audio_array(f) for f in _frames(source, "audio", pair)]
    return np.concatenate(parts, axis=1) if parts else np.zeros((1, 0))


def audio_blocks(
    reference: MediaSource, candidate: MediaSource, pair: int = 0, block: int = AUDIO_BLOCK
) -> tuple[np.ndarray, np.ndarray] | None:
    """Max absolute and RMS sample difference per block of ``block`` samples (over every
    channel); None when the inputs do not line up sample for sample."""
    import numpy as np

    a = _all_samples(reference, pair)
    b = _all_samples(candidate, pair)
    if a.shape != b.shape or a.shape[1] == 0:
        return None
    d = a - b
    n = d.shape[1]
    blocks = -(-n // block)
    padded = np.zeros((d.shape[0], blocks * block))
    padded[:, :n] = d
    view = padded.reshape(d.shape[0], blocks, block)
    max_abs = np.abs(view).max(axis=(0, 2))
    counts = np.full(blocks, block * d.shape[0], dtype=float)
    counts[-1] = (n - (blocks - 1) * block) * d.shape[0]
    rms = np.sqrt(np.square(view).sum(axis=(0, 2)) / counts)
    return max_abs, rms
