"""Streaming full decode: every video frame and audio sample, decoders flushed, errors kept.

Each frame is hashed from its native buffers (no colour conversion, no resampling, no
quantisation); only the visible bytes of each row are hashed, so the digest does not
depend on the decoder's row alignment.
"""

from __future__ import annotations

import math
import os
import struct
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from blake3 import blake3

from .._canonical import canonical
from ..digest import digest_from_hex
from ..merkle import merkle_root
from .probing import NotMediaError, fraction_text, opened, probe_container
from .records import (
    DecodedStream,
    DecodeErrorRecord,
    FrameRecord,
    MediaReport,
    ProbeReport,
)
from .source import MediaSource, resolve

__all__ = [
    "analyse",
    "frame_leaf",
    "iter_frames",
    "set_decode_threads",
    "stream_kinds",
    "video_frame_digest",
]

# What ``analyse`` does when not told: decoder and hashing threads (see ``_fold``).
_threads = True


def set_decode_threads(enabled: bool) -> bool:
    """Whether :func:`analyse` uses threads (FFmpeg's decoder threads and a hashing
    thread) when its caller does not say; returns the setting it replaces. A worker
    process of ``--jobs N`` turns them off: its siblings already use every core, as
    ``torch.set_num_threads(1)`` does for LPIPS. Digests are the same either way."""
    global _threads
    previous, _threads = _threads, enabled
    return previous


def frame_leaf(index: int, digest: str) -> bytes:
    """Return a frame's Merkle leaf hash (same domain separation as bundle entries)."""
    return blake3(b"\x00" + canonical({"digest": digest, "index": index})).digest()


PALETTE_BYTES = 1024  # 256 entries of 4 bytes (FFmpeg's AVPALETTE_SIZE)


def _packed_width(fmt: Any, width: int) -> int:
    """Pixels per row including the last macropixel of packed chroma-subsampled formats
    (yuyv422, uyvy422, y210, ...): an odd width still stores a whole macropixel."""
    chroma = fmt.chroma_width(width)
    if chroma >= width or chroma <= 0:
        return int(width)
    ratio = (1 << 16) // max(1, fmt.chroma_width(1 << 16))
    return int(chroma * ratio)


def _row_bytes(frame: Any) -> tuple[int, ...]:
    """Bytes of visible data per row of each plane of a video frame (the palette plane of
    palette formats: its 1024 bytes, as one row)."""
    fmt = frame.format
    planes = frame.planes
    rows: list[int] = []
    for i, plane in enumerate(planes):
        if fmt.has_palette and i == 1:
            rows.append(min(PALETTE_BYTES, plane.buffer_size))
            continue
        if not fmt.is_planar or len(planes) == 1:
            width = _packed_width(fmt, plane.width) if not fmt.is_planar else plane.width
            row = math.ceil(width * fmt.padded_bits_per_pixel / 8)
        else:
            step = sum(math.ceil(c.bits / 8) for c in fmt.components if c.plane == i)
            row = plane.width * step
        rows.append(min(row, abs(plane.line_size)))
    return tuple(rows)


def colour_tags(frame: Any) -> tuple[int, int, int, int]:
    """A video frame's colour range, matrix, primaries and transfer (FFmpeg enum values)."""
    return (
        int(frame.color_range),
        int(frame.colorspace),
        int(frame.color_primaries),
        int(frame.color_trc),
    )


# Per (format, width, height, colour tags): the visible row bytes of each plane and a
# hasher already fed the frame header; frames of a stream share one, so each frame only
# copies it (cheaper than encoding and hashing the header again).
_prefix_cache: dict[tuple[Any, ...], tuple[tuple[int, ...], Any]] = {}


def _video_digest(frame: Any, fmt_name: str, colour: tuple[int, int, int, int]) -> str:
    key = (fmt_name, frame.width, frame.height, colour)
    cached = _prefix_cache.get(key)
    if cached is None:
        header = {
            "colour": list(colour),
            "format": fmt_name,
            "height": frame.height,
            "width": frame.width,
        }
        cached = _prefix_cache[key] = (_row_bytes(frame), blake3(canonical(header)))
    rows, prefix = cached
    hasher = prefix.copy()
    for plane, row in zip(frame.planes, rows, strict=True):
        view = memoryview(plane)
        line = plane.line_size
        height = plane.height
        if line == 0:  # the palette plane: one row
            hasher.update(view[:row])
        elif line == row:
            hasher.update(view[: row * height])
        else:  # padded rows: their visible bytes joined, one update (about 3x faster)
            hasher.update(b"".join([view[y * line : y * line + row] for y in range(height)]))
    return digest_from_hex(hasher.hexdigest())


def video_frame_digest(frame: Any) -> str:
    """Digest of a video frame: its pixel format, geometry, colour tags and visible plane
    bytes (and the palette of palette formats)."""
    return _video_digest(frame, frame.format.name, colour_tags(frame))


AUDIO_BLOCK = 1024  # samples per channel in each leaf of an audio stream's root


