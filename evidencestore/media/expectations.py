"""Expectations from the generation request, and the checks of a decoded file against them.

Timing rules (``tb`` is the stream time base):

* timestamps are judged at the container's own resolution, the quantum ``q``: the coarser
  of the stream time base and the container's timestamp unit (1 ms for Matroska/WebM,
  ``CONTAINER_QUANTA``). Where every ideal time is a whole tick (sample-based time bases:
  1/48000 for 48 kHz audio, 1/15360 for 30 fps MP4 video) the rule is exact equality (half
  a tick). Where it is not (1/24 s frames in 1 ms ticks), each stored time was rounded to
  ``q``: a timestamp matches within one quantum (it and the time it is measured from are
  each rounded by up to half of one), an end time (a timestamp plus a stored duration,
  which muxers truncate: 41.667 ms is written as 41) within one and a half. Every message
  states the tolerance and where it comes from; a missing frame or a one-frame gap (16.7 ms
  at 60 fps) is always larger;
* audio is judged by the samples the container presents (``presented.py``: PCM, FLAC,
  end-trimming side data, Ogg, the MP4/MOV sample table and edit list), compared with the
  request exactly (to the edit list's resolution where that is coarser than a sample), and
  the check names the source. Where the container says nothing (raw ADTS, MPEG-TS, AAC in
  Matroska) only the codec padding bound applies, ``expected <= decoded < expected +
  allowance`` (one codec frame, plus untrimmed encoder priming), and the length is
  **bounded, not verified**: the check records a ``LengthBound`` (samples and ms that could
  be missing unseen) and its verdict is INCONCLUSIVE unless bounded lengths are accepted
  (``audio_length="bounded"``), never PASS on a length nobody can verify;
* the first timestamp is 0 after the container's edit list / pre-skip trimming (FFmpeg
  applies it while decoding). MPEG-TS and raw streams (ADTS, MP3) have no timeline
  origin: time 0 is the first video frame (audio-only: the first presented sample, after
  the encoder's untrimmed priming or the priming the decoder drops), and an audio stream
  with untrimmed priming starts that much before it. Continuity compares
  every frame with the ideal time given by the frames or samples before it, so a gap or
  an overlap anywhere is caught; without a known frame rate (requested or declared) video
  continuity is a failing check, never silently absent.

Coverage rules:

* every stream of a kind is checked against that kind's section (a second audio track is
  held to the same request as the first);
* a kind the file carries must have a length in the request (``frames`` or ``duration``
  for video, ``samples`` or ``duration`` for audio): a missing one is the failing check
  ``video.length`` / ``audio.length``, and the CLI refuses such a request (exit 2);
* when both a count and a duration are given they must agree (``round(duration * rate)``);
  a disagreement is refused when loading, or a failing ``*.length`` check when the rate
  is only known from the file.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any, Literal

import msgspec

from .._canonical import MAX_DEPTH, loads_json, nesting_depth
from ..errors import MediaError
from .presented import CODEC_FRAME_SIZES, UNTRIMMED_PRIMING, codec_allowance, presented_samples
from .records import (
    AudioExpectation,
    Check,
    CheckReport,
    DecodedStream,
    Expectations,
    FrameRecord,
    LengthBound,
    LengthPolicy,
    MediaReport,
    ProbeReport,
    StreamInfo,
    Value,
    VideoExpectation,
)

__all__ = [
    "CODEC_FRAME_SIZES",
    "CONTAINER_QUANTA",
    "Tolerance",
    "assess",
    "expectations_from_mapping",
    "load_expectations",
    "missing_lengths",
    "parse_rate",
    "require_lengths",
    "verdict_of",
    "verify_report",
    "with_overrides",
]


def parse_rate(value: int | float | str) -> Fraction:
    """Parse a frame rate: ``30``, ``"30000/1001"`` or ``"29.97"``."""
    try:
        rate = Fraction(str(value))
    except (ValueError, ZeroDivisionError) as exc:
        raise MediaError(f"invalid frame rate {value!r}: expected e.g. 30 or '30000/1001'") from exc
    if rate <= 0:
        raise MediaError(f"invalid frame rate {value!r}: expected a positive rate")
    return rate


def expectations_from_mapping(data: Mapping[str, Any], where: str = "expectations") -> Expectations:
    """Validate a mapping (parsed TOML or JSON) as :class:`Expectations`."""
    try:
        exp = msgspec.convert(dict(data), Expectations)
    except msgspec.ValidationError as exc:
        raise MediaError(
            f"{where}: {exc}; expected [video] (width, height, pix_fmt, frame_rate, "
            "frames or duration) and/or [audio] (sample_rate, channels, samples or duration)"
        ) from exc
    v, a = exp.video, exp.audio
    # Parsed even without a length: an invalid frame rate is refused here either way.
    video_rate = parse_rate(v.frame_rate) if v is not None and v.frame_rate is not None else None
    sections = (("video", v, video_rate), ("audio", a, a.sample_rate if a is not None else None))
    for kind, section, rate in sections:
        if section is None or section.duration is None or not rate:
            continue
        _, conflict = _implied_count(kind, _count(kind, section), section.duration, rate)
        if conflict:
            raise MediaError(
                f"{where}: inconsistent {kind} length: {conflict}; give one of them or "
                "make them agree"
            )
    return exp


LENGTH_KEYS = {"video": "frames or duration", "audio": "samples or duration"}

# Per stream kind: the count a request may give instead of a duration, the rate that
# turns one into the other, and that rate's unit.
_COUNTS = {"video": ("frames", "frame rate", "fps"), "audio": ("samples", "sample rate", "Hz")}


def _count(kind: str, exp: VideoExpectation | AudioExpectation) -> int | None:
    """The requested ``frames`` (video) or ``samples`` (audio)."""
    count: int | None = getattr(exp, _COUNTS[kind][0])
    return count


def _implied_count(
    kind: str, count: int | None, duration: float, rate: Fraction | int
) -> tuple[int, str | None]:
    """The count ``duration`` seconds make at ``rate``, and how that disagrees with the
    requested ``count`` (None when it does not)."""
    noun, _, unit = _COUNTS[kind]
    implied = round(Fraction(str(duration)) * rate)
    if count is None or implied == count:
        return implied, None
    return (
        implied,
        f"{noun} = {count} but duration {duration} s at {rate} {unit} is {implied} {noun}",
    )


def missing_lengths(expectations: Expectations, kinds: Iterable[str]) -> list[str]:
    """The stream kinds among ``kinds`` for which ``expectations`` give no length."""
    out: list[str] = []
    for kind in ("video", "audio"):
        if kind not in kinds:
            continue
        section = expectations.video if kind == "video" else expectations.audio
        if section is None or (
            section.duration is None
            and (section.frames if isinstance(section, VideoExpectation) else section.samples)
            is None
        ):
            out.append(kind)
    return out


def require_lengths(expectations: Expectations, kinds: Iterable[str], name: str) -> None:
    """Raise :class:`MediaError` when the request gives no length for a kind ``name``
    carries: outputs are checked against what was requested, and without a length two
    equally truncated outputs would pass."""
    missing = missing_lengths(expectations, kinds)
    if missing:
        wanted = "; ".join(f"[{k}] {LENGTH_KEYS[k]}" for k in missing)
        raise MediaError(
            f"{name} has {' and '.join(missing)} but the expectations give no length for it: "
            f"expected {wanted}"
        )


def load_expectations(path: str | os.PathLike[str]) -> Expectations:
    """Read expectations from a ``.toml`` or ``.json`` file."""
    p = Path(path)
    try:
        raw = p.read_bytes()
    except OSError as exc:
        raise MediaError(f"{p}: cannot read expectations: {exc.strerror}") from exc
    kind = "JSON" if p.suffix.lower() == ".json" else "TOML"
    try:
        text = raw.decode("utf-8")
        data = loads_json(raw) if kind == "JSON" else tomllib.loads(text)
    except RecursionError:
        raise MediaError(f"{p}: not valid {kind}: nested too deeply") from None
    except (UnicodeDecodeError, ValueError, msgspec.DecodeError) as exc:
        raise MediaError(f"{p}: not valid {kind}: {exc}") from None
    if nesting_depth(data) > MAX_DEPTH:
        raise MediaError(f"{p}: not valid expectations: nested deeper than {MAX_DEPTH} levels")
    if not isinstance(data, dict):
        raise MediaError(f"{p}: expected a table/object of expectations")
    return expectations_from_mapping(data, str(p))


def with_overrides(
    base: Expectations | None,
    video: Mapping[str, Any] | None = None,
    audio: Mapping[str, Any] | None = None,
) -> Expectations:
    """Return ``base`` with the non-None values of ``video`` / ``audio`` applied (flags)."""
    base = base or Expectations()
    out = msgspec.to_builtins(base)
    for key, values in (("video", video), ("audio", audio)):
        given = {k: v for k, v in (values or {}).items() if v is not None}
        if given:
            out[key] = {**(out.get(key) or {}), **given}
    return expectations_from_mapping(out, "expectation flags")


# --------------------------------------------------------------------------- checks


def _sec(value: Fraction | None) -> float | None:
    return None if value is None else float(value)


def _fmt(value: Fraction | float | None) -> str:
    return "none" if value is None else f"{float(value):.6f} s"


def _tb(stream: DecodedStream) -> Fraction | None:
    return Fraction(stream.time_base) if stream.time_base else None


#: The timestamp unit of containers whose timestamps are coarser than their codecs' sample
#: clocks (FFmpeg's demuxer name, as PyAV reports it in ``container.format.name``).
#: Matroska/WebM store timestamps in TimestampScale units, 1 ms as every muxer writes it.
CONTAINER_QUANTA: dict[str, tuple[str, Fraction]] = {
    "matroska": ("Matroska/WebM", Fraction(1, 1000)),
    "webm": ("Matroska/WebM", Fraction(1, 1000)),
    "flv": ("FLV", Fraction(1, 1000)),
}


@dataclass(frozen=True)
class Tolerance:
    """How closely a stream's stored timestamps can match ideal times (module doc).

    ``quantum`` is the coarser of the stream time base and the container's timestamp unit;
    ``on_grid`` whether every ideal time (a multiple of ``step``) is a whole quantum.
    """

    time_base: Fraction
    quantum: Fraction
    on_grid: bool
    unit: str  # where the quantum comes from, for messages

    @classmethod
    def of(cls, s: DecodedStream, container: str, step: Fraction | None) -> Tolerance | None:
        """The tolerance of stream ``s`` in ``container`` whose frames or samples last
        ``step`` seconds (None when unknown: judged as on the grid); None without a time
        base."""
        tb = _tb(s)
        if tb is None:
            return None
        known = [CONTAINER_QUANTA[n] for n in container.split(",") if n in CONTAINER_QUANTA]
        name, unit = known[0] if known else ("", tb)
        quantum = max(tb, unit)
        if quantum > tb:
            where = f"{name}'s {_quantum_text(unit)} timestamps, coarser than the time base {tb}"
        elif known:
            where = f"the time base {tb} ({name} stores {_quantum_text(unit)} timestamps)"
        else:
            where = f"the time base {tb}"
        on_grid = step is None or (step / quantum).denominator == 1
        return cls(tb, quantum, on_grid, where)

    @property
    def first(self) -> Fraction:
        """For a timestamp against an exact time (the start, 0): half a quantum."""
        return self.quantum / 2

    @property
    def point(self) -> Fraction:
        """For a timestamp against a time measured from another stored timestamp."""
        return self.time_base / 2 if self.on_grid else self.quantum

    @property
    def end(self) -> Fraction:
        """For an end: a stored timestamp plus a stored (possibly truncated) duration."""
        return self.time_base / 2 if self.on_grid else self.quantum * 3 / 2

    def says(self, value: Fraction) -> str:
        """The tolerance ``value`` in words, with its reason."""
        if self.on_grid:
            return (
                f"tolerance half a tick ({_fmt(value)}): ideal times are whole ticks of {self.unit}"
            )
        quanta = {self.quantum / 2: "half a quantum", self.quantum: "one quantum"}.get(
            value, "one and a half quanta"
        )
        return f"tolerance {quanta} ({_fmt(value)}) of {self.unit}"


def _quantum_text(unit: Fraction) -> str:
    ms = unit * 1000
    return f"{ms} ms" if ms.denominator == 1 else f"{unit} s"


class _Checks:
    def __init__(self) -> None:
        self.items: list[Check] = []
        self.bounds: list[LengthBound] = []

    def add(
        self,
        name: str,
        ok: bool,
        expected: Value,
        observed: Value,
        message: str,
        stream: int | None = None,
    ) -> None:
        self.items.append(
            Check(
                name=name,
                ok=bool(ok),
                expected=expected,
                observed=observed,
                message=message,
                stream=stream,
            )
        )

    def equal(self, name: str, expected: Value, observed: Value, what: str, stream: int) -> None:
        ok = expected == observed
        message = f"{what} is {observed!r}" + ("" if ok else f", expected {expected!r}")
        self.add(name, ok, expected, observed, message, stream)


def _article(word: str) -> str:
    return "an" if word[:1] in "aeiou" else "a"


def _info(report: MediaReport, index: int) -> StreamInfo | None:
    return next((s for s in report.probe.streams if s.index == index), None)


def _common(
    checks: _Checks, s: DecodedStream, exp: VideoExpectation | AudioExpectation | None
) -> None:
    """What every stream is held to: frames decoded, none corrupt, one format, a record
    and a timestamp per frame, and the properties ``exp`` asks for."""
    kind = s.type
    checks.add(
        f"{kind}.decoded",
        s.frames > 0,
        "at least one frame",
        s.frames,
        f"{s.frames} {kind} frames decoded",
        s.index,
    )
    checks.add(
        f"{kind}.corrupt_frames",
        s.corrupt_frames == 0,
        0,
        s.corrupt_frames,
        f"{s.corrupt_frames} frames flagged corrupt by the decoder",
        s.index,
    )
    checks.add(
        f"{kind}.format_changes",
        s.format_changes == 0,
        0,
        s.format_changes,
        f"{s.format_changes} mid-stream changes of geometry or sample format",
        s.index,
    )
    if len(s.frame_records) != s.frames:
        checks.add(
            f"{kind}.frame_records",
            False,
            s.frames,
            len(s.frame_records),
            f"{len(s.frame_records)} frame records for {s.frames} decoded frames: timestamp, "
            "continuity and end-time checks need every frame's record (analyse with "
            "keep_frames=True)",
            s.index,
        )
    missing = sum(1 for r in s.frame_records if r.pts is None)
    checks.add(
        f"{kind}.timestamps",
        missing == 0,
        0,
        missing,
        f"{missing} frames without a presentation timestamp",
        s.index,
    )
    _requested_properties(checks, kind, s, exp)


@dataclass(frozen=True)
class _Origin:
    """Time 0 of a file's timeline: 0, or for MPEG-TS (whose timestamps start anywhere)
    the first video frame's time (audio-only: the first audio sample after the
    encoder's untrimmed priming)."""

    at: Fraction = Fraction(0)
    why: str = ""

    def lead(self, s: DecodedStream) -> Fraction:
        """Where ``s`` should start relative to the origin: before it by the encoder
        priming that an MPEG-TS stream carries untrimmed (decoded as content)."""
        return _untrimmed_lead(s) if self.why else Fraction(0)


