"""Streaming full decode: every video frame and audio sample, decoders flushed, errors kept.

Each frame is hashed from its native buffers (no colour conversion, no resampling, no
quantisation); only the visible bytes of each row are hashed, so the digest does not
depend on the decoder's row alignment.
"""

from __future__ import annotations

import math
import os
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from blake3 import blake3

from .._canonical import canonical
from ..merkle import merkle_root
from .probe import NotMediaError, fraction_text, opened, probe_container
from .records import (
    DecodedStream,
    DecodeErrorRecord,
    FrameRecord,
    MediaReport,
    ProbeReport,
)
from .source import MediaSource, resolve

__all__ = ["analyse", "audio_frame_digest", "frame_leaf", "iter_frames", "video_frame_digest"]

_PREFIX = "blake3:"


def frame_leaf(index: int, digest: str) -> bytes:
    """Return a frame's Merkle leaf hash (same domain separation as bundle entries)."""
    return blake3(b"\x00" + canonical({"digest": digest, "index": index})).digest()


def _row_bytes(frame: Any) -> tuple[int, ...]:
    """Bytes of visible data per row of each plane of a video frame."""
    fmt = frame.format
    planes = frame.planes
    rows: list[int] = []
    for i, plane in enumerate(planes):
        if fmt.has_palette and i == 1:
            row = plane.buffer_size
        elif not fmt.is_planar or len(planes) == 1:
            row = math.ceil(plane.width * fmt.padded_bits_per_pixel / 8)
        else:
            step = sum(math.ceil(c.bits / 8) for c in fmt.components if c.plane == i)
            row = plane.width * step
        rows.append(min(row, abs(plane.line_size)))
    return tuple(rows)


_row_cache: dict[tuple[str, int, int], tuple[int, ...]] = {}


def video_frame_digest(frame: Any) -> str:
    """Digest of a video frame: its pixel format, geometry and visible plane bytes."""
    fmt_name = frame.format.name
    key = (fmt_name, frame.width, frame.height)
    rows = _row_cache.get(key)
    if rows is None:
        rows = _row_cache[key] = _row_bytes(frame)
    hasher = blake3(canonical({"format": fmt_name, "height": frame.height, "width": frame.width}))
    for plane, row in zip(frame.planes, rows, strict=True):
        view = memoryview(plane)
        line = plane.line_size
        height = plane.height
        if line == row:
            hasher.update(view[: row * height])
        else:
            for y in range(height):
                start = y * line
                hasher.update(view[start : start + row])
    return _PREFIX + hasher.hexdigest()


def _audio_buffers(frame: Any) -> list[memoryview]:
    fmt = frame.format
    n = frame.samples * fmt.bytes
    if not fmt.is_planar:
        n *= frame.layout.nb_channels
    return [memoryview(plane)[:n] for plane in frame.planes]


def _audio_header(frame: Any) -> bytes:
    return canonical(
        {
            "format": frame.format.name,
            "layout": frame.layout.name,
            "rate": frame.sample_rate,
            "samples": frame.samples,
        }
    )


def audio_frame_digest(frame: Any) -> str:
    """Digest of an audio frame: format, layout, rate and exact samples as decoded."""
    hasher = blake3(_audio_header(frame))
    for buf in _audio_buffers(frame):
        hasher.update(buf)
    return _PREFIX + hasher.hexdigest()


