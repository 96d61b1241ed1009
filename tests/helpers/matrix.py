"""The media verdict matrix (issue 37): containers x codecs x frame rates x bit depths x
sample rates x audio track counts, each cell encoded here by PyAV as an honest output, one
cut by one audio sample, one cut by one video frame, and one with a corrupt packet in the
middle, judged by ``media check`` and ``compare`` against the honest reference.

The expected verdicts come from first principles, not from the code under test:

* a cut video frame is always visible (frames are counted and timed): FAIL;
* an audio length is *stated* by PCM and FLAC (no padding), by the MP4/MOV sample table
  and edit list, by WebM/Matroska DiscardPadding (FFmpeg writes it for Opus, not AAC) and by
  Ogg's last granule position; there an honest output PASSes and one sample short FAILs;
* everywhere else (raw ADTS, MPEG-TS, AAC in Matroska) the length is only *bounded*: the
  honest output and the one sample short are both INCONCLUSIVE, never PASS;
* a corrupt packet never makes a lossless comparison with the honest output PASS.

The default design covers every level of every factor and every container x codec pair
(codecs assigned round-robin, factor levels cycled); ``EVSTORE_MEDIA_MATRIX=full`` runs
the full cross product instead.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

from evidencestore.media.comparison import compare_reports
from evidencestore.media.decode import analyse
from evidencestore.media.expectations import assess, verdict_of
from evidencestore.media.records import (
    AudioExpectation,
    CheckReport,
    Expectations,
    MediaReport,
    VideoExpectation,
)
from evidencestore.media.source import MediaSource
from evidencestore.testing.synth import AudioSpec, VideoSpec, write_interleaved

# name -> (FFmpeg muxer, file suffix, muxer options)
CONTAINERS: dict[str, tuple[str, str, dict[str, str]]] = {
    "MP4": ("mp4", "mp4", {}),
    "MOV": ("mov", "mov", {}),
    # delay_moov: FFmpeg's way to write the priming edit list into a fragmented file
    "fragmented MP4": ("mp4", "mp4", {"movflags": "frag_keyframe+delay_moov+default_base_moof"}),
    "Matroska": ("matroska", "mkv", {}),
    "WebM": ("webm", "webm", {}),
    "Ogg": ("ogg", "ogg", {}),
    "WAV": ("wav", "wav", {}),
    "ADTS": ("adts", "aac", {}),
    "MPEG-TS": ("mpegts", "ts", {}),
}
VIDEO_CODECS = {"H.264": "libx264", "HEVC": "libx265", "VP9": "libvpx-vp9", "AV1": "libsvtav1"}
AUDIO_CODECS = {"AAC": "aac", "Opus": "libopus", "FLAC": "flac", "PCM": "pcm_s16le"}
# What each container carries (by the muxer's rules: FFmpeg refuses the others).
CARRIES: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "MP4": (("H.264", "HEVC", "VP9", "AV1"), ("AAC", "Opus", "FLAC")),
    "MOV": (("H.264", "HEVC"), ("AAC", "PCM")),  # FFmpeg's mov muxer refuses AV1
    "fragmented MP4": (("H.264", "HEVC", "VP9", "AV1"), ("AAC", "Opus", "FLAC")),
    "Matroska": (("H.264", "HEVC", "VP9", "AV1"), ("AAC", "Opus", "FLAC", "PCM")),
    "WebM": (("VP9", "AV1"), ("Opus",)),
    "Ogg": ((), ("Opus", "FLAC")),
    "WAV": ((), ("PCM",)),
    "ADTS": ((), ("AAC",)),
    "MPEG-TS": (("H.264", "HEVC"), ("AAC", "Opus")),
}
SINGLE_STREAM = {"WAV", "ADTS"}  # one audio stream and nothing else
RATES = ("24000/1001", "24", "30000/1001", "30", "50", "60000/1001", "60")
DEPTHS = (8, 10)
SAMPLE_RATES = (16000, 44100, 48000)
TRACKS = (1, 2)
VARIANTS = ("honest", "cut-audio", "cut-video", "corrupt")
WIDTH, HEIGHT, FRAMES = 64, 48, 6
ROUNDS = 3  # cells per container: this many times its longer codec list


def encoders() -> set[str]:
    """The video and audio encoders this PyAV wheel carries."""
    import av

    have = set()
    for name in (*VIDEO_CODECS.values(), *AUDIO_CODECS.values()):
        try:
            av.codec.Codec(name, "w")
        except Exception:
            continue
        have.add(name)
    return have


def ten_bit(codec: str) -> bool:
    """Whether the wheel's encoder takes yuv420p10le (libvpx is often built without)."""
    import av

    try:
        return "yuv420p10le" in {f.name for f in av.codec.Codec(codec, "w").video_formats or ()}
    except Exception:
        return False