def _untrimmed_lead(s: DecodedStream) -> Fraction:
    """Minus the duration of the encoder priming ``s`` decodes as content (none trimmed)."""
    if s.type != "audio" or s.skip_start is not None or not s.sample_rate:
        return Fraction(0)
    return -Fraction(UNTRIMMED_PRIMING.get(s.codec or "", 0), s.sample_rate)


# Containers whose timestamps have no origin of their own: a transport stream starts its
# clock anywhere; a raw elementary stream's first frame may be priming the decoder drops.
_NO_ORIGIN = {"mpegts": "MPEG-TS", "mp3": "raw MP3", "aac": "raw ADTS"}


def _origin(report: MediaReport) -> _Origin:
    names = [_NO_ORIGIN[n] for n in report.probe.container.split(",") if n in _NO_ORIGIN]
    if not names:
        return _Origin()
    starts = [
        (s.type, s.first_pts * tb - _untrimmed_lead(s))
        for s in report.decoded
        if s.first_pts is not None and (tb := _tb(s)) is not None
    ]
    video = [t for kind, t in starts if kind == "video"]
    if video:
        why = f"{names[0]} has no timeline origin: time 0 is the first video frame"
        return _Origin(min(video), why)
    if starts:
        why = f"{names[0]} has no timeline origin: time 0 is the first presented audio sample"
        return _Origin(min(t for _, t in starts), why)
    return _Origin()