class _StreamAccumulator:
    """Folds decoded frames of one stream into a :class:`DecodedStream`."""

    def __init__(self, stream: Any, keep_frames: bool) -> None:
        self.stream = stream
        self.index: int = stream.index
        self.type: str = stream.type
        self.video = self.type == "video"
        self.codec_context = stream.codec_context
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
        self.audio_prefixes: dict[tuple[Any, ...], Any] = {}  # header hashers, as for video
        # Audio root: samples regrouped in blocks of AUDIO_BLOCK, whatever the framing.
        self.block: list[bytearray] = []
        self.block_format: tuple[Any, ...] | None = None
        self.block_samples = 0
        self.block_stride = 0  # bytes per sample in each buffer
        # The packet timeline, as the container declares it (see DecodedStream).
        self.packets = 0
        self.discarded = 0
        self.packet_end: int | None = None
        self._latest_pts: int | None = None  # pts of the latest packet, whose end is packet_end
        self.skip_start: int | None = None
        self.skip_end: int | None = None

    def packet(self, packet: Any) -> None:
        """Fold in one demuxed packet: the container's timeline, discards, skip samples."""
        self.packets += 1
        if packet.is_discard:
            self.discarded += 1
        pts = packet.pts
        if pts is not None and (self._latest_pts is None or pts >= self._latest_pts):
            # The stream's last packet fixes its end; one without a duration leaves the
            # end unknown (None) rather than taken from an earlier packet.
            self._latest_pts = pts
            self.packet_end = pts + packet.duration if packet.duration else None
        if not self.video and packet.has_sidedata("skip_samples"):
            data = bytes(packet.get_sidedata("skip_samples"))
            if len(data) >= 8:
                start, end = struct.unpack_from("<II", data)
                self.skip_start = (self.skip_start or 0) + start
                self.skip_end = (self.skip_end or 0) + end

    def _audio_prefix(self, fmt: tuple[Any, ...], samples: int) -> Any:
        """A hasher fed the header of ``samples`` samples of audio format ``fmt``."""
        prefix = self.audio_prefixes.get((fmt, samples))
        if prefix is None:
            rate, _channels, layout, sample_format = fmt
            header = {"format": sample_format, "layout": layout, "rate": rate, "samples": samples}
            prefix = self.audio_prefixes[(fmt, samples)] = blake3(canonical(header))
        return prefix

    def _emit_block(self, samples: int) -> None:
        assert self.block_format is not None
        hasher = self._audio_prefix(self.block_format, samples).copy()
        n = samples * self.block_stride
        for buf in self.block:
            hasher.update(memoryview(buf)[:n])
            del buf[:n]
        self.block_samples -= samples
        self.leaves.append(frame_leaf(len(self.leaves), digest_from_hex(hasher.hexdigest())))

    def _flush_block(self) -> None:
        if self.block_samples:
            self._emit_block(self.block_samples)

    def _add_audio_blocks(self, fmt: tuple[Any, ...], frame: Any, buffers: list[Any]) -> None:
        if fmt != self.block_format:
            self._flush_block()
            self.block_format = fmt
            self.block = [bytearray() for _ in buffers]
            stride = frame.format.bytes
            self.block_stride = stride if frame.format.is_planar else stride * fmt[1]
        for acc, buf in zip(self.block, buffers, strict=False):
            acc += buf
        self.block_samples += frame.samples
        while self.block_samples >= AUDIO_BLOCK:
            self._emit_block(AUDIO_BLOCK)

    def _audio(self, frame: Any) -> tuple[tuple[Any, ...], str]:
        """Fold in an audio frame's samples; return its format and digest."""
        layout = frame.layout
        sample_format = frame.format
        samples = frame.samples
        fmt = (frame.sample_rate, layout.nb_channels, layout.name, sample_format.name)
        hasher = self._audio_prefix(fmt, samples).copy()
        n = samples * sample_format.bytes
        if not sample_format.is_planar:
            n *= fmt[1]
        buffers = [memoryview(plane)[:n] for plane in frame.planes]
        if not self.channel_hashers:
            self.channel_hashers = [blake3() for _ in buffers]
        for buf, channel in zip(buffers, self.channel_hashers, strict=False):
            hasher.update(buf)
            channel.update(buf)
        self.samples += samples
        self._add_audio_blocks(fmt, frame, buffers)
        return fmt, digest_from_hex(hasher.hexdigest())

    def add(self, frame: Any, digest: str | None = None) -> None:
        """Fold in the next frame (``digest``: its precomputed video digest, if any)."""
        index = self.frames
        samples: int | None
        if self.video:
            sar = self.codec_context.sample_aspect_ratio
            fmt_name = frame.format.name
            colour = colour_tags(frame)
            fmt: tuple[Any, ...] = (frame.width, frame.height, fmt_name, *colour)
            fmt += (fraction_text(sar) if sar is not None else None,)
            if digest is None:
                digest = _video_digest(frame, fmt_name, colour)
            samples = None
            self.leaves.append(frame_leaf(index, digest))
        else:
            fmt, digest = self._audio(frame)
            samples = frame.samples
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
            if not self.video and (tb := frame.time_base) and (rate := frame.sample_rate):
                # float(time_base), as Fraction's own float fallback computes it
                span = samples or 0
                self.end_pts = pts + round(span / rate / (tb.numerator / tb.denominator))
            elif duration is not None:
                self.end_pts = pts + duration
            else:
                self.end_pts = None
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
            width, height, pix_fmt, crange, cspace, primaries, trc, sar = self.format
            extra.update(
                width=width,
                height=height,
                pix_fmt=pix_fmt,
                color_range=crange,
                colorspace=cspace,
                color_primaries=primaries,
                color_trc=trc,
                sample_aspect_ratio=sar,
            )
        elif self.format is not None:
            rate, channels, layout, sample_format = self.format
            extra.update(
                sample_rate=rate, channels=channels, layout=layout, sample_format=sample_format
            )
        if self.type == "audio":
            self._flush_block()
            content = {
                "channels": [h.hexdigest() for h in self.channel_hashers],
                "format": extra.get("sample_format"),
                "layout": extra.get("layout"),
                "rate": extra.get("sample_rate"),
                "samples": self.samples,
            }
            extra["content_digest"] = digest_from_hex(blake3(canonical(content)).hexdigest())
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
            packets=self.packets,
            discarded_packets=self.discarded,
            packet_end=self.packet_end,
            skip_start=self.skip_start,
            skip_end=self.skip_end,
            root=digest_from_hex(merkle_root(self.leaves).hex()),
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


