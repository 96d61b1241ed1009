"""Media reports, expectations, thresholds and comparison records (msgspec structs).

These are evidence, not bundle manifests: they may hold floats (MSE, PSNR, SNR,
perceptual scores), so they are stored as blobs and added to bundles as entries, never
hashed into a bundle structure themselves.

Conventions:

* Timestamps are integers in the stream's ``time_base`` (a ``"num/den"`` string).
* An infinite PSNR or SNR (identical content) is written as ``null`` with
  ``identical: true`` beside it: JSON has no infinity, and no finite cap is invented.
* Audio differences are in full-scale units: float samples as decoded, integer samples
  divided by ``2**(bits-1)`` (``u8`` is centred on 128 first).
"""

from __future__ import annotations

import math
from typing import Annotated, Literal

import msgspec
from msgspec import Meta

from .._canonical import canonical_defaults
from ..models import Descriptor, DigestStr, Model

__all__ = [
    "MEDIA_SCHEMA_TYPES",
    "AudioExpectation",
    "AudioMetrics",
    "Check",
    "CheckReport",
    "ComparisonMetrics",
    "ComparisonRecord",
    "DecodeErrorRecord",
    "DecodedStream",
    "Expectations",
    "FrameMetrics",
    "FrameRecord",
    "InputRecord",
    "LengthBound",
    "LengthPolicy",
    "MediaReport",
    "PerceptualSummary",
    "PlaneMetrics",
    "ProbeReport",
    "StreamEquality",
    "StreamInfo",
    "Thresholds",
    "Value",
    "Verdict",
    "VideoExpectation",
    "VideoMetrics",
]

COMPARISON_KIND = "evidencestore/media-comparison"
REPORT_KIND = "evidencestore/media-check"

Verdict = Literal["PASS", "FAIL", "INCONCLUSIVE", "UNAVAILABLE"]
#: What a verdict accepts as an audio stream's length: ``exact`` (stated by the container)
#: or ``bounded`` (also a decoded count the container cannot confirm, with its bound named).
LengthPolicy = Literal["exact", "bounded"]
StreamType = Literal["video", "audio", "subtitle", "data", "attachment", "unknown"]
Value = int | float | str | bool | None

# Constrained expectation and threshold values: msgspec rejects NaN with ``gt``/``ge`` but
# accepts infinity, so the structs below also check finiteness in ``__post_init__``.
Positive = Annotated[int, Meta(gt=0)]
PositiveSeconds = Annotated[float, Meta(gt=0)]
FrameSize = Annotated[int, Meta(ge=0, le=65536)]


def _require_finite(owner: str, **values: float | None) -> None:
    for key, value in values.items():
        if value is not None and not math.isfinite(value):
            raise ValueError(f"{owner}.{key} must be a finite number, got {value!r}")


class StreamInfo(Model, frozen=True, kw_only=True):
    """What a container declares about one stream (before decoding anything)."""

    index: int
    type: StreamType
    codec: str | None = None
    time_base: str | None = None
    start_time: int | None = None
    duration: int | None = None
    frames: int | None = None
    width: int | None = None
    height: int | None = None
    pix_fmt: str | None = None
    frame_rate: str | None = None
    sample_rate: int | None = None
    channels: int | None = None
    layout: str | None = None
    sample_format: str | None = None
    codec_frame_size: int | None = None


class ProbeReport(Model, frozen=True, kw_only=True):
    """A container's declared properties; ``movie_timescale`` (MP4/MOV: the ``mvhd``
    timescale) is the resolution of the container's edit lists and declared durations."""

    name: str
    source: Descriptor
    container: str
    duration_us: int | None = None
    start_time_us: int | None = None
    movie_timescale: int | None = None
    streams: tuple[StreamInfo, ...] = ()


class FrameRecord(Model, frozen=True, kw_only=True):
    """One decoded frame: timestamps in the stream time base and a content digest.

    Video digests cover the pixel format, geometry and visible bytes of every native
    plane (no colour conversion, no row padding); audio digests cover the format, rate,
    layout and exact samples in the decoded sample format.
    """

    index: int
    pts: int | None
    duration: int | None = None
    samples: int | None = None
    digest: DigestStr
    corrupt: bool = False