def _first_timestamp(
    checks: _Checks, s: DecodedStream, tol: Tolerance | None, origin: _Origin
) -> None:
    tb = _tb(s)
    if s.first_pts is None or tb is None or tol is None:
        return
    t = s.first_pts * tb - origin.at
    want = origin.lead(s)
    where = f" ({origin.why})" if origin.why else ""
    checks.add(
        f"{s.type}.first_timestamp",
        abs(t - want) <= tol.first,
        float(want),
        float(t),
        f"first {s.type} timestamp {_fmt(t)} (after edit-list trimming){where}, expected "
        + (f"{_fmt(want)} (its untrimmed priming before time 0)" if want else "0")
        + f"; {tol.says(tol.first)}",
        s.index,
    )


def _continuity(
    checks: _Checks, s: DecodedStream, ideal_step: Any, basis: str, tol: Tolerance | None
) -> None:
    """Every frame's time must be within the tolerance of first + the ideal offset."""
    tb = _tb(s)
    records = [r for r in s.frame_records if r.pts is not None]
    if tb is None or tol is None or not records:
        return
    limit = tol.point
    anchor = records[0].pts * tb  # type: ignore[operator]
    offset = Fraction(0)
    bad: list[tuple[FrameRecord, Fraction, Fraction]] = []
    worst = Fraction(0)
    prev: FrameRecord | None = None
    for r in records:
        if prev is not None:
            offset += ideal_step(prev)
        ideal = anchor + offset
        t = r.pts * tb  # type: ignore[operator]
        dev = abs(t - ideal)
        if dev > limit:
            bad.append((r, t, ideal))
            # Re-anchor so one gap counts once, not once per frame after it.
            anchor, offset = t, Fraction(0)
        else:
            worst = max(worst, dev)
        prev = r
    if bad:
        r, t, ideal = bad[0]
        kind = "gap" if t > ideal else "overlap"
        message = (
            f"{len(bad)} discontinuit{'y' if len(bad) == 1 else 'ies'} in the {s.type} "
            f"timeline ({basis}); first: "
            f"frame {r.index} at {_fmt(t)}, expected {_fmt(ideal)} ({kind} of "
            f"{_fmt(abs(t - ideal))}); {tol.says(limit)}"
        )
    else:
        message = (
            f"{len(records)} {s.type} frames continuous ({basis}); largest deviation "
            f"{_fmt(worst)}, {tol.says(limit)}"
        )
    checks.add(f"{s.type}.continuity", not bad, 0, len(bad), message, s.index)


