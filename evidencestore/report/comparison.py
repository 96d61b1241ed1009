"""The comparison report: a :class:`ComparisonRecord` as one self-contained HTML page.

Order on the page follows the reader's questions: the verdict (word, glyph, colour), why,
each input against the request's expectations, exact equality, then per-frame PSNR per
plane over time with the threshold drawn (identical frames marked as identical, never as
a capped number), perceptual scores, the worst frame of both inputs with an amplified
difference, the audio difference per block (or, when an input's audio is invalid, why:
samples expected, presented and where the gap is), and provenance with every digest.

Numbers come from the record only; the thumbnails and the audio-over-time plot come from
the compared media, read by the digests the record names (a caller's verified sources
first, then the repository store). Media that are not available are named, not fetched.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from ..errors import EvidenceStoreError
from ._page import VERDICT_MEANING, digests_in, fmt, render_page, unique

if TYPE_CHECKING:
    from ..media.records import ComparisonRecord, InputRecord, VideoMetrics
    from ..media.source import MediaSource

__all__ = ["render_comparison_html"]

_PLANES = ("Y", "U", "V", "A")


class _Media:
    """Compared inputs by digest: the caller's sources, else the repository store."""

    def __init__(
        self, sources: Mapping[str, MediaSource], root: str | os.PathLike[str] | None
    ) -> None:
        self.sources = dict(sources)
        self.root = root
        self.missing: dict[str, str] = {}

    def get(self, side: InputRecord) -> MediaSource | None:
        digest = side.source.digest
        if digest in self.sources:
            return self.sources[digest]
        if digest in self.missing:
            return None
        if self.root is None:
            self.missing[digest] = "no repository given"
            return None
        from ..media.source import resolve

        try:
            source = resolve(digest, self.root)
        except EvidenceStoreError as exc:
            self.missing[digest] = str(exc)
            return None
        self.sources[digest] = source
        return source

    def note(self, what: str, *sides: InputRecord) -> str:
        gone = [s for s in sides if s.source.digest in self.missing]
        names = ", ".join(f"{s.name} ({s.source.digest})" for s in gone)
        return f"{what} omitted: media not available ({names}); run `evstore pull` to fetch them."


def _check_rows(checks: Any) -> list[dict[str, Any]]:
    return [
        {
            "name": c.name,
            "ok": c.ok,
            "expected": fmt(c.expected),
            "observed": fmt(c.observed),
            "message": c.message,
        }
        for c in checks
    ]


def _worst(v: VideoMetrics) -> int | None:
    """The frame with the lowest PSNR of any plane (perceptual score breaks ties)."""
    best: tuple[float, float, int] | None = None
    for f in v.per_frame:
        if f.identical:
            continue
        low = min((p.psnr for p in f.planes if p.psnr is not None), default=float("inf"))
        score = max(f.perceptual.values(), default=0.0)
        key = (low, -score, f.index)
        if best is None or key < best:
            best = key
    return None if best is None else best[2]


def _grid(record: ComparisonRecord, pair: int) -> tuple[int, Fraction] | None:
    """``(first_pts, ticks per frame)`` when both inputs passed the continuity check (so
    frame ``i`` sits at ``first_pts + i * step`` within half a tick) and share timestamps."""
    for side in (record.reference, record.candidate):
        if not any(c.name == "video.continuity" and c.ok for c in side.checks):
            return None
    streams = [s for s in record.reference.streams if s.type == "video"]
    other = [s for s in record.candidate.streams if s.type == "video"]
    if pair >= min(len(streams), len(other)):
        return None
    s, o = streams[pair], other[pair]
    if (s.time_base, s.first_pts, s.last_pts) != (o.time_base, o.first_pts, o.last_pts):
        return None
    if not s.time_base or s.first_pts is None or s.last_pts is None or s.frames < 2:
        return None
    return s.first_pts, Fraction(s.last_pts - s.first_pts, s.frames - 1)