class _StreamAccumulator:
    """Folds decoded frames of one stream into a :class:`DecodedStream`."""

    def __init__(self, stream: Any, keep_frames: bool) -> None:
        self.index: int = stream.index
        self.type: str = stream.type
        self.codec: str | None = stream.codec_context.name
        self.time_base = fraction_text(stream.time_base)
        self.keep_frames = keep_frames
        self.records: list[FrameRecord] = []
        self.leaves: list[bytes] = []
        self.frames = 0
        self.samples = 0
        self.first_pts: int | None = None
        self.last_pts: int | None = None
        self.end_pts: int | None = None
        self.format: tuple[Any, ...] | None = None
        self.format_changes = 0
        self.corrupt = 0
        self.channel_hashers: list[Any] = []

    def add(self, frame: Any, digest: str | None = None) -> None:
        """Fold in the next frame (``digest``: its precomputed video digest, if any)."""
        if self.type == "video":
            fmt: tuple[Any, ...] = (frame.width, frame.height, frame.format.name)
            if digest is None:
                digest = video_frame_digest(frame)
            samples = None
        else:
            fmt = (frame.sample_rate, frame.layout.nb_channels, frame.layout.name)
            fmt += (frame.format.name,)
            hasher = blake3(_audio_header(frame))
            buffers = _audio_buffers(frame)
            if not self.channel_hashers:
                self.channel_hashers = [blake3() for _ in buffers]
            for buf, channel in zip(buffers, self.channel_hashers, strict=False):
                hasher.update(buf)
                channel.update(buf)
            digest = _PREFIX + hasher.hexdigest()
            samples = frame.samples
            self.samples += samples
        if self.format is None:
            self.format = fmt
        elif fmt != self.format:
            self.format_changes += 1
        pts = frame.pts
        duration = frame.duration or None
        corrupt = bool(frame.is_corrupt)
        self.corrupt += corrupt
        if pts is not None:
            if self.first_pts is None:
                self.first_pts = pts
            self.last_pts = pts
            if self.type == "audio" and frame.time_base and frame.sample_rate:
                span = samples or 0
                self.end_pts = pts + round(span / frame.sample_rate / frame.time_base)
            elif duration is not None:
                self.end_pts = pts + duration
            else:
                self.end_pts = None
        index = self.frames
        self.leaves.append(frame_leaf(index, digest))
        if self.keep_frames:
            self.records.append(
                FrameRecord(
                    index=index,
                    pts=pts,
                    duration=duration,
                    samples=samples,
                    digest=digest,
                    corrupt=corrupt,
                )
            )
        self.frames += 1

    def result(self) -> DecodedStream:
        extra: dict[str, Any] = {}
        if self.format is not None and self.type == "video":
            extra.update(width=self.format[0], height=self.format[1], pix_fmt=self.format[2])
        elif self.format is not None:
            rate, channels, layout, sample_format = self.format
            extra.update(
                sample_rate=rate, channels=channels, layout=layout, sample_format=sample_format
            )
        if self.type == "audio":
            content = {
                "channels": [h.hexdigest() for h in self.channel_hashers],
                "format": extra.get("sample_format"),
                "layout": extra.get("layout"),
                "rate": extra.get("sample_rate"),
                "samples": self.samples,
            }
            extra["content_digest"] = _PREFIX + blake3(canonical(content)).hexdigest()
            extra["samples"] = self.samples
        return DecodedStream(
            index=self.index,
            type=self.type,  # type: ignore[arg-type]
            codec=self.codec,
            time_base=self.time_base,
            frames=self.frames,
            first_pts=self.first_pts,
            last_pts=self.last_pts,
            end_pts=self.end_pts,
            format_changes=self.format_changes,
            corrupt_frames=self.corrupt,
            root=_PREFIX + merkle_root(self.leaves).hex(),
            frame_records=tuple(self.records),
            **extra,
        )


def decodable(stream: Any) -> bool:
    """Whether a stream is audio or video content (cover art pictures are not)."""
    if stream.type == "audio":
        return True
    if stream.type != "video":
        return False
    import av

    return not stream.disposition & av.stream.Disposition.attached_pic


def _message(exc: BaseException) -> str:
    strerror = getattr(exc, "strerror", None)
    return f"{type(exc).__name__}: {strerror or exc}"