# Per stream kind: the requested properties checked as they are, and what each is called.
_PROPERTIES = {
    "video": (
        ("codec", "video codec"),
        ("width", "decoded width"),
        ("height", "decoded height"),
        ("pix_fmt", "decoded pixel format"),
    ),
    "audio": (
        ("codec", "audio codec"),
        ("sample_rate", "sample rate"),
        ("channels", "channel count"),
        ("layout", "channel layout"),
        ("sample_format", "sample format"),
    ),
}


def _requested_properties(
    checks: _Checks,
    kind: str,
    s: DecodedStream,
    exp: VideoExpectation | AudioExpectation | None,
) -> None:
    """Check each property ``exp`` gives (codec, geometry, format) against the decoded one."""
    if exp is None:
        return
    for key, what in _PROPERTIES[kind]:
        wanted = getattr(exp, key)
        if wanted is not None:
            checks.equal(f"{kind}.{key}", wanted, getattr(s, key), what, s.index)


@dataclass(frozen=True)
class _Stream:
    """One decoded stream with what its checks read: the container's word on it, the
    report's probe and the presentation origin."""

    s: DecodedStream
    info: StreamInfo | None
    probe: ProbeReport
    origin: _Origin


def _video(checks: _Checks, st: _Stream, exp: VideoExpectation | None) -> None:
    s, info, container, origin = st.s, st.info, st.probe.container, st.origin
    _common(checks, s, exp)
    i = s.index
    declared_rate = parse_rate(info.frame_rate) if info and info.frame_rate else None
    rate = parse_rate(exp.frame_rate) if exp and exp.frame_rate is not None else declared_rate
    tb = _tb(s)
    tol = Tolerance.of(s, container, 1 / rate if rate is not None else None)
    if exp is not None and exp.frame_rate is not None:
        assert rate is not None
        ok = declared_rate == rate
        how = ""
        if not ok and declared_rate is not None and tol is not None and not tol.on_grid:
            # A rate the demuxer measured from rounded timestamps: n frame intervals at
            # the declared rate must span the requested time to within one quantum.
            n = max(1, s.frames - 1)
            ok = abs(n / declared_rate - n / rate) <= tol.point
            how = f" (measured over {n} frame intervals; {tol.says(tol.point)})"
        checks.add(
            "video.frame_rate",
            ok,
            str(rate),
            None if declared_rate is None else str(declared_rate),
            f"declared frame rate {declared_rate}, expected {rate}{how}",
            i,
        )
    _first_timestamp(checks, s, tol, origin)
    if rate is not None:
        _continuity(checks, s, lambda _r: 1 / rate, f"1/{rate} s per frame", tol)
    else:
        checks.add(
            "video.continuity",
            False,
            "a frame rate",
            None,
            "no frame rate known (neither requested nor declared by the container): "
            "continuity, last timestamp and end time cannot be checked; give frame_rate",
            i,
        )
    # Declared vs decoded.
    if info is not None and info.frames is not None:
        # Frames the edit list leaves out are not presented (FFmpeg drops them) but are
        # still among the frames the container declares.
        carried = s.frames + s.discarded_packets
        outside = (
            f" ({s.frames} presented + {s.discarded_packets} outside the edit list)"
            if s.discarded_packets
            else ""
        )
        checks.add(
            "video.declared_frames",
            info.frames == carried,
            info.frames,
            carried,
            f"decoded frame count is {carried}{outside}"
            + ("" if info.frames == carried else f", expected {info.frames!r}"),
            i,
        )
    records = [r for r in s.frame_records if r.pts is not None]
    end: Fraction | None = None
    if records and tb is not None:
        last = records[-1]
        step = last.duration * tb if last.duration else (1 / rate if rate else None)
        end = last.pts * tb + step - origin.at if step is not None else None  # type: ignore[operator]
    if info is not None and info.duration is not None and tol is not None and end is not None:
        declared = info.duration * tol.time_base
        checks.add(
            "video.declared_duration",
            abs(end - declared) <= tol.end,
            float(declared),
            float(end),
            f"decoded video ends at {_fmt(end)}; the container declares {_fmt(declared)}; "
            + tol.says(tol.end),
            i,
        )
    frames = _requested_length(checks, "video", s, exp, rate)
    if frames is None:
        return
    dropped = (
        f" (after the edit list: {s.discarded_packets} frames outside it not presented)"
        if s.discarded_packets
        else ""
    )
    checks.add(
        "video.frames",
        s.frames == frames,
        frames,
        s.frames,
        f"decoded {s.frames} video frames{dropped}, expected {frames}",
        i,
    )
    if rate is None or tb is None or tol is None or not records:
        return
    want_last = (frames - 1) / rate
    last_t = records[-1].pts * tb - origin.at  # type: ignore[operator]
    checks.add(
        "video.last_timestamp",
        abs(last_t - want_last) <= tol.point,
        float(want_last),
        float(last_t),
        f"last video frame at {_fmt(last_t)}, expected {_fmt(want_last)}; " + tol.says(tol.point),
        i,
    )
    want_end = frames / rate
    checks.add(
        "video.end_time",
        end is not None and abs(end - want_end) <= tol.end,
        float(want_end),
        _sec(end),
        f"video ends at {_fmt(end)}, expected {_fmt(want_end)}; " + tol.says(tol.end),
        i,
    )