def _thumbs(
    media: _Media, record: ComparisonRecord, pair: int, index: int
) -> tuple[list[dict[str, Any]], str | None]:
    from ._media import frame_pair
    from .plots import png_data_uri

    ref, cand = media.get(record.reference), media.get(record.candidate)
    if ref is None or cand is None:
        return [], media.note("Thumbnails", record.reference, record.candidate)
    got = frame_pair(ref, cand, index, pair, _grid(record, pair))
    if got is None:
        return [], f"Thumbnails omitted: frame {index} could not be decoded from both inputs."
    a, b, diff, peak = got
    gain = f"{255 / peak:.0f}x" if peak else "none: no luma difference"
    h, w = a.shape[:2]
    return [
        {"uri": png_data_uri(a), "alt": f"reference frame {index}", "caption": f"reference, frame {index}", "width": w, "height": h},
        {"uri": png_data_uri(b), "alt": f"candidate frame {index}", "caption": f"candidate, frame {index}", "width": w, "height": h},
        {
            "uri": png_data_uri(diff),
            "alt": f"amplified luma difference, frame {index}",
            "caption": f"|luma difference|, largest {peak}, amplified {gain} (white = largest)",
            "width": w,
            "height": h,
        },
    ], None  # fmt: skip


def _video(record: ComparisonRecord, media: _Media) -> list[dict[str, Any]]:
    from .plots import identical_strip, psnr_plot, score_plot

    out: list[dict[str, Any]] = []
    m = record.metrics
    if m is not None:
        for v in (m.video, *m.extra_video):
            if v is None:
                continue
            worst = _worst(v)
            nplanes = max((len(f.planes) for f in v.per_frame), default=0)
            series = [
                [f.planes[p].psnr if p < len(f.planes) else None for f in v.per_frame]
                for p in range(nplanes)
            ]
            salt = f"video{v.pair}"
            plots = [
                psnr_plot(
                    series,
                    record.thresholds.video_psnr_min,
                    worst,
                    [f.identical for f in v.per_frame],
                    salt=salt,
                )
            ]
            for name in v.perceptual:
                scores = [f.perceptual.get(name, 0.0) for f in v.per_frame]
                limit = record.thresholds.perceptual_max.get(name)
                plots.append(score_plot(name, scores, limit, salt=f"{salt}{name}"))
            facts = [
                ("frames identical", f"{v.identical_frames} of {v.frames}"),
                ("lowest PSNR", "infinite (identical)" if v.min_psnr is None else f"{v.min_psnr:.3f} dB"),
                ("PSNR threshold", f"{record.thresholds.video_psnr_min:g} dB"),
                ("largest MSE", f"{v.max_mse:.6g}"),
            ]  # fmt: skip
            for name, summary in v.perceptual.items():
                facts.append((f"largest {name}", f"{summary.max:.6g} (mean {summary.mean:.6g})"))
            view: dict[str, Any] = {
                "pair": v.pair,
                "frames": v.frames,
                "all_identical": v.identical,
                "facts": facts,
                "plots": plots,
                "worst": worst,
                "worst_planes": [],
                "thumbs": [],
                "thumb_note": None,
            }
            if worst is not None:
                frame = v.per_frame[worst]
                view["worst_planes"] = [
                    {
                        "name": _PLANES[p.plane] if p.plane < 4 else str(p.plane),
                        "mse": f"{p.mse:.6g}",
                        "psnr": "identical" if p.psnr is None else f"{p.psnr:.3f} dB",
                    }
                    for p in frame.planes
                ]
                view["thumbs"], view["thumb_note"] = _thumbs(media, record, v.pair, worst)
            out.append(view)
        return out
    for e in record.equality:
        if e.type != "video" or not e.equal:
            continue
        stream = next((s for s in record.reference.streams if s.index == e.reference_stream), None)
        frames = stream.frames if stream is not None else 0
        out.append(
            {
                "pair": e.pair,
                "frames": frames,
                "all_identical": True,
                "facts": [("frames identical", f"{frames} of {frames}")],
                "plots": [identical_strip(frames, salt=f"ident{e.pair}")] if frames else [],
                "worst": None,
                "worst_planes": [],
                "thumbs": [],
                "thumb_note": None,
            }
        )
    return out