def stream_kinds(source: MediaSource) -> set[str]:
    """The kinds (``video``, ``audio``) of the decodable streams ``source`` declares; empty
    when it is not a readable container (a check then FAILs it)."""
    try:
        with opened(source) as container:
            return {s.type for s in container.streams if decodable(s)}
    except NotMediaError:
        return set()


def _message(exc: BaseException) -> str:
    strerror = getattr(exc, "strerror", None)
    return f"{type(exc).__name__}: {strerror or exc}"


def iter_frames(
    container: Any,
    streams: list[Any],
    errors: list[DecodeErrorRecord],
    *,
    threads: bool = True,
    on_packet: Callable[[Any], None] | None = None,
) -> Iterator[tuple[int, Any]]:
    """Yield ``(stream_index, frame)`` for every frame of ``streams``, in demux order.

    Demux and decode failures are appended to ``errors`` and decoding continues with the
    next packet where FFmpeg allows it; every decoder is flushed at the end, also after a
    demux failure. ``on_packet`` sees every demuxed packet of ``streams`` before it is
    decoded.
    """
    import av

    for stream in streams:
        if threads and stream.type == "video":
            stream.codec_context.thread_type = "AUTO"
    flushed: set[int] = set()
    wanted = {stream.index for stream in streams}
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
        if index not in wanted:
            # ``demux()`` of no streams demuxes them all: a damaged MP4 whose audio and
            # video streams are gone still has a data stream, which has no decoder.
            continue
        if packet.size == 0:
            flushed.add(index)
        elif on_packet is not None:
            on_packet(packet)
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
    hashed on a worker thread (BLAKE3 releases the GIL) while the next ones decode.

    At most ``_MAX_PENDING`` frames wait for their digest, so memory stays flat. Measured
    on a 60 s 1280x720 H.264 clip on 2 shared CPUs (``benches/bench_media.py``): the
    decoding thread keeps FFmpeg's frame threads fed instead of hashing. Re-measured
    against hashing inline in five interleaved sets (7-15 runs each; the neighbours'
    load varies): shorter wall time in four (ratio to ``ffmpeg -f null`` 0.02-0.08x
    higher; 0.93x vs 0.90x over 15 runs), longer in one, for 5 % more CPU time.
    """
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
    threads: bool | None = None,
    on_frame: Callable[[int, Any], None] | None = None,
    before_decode: Callable[[set[str]], None] | None = None,
) -> MediaReport:
    """Probe and fully decode ``FILE|DIGEST``: every frame hashed, per-stream roots.

    ``threads``: decoder and hashing threads (default: :func:`set_decode_threads`'s
    setting, on unless turned off).

    ``before_decode`` is called with the kinds of the streams to be decoded (those of
    :func:`stream_kinds`) once the container is open and before any frame is decoded,
    so a caller can refuse the request without opening the file twice.

    A file FFmpeg cannot open gives a report with an ``open`` error (and no streams)
    rather than an exception, so checks can FAIL it; an unreadable path, a digest
    missing from the store, or a file that changed while it was decoded (the report
    would describe bytes other than the digest it names) raises
    :class:`~evidencestore.errors.MediaError`.
    """
    if threads is None:
        threads = _threads
    source = resolve(ref, root)
    try:
        with opened(source) as container:
            wanted = [s for s in container.streams if decodable(s)]
            if before_decode is not None:
                before_decode({s.type for s in wanted})  # before the probe, as it was
            probe = probe_container(container, source)
            accumulators = {s.index: _StreamAccumulator(s, keep_frames) for s in wanted}
            errors: list[DecodeErrorRecord] = []
            frames = iter_frames(
                container,
                wanted,
                errors,
                threads=threads,
                on_packet=lambda p: accumulators[p.stream.index].packet(p),
            )
            _fold(frames, accumulators, on_frame, threads)
        source.ensure_unchanged()
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