def _no_length(checks: _Checks, kind: str, s: DecodedStream, why: str) -> None:
    checks.add(
        f"{kind}.length",
        False,
        LENGTH_KEYS[kind],
        None,
        f"{why}: the request must give {LENGTH_KEYS[kind]} for every {kind} stream "
        "(equally truncated outputs would otherwise pass)",
        s.index,
    )


def _requested_length(
    checks: _Checks,
    kind: str,
    s: DecodedStream,
    exp: VideoExpectation | AudioExpectation | None,
    rate: Fraction | int | None,
) -> int | None:
    """The requested frame count (video) or samples per channel (audio), from the count
    and/or ``duration``; None after recording why it is missing or inconsistent."""
    noun, rate_name, _ = _COUNTS[kind]
    if exp is None:
        _no_length(checks, kind, s, f"no [{kind}] expectations")
        return None
    count = _count(kind, exp)
    if count is None and exp.duration is None:
        _no_length(checks, kind, s, f"no {kind} {noun} or duration requested")
        return None
    if exp.duration is None:
        return count
    if not rate:
        _no_length(checks, kind, s, f"a duration was requested but no {rate_name} is known")
        return None
    implied, conflict = _implied_count(kind, count, exp.duration, rate)
    if conflict:
        checks.add(
            f"{kind}.length", False, count, implied, f"inconsistent request: {conflict}", s.index
        )
        return None
    return implied