@dataclass(frozen=True)
class Cell:
    """One cell: a container, its codecs and the factor levels it is encoded at."""

    container: str
    video: str | None
    audio: str | None
    rate: str
    depth: int
    sample_rate: int
    tracks: int

    @property
    def name(self) -> str:
        parts = [self.container, self.video or "-", self.audio or "-"]
        if self.video:
            parts += [f"{self.rate}fps", f"{self.depth}bit"]
        if self.audio:
            parts += [f"{self.sample_rate}Hz", f"{self.tracks}trk"]
        return " ".join(parts)

    def states_length(self) -> bool:
        """First principles: does this container state this codec's presented length?"""
        if self.audio is None or self.audio in ("PCM", "FLAC"):
            return True
        if self.container in ("MP4", "MOV", "fragmented MP4", "Ogg"):
            return True
        if self.container in ("Matroska", "WebM"):
            return self.audio == "Opus"  # DiscardPadding: FFmpeg writes it for Opus, not AAC
        return False  # raw ADTS, MPEG-TS

    def expected(self, variant: str) -> set[str]:
        """The verdicts first principles allow for ``variant`` (check for honest and the
        cuts, comparison with the honest output for corrupt)."""
        if variant == "corrupt":
            return {"FAIL", "INCONCLUSIVE", "UNAVAILABLE"}  # never PASS
        if variant == "cut-video":
            return {"FAIL"}
        stated = self.states_length()
        if variant == "cut-audio":
            return {"FAIL"} if stated else {"INCONCLUSIVE"}
        return {"PASS"} if stated else {"INCONCLUSIVE"}


def _cycle(levels: tuple[Any, ...], i: int, allowed: tuple[Any, ...] | None = None) -> Any:
    pool = tuple(x for x in levels if allowed is None or x in allowed) or levels
    return pool[i % len(pool)]


def _audio_rates(codec: str) -> tuple[int, ...]:
    # Opus is coded at 48 kHz: libopus takes 16 kHz but every decoder presents 48 kHz,
    # and 44.1 kHz is no Opus rate; a 16/44.1 kHz request for Opus is outside the matrix.
    return (48000,) if codec == "Opus" else SAMPLE_RATES


