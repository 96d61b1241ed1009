"""``evstore`` subcommands: media (probe, check, compare).

Exit codes: ``check`` 0 PASS, 1 FAIL, 3 INCONCLUSIVE (every check holds but an audio
length is bounded, not verified, and ``--audio-length bounded`` was not given);
``compare`` 0 PASS, 1 FAIL, 3 INCONCLUSIVE, 4 UNAVAILABLE; 2 for usage errors and
unusable inputs or files.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import MediaError, ScorerError
from ._common import ROOT, Commands, arg, found_repository, json_flag, switch

if TYPE_CHECKING:
    from ..media.records import Check, Expectations


def register(commands: Commands) -> None:
    """Add this module's subcommands to the ``evstore`` parser."""
    msub = commands.group(
        "media",
        description="Media validators: full decode, expectations, exact and metric comparison.",
    )
    source = arg("source", metavar="FILE|DIGEST")
    msub.add(
        "probe",
        _probe,
        [source, ROOT, json_flag("the probe report")],
        help="show what a container declares about its streams",
    )
    msub.add(
        "check",
        _check,
        [
            source,
            ROOT,
            _expectation_args,
            json_flag("the full report"),
            arg("--record", metavar="OUT.json", help="also write the report to this file"),
            AUDIO_LENGTH,
        ],
        help="decode every frame and sample and check against expectations",
        description="Exit 0 PASS, 1 FAIL, 3 INCONCLUSIVE (an audio length the container "
        "cannot state: bounded, not verified), 2 usage error.",
    )
    msub.add(
        "compare",
        _compare,
        [
            arg("reference", metavar="REF"),
            arg("candidate", metavar="CAND"),
            ROOT,
            _expectation_args,
            arg("--thresholds", metavar="T.toml", help="thresholds file (TOML or JSON)"),
            switch(
                "--lpips",
                help="also score frames with LPIPS from the weights pinned in evstore.toml",
            ),
            json_flag("the comparison record"),
            arg("--record", metavar="OUT.json", help="write the comparison record here"),
            arg("--html", metavar="OUT.html", help="also write a self-contained HTML report"),
            AUDIO_LENGTH,
        ],
        help="compare a reference and a candidate",
        description="Exit 0 PASS, 1 FAIL, 3 INCONCLUSIVE, 4 UNAVAILABLE, 2 usage error.",
    )


AUDIO_LENGTH = arg(
    "--audio-length",
    choices=("exact", "bounded"),
    default="exact",
    help="exact (default): an audio length the container cannot state (raw ADTS, MPEG-TS, "
    "AAC in Matroska) is INCONCLUSIVE; bounded: accept it, naming the bound",
)