def _padding_ok(excess: int, allowance: int) -> bool:
    return excess == 0 if allowance <= 0 else 0 <= excess < allowance


def _audio(checks: _Checks, st: _Stream, exp: AudioExpectation | None) -> None:
    s, info, probe, origin = st.s, st.info, st.probe, st.origin
    _common(checks, s, exp)
    i = s.index
    rate = s.sample_rate
    tb = _tb(s)
    decoded = s.samples or 0
    override = exp.codec_frame_size if exp is not None else None
    allowance = codec_allowance(s, info, override, probe.container)
    tol = Tolerance.of(s, probe.container, Fraction(1, rate) if rate else None)
    _first_timestamp(checks, s, tol, origin)
    if rate:
        _continuity(
            checks,
            s,
            lambda r: Fraction(r.samples or 0, rate),
            "by decoded sample count",
            tol,
        )
    if info is not None and info.duration is not None and tb is not None and rate:
        declared = info.duration * tb * rate
        diff = decoded - declared
        ok = abs(diff) < allowance if allowance > 0 else abs(diff) <= tb * rate / 2
        checks.add(
            "audio.declared_samples",
            ok,
            float(declared),
            decoded,
            f"decoded {decoded} samples per channel; the container declares {float(declared):g} "
            f"(allowed difference: less than one codec frame, {allowance})",
            i,
        )
    want_rate = (exp.sample_rate if exp is not None else None) or rate
    expected = _requested_length(checks, "audio", s, exp, want_rate)
    if expected is None or not want_rate:
        return
    _samples(checks, s, info, probe, expected, allowance)
    records = [r for r in s.frame_records if r.pts is not None]
    if not records or tb is None or tol is None or not rate:
        return
    last = records[-1]
    # The last frame's stored timestamp plus its exact length in samples.
    # From where this stream's first sample should be (before the origin by untrimmed
    # MPEG-TS priming): the decoded count, priming included, is judged as for raw ADTS.
    start = origin.at + origin.lead(s)
    end = last.pts * tb + Fraction(last.samples or 0, rate) - start  # type: ignore[operator]
    want_end = Fraction(expected, want_rate)
    low = want_end - tol.point
    high = want_end + Fraction(allowance, rate) + tol.point
    end_ok = low <= end < high if allowance > 0 else abs(end - want_end) <= tol.point
    checks.add(
        "audio.end_time",
        end_ok,
        float(want_end),
        float(end),
        f"audio ends at {_fmt(end)}, expected {_fmt(want_end)}"
        + (f" (plus less than {allowance} samples of codec padding)" if allowance else "")
        + f"; {tol.says(tol.point)}",
        i,
    )


