"""Deterministic synthetic clips, encoded with PyAV: for tests, the demo and benchmarks.

Video is a moving gradient with a frame counter pattern; audio is a sine tone. Content is
a pure function of the frame / sample index, so two encodes with the same settings decode
alike, and a ``video_hook`` / ``audio_hook`` / ``packet_hook`` lets callers perturb one
frame, change samples or shift packet timestamps (to build broken files on purpose).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

__all__ = ["AudioSpec", "VideoSpec", "write_clip", "write_interleaved"]


@dataclass(frozen=True)
class VideoSpec:
    """A video track to encode."""

    codec: str = "libx264"
    width: int = 64
    height: int = 64
    rate: int | Fraction = 30  # frames per second (30000/1001 as a Fraction)
    frames: int = 15
    pix_fmt: str = "yuv420p"
    options: dict[str, str] = field(default_factory=lambda: {"preset": "ultrafast"})


@dataclass(frozen=True)
class AudioSpec:
    """An audio track to encode: ``samples`` per channel at ``rate``."""

    codec: str = "aac"
    rate: int = 48000
    layout: str = "stereo"
    samples: int = 24000
    frequency: float = 440.0
    frame_size: int = 1024  # used when the encoder accepts any frame size (PCM)
    options: dict[str, str] = field(default_factory=dict)


def video_planes(index: int, width: int, height: int) -> np.ndarray:
    """Return frame ``index`` as a ``(height * 3 // 2, width)`` uint8 yuv420p array."""
    import numpy as np

    y = np.add.outer(np.arange(height), np.arange(width)) * 2 + index * 3
    luma = (y % 220 + 16).astype(np.uint8)
    ch, cw = height // 2, width // 2
    u = np.full((ch, cw), (128 + 4 * index) % 256, np.uint8)
    v = (np.add.outer(np.arange(ch), np.zeros(cw, int)) * 3 % 256).astype(np.uint8)
    return np.concatenate([luma, u.reshape(-1, width), v.reshape(-1, width)])


def audio_samples(start: int, count: int, channels: int, rate: int, frequency: float) -> np.ndarray:
    """Return ``count`` float32 samples from sample ``start``, shaped ``(channels, count)``."""
    import numpy as np

    t = (np.arange(start, start + count) / rate).astype(np.float64)
    rows = [0.4 * np.sin(2 * np.pi * frequency * (c + 1) * t) for c in range(channels)]
    return np.asarray(rows, dtype=np.float32)


def write_clip(
    path: str | os.PathLike[str],
    *,
    video: VideoSpec | None = None,
    audio: AudioSpec | None = None,
    format: str | None = None,
    container_options: dict[str, str] | None = None,
    video_hook: Callable[[int, np.ndarray], np.ndarray] | None = None,
    audio_hook: Callable[[int, np.ndarray], np.ndarray] | None = None,
    packet_hook: Callable[[Any], Any] | None = None,
) -> str:
    """Encode a clip to ``path`` and return the path as a string.

    ``video_hook(index, yuv420p_array)`` and ``audio_hook(first_sample, fltp_array)`` may
    alter raw content before encoding; ``packet_hook(packet)`` may alter or drop (return
    None) each encoded packet before muxing.
    """
    import av

    out = os.fspath(path)
    with av.open(out, "w", format=format, options=container_options or {}) as container:
        vstream = _video_stream(container, video) if video is not None else None
        astream = _audio_stream(container, audio) if audio is not None else None

        def mux(packets: Any) -> None:
            for packet in packets:
                if packet_hook is not None:
                    packet = packet_hook(packet)
                    if packet is None:
                        continue
                container.mux(packet)

        if vstream is not None and video is not None:
            mux(_video_packets(vstream, video, video_hook))
        if astream is not None and audio is not None:
            mux(_audio_packets(astream, audio, audio.frequency, audio_hook))
    return out


def _video_stream(container: Any, video: VideoSpec) -> Any:
    stream = container.add_stream(video.codec, rate=video.rate, options=video.options)
    stream.width = video.width
    stream.height = video.height
    stream.pix_fmt = video.pix_fmt
    return stream


def _audio_stream(container: Any, audio: AudioSpec) -> Any:
    stream = container.add_stream(audio.codec, rate=audio.rate, options=audio.options)
    stream.layout = audio.layout
    return stream


def _video_packets(
    stream: Any, video: VideoSpec, hook: Callable[[int, np.ndarray], np.ndarray] | None
) -> Iterator[Any]:
    """Encode the test pattern's frames (``hook`` may alter each first), then flush."""
    import av

    for i in range(video.frames):
        planes = video_planes(i, video.width, video.height)
        if hook is not None:
            planes = hook(i, planes)
        vframe = av.VideoFrame.from_ndarray(planes, format="yuv420p")
        if video.pix_fmt != "yuv420p":
            vframe = vframe.reformat(format=video.pix_fmt)
        vframe.pts = i
        vframe.time_base = 1 / Fraction(video.rate)
        yield from stream.encode(vframe)
    yield from stream.encode(None)


def _audio_packets(
    stream: Any,
    audio: AudioSpec,
    frequency: float,
    hook: Callable[[int, np.ndarray], np.ndarray] | None,
) -> Iterator[Any]:
    """Encode a ``frequency`` tone's frames (``hook`` may alter each first), then flush."""
    import av

    ctx = stream.codec_context
    channels = ctx.layout.nb_channels
    fmt = ctx.format.name
    frame_size = ctx.frame_size or audio.frame_size
    done = 0
    while done < audio.samples:
        n = min(frame_size, audio.samples - done)
        data = audio_samples(done, n, channels, audio.rate, frequency)
        if hook is not None:
            data = hook(done, data)
        arr: np.ndarray = _to_format(data, fmt)
        aframe = av.AudioFrame.from_ndarray(arr, format=fmt, layout=audio.layout)
        aframe.sample_rate = audio.rate
        aframe.pts = done
        aframe.time_base = Fraction(1, audio.rate)
        yield from stream.encode(aframe)
        done += n
    yield from stream.encode(None)


def _to_format(data: np.ndarray, fmt: str) -> np.ndarray:
    import numpy as np

    planar = fmt.endswith("p")
    base = fmt.rstrip("p")
    if base == "flt":
        arr = data.astype(np.float32)
    elif base == "s16":
        arr = np.round(data * 32767).astype(np.int16)
    elif base == "s32":
        arr = np.round(data.astype(np.float64) * 2147483647).astype(np.int32)
    elif base == "dbl":
        arr = data.astype(np.float64)
    else:
        raise ValueError(f"unsupported sample format {fmt}")
    if planar:
        return np.ascontiguousarray(arr)
    return np.ascontiguousarray(arr.T.reshape(1, -1))


def write_interleaved(
    path: str | os.PathLike[str],
    *,
    video: VideoSpec | None = None,
    audio: Sequence[AudioSpec] = (),
    format: str | None = None,
    container_options: dict[str, str] | None = None,
    packet_hook: Callable[[Any], Any] | None = None,
) -> str:
    """Encode a clip with any number of audio tracks, muxing the packets of every stream
    in decode-time order (as a real muxing pipeline does: fragmented MP4 and MPEG-TS cut
    their fragments and packets by time); ``packet_hook`` as for :func:`write_clip`."""
    import av

    out = os.fspath(path)
    packets: list[Any] = []
    with av.open(out, "w", format=format, options=container_options or {}) as container:
        vstream = _video_stream(container, video) if video is not None else None
        astreams = [_audio_stream(container, spec) for spec in audio]
        if vstream is not None and video is not None:
            packets += _video_packets(vstream, video, None)
        for track, (stream, spec) in enumerate(zip(astreams, audio, strict=True)):
            packets += _audio_packets(stream, spec, spec.frequency * (track + 1), None)

        def when(packet: Any) -> Fraction:
            stamp = packet.dts if packet.dts is not None else packet.pts
            return Fraction(stamp or 0) * Fraction(packet.time_base)

        for packet in sorted(packets, key=when):  # stable: each stream keeps its order
            if packet_hook is not None:
                packet = packet_hook(packet)
                if packet is None:
                    continue
            container.mux(packet)
    return out