def _expectation_args(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("expectations (flags override the file)")
    g.add_argument("--expect", metavar="EXPECT.toml", help="expectations file (TOML or JSON)")
    g.add_argument("--width", type=int)
    g.add_argument("--height", type=int)
    g.add_argument("--pix-fmt")
    g.add_argument("--frame-rate", help="e.g. 30 or 30000/1001")
    g.add_argument("--frames", type=int, help="expected video frame count")
    g.add_argument("--video-duration", type=float, metavar="SECONDS")
    g.add_argument("--sample-rate", type=int)
    g.add_argument("--channels", type=int)
    g.add_argument("--samples", type=int, help="expected audio samples per channel")
    g.add_argument("--audio-duration", type=float, metavar="SECONDS")


def _expectations(args: argparse.Namespace) -> Expectations:
    from ..media.expectations import load_expectations, with_overrides

    video = {
        "width": args.width,
        "height": args.height,
        "pix_fmt": args.pix_fmt,
        "frame_rate": args.frame_rate,
        "frames": args.frames,
        "duration": args.video_duration,
    }
    audio = {
        "sample_rate": args.sample_rate,
        "channels": args.channels,
        "samples": args.samples,
        "duration": args.audio_duration,
    }
    flags = any(v is not None for v in (*video.values(), *audio.values()))
    if args.expect is None and not flags:
        raise MediaError(
            "no expectations: give --expect EXPECT.toml (or flags such as --frames, "
            "--audio-duration); media are checked against what was requested"
        )
    base = load_expectations(args.expect) if args.expect else None
    return with_overrides(base, video, audio)


def _resolve_checked(ref: str, expectations: Expectations, root: Any = None) -> Any:
    """Resolve ``FILE|DIGEST`` and refuse (exit 2) expectations that give no length for a
    stream kind it carries: it would be checked against nothing."""
    from ..media.decode import stream_kinds
    from ..media.expectations import require_lengths
    from ..media.source import resolve

    source = resolve(ref, root)
    require_lengths(expectations, stream_kinds(source), source.name)
    return source


def _write(path: str, data: bytes) -> None:
    try:
        Path(path).write_bytes(data)
    except OSError as exc:
        raise MediaError(f"{path}: cannot write record: {exc.strerror}") from exc


def _show(value: object) -> str:
    if isinstance(value, float):
        return f"{value:.6g}"
    return "none" if value is None else str(value)


def _pair(pair: int) -> str:
    """Which stream pair a line is about; nothing for the first (pair 0)."""
    return f" (stream pair {pair})" if pair else ""


def _db(value: float | None) -> str:
    """A PSNR or SNR; None stands for identical inputs (infinite)."""
    return "inf" if value is None else f"{value:.3f} dB"


def _print_checks(checks: tuple[Check, ...], indent: str = "  ", failed_only: bool = False) -> None:
    for c in checks:
        if failed_only and c.ok:
            continue
        mark = "ok  " if c.ok else "FAIL"
        detail = "" if c.ok else f" [expected {_show(c.expected)}, observed {_show(c.observed)}]"
        print(f"{indent}{mark} {c.name}: {c.message}{detail}")


def _probe(args: argparse.Namespace) -> int:
    from .._canonical import pretty
    from ..media.probing import probe

    report = probe(args.source, found_repository(args))
    if args.json:
        sys.stdout.write(pretty(report).decode())
        return 0
    print(f"{report.name}: {report.container}, {report.source.size} bytes, {report.source.digest}")
    if report.duration_us is not None:
        print(f"  duration {report.duration_us / 1e6:.6f} s (declared)")
    if not report.streams:
        print("  no streams")
    for s in report.streams:
        if s.type == "video":
            what = f"{s.width}x{s.height} {s.pix_fmt} {s.frame_rate} fps"
        elif s.type == "audio":
            what = f"{s.sample_rate} Hz {s.channels} ch ({s.layout}) {s.sample_format}"
            if s.codec_frame_size:
                what += f", codec frame {s.codec_frame_size}"
        else:
            what = ""
        declared = f"time base {s.time_base}, start {s.start_time}, duration {s.duration}"
        if s.frames is not None:
            declared += f", {s.frames} frames"
        print(f"  #{s.index} {s.type} {s.codec}: {what}; {declared}")
    return 0


def _check(args: argparse.Namespace) -> int:
    from .._canonical import pretty
    from ..media.expectations import check, require_lengths
    from ..media.source import resolve

    expectations = _expectations(args)
    source = resolve(args.source, found_repository(args))

    def refuse_unrequested(kinds: set[str]) -> None:
        # checked on the container that is decoded, so it is opened once
        require_lengths(expectations, kinds, source.name)

    report = check(
        source, expectations, before_decode=refuse_unrequested, audio_length=args.audio_length
    )
    if args.record:
        _write(args.record, pretty(report))
    if args.json:
        sys.stdout.write(pretty(report).decode())
    else:
        print(f"{report.report.probe.name}: {report.verdict}")
        for bound in report.bounds:
            print(f"  {bound.text()}")
        for s in report.report.decoded:
            print(f"  #{s.index} {s.type}: {s.frames} frames, root {s.root}")
        _print_checks(report.checks)
    return {"PASS": 0, "FAIL": 1, "INCONCLUSIVE": 3}[report.verdict]


def _compare(args: argparse.Namespace) -> int:
    from .._canonical import pretty
    from ..media.comparison import EXIT_CODES, compare
    from ..media.thresholds import load_thresholds

    expectations = _expectations(args)
    thresholds = load_thresholds(args.thresholds)
    root = found_repository(args)
    scorers: list[Any] = []
    if args.lpips:
        try:
            from ..perceptual import (
                load_configured_scorer,
            )
        except ImportError as exc:
            raise ScorerError(
                "--lpips: LPIPS scoring is not available in this installation "
                "(install evidencestore[lpips])"
            ) from exc
        scorers.append(load_configured_scorer(root))
    reference = _resolve_checked(args.reference, expectations, root)
    candidate = _resolve_checked(args.candidate, expectations, root)
    record = compare(
        reference, candidate, expectations, thresholds, scorers=scorers, root=root,
        audio_length=args.audio_length,
    )  # fmt: skip
    if args.record:
        _write(args.record, pretty(record))
    if args.html:
        from ..digest import hash_bytes
        from ..report import render_comparison_html

        sources = {s.descriptor.digest: s for s in (reference, candidate)}
        # The page names the record file's digest when one is written, else the stored form's.
        written = hash_bytes(pretty(record)).digest if args.record else None
        html = render_comparison_html(record, record_digest=written, sources=sources, root=root)
        _write(args.html, html.encode())
    if args.json:
        sys.stdout.write(pretty(record).decode())
        return EXIT_CODES[record.verdict]
    print(f"{record.verdict}: {record.reference.name} vs {record.candidate.name}")
    for reason in record.reasons:
        print(f"  {reason}")
    for side in (record.reference, record.candidate):
        state = "valid" if side.valid else "INVALID"
        print(f"  {side.name} ({side.source.digest}): {state}")
        _print_checks(side.checks, indent="    ", failed_only=True)
    for e in record.equality:
        print(
            f"  {e.type}{_pair(e.pair)}: {'exactly equal' if e.equal else 'not equal'}"
            + (
                f" (first difference at frame {e.first_difference})"
                if e.first_difference is not None
                else ""
            )
        )
    _print_checks(record.compatibility, failed_only=True)
    if record.metrics is not None:
        m = record.metrics
        for v in filter(None, (m.video, *m.extra_video)):
            print(
                f"  video{_pair(v.pair)}: {v.identical_frames}/{v.frames} frames identical, "
                f"max MSE {v.max_mse:.6g}, min PSNR {_db(v.min_psnr)}"
            )
            for name, summary in v.perceptual.items():
                print(f"  video {name}: max {summary.max:.6g}, mean {summary.mean:.6g}")
        for a in filter(None, (m.audio, *m.extra_audio)):
            print(
                f"  audio{_pair(a.pair)}: max abs diff {a.max_abs_diff:.6g}, "
                f"RMS diff {a.rms_diff:.6g}, SNR {_db(a.snr_db)}"
            )
        _print_checks(record.threshold_checks)
    if args.record:
        print(f"  record written to {args.record}")
    return EXIT_CODES[record.verdict]