def _samples(
    checks: _Checks,
    s: DecodedStream,
    info: StreamInfo | None,
    probe: ProbeReport,
    expected: int,
    allowance: int,
) -> None:
    """``audio.samples``: the presented count against the request (exactly where the
    container fixes it); ``audio.padding``: what the decoder emitted beyond it."""
    i = s.index
    decoded = s.samples or 0
    shown = presented_samples(s, info, probe, allowance)
    if shown.resolution is None:  # no container information: the padding bound
        excess = decoded - expected
        ok = _padding_ok(excess, allowance)
        rule = (
            f"{expected} <= decoded < {expected + allowance}"
            if allowance > 0
            else f"exactly {expected}"
        )
        what = f"{-excess} samples short (truncated)" if excess < 0 else f"excess {excess}"
        bound = ""
        if ok and s.sample_rate:
            # The presented count is at least decoded - (allowance - 1): that many
            # samples of the request could be missing without the decode showing it.
            hidden = max(0, allowance - 1 - excess)
            b = LengthBound(
                stream=i,
                samples=hidden,
                ms=round(hidden * 1000 / s.sample_rate, 3),
                sample_rate=s.sample_rate,
                reason=shown.silent,
            )
            checks.bounds.append(b)
            bound = f"; bounded, not verified: up to {hidden} samples ({b.ms:.3f} ms) short"
        checks.add(
            "audio.samples",
            ok,
            expected,
            decoded,
            f"decoded {decoded} samples per channel, expected {rule}: {what}{bound}; source: "
            f"{shown.source}",
            i,
        )
        checks.add(
            "audio.padding",
            ok,
            allowance,
            excess,
            (f"{excess} samples beyond" if excess >= 0 else f"{-excess} samples short of")
            + f" the expected {expected} (codec padding allowance: less than one codec "
            f"frame, {allowance})",
            i,
        )
        return
    gap = shown.samples - expected
    if shown.resolution > 1:
        ok = abs(gap) < shown.resolution
        rule = f"{expected} to within the source's resolution of {shown.resolution} samples"
    else:
        ok = gap == 0
        rule = f"exactly {expected}"
    if gap < 0:
        what = f"{-gap} sample{'s' if gap < -1 else ''} short (truncated)"
    elif gap > 0:
        what = f"{gap} sample{'s' if gap > 1 else ''} too many"
    else:
        what = "as requested"
    checks.add(
        "audio.samples",
        ok,
        expected,
        shown.samples,
        f"{shown.samples} samples per channel presented, expected {rule}: {what}; source: "
        f"{shown.source}; decoded {decoded}",
        i,
    )
    padding = decoded - shown.samples
    checks.add(
        "audio.padding",
        ok and (_padding_ok(padding, allowance) or padding == 0),
        allowance,
        padding,
        f"the decoder emitted {decoded} samples, {padding} beyond the {shown.samples} "
        f"presented (codec padding allowance: less than one codec frame, {allowance})"
        + (
            ""
            if gap >= 0
            else f"; the presented samples are {-gap} short of the expected {expected}"
        ),
        i,
    )


