"""The presented length of a decoded stream: what a player shows, not what a decoder emits.

Audio codecs emit whole frames: an AAC or Opus decoder's output includes encoder priming
and end padding that the container tells players to drop. FFmpeg applies the start of an
MP4/MOV edit list and every skip-samples side data (priming, Opus pre-skip, Matroska
DiscardPadding, Ogg end trimming) while decoding, but not the end of an audio edit list:
an AAC track in MP4 decodes to whole 1024-sample frames. The presented sample count is
therefore taken, in this order, from:

1. **PCM**: every decoded sample is presented (no priming, no padding); exact.
2. **Skip-samples side data at the end** (WebM/Matroska DiscardPadding, Ogg granule end
   trimming, any muxer that sets it): the decoder already dropped the padding; exact.
3. **The MP4/MOV sample table and edit list**: the sample table's last entry ends where the
   encoder's samples end (FFmpeg and most muxers shorten the last packet's duration), and the
   edit list's duration says what is presented, to the resolution of the movie timescale
   (``mvhd``: 1/1000 s is 48 samples at 48 kHz). When the two agree within that resolution
   the sample table's count is used (exact); when the edit list is shorter it trims the end
   and its count is used (exact to its resolution); an edit list declaring more than the
   packets carry (or none at all, as in fragmented MP4) leaves the sample table's count.
4. **FLAC**: a FLAC encoder's last frame holds only the remaining samples (its STREAMINFO
   states the total), so every decoded sample is presented; exact in any container.
5. **Ogg**: the last page's granule position states where the stream ends; FFmpeg turns
   any end trimming it implies into skip-samples side data (rule 2), and none means the
   decoded count is the presented count; exact. So does Opus in Matroska/WebM without
   DiscardPadding: its mapping requires DiscardPadding wherever there is padding.
6. **Nothing**: raw ADTS, MPEG-TS, and Matroska/WebM without DiscardPadding (FFmpeg's
   muxer writes it from the encoder's end-padding side data, which its Opus and MP3
   encoders set and its AAC and AC-3 encoders do not: AAC in Matroska decodes to whole
   1024-sample frames and nothing says how many samples of the last are padding) give
   only the decoded count (raw MP3 with a LAME header states its delay and padding: rule
   2). The length is then **bounded, not verified**: the check
   accepts ``expected <= decoded < expected + allowance`` (one codec frame, plus the
   encoder's untrimmed priming where the container trims none: 1024 samples for AAC, 312
   for Opus) and records how many samples of the request could be missing unseen
   (``allowance - 1 - excess``), which no lossless verdict accepts unless the protocol opts
   in (``[quality] audio_length = "bounded"``).

Video: FFmpeg drops the frames the edit list leaves out (their packets are marked discard),
so the decoded frames are the presented frames; the discarded packets are counted so the
container's declared frame count can still be checked.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

from .records import DecodedStream, ProbeReport, StreamInfo

__all__ = [
    "ADTS_PRIMING",
    "CODEC_FRAME_SIZES",
    "UNTRIMMED_PRIMING",
    "PresentedLength",
    "codec_allowance",
    "presented_samples",
]

# Padding allowance (one codec frame) for decoders whose context does not declare it.
CODEC_FRAME_SIZES: dict[str, int] = {
    "aac": 1024,
    "libfdk_aac": 1024,
    "opus": 960,
    "libopus": 960,
    "mp3": 1152,
    "mp3float": 1152,
    "mp2": 1152,
    "ac3": 1536,
    "eac3": 1536,
    "vorbis": 2048,
    "libvorbis": 2048,
    "flac": 0,
}

# Encoder priming a decoder emits when the container trims none (raw ADTS AAC, AAC or
# Opus in MPEG-TS: no edit list, no pre-skip side data): FFmpeg's and most AAC encoders
# prime 1024 samples, libopus 312 (its usual pre-skip at 48 kHz).
UNTRIMMED_PRIMING: dict[str, int] = {"aac": 1024, "libfdk_aac": 1024, "opus": 312, "libopus": 312}
ADTS_PRIMING = UNTRIMMED_PRIMING["aac"]

# Codecs whose last frame holds only the remaining samples: no end padding to trim.
UNPADDED = frozenset({"flac"})


@dataclass(frozen=True)
class PresentedLength:
    """Samples per channel a stream presents, and where that count comes from.

    ``resolution`` is how finely the source fixes the count (1: exactly; 48: an edit
    list in milliseconds at 48 kHz); None when the container gives no information and
    ``allowance`` (samples of padding the decoded count may carry) bounds it instead.
    """

    samples: int
    source: str
    resolution: int | None
    allowance: int
    decoded: int
    silent: str = ""  # why the container cannot state the length (when it cannot)

    @property
    def exact(self) -> bool:
        """Whether the container fixes the presented count (to ``resolution``)."""
        return self.resolution is not None


def codec_allowance(
    stream: DecodedStream, info: StreamInfo | None, override: int | None, container: str
) -> int:
    """One codec frame of padding (the expectation's ``codec_frame_size``, else the
    decoder's frame size, else the codec's usual one), plus the encoder's priming where
    the container trims none (``UNTRIMMED_PRIMING``: no skip-samples side data at all)."""
    codec = stream.codec or ""
    if override is not None:
        allowance = override
    elif info is not None and info.codec_frame_size:
        allowance = info.codec_frame_size
    else:
        allowance = CODEC_FRAME_SIZES.get(codec, 0)
    if stream.skip_start is None:
        allowance += UNTRIMMED_PRIMING.get(codec, 0)
    return allowance


def _ticks_per_sample(time_base: Fraction | None, rate: int) -> int | None:
    """Time-base ticks per sample when every sample boundary is a whole tick."""
    if time_base is None or rate <= 0:
        return None
    ticks = 1 / (time_base * rate)
    return int(ticks) if ticks.denominator == 1 and ticks >= 1 else None


def presented_samples(
    stream: DecodedStream,
    info: StreamInfo | None,
    probe: ProbeReport,
    allowance: int,
) -> PresentedLength:
    """The samples per channel ``stream`` presents (see the module doc for the rules)."""
    decoded = stream.samples or 0
    rate = stream.sample_rate or 0
    codec = stream.codec or ""
    if codec.startswith("pcm_"):
        return PresentedLength(
            decoded, "PCM: every decoded sample is presented", 1, allowance, decoded
        )
    if codec in UNPADDED:
        source = f"{codec.upper()}: its last frame holds only the remaining samples"
        return PresentedLength(decoded, source, 1, allowance, decoded)
    if stream.skip_end:
        source = (
            f"the container's end trimming ({stream.skip_end} samples of skip-samples side "
            "data, e.g. DiscardPadding or an Ogg granule position), applied by the decoder"
        )
        return PresentedLength(decoded, source, 1, allowance, decoded)
    tb = Fraction(stream.time_base) if stream.time_base else None
    ticks = _ticks_per_sample(tb, rate)
    end = stream.end_pts  # where the decoded samples end, in the time base
    if probe.movie_timescale and ticks and stream.packet_end is not None and end is not None:

        def ending_at(tick: int) -> int:
            # The decoded samples up to ``tick``: those past it are padding (never more
            # than were decoded; a gap inside the stream does not shift the end).
            return decoded - max(0, (end - tick) // ticks)

        table = ending_at(stream.packet_end)
        table_at = f"its packets end at {stream.packet_end // ticks}"
        resolution = max(1, math.ceil(rate / probe.movie_timescale))
        scale = f"1/{probe.movie_timescale} s, {resolution} sample{'s' if resolution > 1 else ''}"
        if info is None or not info.duration or info.duration % ticks:
            source = f"the MP4/MOV sample table ({table_at}; no edit-list duration)"
            return PresentedLength(table, source, 1, allowance, decoded)
        edit = ending_at(info.duration)
        declared = info.duration // ticks
        if abs(edit - table) < resolution:
            source = (
                f"the MP4/MOV sample table ({table_at}; the edit list declares {declared}, "
                f"the same to its resolution of {scale})"
            )
            return PresentedLength(table, source, 1, allowance, decoded)
        if edit < table:
            source = f"the MP4/MOV edit list ({declared} samples, resolution {scale}; {table_at})"
            return PresentedLength(edit, source, resolution, allowance, decoded)
        source = (
            f"the MP4/MOV sample table ({table_at}; the edit list declares {declared}, "
            "more than the packets carry)"
        )
        return PresentedLength(table, source, 1, allowance, decoded)
    names = set(probe.container.split(","))
    if "ogg" in names:
        source = "the Ogg granule position of the last page (no end trimming needed)"
        return PresentedLength(decoded, source, 1, allowance, decoded)
    if names & {"matroska", "webm"} and codec in ("opus", "libopus"):
        # The Matroska Opus mapping requires DiscardPadding wherever the last frame
        # carries padding (FFmpeg writes it then): none means there was none.
        source = "the container's end trimming (no DiscardPadding: no padding to trim)"
        return PresentedLength(decoded, source, 1, allowance, decoded)
    silent = _silent(probe.container)
    source = (
        f"no container information on the presented length ({silent}): "
        "the decoded count, which may carry up to one codec frame of padding"
        + (" and the encoder's untrimmed priming" if stream.skip_start is None else "")
        + f" ({allowance} samples)"
    )
    return PresentedLength(decoded, source, None, allowance, decoded, silent)


def _silent(container: str) -> str:
    """Why ``container`` says nothing about where an audio stream's samples end."""
    names = set(container.split(","))
    if "aac" in names:
        return "raw ADTS: no edit list, no end trimming"
    if names & {"matroska", "webm"}:
        return "Matroska/WebM without DiscardPadding: nothing marks the last frame's padding"
    if "mpegts" in names:
        return "MPEG-TS: no edit list, no end trimming"
    return "no edit list, sample table or end-trimming side data"