def iter_frames(
    container: Any,
    streams: list[Any],
    errors: list[DecodeErrorRecord],
    *,
    threads: bool = True,
) -> Iterator[tuple[int, Any]]:
    """Yield ``(stream_index, frame)`` for every frame of ``streams``, in demux order.

    Demux and decode failures are appended to ``errors`` and decoding continues with the
    next packet where FFmpeg allows it; every decoder is flushed at the end, also after a
    demux failure.
    """
    import av

    for stream in streams:
        if threads and stream.type == "video":
            stream.codec_context.thread_type = "AUTO"
    flushed: set[int] = set()
    packets = container.demux(*streams)
    while True:
        try:
            packet = next(packets)
        except StopIteration:
            break
        except (av.error.FFmpegError, ValueError) as exc:
            errors.append(DecodeErrorRecord(stage="demux", message=_message(exc)))
            break
        index = packet.stream.index
        if packet.size == 0:
            flushed.add(index)
        try:
            frames = packet.decode()
        except (av.error.FFmpegError, ValueError) as exc:  # ValueError: no decoder
            errors.append(
                DecodeErrorRecord(
                    stage="flush" if packet.size == 0 else "decode",
                    message=_message(exc),
                    stream=index,
                    pts=packet.pts,
                )
            )
            continue
        for frame in frames:
            yield index, frame
    for stream in streams:
        if stream.index in flushed:
            continue
        try:
            frames = stream.codec_context.decode(None)
        except (av.error.FFmpegError, ValueError) as exc:
            errors.append(
                DecodeErrorRecord(stage="flush", message=_message(exc), stream=stream.index)
            )
            continue
        for frame in frames:
            yield stream.index, frame


# Video frames waiting for their digest from the hashing thread (bounds memory).
_MAX_PENDING = 4


def _fold(
    frames: Iterator[tuple[int, Any]],
    accumulators: dict[int, _StreamAccumulator],
    on_frame: Callable[[int, Any], None] | None,
    threads: bool,
) -> None:
    """Feed frames to their accumulators in order; with ``threads``, video frames are
    hashed on a worker thread (BLAKE3 releases the GIL) while the next ones decode."""
    if not threads:
        for index, frame in frames:
            accumulators[index].add(frame)
            if on_frame is not None:
                on_frame(index, frame)
        return
    pending: deque[tuple[int, Any, Future[str] | None]] = deque()

    def settle(keep: int) -> None:
        # Blocks while more than ``keep`` frames wait, then takes whatever is ready.
        while pending:
            index, frame, future = pending[0]
            if len(pending) <= keep and future is not None and not future.done():
                return
            pending.popleft()
            accumulators[index].add(frame, future.result() if future is not None else None)
            if on_frame is not None:
                on_frame(index, frame)

    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="evstore-hash") as pool:
        for index, frame in frames:
            future = None
            if accumulators[index].type == "video":
                future = pool.submit(video_frame_digest, frame)
            pending.append((index, frame, future))
            settle(keep=_MAX_PENDING)
        settle(keep=0)


def analyse(
    ref: str | os.PathLike[str] | MediaSource,
    root: str | os.PathLike[str] | None = None,
    *,
    keep_frames: bool = True,
    threads: bool = True,
    on_frame: Callable[[int, Any], None] | None = None,
) -> MediaReport:
    """Probe and fully decode ``FILE|DIGEST``: every frame hashed, per-stream roots.

    A file FFmpeg cannot open gives a report with an ``open`` error (and no streams)
    rather than an exception, so checks can FAIL it; an unreadable path or a digest
    missing from the store raises :class:`~evidencestore.errors.MediaError`.
    """
    source = resolve(ref, root)
    try:
        with opened(source) as container:
            probe = probe_container(container, source)
            wanted = [s for s in container.streams if decodable(s)]
            accumulators = {s.index: _StreamAccumulator(s, keep_frames) for s in wanted}
            errors: list[DecodeErrorRecord] = []
            frames = iter_frames(container, wanted, errors, threads=threads)
            _fold(frames, accumulators, on_frame, threads)
    except NotMediaError as exc:
        return MediaReport(
            probe=ProbeReport(name=source.name, source=source.descriptor, container=""),
            errors=(DecodeErrorRecord(stage="open", message=str(exc)),),
        )
    return MediaReport(
        probe=probe,
        decoded=tuple(acc.result() for acc in accumulators.values()),
        errors=tuple(errors),
    )