def _audio(record: ComparisonRecord, media: _Media) -> list[dict[str, Any]]:
    from ._media import AUDIO_BLOCK, audio_blocks
    from .plots import audio_plot

    out: list[dict[str, Any]] = []
    m = record.metrics
    audios = [a for a in ((m.audio, *m.extra_audio) if m else ()) if a is not None]
    for a in audios:
        snr = "infinite (identical)" if a.identical else fmt(a.snr_db) + " dB"
        view: dict[str, Any] = {
            "pair": a.pair,
            "facts": [
                ("SNR", snr),
                ("largest |difference|", f"{a.max_abs_diff:.6g} FS"),
                ("RMS difference", f"{a.rms_diff:.6g} FS"),
                *_sample_facts(record, a.pair, a.samples, a.channels),
            ],
            "plot": None,
            "note": None,
        }
        if a.identical:
            view["note"] = "Every sample identical."
        else:
            ref, cand = media.get(record.reference), media.get(record.candidate)
            if ref is None or cand is None:
                view["note"] = media.note(
                    "Audio difference over time", record.reference, record.candidate
                )
            else:
                blocks = audio_blocks(ref, cand, a.pair)
                stream = next((s for s in record.reference.streams if s.type == "audio"), None)
                rate = (stream.sample_rate if stream else None) or 48000
                if blocks is None:
                    view["note"] = "Audio difference over time omitted: samples do not line up."
                else:
                    view["plot"] = audio_plot(
                        blocks[0],
                        blocks[1],
                        AUDIO_BLOCK,
                        rate,
                        record.thresholds.audio_max_abs_diff,
                        salt=f"audio{a.pair}",
                    )
        out.append(view)
    if not audios:
        for e in record.equality:
            if e.type == "audio" and e.equal:
                out.append(
                    {
                        "pair": e.pair,
                        "facts": [("samples", "identical")],
                        "plot": None,
                        "note": "Every decoded sample identical (equal content digests).",
                    }
                )
    return out


def _presented(side: Any, pair: int) -> int | None:
    """The samples the container presents for the ``pair``-th audio stream of an input,
    as its ``audio.samples`` check observed them (None when not checked)."""
    counts = [c.observed for c in side.checks if c.name == "audio.samples"]
    value = counts[pair] if pair < len(counts) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _sample_facts(
    record: ComparisonRecord, pair: int, decoded: int, channels: int
) -> list[tuple[str, str]]:
    """Samples presented (what the request and the check count) and samples compared
    (every decoded one, codec padding included), so the two are never confused."""
    ref, cand = _presented(record.reference, pair), _presented(record.candidate, pair)
    if ref is None or cand is None:
        return [("samples x channels", f"{decoded:,} decoded x {channels}")]
    presented = f"{ref:,}" if ref == cand else f"reference {ref:,}, candidate {cand:,}"
    facts = [("samples presented", f"{presented} x {channels} channels")]
    extra = decoded - max(ref, cand)
    compared = f"{decoded:,} decoded"
    if extra > 0:
        compared += f" (the presented ones and {extra:,} of codec padding)"
    facts.append(("samples compared", compared))
    return facts


def _audio_failures(record: ComparisonRecord) -> list[dict[str, Any]]:
    """Why an input's audio is invalid, for a comparison that fails on audio: samples
    expected and presented per input, and where the missing or extra samples are."""
    out: list[dict[str, Any]] = []
    for role, side in (("reference", record.reference), ("candidate", record.candidate)):
        bad = [c for c in side.checks if c.name.startswith("audio.") and not c.ok]
        if not bad:
            continue
        checks = {c.name: c for c in side.checks}
        facts: list[tuple[str, str]] = []
        where: list[str] = []
        samples = checks.get("audio.samples")
        stream = next((s for s in side.streams if s.type == "audio"), None)
        rate = stream.sample_rate if stream is not None else None
        if samples is not None and isinstance(samples.expected, int):
            facts.append(("samples expected", str(samples.expected)))
            if isinstance(samples.observed, int):
                facts.append(("samples presented", str(samples.observed)))
                gap = samples.observed - samples.expected
                if gap and rate:
                    lo, hi = sorted((samples.expected, samples.observed))
                    word = "missing" if gap < 0 else "extra"
                    facts.append(
                        (f"samples {word}", f"{abs(gap)} ({abs(gap) / rate * 1000:.1f} ms)")
                    )
                    where.append(
                        f"{abs(gap)} samples {word} at the end: from {lo / rate:.6f} s to "
                        f"{hi / rate:.6f} s"
                    )
        if stream is not None and stream.samples is not None:
            facts.append(("samples decoded", str(stream.samples)))
        continuity = checks.get("audio.continuity")
        if continuity is not None and not continuity.ok:
            where.append(continuity.message)
        out.append(
            {
                "role": role,
                "name": side.name,
                "facts": facts,
                "where": where,
                "checks": _check_rows(bad),
            }
        )
    return out