def verify_report(
    report: MediaReport, expectations: Expectations | None = None
) -> tuple[Check, ...]:
    """Return every check of ``report`` against ``expectations`` (intrinsic checks always)."""
    return assess(report, expectations)[0]


def verdict_of(
    checks: tuple[Check, ...], bounds: tuple[LengthBound, ...], audio_length: LengthPolicy
) -> Literal["PASS", "FAIL", "INCONCLUSIVE"]:
    """FAIL when a check failed; INCONCLUSIVE when an audio length is only bounded and
    ``audio_length`` is ``exact`` (unverifiable is never valid); else PASS."""
    if not all(c.ok for c in checks):
        return "FAIL"
    return "INCONCLUSIVE" if bounds and audio_length == "exact" else "PASS"


def assess(
    report: MediaReport, expectations: Expectations | None = None
) -> tuple[tuple[Check, ...], tuple[LengthBound, ...]]:
    """Every check of ``report`` against ``expectations``, and the audio streams whose
    length is bounded, not verified (``presented.py``)."""
    exp = expectations or Expectations()
    checks = _Checks()
    name = report.probe.name
    open_errors = [e for e in report.errors if e.stage == "open"]
    if open_errors:
        checks.add("open", False, "a media container", None, open_errors[0].message)
        return tuple(checks.items), ()
    checks.add("open", True, "a media container", report.probe.container, f"{name}: opened")
    others = [e for e in report.errors if e.stage != "open"]
    if others:
        first = others[0]
        where = f" in stream {first.stream}" if first.stream is not None else ""
        message = f"{len(others)} {first.stage} errors{where}; first: {first.message}"
    else:
        message = "no demux or decode errors"
    checks.add("decode.errors", not others, 0, len(others), message)
    kinds: list[str] = [s.type for s in report.decoded]
    checks.add(
        "streams.decodable",
        bool(kinds),
        "at least one audio or video stream",
        len(kinds),
        f"{len(kinds)} audio/video streams"
        + ("" if kinds else f" in {name} (container {report.probe.container})"),
    )
    for kind, section in (("video", exp.video), ("audio", exp.audio)):
        if section is not None:
            n = kinds.count(kind)
            checks.add(
                f"streams.{kind}",
                n > 0,
                "present",
                n,
                f"{n} {kind} streams" + ("" if n else f": expected {_article(kind)} {kind} stream"),
            )
    origin = _origin(report)
    # Every stream of a kind is checked against that kind's section (multi-track files:
    # a second audio track truncated is as invalid as the first).
    for s in report.decoded:
        st = _Stream(s, _info(report, s.index), report.probe, origin)
        if s.type == "video":
            _video(checks, st, exp.video)
        else:
            _audio(checks, st, exp.audio)
    return tuple(checks.items), tuple(checks.bounds)


def check(
    ref: Any,
    expectations: Expectations | None = None,
    root: str | os.PathLike[str] | None = None,
    *,
    before_decode: Callable[[set[str]], None] | None = None,
    audio_length: LengthPolicy = "exact",
) -> CheckReport:
    """Decode ``FILE|DIGEST`` fully and check it against ``expectations``
    (``before_decode`` as for :func:`~evidencestore.media.decode.analyse`); a length the
    container cannot state makes it INCONCLUSIVE unless ``audio_length="bounded"``."""
    from .decode import analyse
    from .versions import tool_versions

    report = analyse(ref, root, before_decode=before_decode)
    checks, bounds = assess(report, expectations)
    return CheckReport(
        verdict=verdict_of(checks, bounds, audio_length),
        checks=checks,
        expectations=expectations or Expectations(),
        report=report,
        versions=tool_versions(),
        bounds=bounds,
        audio_length=audio_length,
    )
