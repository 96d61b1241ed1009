"""Opening containers with PyAV and reading what they declare about their streams."""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator
from contextlib import contextmanager
from fractions import Fraction
from typing import TYPE_CHECKING, Any, BinaryIO

from ..errors import NotMediaError
from .records import ProbeReport, StreamInfo
from .source import MediaSource, resolve

if TYPE_CHECKING:
    from av.container import InputContainer

__all__ = ["NotMediaError", "opened", "probe", "probe_container"]


# No nested opens at all: a playlist (HLS, concat, ...) or a reference to another file
# would make FFmpeg decode content the record's digest does not cover. The main input
# always goes through a Python file object (see MediaSource), which this does not affect.
_CONTAINER_OPTIONS = {"protocol_whitelist": "none"}


def _not_media(source: MediaSource, reason: str) -> NotMediaError:
    return NotMediaError(
        f"{source.name}: not a readable media container ({reason}); "
        "expected a file FFmpeg can demux (e.g. MP4, WebM, Ogg, WAV)"
    )


@contextmanager
def opened(source: MediaSource) -> Iterator[InputContainer]:
    """Open ``source`` for demuxing; raise :class:`MediaError` naming it when FFmpeg
    cannot recognise a media container in it."""
    import av

    if source.descriptor.size == 0:
        raise NotMediaError(f"{source.name}: empty file (0 bytes): expected a media container")
    with source.open() as stream:
        try:
            container = av.open(
                stream, "r", options=dict(_CONTAINER_OPTIONS), metadata_errors="replace"
            )
        except av.error.FFmpegError as exc:
            raise _not_media(source, exc.strerror or str(exc)) from None
        except Exception as exc:  # malformed metadata and the like: not a clean container
            raise _not_media(source, f"{type(exc).__name__}: {exc}") from None
        try:
            yield container
        finally:
            container.close()


def fraction_text(value: Fraction | None) -> str | None:
    """Return ``"num/den"`` for a rational, or None."""
    if value is None:
        return None
    return f"{value.numerator}/{value.denominator}"


def _positive(value: int | None) -> int | None:
    return value if value is not None and value > 0 else None


def _tag_duration(stream: Any) -> int | None:
    """A Matroska track's own ``DURATION`` tag (``HH:MM:SS.nnnnnnnnn``, written by FFmpeg's
    muxer) in the stream's time base, or None.

    FFmpeg gives a Matroska stream without a duration of its own the whole segment's
    (the longest track's, audio priming included), which says nothing about this track."""
    text = stream.metadata.get("DURATION") if stream.metadata else None
    tb = stream.time_base
    if not text or not tb:
        return None
    try:
        hours, minutes, seconds = text.strip().split(":")
        total = (int(hours) * 60 + int(minutes)) * 60 + Fraction(seconds)
    except (ValueError, ZeroDivisionError):
        return None
    return round(total / Fraction(tb))


def stream_info(stream: Any, container: str = "") -> StreamInfo:
    """Return the declared properties of one PyAV stream in ``container`` (its format
    name: for Matroska/WebM a track's duration is its own ``DURATION`` tag)."""
    ctx = stream.codec_context
    matroska = bool({"matroska", "webm"} & set(container.split(",")))
    common: dict[str, Any] = {
        "index": stream.index,
        "type": stream.type,
        "codec": ctx.name if ctx is not None else None,
        "time_base": fraction_text(stream.time_base),
        "start_time": stream.start_time,
        "duration": _tag_duration(stream) if matroska else stream.duration,
        "frames": _positive(stream.frames),
    }
    if stream.type == "video":
        rate = stream.average_rate or stream.guessed_rate
        fmt = ctx.format
        common.update(
            width=ctx.width or None,
            height=ctx.height or None,
            pix_fmt=fmt.name if fmt is not None else None,
            frame_rate=fraction_text(rate) if rate else None,
        )
    elif stream.type == "audio":
        fmt = ctx.format
        common.update(
            sample_rate=ctx.sample_rate or None,
            channels=ctx.layout.nb_channels or None,
            layout=ctx.layout.name,
            sample_format=fmt.name if fmt is not None else None,
            codec_frame_size=_positive(ctx.frame_size),
        )
    return StreamInfo(**common)


_BOX_HEADER = 8
_MAX_BOXES = 4096  # top-level and moov children looked at before giving up


def _boxes(f: BinaryIO, end: int | None) -> Iterator[tuple[bytes, int, int]]:
    """ISO BMFF boxes from ``f``'s position to ``end``: ``(type, payload offset, payload
    end)``; stops at the first malformed header."""
    for _ in range(_MAX_BOXES):
        start = f.tell()
        if end is not None and start + _BOX_HEADER > end:
            return
        header = f.read(_BOX_HEADER)
        if len(header) < _BOX_HEADER:
            return
        size, kind = struct.unpack(">I4s", header)
        payload = start + _BOX_HEADER
        if size == 1:
            large = f.read(8)
            if len(large) < 8:
                return
            size = struct.unpack(">Q", large)[0]
            payload += 8
        elif size == 0:  # to the end of the enclosing box or file
            size = (end if end is not None else f.seek(0, os.SEEK_END)) - start
        if size < payload - start or (end is not None and start + size > end):
            return
        yield kind, payload, start + size
        f.seek(start + size)


def movie_timescale(f: BinaryIO) -> int | None:
    """The ``mvhd`` timescale of an MP4/MOV file (ticks per second of its edit lists and
    movie duration), or None when there is no readable one."""
    for kind, _payload, box_end in _boxes(f, None):
        if kind != b"moov":
            continue
        for child, offset, _ in _boxes(f, box_end):
            if child != b"mvhd":
                continue
            f.seek(offset)
            head = f.read(24)
            skip = 20 if head[:1] == b"\x01" else 12  # version, flags, creation, modification
            if len(head) < skip + 4:
                return None
            scale = int(struct.unpack_from(">I", head, skip)[0])
            return scale or None
        return None
    return None


def _timescale(container: InputContainer, source: MediaSource) -> int | None:
    names = set(container.format.name.split(","))
    if not names & {"mov", "mp4"}:
        return None
    with source.open() as f:
        return movie_timescale(f)


def probe_container(container: InputContainer, source: MediaSource) -> ProbeReport:
    """Return what an open container declares; :class:`NotMediaError` when PyAV cannot
    describe it."""
    try:
        return ProbeReport(
            name=source.name,
            source=source.descriptor,
            container=container.format.name,
            duration_us=container.duration,
            start_time_us=container.start_time,
            movie_timescale=_timescale(container, source),
            streams=tuple(stream_info(s, container.format.name) for s in container.streams),
        )
    except Exception as exc:
        reason = f"cannot read stream properties: {type(exc).__name__}: {exc}"
        raise _not_media(source, reason) from None


def probe(
    ref: str | os.PathLike[str] | MediaSource, root: str | os.PathLike[str] | None = None
) -> ProbeReport:
    """Probe ``FILE|DIGEST`` (see :func:`~evidencestore.media.source.resolve`)."""
    source = resolve(ref, root)
    with opened(source) as container:
        return probe_container(container, source)
