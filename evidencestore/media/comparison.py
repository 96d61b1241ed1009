"""Comparison of a reference and a candidate, with verdicts as in DESIGN.md.

Order: each input is decoded fully and checked against the request's expectations (an
invalid input makes the comparison FAIL whatever else holds); then compatibility
(geometry, pixel format, frame count and timestamps, sample rate, layout, sample format,
sample count); incompatible inputs are UNAVAILABLE and no metric is computed (nothing is
resized, resampled, padded or trimmed). Exact equality per stream comes from the decoded
content digests: all equal is PASS, unless an input's audio length is bounded, not
verified (``LengthBound``): then INCONCLUSIVE unless ``audio_length="bounded"`` accepts
bounded lengths, and every verdict on such an input names its bounds. Otherwise metrics are computed frame by frame in
lockstep (memory does not grow with duration): a violated threshold is FAIL, and unequal
outputs within every threshold are INCONCLUSIVE, never PASS. The metrics read each stream's
frames from a :data:`FrameReader`: by default :func:`stream_frames` decodes the source again;
a caller that kept the frames of its own analysis (``analyse(on_frame=...)``) passes a
reader over them, so each input is decoded once.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterator, Sequence
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from .decode import _row_bytes, analyse, decodable, iter_frames
from .expectations import assess
from .probing import opened
from .records import (
    AudioMetrics,
    Check,
    ComparisonMetrics,
    ComparisonRecord,
    DecodedStream,
    DecodeErrorRecord,
    Expectations,
    FrameMetrics,
    InputRecord,
    LengthBound,
    LengthPolicy,
    MediaReport,
    PerceptualSummary,
    PlaneMetrics,
    StreamEquality,
    Thresholds,
    Value,
    Verdict,
    VideoMetrics,
)
from .scoring import FrameScorer
from .source import MediaSource, resolve

if TYPE_CHECKING:
    import numpy as np

__all__ = [
    "EXIT_CODES",
    "FrameReader",
    "audio_array",
    "compare",
    "compare_reports",
    "stream_frames",
]

EXIT_CODES: dict[str, int] = {"PASS": 0, "FAIL": 1, "INCONCLUSIVE": 3, "UNAVAILABLE": 4}


def _of_kind(report: MediaReport, kind: str) -> list[DecodedStream]:
    return [s for s in report.decoded if s.type == kind]


def _pairs(ref: MediaReport, cand: MediaReport, kind: str) -> list[tuple[DecodedStream, ...]]:
    """Stream pairs of one kind, matched by order within the kind."""
    return list(zip(_of_kind(ref, kind), _of_kind(cand, kind), strict=False))


def _check(
    name: str, expected: Value, observed: Value, what: str, stream: int | None = None
) -> Check:
    ok = expected == observed
    message = f"{what}: reference {expected!r}, candidate {observed!r}"
    return Check(
        name=name, ok=ok, expected=expected, observed=observed, message=message, stream=stream
    )


def _times(s: DecodedStream) -> list[Fraction | None]:
    tb = Fraction(s.time_base) if s.time_base else None
    return [None if r.pts is None or tb is None else r.pts * tb for r in s.frame_records]


def compatibility(ref: MediaReport, cand: MediaReport) -> tuple[Check, ...]:
    """Checks that the two inputs can be compared as they are (reference = expected).

    The number of decodable streams of each kind must agree; every pair (matched by order
    within the kind) must then agree in geometry, pixel format, colour tags and sample
    aspect ratio, frame count and timestamps (video) or rate, layout, sample format,
    sample count and first timestamp (audio).
    """
    out: list[Check] = []
    for kind in ("video", "audio"):
        nr, nc = len(_of_kind(ref, kind)), len(_of_kind(cand, kind))
        out.append(_check(f"compat.{kind}.present", nr > 0, nc > 0, f"{kind} stream"))
        out.append(_check(f"compat.{kind}.streams", nr, nc, f"number of {kind} streams"))
        for pair, (r, c) in enumerate(_pairs(ref, cand, kind)):
            what = f" (stream pair {pair})" if pair else ""
            if kind == "video":
                fields = [
                    ("width", "width"),
                    ("height", "height"),
                    ("pix_fmt", "pixel format"),
                    ("color_range", "colour range"),
                    ("colorspace", "colour matrix"),
                    ("color_primaries", "colour primaries"),
                    ("color_trc", "transfer characteristics"),
                    ("sample_aspect_ratio", "sample aspect ratio"),
                    ("frames", "frame count"),
                ]
            else:
                fields = [
                    ("sample_rate", "rate"),
                    ("channels", "channels"),
                    ("layout", "channel layout"),
                    ("sample_format", "format"),
                    ("samples", "samples"),
                ]
            for key, label in fields:
                out.append(
                    _check(
                        f"compat.{kind}.{key}",
                        getattr(r, key),
                        getattr(c, key),
                        label + what,
                        r.index,
                    )
                )
            out.append(_timestamps(r, c, first_only=kind == "audio"))
    return tuple(out)


def _timestamps(r: DecodedStream, c: DecodedStream, *, first_only: bool = False) -> Check:
    """Frame times must agree within half a tick of each stream's time base."""
    name = f"compat.{r.type}.timestamps"
    tr, tc = _times(r), _times(c)
    if first_only:
        tr, tc = tr[:1], tc[:1]
    tol = (
        (Fraction(r.time_base) + Fraction(c.time_base)) / 2
        if r.time_base and c.time_base
        else Fraction(0)
    )
    mismatched = [
        i
        for i, (a, b) in enumerate(zip(tr, tc, strict=False))
        if a is None or b is None or abs(a - b) > tol
    ]
    if len(tr) != len(tc):
        mismatched.append(min(len(tr), len(tc)))
    what = "first timestamp" if first_only else "frame timestamps"
    if mismatched:
        i = mismatched[0]
        a = tr[i] if i < len(tr) else None
        b = tc[i] if i < len(tc) else None
        message = (
            f"{len(mismatched)} {r.type} {what} differ; first at frame {i}: reference "
            f"{None if a is None else float(a)}, candidate {None if b is None else float(b)}"
        )
    else:
        message = f"{r.type} {what} agree within half a tick"
    return Check(
        name=name,
        ok=not mismatched,
        expected=0,
        observed=len(mismatched),
        message=message,
        stream=r.index,
    )