class DecodedStream(Model, frozen=True, kw_only=True):
    """What full decoding observed for one stream.

    ``root`` is the Merkle root over leaves ``H(0x00 || canonical({"digest": d, "index":
    i}))``. For video, ``d`` is frame ``i``'s digest. For audio, ``d`` is the digest of
    block ``i`` of 1024 samples per channel (the last block may be shorter), over the block's
    format, layout, rate, sample count and exact samples: it does not depend on how the
    codec or container cut the samples into frames. Both identify decoded content only, so
    identical decoded streams in different containers (different time bases, different
    framing) share their root. ``content_digest`` (audio) hashes the samples per channel.
    Per-frame records (timestamps, frame digests) are kept separately in ``frame_records``.
    Video colour tags (range, matrix, primaries, transfer) are part of every frame digest;
    ``sample_aspect_ratio`` is the decoder's, ``"0/1"`` when unknown.

    The container's own timeline, read from the demuxed packets: ``packets`` demuxed,
    ``discarded_packets`` of them outside the edit list (FFmpeg drops their frames: audio
    priming, video frames past the edit's end), ``packet_end`` the end of the last packet
    (pts + duration, in ``time_base``: for MP4/MOV the sample table's last entry), and for
    audio the samples the container's skip-samples side data asks the decoder to drop at
    the start (``skip_start``: priming, pre-skip) and at the end (``skip_end``: padding,
    Matroska DiscardPadding, Ogg end trimming), None when no packet carried any.
    """

    index: int
    type: StreamType
    codec: str | None = None
    time_base: str | None = None
    frames: int = 0
    samples: int | None = None
    first_pts: int | None = None
    last_pts: int | None = None
    end_pts: int | None = None
    width: int | None = None
    height: int | None = None
    pix_fmt: str | None = None
    sample_rate: int | None = None
    channels: int | None = None
    layout: str | None = None
    sample_format: str | None = None
    color_range: int | None = None
    colorspace: int | None = None
    color_primaries: int | None = None
    color_trc: int | None = None
    sample_aspect_ratio: str | None = None
    format_changes: int = 0
    corrupt_frames: int = 0
    packets: int | None = None
    discarded_packets: int = 0
    packet_end: int | None = None
    skip_start: int | None = None
    skip_end: int | None = None
    root: DigestStr
    content_digest: DigestStr | None = None
    frame_records: tuple[FrameRecord, ...] = ()


class DecodeErrorRecord(Model, frozen=True, kw_only=True):
    """A failure while opening, demuxing, decoding or flushing; never swallowed."""

    stage: Literal["open", "demux", "decode", "flush"]
    message: str
    stream: int | None = None
    pts: int | None = None


class MediaReport(Model, frozen=True, kw_only=True):
    """A probe plus a full streaming decode of every frame and sample."""

    probe: ProbeReport
    decoded: tuple[DecodedStream, ...] = ()
    errors: tuple[DecodeErrorRecord, ...] = ()


class Check(Model, frozen=True, kw_only=True, omit_defaults=False):
    """One check, with what was expected and what was observed."""

    name: str
    ok: bool
    expected: Value
    observed: Value
    message: str
    stream: int | None = None


class VideoExpectation(Model, frozen=True, kw_only=True):
    """What the request asked for: ``frames`` or ``duration`` (seconds) with ``frame_rate``."""

    width: Positive | None = None
    height: Positive | None = None
    pix_fmt: str | None = None
    frame_rate: Positive | str | None = None
    duration: PositiveSeconds | None = None
    frames: Positive | None = None
    codec: str | None = None

    def __post_init__(self) -> None:
        _require_finite("video", duration=self.duration)