def covering(have: set[str]) -> list[Cell]:
    """Every container x codec pair (``ROUNDS`` times), codecs paired round-robin within a
    container, the other factors' levels cycled so that each appears."""
    cells: list[Cell] = []
    i = 0
    for container, (videos, audios) in CARRIES.items():
        vs = [v for v in videos if VIDEO_CODECS[v] in have]
        as_ = [a for a in audios if AUDIO_CODECS[a] in have]
        n = ROUNDS * max(len(vs), len(as_))
        for k in range(n):
            v = vs[k % len(vs)] if vs else None
            # shifted each round, so that video and audio codecs meet in varied pairs
            shift = k // len(vs) if vs else 0
            a = as_[(k + shift) % len(as_)] if as_ else None
            depths = (8, 10) if v and ten_bit(VIDEO_CODECS[v]) else (8,)
            cells.append(
                Cell(
                    container=container,
                    video=v,
                    audio=a,
                    rate=RATES[i % len(RATES)],
                    depth=_cycle(DEPTHS, i // 2, depths),
                    sample_rate=_cycle(SAMPLE_RATES, i, _audio_rates(a or "")),
                    tracks=1 if container in SINGLE_STREAM else TRACKS[(i // 3) % 2],
                )
            )
            i += 1
    return cells


def full_product(have: set[str]) -> Iterator[Cell]:
    """The full cross product (``EVSTORE_MEDIA_MATRIX=full``)."""
    for container, (videos, audios) in CARRIES.items():
        vs = [v for v in videos if VIDEO_CODECS[v] in have] or [None]
        as_ = [a for a in audios if AUDIO_CODECS[a] in have] or [None]
        for v, a in itertools.product(vs, as_):
            depths = DEPTHS if v and ten_bit(VIDEO_CODECS[v]) else (8,)
            for rate, depth, sr, tracks in itertools.product(
                RATES if v else RATES[:1],
                depths if v else (8,),
                _audio_rates(a) if a else SAMPLE_RATES[:1],
                TRACKS if a and container not in SINGLE_STREAM else (1,),
            ):
                yield Cell(container, v, a, rate, depth, sr, tracks)


def expectations(cell: Cell) -> Expectations:
    """What the request asked for: 6 frames at the cell's rate, 0.25 s of audio."""
    video = audio = None
    if cell.video:
        pix_fmt = "yuv420p10le" if cell.depth == 10 else "yuv420p"
        video = VideoExpectation(
            width=WIDTH, height=HEIGHT, pix_fmt=pix_fmt, frame_rate=cell.rate, frames=FRAMES
        )
    if cell.audio:
        audio = AudioExpectation(sample_rate=cell.sample_rate, samples=cell.sample_rate // 4)
    return Expectations(video=video, audio=audio)


def _corrupt_middle(kind: str, total: int) -> Any:
    """A packet hook replacing the middle packet of the first ``kind`` stream with its
    bytes inverted from a quarter of its length on (headers kept, payload garbage)."""
    import av

    seen = [0]

    def hook(packet: Any) -> Any:
        if packet.stream.type != kind or packet.stream.index != _first[kind]:
            return packet
        seen[0] += 1
        if seen[0] != max(1, total // 2) + 1:
            return packet
        data = bytearray(bytes(packet))
        for j in range(len(data) // 4, len(data)):
            data[j] ^= 0xA5
        out = av.Packet(bytes(data))
        out.pts, out.dts, out.duration = packet.pts, packet.dts, packet.duration
        out.time_base, out.is_keyframe, out.stream = (
            packet.time_base,
            packet.is_keyframe,
            packet.stream,
        )
        return out

    _first: dict[str, int] = {}

    def first_of_kind(packet: Any) -> Any:
        _first.setdefault(
            packet.stream.type,
            min(s.index for s in packet.stream.container.streams if s.type == packet.stream.type),
        )
        return hook(packet)

    return first_of_kind


def encode(cell: Cell, variant: str, directory: Path) -> Path:
    """Encode ``cell``'s ``variant`` under ``directory``."""
    fmt, suffix, options = CONTAINERS[cell.container]
    video = None
    if cell.video:
        codec = VIDEO_CODECS[cell.video]
        opts = {"preset": "ultrafast", "threads": "1"} if codec in ("libx264",) else {}
        if codec == "libx265":
            opts = {"preset": "ultrafast", "x265-params": "log-level=error:pools=1"}
        if codec == "libvpx-vp9":
            opts = {"deadline": "realtime", "cpu-used": "8", "threads": "1"}
        if codec == "libsvtav1":
            opts = {"preset": "12"}
        frames = FRAMES - 1 if variant == "cut-video" else FRAMES
        video = VideoSpec(codec=codec, width=WIDTH, height=HEIGHT, rate=Fraction(cell.rate),
                          frames=frames, pix_fmt="yuv420p10le" if cell.depth == 10 else "yuv420p",
                          options=opts)  # fmt: skip
    audio: list[AudioSpec] = []
    if cell.audio:
        samples = cell.sample_rate // 4
        for track in range(cell.tracks):
            short = variant == "cut-audio" and track == cell.tracks - 1
            audio.append(AudioSpec(codec=AUDIO_CODECS[cell.audio], rate=cell.sample_rate,
                                   samples=samples - short))  # fmt: skip
    hook = None
    if variant == "corrupt":
        # The middle of 6 video frames; audio: the second packet (FLAC may code 0.25 s
        # in three), never the first, which carries the codec's set-up.
        hook = _corrupt_middle("video", FRAMES) if cell.video else _corrupt_middle("audio", 2)
    path = directory / f"{variant}.{suffix}"
    write_interleaved(path, video=video, audio=audio, format=fmt, container_options=options,
                      packet_hook=hook)  # fmt: skip
    return path


@dataclass(frozen=True)
class Outcome:
    """One variant of one cell: the verdict judged and what the check said."""

    cell: Cell
    variant: str
    verdict: str
    check: CheckReport | None
    why: str


def judge(cell: Cell, directory: Path) -> list[Outcome]:
    """Every variant of ``cell``: honest and cuts by ``media check``; corrupt by
    ``compare`` with the honest output (a lossless verdict)."""
    exp = expectations(cell)
    out: list[Outcome] = []
    reports: dict[str, tuple[MediaSource, MediaReport]] = {}
    for variant in VARIANTS:
        if variant == "cut-video" and not cell.video:
            continue
        if variant == "cut-audio" and not cell.audio:
            continue
        path = encode(cell, variant, directory)
        source = MediaSource.from_path(path)
        report = analyse(source)
        reports[variant] = (source, report)
        checks, bounds = assess(report, exp)
        verdict = verdict_of(checks, bounds, "exact")
        check = CheckReport(verdict=verdict, checks=checks, expectations=exp, report=report,
                            bounds=bounds)  # fmt: skip
        why = "; ".join(f"{c.name}: {c.message}" for c in checks if not c.ok)
        if variant == "corrupt":
            ref_src, ref = reports["honest"]
            record = compare_reports(ref_src, source, ref, report, exp)
            verdict, why = record.verdict, "; ".join(record.reasons)
        out.append(Outcome(cell, variant, verdict, check, why))
    return out


def length_source(check: CheckReport) -> str:
    """What the check names as the source of an audio length (its own words)."""
    c = next((c for c in check.checks if c.name == "audio.samples"), None)
    if c is None:
        return ""
    text = c.message.split("source: ", 1)[1] if "source: " in c.message else ""
    return text.split(" (", 1)[0].split("; decoded", 1)[0]