def equality(ref: MediaReport, cand: MediaReport) -> tuple[StreamEquality, ...]:
    """Exact equality of the decoded content of every stream pair (matched by order within
    each kind; an unmatched stream is recorded as unequal)."""
    out: list[StreamEquality] = []
    for kind in ("video", "audio"):
        rs, cs = _of_kind(ref, kind), _of_kind(cand, kind)
        key = "root" if kind == "video" else "content_digest"
        for pair in range(max(len(rs), len(cs))):
            r = rs[pair] if pair < len(rs) else None
            c = cs[pair] if pair < len(cs) else None
            a = getattr(r, key) if r is not None else None
            b = getattr(c, key) if c is not None else None
            first: int | None = None
            if r is not None and c is not None and a != b:
                pairs = zip(r.frame_records, c.frame_records, strict=False)
                first = next((x.index for x, y in pairs if x.digest != y.digest), None)
                if first is None:
                    first = min(len(r.frame_records), len(c.frame_records))
            out.append(
                StreamEquality(
                    type=kind,
                    equal=a is not None and a == b,
                    reference=a,
                    candidate=b,
                    first_difference=first,
                    pair=pair,
                    reference_stream=None if r is None else r.index,
                    candidate_stream=None if c is None else c.index,
                )
            )
    return tuple(out)


def _input_record(
    report: MediaReport, checks: tuple[Check, ...], bounds: tuple[LengthBound, ...]
) -> InputRecord:
    import msgspec

    return InputRecord(
        bounds=bounds,
        name=report.probe.name,
        source=report.probe.source,
        container=report.probe.container,
        valid=all(c.ok for c in checks),
        checks=checks,
        streams=tuple(msgspec.structs.replace(s, frame_records=()) for s in report.decoded),
        errors=report.errors,
    )