class AudioExpectation(Model, frozen=True, kw_only=True):
    """What the request asked for: ``samples`` (per channel) or ``duration`` (seconds).

    ``codec_frame_size`` overrides the padding allowance (default: the codec's frame
    size, e.g. 1024 for AAC, 960 for Opus, 0 for PCM).
    """

    sample_rate: Positive | None = None
    channels: Positive | None = None
    layout: str | None = None
    sample_format: str | None = None
    duration: PositiveSeconds | None = None
    samples: Positive | None = None
    codec: str | None = None
    codec_frame_size: FrameSize | None = None

    def __post_init__(self) -> None:
        _require_finite("audio", duration=self.duration)


class Expectations(Model, frozen=True, kw_only=True):
    """Expectations from the generation request.

    Each section applies to every stream of its kind. A section must give a length
    (``frames`` or ``duration`` for video, ``samples`` or ``duration`` for audio) for every
    kind the checked file carries: a missing length is a failing check, since two equally
    truncated outputs would otherwise pass.
    """

    video: VideoExpectation | None = None
    audio: AudioExpectation | None = None


DEFAULT_PERCEPTUAL_MAX: dict[str, float] = {"lpips": 0.01}


class Thresholds(Model, frozen=True, kw_only=True, omit_defaults=False):
    """Thresholds a comparison of unequal outputs must meet (violations FAIL).

    Defaults: every plane of every frame at least 40 dB PSNR; audio SNR at least 40 dB
    and no sample differing by more than 0.01 full scale; LPIPS at most 0.01 per frame.
    Meeting them gives INCONCLUSIVE, never PASS.
    """

    video_psnr_min: float = 40.0
    audio_snr_min: float = 40.0
    audio_max_abs_diff: Annotated[float, Meta(ge=0)] = 0.01
    perceptual_max: dict[str, Annotated[float, Meta(ge=0)]] = msgspec.field(
        default_factory=lambda: dict(DEFAULT_PERCEPTUAL_MAX)
    )

    def __post_init__(self) -> None:
        _require_finite(
            "thresholds",
            video_psnr_min=self.video_psnr_min,
            audio_snr_min=self.audio_snr_min,
            audio_max_abs_diff=self.audio_max_abs_diff,
        )
        for name, value in self.perceptual_max.items():
            _require_finite("thresholds.perceptual_max", **{name: value})


class LengthBound(Model, frozen=True, kw_only=True):
    """An audio stream whose presented length its container does not state (raw ADTS,
    MPEG-TS, AAC in Matroska): the decoded count agrees with the request to within the
    codec's padding, so up to ``samples`` samples (``ms`` milliseconds) of the request
    could be missing unseen. ``reason`` says why the container cannot tell."""

    stream: int
    samples: int
    ms: float
    sample_rate: int
    reason: str

    def text(self) -> str:
        """The bound in words, as every verdict that rests on it names it."""
        return (
            f"audio stream #{self.stream}: length bounded, not verified: up to "
            f"{self.samples} samples ({self.ms:.3f} ms at {self.sample_rate} Hz) of the "
            f"request could be missing unseen ({self.reason})"
        )


class CheckReport(Model, frozen=True, kw_only=True, tag_field="kind", tag=REPORT_KIND):
    """``evstore media check``: a report, the expectations and every check.

    ``bounds``: audio streams whose length is bounded, not verified. With any, and
    every check passing, the verdict is ``INCONCLUSIVE`` unless ``audio_length`` is
    ``bounded`` (the caller accepts bounded lengths), then ``PASS`` with the bounds named.
    """

    __post_init__ = canonical_defaults  # type: ignore[misc]  # defaults omitted by value

    verdict: Literal["PASS", "FAIL", "INCONCLUSIVE"]
    checks: tuple[Check, ...]
    expectations: Expectations
    report: MediaReport
    versions: dict[str, str] = msgspec.field(default_factory=dict)
    bounds: tuple[LengthBound, ...] = ()
    audio_length: LengthPolicy = "exact"


class PlaneMetrics(Model, frozen=True, kw_only=True, omit_defaults=False):
    """MSE and PSNR of one plane; ``psnr`` is null (infinite) when ``identical``."""

    plane: int
    mse: float
    psnr: float | None
    identical: bool