def _settings(record: ComparisonRecord) -> list[tuple[str, str]]:
    import msgspec

    rows: list[tuple[str, str]] = []
    for prefix, value in (
        ("expectations", record.expectations),
        ("thresholds", record.thresholds),
    ):
        for k, v in msgspec.to_builtins(value).items():
            if isinstance(v, dict):
                rows += [(f"{prefix}.{k}.{k2}", fmt(v2)) for k2, v2 in v.items()]
            else:
                rows.append((f"{prefix}.{k}", fmt(v)))
    return rows


def _shown(name: str, root: str | os.PathLike[str] | None) -> str:
    """A side's name for the title: as the user gave it, except that an absolute path
    is shown relative to the repository when inside it, else by its file name (the
    inputs table keeps the name in full)."""
    if not os.path.isabs(name):
        return name
    if root is not None:
        base = os.path.abspath(os.fspath(root))
        if os.path.commonpath([base, os.path.abspath(name)]) == base:
            return os.path.relpath(name, base)
    return os.path.basename(name) or name


def render_comparison_html(
    record: ComparisonRecord,
    *,
    record_digest: str | None = None,
    sources: Mapping[str, MediaSource] | None = None,
    root: str | os.PathLike[str] | None = None,
    context: Mapping[str, str] | None = None,
) -> str:
    """Render a comparison record as a self-contained HTML page.

    ``record_digest`` names the stored record (default: the digest of its canonical bytes,
    as :func:`evidencestore.media.store.store_record` stores it). Media for thumbnails and
    the audio plot come from ``sources`` (digest to verified source) or the store of the
    repository at ``root``. ``context`` adds labelled digests (e.g. the bundle's).
    """
    import msgspec

    from ..digest import hash_bytes
    from ..media.store import record_bytes

    digest = record_digest or hash_bytes(record_bytes(record)).digest
    media = _Media(sources or {}, root)
    inputs = [
        {
            "role": role,
            "name": side.name,
            "valid": side.valid,
            "container": side.container,
            "size": side.source.size,
            "digest": side.source.digest,
            "checks": _check_rows(side.checks),
        }
        for role, side in (("reference", record.reference), ("candidate", record.candidate))
    ]
    videos = _video(record, media)
    audios = _audio(record, media)
    summary: list[tuple[str, str]] = []
    for v in videos:
        summary.append(("frames identical", v["facts"][0][1]))
        if v["worst"] is not None:
            summary.append(("worst frame", str(v["worst"])))
    for a in audios:
        summary.append(("audio SNR", a["facts"][0][1]))
    rows = [("comparison record", digest), *(context or {}).items()]
    digests = unique(iter([*rows, *digests_in(msgspec.to_builtins(record))]))
    title = f"{_shown(record.reference.name, root)} vs {_shown(record.candidate.name, root)}"
    return render_page(
        "comparison.html",
        {
            "title": title,
            "report_kind": "comparison",
            "kind_label": "media comparison",
            "verdict": record.verdict,
            "verdict_style": record.verdict,
            "meaning": VERDICT_MEANING.get(record.verdict, ""),
            "reasons": record.reasons,
            "summary": summary,
            "inputs": inputs,
            "compatibility": _check_rows(record.compatibility),
            "equality": record.equality,
            "videos": videos,
            "audios": audios,
            "audio_failures": _audio_failures(record),
            "threshold_checks": _check_rows(record.threshold_checks),
            "settings": _settings(record),
            "scorers": [(k, sorted(v.items())) for k, v in sorted(record.scorers.items())],
            "digests": digests,
            "versions": sorted(record.versions.items()),
        },
    )