# --------------------------------------------------------------------------- metrics


class _Mismatch(Exception):
    """The decoded streams turned out not to pair up frame by frame."""


#: ``(source, kind, pair)`` -> the decoded frames of ``source``'s ``pair``-th decodable
#: stream of ``kind`` (``"video"`` or ``"audio"``), in decode order.
FrameReader = Callable[[MediaSource, str, int], Iterator[Any]]


def stream_frames(source: MediaSource, kind: str, pair: int = 0) -> Iterator[Any]:
    """Frames of the ``pair``-th decodable stream of ``kind``, decoded again."""
    with opened(source) as container:
        streams = [s for s in container.streams if s.type == kind and decodable(s)]
        streams = streams[pair : pair + 1]
        errors: list[DecodeErrorRecord] = []  # already recorded by the validity pass
        for _index, frame in iter_frames(container, streams, errors):
            yield frame


def _lockstep(a: Iterator[Any], b: Iterator[Any]) -> Iterator[tuple[Any, Any]]:
    sentinel = object()
    while True:
        x, y = next(a, sentinel), next(b, sentinel)
        if x is sentinel and y is sentinel:
            return
        if x is sentinel or y is sentinel:
            raise _Mismatch("one stream has more frames than the other")
        yield x, y


class _NotMeasurable(Exception):
    """The pixel format's samples cannot be read plane by plane as integers."""


# Formats with 9-15 bit components stored LSB-aligned in 16-bit words (FFmpeg's planar
# high-depth families); others (p010, y210, x2rgb10, ...) pack or shift their bits.
_LSB_ALIGNED = ("yuv", "gbr", "gray")


def not_measurable(fmt: Any) -> str | None:
    """Why per-plane MSE/PSNR cannot be computed on ``fmt``'s native samples, or None."""
    if fmt.has_palette:
        return "palette format (samples are indices into a palette)"
    if fmt.is_bit_stream or fmt.is_bayer:
        return "bit-stream or Bayer format"
    for comp in fmt.components:
        if comp.bits == 8 or comp.bits == 16:
            continue
        if 8 < comp.bits < 16 and fmt.name.startswith(_LSB_ALIGNED):
            continue
        return f"{comp.bits}-bit components packed or shifted within their words"
    return None  # every byte (8-bit) or 16-bit word of a row is one component sample