class FrameMetrics(Model, frozen=True, kw_only=True):
    """Per-frame metrics; ``perceptual`` maps scorer names to this frame's score."""

    index: int
    identical: bool
    planes: tuple[PlaneMetrics, ...]
    perceptual: dict[str, float] = msgspec.field(default_factory=dict)


class PerceptualSummary(Model, frozen=True, kw_only=True, omit_defaults=False):
    """A scorer's summary over every frame pair (lower is more similar)."""

    frames: int
    max: float
    mean: float


class VideoMetrics(Model, frozen=True, kw_only=True, omit_defaults=False):
    """Video metrics over every frame pair, in decode order; ``pair`` is the position of
    the compared streams among the video streams of each input."""

    pair: int = 0
    frames: int
    identical_frames: int
    max_mse: float
    min_psnr: float | None
    identical: bool
    per_frame: tuple[FrameMetrics, ...]
    perceptual: dict[str, PerceptualSummary] = msgspec.field(default_factory=dict)


class AudioMetrics(Model, frozen=True, kw_only=True, omit_defaults=False):
    """Audio metrics over every sample of every channel (full-scale units); ``pair`` is
    the position of the compared streams among the audio streams of each input."""

    pair: int = 0
    samples: int
    channels: int
    max_abs_diff: float
    rms_diff: float
    snr_db: float | None
    identical: bool


class ComparisonMetrics(Model, frozen=True, kw_only=True):
    """Metrics, computed only for two valid, compatible, unequal outputs.

    ``video`` / ``audio``: the first stream pair of each kind; ``extra_video`` /
    ``extra_audio``: the second and later pairs (matched by order within the kind).
    """

    video: VideoMetrics | None = None
    audio: AudioMetrics | None = None
    extra_video: tuple[VideoMetrics, ...] = ()
    extra_audio: tuple[AudioMetrics, ...] = ()


class StreamEquality(Model, frozen=True, kw_only=True, omit_defaults=False):
    """Exact equality of one stream pair (matched by order within its type), by
    decoded-content digests; ``pair`` is that position."""

    type: StreamType
    equal: bool
    reference: str | None
    candidate: str | None
    first_difference: int | None = None
    pair: int = 0
    reference_stream: int | None = None
    candidate_stream: int | None = None


class InputRecord(Model, frozen=True, kw_only=True):
    """One compared input: descriptor, validity against expectations, stream summaries."""

    name: str
    source: Descriptor
    container: str
    valid: bool
    checks: tuple[Check, ...]
    streams: tuple[DecodedStream, ...] = ()
    errors: tuple[DecodeErrorRecord, ...] = ()
    bounds: tuple[LengthBound, ...] = ()


class ComparisonRecord(Model, frozen=True, kw_only=True, tag_field="kind", tag=COMPARISON_KIND):
    """A comparison bound to its provenance: inputs, expectations, thresholds, versions;
    ``audio_length``: whether a length bounded, not verified, could make it PASS."""

    __post_init__ = canonical_defaults  # type: ignore[misc]  # defaults omitted by value

    schema_version: int = 1
    verdict: Verdict
    reasons: tuple[str, ...]
    reference: InputRecord
    candidate: InputRecord
    expectations: Expectations
    thresholds: Thresholds
    compatibility: tuple[Check, ...] = ()
    equality: tuple[StreamEquality, ...] = ()
    metrics: ComparisonMetrics | None = None
    threshold_checks: tuple[Check, ...] = ()
    scorers: dict[str, dict[str, str]] = msgspec.field(default_factory=dict)
    versions: dict[str, str] = msgspec.field(default_factory=dict)
    audio_length: LengthPolicy = "exact"


MEDIA_SCHEMA_TYPES: dict[str, type] = {
    "media-probe": ProbeReport,
    "media-report": MediaReport,
    "media-check": CheckReport,
    "comparison-record": ComparisonRecord,
    "expectations": Expectations,
    "thresholds": Thresholds,
}

SCHEMA_TYPES = MEDIA_SCHEMA_TYPES