def _plane_arrays(frame: Any) -> list[tuple[np.ndarray, int]]:
    """Visible samples of each plane (no copy) and the plane's peak value."""
    import numpy as np

    fmt = frame.format
    why = not_measurable(fmt)
    if why is not None:
        raise _NotMeasurable(f"pixel format {fmt.name}: {why}; per-plane metrics not measurable")
    depth = [0] * len(frame.planes)
    for comp in fmt.components:
        if comp.plane < len(depth):
            depth[comp.plane] = max(depth[comp.plane], comp.bits)
    out: list[tuple[np.ndarray, int]] = []
    for plane, row, bits in zip(frame.planes, _row_bytes(frame), depth, strict=True):
        bits = bits or 8
        item = 1 if bits <= 8 else 2
        dtype = np.dtype(np.uint8) if item == 1 else np.dtype(">u2" if fmt.is_big_endian else "<u2")
        line = abs(plane.line_size)
        arr = np.frombuffer(memoryview(plane), dtype=dtype)[: line // item * plane.height]
        arr = arr.reshape(plane.height, line // item)[:, : row // item]
        out.append((arr, (1 << bits) - 1))
    return out


def _psnr(mse: float, peak: int) -> float | None:
    return None if mse == 0 else 10 * math.log10(peak * peak / mse)


def _video_metrics(
    ref: MediaSource,
    cand: MediaSource,
    scorers: Sequence[FrameScorer],
    pair: int = 0,
    reader: FrameReader = stream_frames,
    equal: bool = False,
) -> VideoMetrics:
    """Per-frame, per-plane MSE/PSNR (and the scorers' scores) of one video stream pair.

    With ``equal`` (the pair's decoded roots match, so every frame's digest over its
    format, geometry and visible samples does) and no scorer, each plane's metrics are
    those of identical samples (MSE 0, no PSNR) without reading a sample: the same
    record, with the same geometry and measurability checks per frame.
    """
    if equal and not scorers:
        return _summary(_identical_frames(ref, cand, pair, reader), {}, pair)
    import numpy as np

    per_frame: list[tuple[int, bool, tuple[PlaneMetrics, ...]]] = []
    scores: dict[str, list[float]] = {s.name: [] for s in scorers}
    batches: dict[str, tuple[list[np.ndarray], list[np.ndarray]]] = {
        s.name: ([], []) for s in scorers
    }

    def flush(scorer: FrameScorer) -> None:
        refs, cands = batches[scorer.name]
        if not refs:
            return
        got = scorer.score(np.stack(refs), np.stack(cands))
        if len(got) != len(refs):
            raise _Mismatch(f"scorer {scorer.name} returned {len(got)} scores for {len(refs)}")
        scores[scorer.name].extend(float(x) for x in got)
        refs.clear()
        cands.clear()

    for index, (fr, fc) in enumerate(
        _lockstep(reader(ref, "video", pair), reader(cand, "video", pair))
    ):
        if (fr.width, fr.height, fr.format.name) != (fc.width, fc.height, fc.format.name):
            raise _Mismatch(f"frame {index} geometry or pixel format differs")
        planes: list[PlaneMetrics] = []
        for p, ((a, peak), (b, _)) in enumerate(
            zip(_plane_arrays(fr), _plane_arrays(fc), strict=True)
        ):
            diff = a.astype(np.int32) - b.astype(np.int32)
            mse = float(np.mean(np.square(diff, dtype=np.int64))) if diff.size else 0.0
            planes.append(PlaneMetrics(plane=p, mse=mse, psnr=_psnr(mse, peak), identical=mse == 0))
        per_frame.append((index, all(x.identical for x in planes), tuple(planes)))
        for scorer in scorers:
            refs, cands = batches[scorer.name]
            refs.append(fr.to_ndarray(format="rgb24"))
            cands.append(fc.to_ndarray(format="rgb24"))
            if len(refs) >= max(1, scorer.batch_size):
                flush(scorer)
    for scorer in scorers:
        flush(scorer)
    return _summary(per_frame, scores, pair)


def _identical_frames(
    ref: MediaSource, cand: MediaSource, pair: int, reader: FrameReader
) -> list[tuple[int, bool, tuple[PlaneMetrics, ...]]]:
    per_frame: list[tuple[int, bool, tuple[PlaneMetrics, ...]]] = []
    for index, (fr, fc) in enumerate(
        _lockstep(reader(ref, "video", pair), reader(cand, "video", pair))
    ):
        if (fr.width, fr.height, fr.format.name) != (fc.width, fc.height, fc.format.name):
            raise _Mismatch(f"frame {index} geometry or pixel format differs")
        why = not_measurable(fr.format)
        if why is not None:
            raise _NotMeasurable(
                f"pixel format {fr.format.name}: {why}; per-plane metrics not measurable"
            )
        planes = tuple(
            PlaneMetrics(plane=p, mse=0.0, psnr=None, identical=True) for p in range(len(fr.planes))
        )
        per_frame.append((index, True, planes))
    return per_frame


def _summary(
    per_frame: list[tuple[int, bool, tuple[PlaneMetrics, ...]]],
    scores: dict[str, list[float]],
    pair: int = 0,
) -> VideoMetrics:
    frames = [
        FrameMetrics(
            index=i,
            identical=ident,
            planes=planes,
            perceptual={name: vals[i] for name, vals in scores.items()},
        )
        for i, ident, planes in per_frame
    ]
    all_planes = [p for f in frames for p in f.planes]
    psnrs = [p.psnr for p in all_planes if p.psnr is not None]
    return VideoMetrics(
        pair=pair,
        frames=len(frames),
        identical_frames=sum(f.identical for f in frames),
        max_mse=max((p.mse for p in all_planes), default=0.0),
        min_psnr=min(psnrs) if psnrs else None,
        identical=all(f.identical for f in frames),
        per_frame=tuple(frames),
        perceptual={
            name: PerceptualSummary(
                frames=len(vals),
                max=max(vals, default=0.0),
                mean=sum(vals) / len(vals) if vals else 0.0,
            )
            for name, vals in scores.items()
        },
    )


def audio_array(frame: Any) -> np.ndarray:
    """A decoded audio frame's samples as float64, shape (channels, samples), in
    full-scale units: what the comparison measures (reports plot the same values)."""
    import numpy as np

    arr = frame.to_ndarray()
    channels = frame.layout.nb_channels
    if not frame.format.is_planar:
        arr = arr.reshape(-1, channels).T
    name = frame.format.name.rstrip("p")
    data: np.ndarray = arr.astype(np.float64)
    if name == "u8":
        data = (data - 128.0) / 128.0
    elif name in ("s16", "s32", "s64"):
        data /= float(1 << (8 * frame.format.bytes - 1))
    return data


def _audio_metrics(
    ref: MediaSource, cand: MediaSource, pair: int = 0, reader: FrameReader = stream_frames
) -> AudioMetrics:
    import numpy as np

    pending_r: list[np.ndarray] = []
    pending_c: list[np.ndarray] = []
    count = 0
    channels = 0
    max_abs = 0.0
    err_sq = 0.0
    sig_sq = 0.0

    def take(pending: list[np.ndarray], n: int) -> np.ndarray:
        out: list[np.ndarray] = []
        while n:
            head = pending[0]
            k = min(n, head.shape[1])
            out.append(head[:, :k])
            if k == head.shape[1]:
                pending.pop(0)
            else:
                pending[0] = head[:, k:]
            n -= k
        return out[0] if len(out) == 1 else np.concatenate(out, axis=1)

    def avail(pending: list[np.ndarray]) -> int:
        return sum(x.shape[1] for x in pending)

    sentinel = object()
    it_r, it_c = reader(ref, "audio", pair), reader(cand, "audio", pair)
    done_r = done_c = False
    while True:
        # Pull from the side with fewer pending samples; compare the overlap, so at most
        # about one frame per side is ever held.
        if not done_r and (avail(pending_r) <= avail(pending_c) or done_c):
            fr = next(it_r, sentinel)
            if fr is sentinel:
                done_r = True
            else:
                pending_r.append(audio_array(fr))
        elif not done_c:
            fc = next(it_c, sentinel)
            if fc is sentinel:
                done_c = True
            else:
                pending_c.append(audio_array(fc))
        else:
            break
        n = min(avail(pending_r), avail(pending_c))
        if n:
            a, b = take(pending_r, n), take(pending_c, n)
            if a.shape[0] != b.shape[0]:
                raise _Mismatch("channel counts differ")
            channels = a.shape[0]
            d = a - b
            max_abs = max(max_abs, float(np.max(np.abs(d))))
            err_sq += float(np.sum(d * d))
            sig_sq += float(np.sum(a * a))
            count += n
    if avail(pending_r) or avail(pending_c):
        raise _Mismatch("sample counts differ")
    identical = err_sq == 0.0
    rms = math.sqrt(err_sq / (count * channels)) if count and channels else 0.0
    snr = None if identical or sig_sq == 0 else 10 * math.log10(sig_sq / err_sq)
    return AudioMetrics(
        pair=pair,
        samples=count,
        channels=channels,
        max_abs_diff=max_abs,
        rms_diff=rms,
        snr_db=snr,
        identical=identical,
    )


def _threshold_checks(
    metrics: ComparisonMetrics, thresholds: Thresholds, scorers: Sequence[FrameScorer]
) -> tuple[Check, ...]:
    out: list[Check] = []

    def limit(name: str, ok: bool, allowed: float | None, observed: float | None, msg: str) -> None:
        out.append(
            Check(name=f"threshold.{name}", ok=ok, expected=allowed, observed=observed, message=msg)
        )

    videos = [m for m in (metrics.video, *metrics.extra_video) if m is not None]
    audios = [m for m in (metrics.audio, *metrics.extra_audio) if m is not None]
    for v in videos:
        pair = f" (video stream pair {v.pair})" if v.pair else ""
        psnr_min = thresholds.video_psnr_min
        shown = "infinite (identical)" if v.min_psnr is None else f"{v.min_psnr:.3f} dB"
        limit(
            "video_psnr_min",
            v.min_psnr is None or v.min_psnr >= psnr_min,
            psnr_min,
            v.min_psnr,
            f"lowest per-frame, per-plane PSNR {shown}; minimum allowed {psnr_min} dB{pair}",
        )
        for scorer in scorers:
            summary = v.perceptual.get(scorer.name)
            most = thresholds.perceptual_max.get(scorer.name)
            worst = summary.max if summary else None
            allowed = (
                "no threshold configured (recorded only)"
                if most is None
                else (f"maximum allowed {most}")
            )
            limit(
                f"perceptual.{scorer.name}",
                most is None or (worst is not None and worst <= most),
                most,
                worst,
                f"largest per-frame {scorer.name} score {worst}; {allowed}{pair}",
            )
    for a in audios:
        pair = f" (audio stream pair {a.pair})" if a.pair else ""
        if a.identical:
            snr_ok, shown = True, "infinite (identical)"
        elif a.snr_db is None:
            snr_ok, shown = False, "undefined (silent reference, non-zero difference)"
        else:
            snr_ok, shown = a.snr_db >= thresholds.audio_snr_min, f"{a.snr_db:.3f} dB"
        snr_min, max_diff = thresholds.audio_snr_min, thresholds.audio_max_abs_diff
        limit(
            "audio_snr_min",
            snr_ok,
            snr_min,
            a.snr_db,
            f"audio SNR {shown}; minimum allowed {snr_min} dB{pair}",
        )
        limit(
            "audio_max_abs_diff",
            a.max_abs_diff <= max_diff,
            max_diff,
            a.max_abs_diff,
            f"largest sample difference {a.max_abs_diff:.6g} full scale; maximum allowed "
            f"{max_diff}{pair}",
        )
    return tuple(out)


def _failed(prefix: str, checks: Sequence[Check]) -> list[str]:
    return [f"{prefix}{c.name}: {c.message}" for c in checks if not c.ok]


def compare_reports(
    ref_source: MediaSource,
    cand_source: MediaSource,
    ref: MediaReport,
    cand: MediaReport,
    expectations: Expectations | None = None,
    thresholds: Thresholds | None = None,
    *,
    scorers: Sequence[FrameScorer] = (),
    frames: FrameReader = stream_frames,
    audio_length: LengthPolicy = "exact",
) -> ComparisonRecord:
    """Compare two already-analysed inputs (see :func:`compare`); the metrics of unequal
    inputs read their frames from ``frames`` (module doc)."""
    from .versions import tool_versions

    expectations = expectations or Expectations()
    thresholds = thresholds or Thresholds()
    ref_checks, ref_bounds = assess(ref, expectations)
    cand_checks, cand_bounds = assess(cand, expectations)
    reference = _input_record(ref, ref_checks, ref_bounds)
    candidate = _input_record(cand, cand_checks, cand_bounds)
    compat = compatibility(ref, cand) if ref.decoded and cand.decoded else ()
    equal = equality(ref, cand)
    metrics: ComparisonMetrics | None = None
    limits: tuple[Check, ...] = ()
    reasons: list[str] = []
    verdict: Verdict
    if not (reference.valid and candidate.valid):
        verdict = "FAIL"
        reasons += _failed("reference: ", ref_checks) + _failed("candidate: ", cand_checks)
    elif not all(c.ok for c in compat):
        verdict = "UNAVAILABLE"
        reasons += _failed("", compat)
        reasons.append("not comparable as they are: no metric computed")
    elif equal and all(e.equal for e in equal):
        verdict = "PASS"
        reasons.append(
            "both valid against expectations; decoded "
            + " and ".join(e.type for e in equal)
            + " exactly equal"
        )
    else:
        try:
            # Every pair is measured (equal pairs too: their metrics read identical), so
            # each kind's first pair stays in ``video`` / ``audio`` as before.
            videos = [
                _video_metrics(ref_source, cand_source, scorers, e.pair, frames, e.equal)
                for e in equal
                if e.type == "video"
            ]
            audios = [
                _audio_metrics(ref_source, cand_source, e.pair, frames)
                for e in equal
                if e.type == "audio"
            ]
            metrics = ComparisonMetrics(
                video=videos[0] if videos else None,
                audio=audios[0] if audios else None,
                extra_video=tuple(videos[1:]),
                extra_audio=tuple(audios[1:]),
            )
        except _Mismatch as exc:
            verdict = "UNAVAILABLE"
            reasons.append(f"streams do not pair up frame by frame: {exc}; no metric computed")
        except _NotMeasurable as exc:
            verdict = "UNAVAILABLE"
            reasons.append(f"not exactly equal and {exc}: no metric computed")
        else:
            limits = _threshold_checks(metrics, thresholds, scorers)
            differing = ", ".join(
                e.type + (f" (stream pair {e.pair})" if e.pair else "")
                for e in equal
                if not e.equal
            )
            if all(c.ok for c in limits):
                verdict = "INCONCLUSIVE"
                reasons.append(
                    f"both valid; decoded {differing} not exactly equal, every threshold met: "
                    "not a no-degradation certificate"
                )
            else:
                verdict = "FAIL"
                reasons += _failed("", limits)
    bounded = [f"{who}: {b.text()}" for who, r in (("reference", reference),
               ("candidate", candidate)) for b in r.bounds]  # fmt: skip
    if bounded and verdict != "FAIL":
        reasons += bounded
        if audio_length == "exact" and verdict == "PASS":
            verdict = "INCONCLUSIVE"
            reasons.append(
                "a length bounded, not verified, is never PASS unless bounded lengths are "
                'accepted (audio_length = "bounded")'
            )
    ref_source.ensure_unchanged()
    cand_source.ensure_unchanged()
    return ComparisonRecord(
        verdict=verdict,
        reasons=tuple(reasons),
        reference=reference,
        candidate=candidate,
        expectations=expectations,
        thresholds=thresholds,
        compatibility=compat,
        equality=equal,
        metrics=metrics,
        threshold_checks=limits,
        scorers={s.name: dict(s.provenance()) for s in scorers},
        versions=tool_versions(),
        audio_length=audio_length,
    )


def compare(
    reference: str | os.PathLike[str] | MediaSource,
    candidate: str | os.PathLike[str] | MediaSource,
    expectations: Expectations | None = None,
    thresholds: Thresholds | None = None,
    *,
    scorers: Sequence[FrameScorer] = (),
    root: str | os.PathLike[str] | None = None,
    audio_length: LengthPolicy = "exact",
) -> ComparisonRecord:
    """Compare ``reference`` and ``candidate`` (``FILE|DIGEST`` each); see module doc."""
    if root is not None:  # the repository resolved once, for both digests
        from ..config import as_repository

        root = as_repository(root)
    ref_source = resolve(reference, root)
    cand_source = resolve(candidate, root)
    ref = analyse(ref_source)
    cand = analyse(cand_source)
    return compare_reports(
        ref_source, cand_source, ref, cand, expectations, thresholds, scorers=scorers,
        audio_length=audio_length,
    )  # fmt: skip
