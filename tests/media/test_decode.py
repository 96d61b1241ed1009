"""Probe and full decode: content digests over native planes / exact samples, roots."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import av
import numpy as np
import pytest
from blake3 import blake3
from helpers.media import AudioSpec, VideoSpec, checks_by_name, clip, lossless

from evidencestore._canonical import canonical
from evidencestore.errors import MediaError
from evidencestore.media import analyse, check, probe
from evidencestore.media.comparison import not_measurable
from evidencestore.media.decode import _row_bytes, frame_leaf, video_frame_digest
from evidencestore.media.records import Expectations, VideoExpectation
from evidencestore.media.source import MediaSource
from evidencestore.merkle import merkle_root
from evidencestore.testing.synth import video_planes


def test_probe_declares_streams_of_h264_aac_mp4(tmp_path: Path) -> None:
    path = clip(tmp_path, "a.mp4", video=VideoSpec(), audio=AudioSpec())
    report = probe(path)
    assert report.container.startswith("mov,mp4")
    video, audio = report.streams
    assert (video.type, video.codec, video.width, video.height) == ("video", "h264", 64, 64)
    assert (video.pix_fmt, video.frame_rate, video.frames) == ("yuv420p", "30/1", 15)
    assert (audio.type, audio.codec, audio.sample_rate, audio.channels) == (
        "audio",
        "aac",
        48000,
        2,
    )
    assert audio.codec_frame_size == 1024
    assert audio.sample_format == "fltp"
    assert report.source.size == Path(path).stat().st_size


def test_probe_of_garbage_raises_media_error_naming_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "garbage.mp4"
    bad.write_bytes(b"\x00\x01garbage" * 100)
    with pytest.raises(MediaError, match=r"garbage\.mp4: not a readable media container"):
        probe(bad)


def test_video_frame_digest_covers_visible_native_planes(tmp_path: Path) -> None:
    # 68x52: chroma rows of 34 bytes sit in padded lines, so row padding must be skipped.
    path = clip(tmp_path, "v.mkv", video=lossless(width=68, height=52, frames=3))
    report = analyse(path)
    (stream,) = report.decoded
    assert (stream.width, stream.height, stream.pix_fmt, stream.frames) == (68, 52, "yuv420p", 3)
    with av.open(path) as container:
        frames = list(container.decode(video=0))
    for record, frame in zip(stream.frame_records, frames, strict=True):
        arr = frame.to_ndarray()  # (h * 3/2, w) for yuv420p: planes without padding
        y = arr[:52].tobytes()
        assert frame.planes[1].line_size > 34  # the padding really is there
        colour = [frame.color_range, frame.colorspace, frame.color_primaries, frame.color_trc]
        header = canonical({"colour": colour, "format": "yuv420p", "height": 52, "width": 68})
        chroma = [
            bytes(memoryview(p))[row * p.line_size : row * p.line_size + 34]
            for p in frame.planes[1:]
            for row in range(26)
        ]
        expected = blake3(header + y + b"".join(chroma)).hexdigest()
        assert record.digest == f"blake3:{expected}"
    leaves = [frame_leaf(r.index, r.digest) for r in stream.frame_records]
    assert stream.root == "blake3:" + merkle_root(leaves).hex()
    # Lossless H.264: decoded luma equals what was encoded.
    from evidencestore.testing.synth import video_planes

    assert np.array_equal(frames[1].to_ndarray(), video_planes(1, 68, 52))


def test_identical_decoded_streams_share_roots_across_containers(tmp_path: Path) -> None:
    mp4 = analyse(clip(tmp_path, "v.mp4", video=VideoSpec()))
    mkv = analyse(clip(tmp_path, "v.mkv", video=VideoSpec()))
    assert mp4.probe.source.digest != mkv.probe.source.digest
    assert mp4.decoded[0].time_base != mkv.decoded[0].time_base
    assert mp4.decoded[0].root == mkv.decoded[0].root
    ogg = analyse(clip(tmp_path, "a.ogg", audio=AudioSpec(codec="libopus")))
    webm = analyse(clip(tmp_path, "a.webm", audio=AudioSpec(codec="libopus")))
    assert ogg.decoded[0].root == webm.decoded[0].root
    assert ogg.decoded[0].content_digest == webm.decoded[0].content_digest


@pytest.mark.parametrize(
    ("name", "spec", "fmt", "samples"),
    [
        ("a.mp4", AudioSpec(), "fltp", 24576),  # AAC: tail padding kept, < 1024 extra
        ("o.ogg", AudioSpec(codec="libopus"), "fltp", 24000),
        ("o.webm", AudioSpec(codec="libopus"), "fltp", 24000),
        ("o.mp4", AudioSpec(codec="libopus"), "fltp", 24648),
        ("p.wav", AudioSpec(codec="pcm_s16le"), "s16", 24000),
    ],
)
def test_audio_decode_counts_every_sample(
    tmp_path: Path, name: str, spec: AudioSpec, fmt: str, samples: int
) -> None:
    report = analyse(clip(tmp_path, name, audio=spec))
    (stream,) = report.decoded
    assert report.errors == ()
    assert stream.sample_format == fmt
    assert stream.samples == samples
    assert sum(r.samples or 0 for r in stream.frame_records) == samples
    assert stream.first_pts == 0


def test_float_audio_is_hashed_without_quantisation(tmp_path: Path) -> None:
    # A change far below 16-bit resolution must still change the digest (framemd5 would not).
    def tiny(start: int, data: np.ndarray) -> np.ndarray:
        if start == 0:
            data = data.copy()
            data[0, 100] += np.float32(1e-6)
        return data

    spec = AudioSpec(codec="pcm_f32le")
    a = analyse(clip(tmp_path, "a.wav", audio=spec))
    b = analyse(clip(tmp_path, "b.wav", audio=spec, audio_hook=tiny))
    assert a.decoded[0].sample_format == "flt"
    assert a.decoded[0].frame_records[0].digest != b.decoded[0].frame_records[0].digest
    assert a.decoded[0].frame_records[1].digest == b.decoded[0].frame_records[1].digest
    assert a.decoded[0].content_digest != b.decoded[0].content_digest


def test_decode_errors_are_recorded_for_a_cut_faststart_mp4(tmp_path: Path) -> None:
    path = clip(
        tmp_path,
        "fs.mp4",
        video=VideoSpec(frames=60),
        audio=AudioSpec(samples=96000),
        container_options={"movflags": "faststart"},
    )
    data = Path(path).read_bytes()
    assert data[4:8] == b"ftyp" and b"moov" in data[: len(data) // 4]  # moov up front
    report = analyse(MediaSource.from_bytes(data[: len(data) // 2], name="cut.mp4"))
    assert report.probe.streams[0].frames == 60  # full declared metadata
    assert report.errors, "the cut must be recorded, not swallowed"
    assert report.errors[0].stage in ("decode", "demux")
    assert report.decoded[0].frames < 60


def test_missing_file_is_a_media_error(tmp_path: Path) -> None:
    with pytest.raises(MediaError, match=r"nope\.mp4: cannot read media file"):
        analyse(tmp_path / "nope.mp4")


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_a_fifo_or_directory_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.mp4"
    os.mkfifo(fifo)  # nothing writes to it: opening it blocking would hang
    for path in (fifo, tmp_path):
        with pytest.raises(MediaError, match="cannot read media file: not a regular file"):
            analyse(path)


def test_importing_the_package_needs_neither_pyav_nor_numpy() -> None:
    code = (
        "import sys, evidencestore, evidencestore.media, evidencestore.cli;"
        "evidencestore.cli.build_parser();"
        "bad = [m for m in ('av', 'numpy') if m in sys.modules];"
        "assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


# playlists may not open other files
def test_playlist_referencing_a_local_file_is_not_followed(tmp_path: Path) -> None:
    segment = clip(tmp_path, "seg.ts", video=VideoSpec(), format="mpegts")
    playlist = tmp_path / "pl.m3u8"
    for line in (f"file:{segment}", segment):
        playlist.write_text(
            "#EXTM3U\n#EXT-X-TARGETDURATION:1\n#EXTINF:0.5,\n" + line + "\n#EXT-X-ENDLIST\n"
        )
        report = analyse(playlist)
        assert not report.decoded
        result = check(playlist, Expectations(video=VideoExpectation(frames=15)))
        assert result.verdict == "FAIL"
        assert not checks_by_name(result.checks)["open"].ok


# undecodable metadata
def test_invalid_utf8_metadata_is_not_a_traceback(tmp_path: Path) -> None:
    path = tmp_path / "m.mkv"
    with av.open(str(path), "w") as container:
        container.metadata["title"] = "EVSTOREPLACEHOLDER"
        stream = container.add_stream("ffv1", rate=30)
        stream.width = stream.height = 16
        stream.pix_fmt = "yuv420p"
        for i in range(2):
            frame = av.VideoFrame.from_ndarray(video_planes(i, 16, 16), format="yuv420p")
            frame.pts = i
            for packet in stream.encode(frame):
                container.mux(packet)
        for packet in stream.encode(None):
            container.mux(packet)
    data = path.read_bytes()
    at = data.index(b"EVSTOREPLACEHOLDER")
    path.write_bytes(data[:at] + b"\xff\xfe" + data[at + 2 :])
    result = check(path, Expectations(video=VideoExpectation(frames=2, frame_rate=30)))
    c = checks_by_name(result.checks)
    assert c["open"].ok and c["decode.errors"].ok and c["video.frames"].ok


# palette formats
def _pal8(palette_byte: int) -> Any:
    frame = av.VideoFrame(8, 4, "pal8")
    index, palette = frame.planes
    index.update(bytes(range(index.buffer_size)))
    palette.update(bytes([palette_byte]) * palette.buffer_size)
    return frame


def test_pal8_digest_covers_the_palette() -> None:
    assert _row_bytes(_pal8(1))[1] == 1024
    assert video_frame_digest(_pal8(1)) != video_frame_digest(_pal8(2))
    assert video_frame_digest(_pal8(1)) == video_frame_digest(_pal8(1))
    assert not_measurable(av.VideoFormat("pal8")) is not None


# odd-width packed 4:2:2
@pytest.mark.parametrize(("fmt", "row"), [("yuyv422", 12), ("uyvy422", 12), ("y210le", 24)])
def test_odd_width_packed_422_hashes_the_last_macropixel(fmt: str, row: int) -> None:
    def frame(last: int) -> Any:
        f = av.VideoFrame(5, 2, fmt)
        (plane,) = f.planes
        data = bytearray(plane.buffer_size)
        for y in range(2):
            data[y * plane.line_size + row - 1] = last
        plane.update(bytes(data))
        return f

    assert _row_bytes(frame(0)) == (row,)
    assert video_frame_digest(frame(0)) != video_frame_digest(frame(7))


# audio root independent of framing
def test_audio_root_does_not_depend_on_container_framing(tmp_path: Path) -> None:
    spec = AudioSpec(codec="pcm_s16le", samples=30000)
    wav = analyse(clip(tmp_path, "a.wav", audio=spec)).decoded[0]
    mkv = analyse(clip(tmp_path, "a.mkv", audio=spec)).decoded[0]
    small = analyse(
        clip(tmp_path, "b.mkv", audio=AudioSpec(codec="pcm_s16le", samples=30000, frame_size=300))
    ).decoded[0]
    assert len({wav.frames, mkv.frames, small.frames}) > 1  # framing really differs
    assert wav.root == mkv.root == small.root
    assert wav.content_digest == mkv.content_digest == small.content_digest
    other = analyse(clip(tmp_path, "c.wav", audio=AudioSpec(codec="pcm_s16le", samples=29999)))
    assert other.decoded[0].root != wav.root


# a file changed while checked
def test_file_rewritten_during_decode_is_an_error(tmp_path: Path) -> None:
    path = clip(tmp_path, "a.mkv", video=VideoSpec())
    touched: list[int] = []

    def rewrite(_index: int, _frame: Any) -> None:
        if not touched:
            touched.append(1)
            with open(path, "ab") as f:
                f.write(b"\0" * 16)

    with pytest.raises(MediaError, match="changed while it was being checked"):
        analyse(path, on_frame=rewrite)


def test_before_decode_sees_the_stream_kinds_before_any_frame(tmp_path: Path) -> None:
    path = clip(tmp_path, "a.mp4", video=VideoSpec(), audio=AudioSpec())
    events: list[object] = []
    report = analyse(
        path,
        before_decode=lambda kinds: events.append(sorted(kinds)),
        on_frame=lambda index, frame: events.append(index),
    )
    assert events[0] == ["audio", "video"]
    assert len(events) > 1 and all(isinstance(e, int) for e in events[1:])
    assert [s.type for s in report.decoded] == ["video", "audio"]

    def refuse(kinds: set[str]) -> None:
        raise MediaError(f"refused {sorted(kinds)}")

    frames: list[int] = []
    with pytest.raises(MediaError, match=r"refused \['audio', 'video'\]"):
        analyse(path, before_decode=refuse, on_frame=lambda index, frame: frames.append(index))
    assert frames == []
    # a file that is not media is reported, not passed to the hook
    junk = tmp_path / "junk.mp4"
    junk.write_bytes(b"not a container" * 10)
    seen: list[set[str]] = []
    assert analyse(junk, before_decode=seen.append).errors[0].stage == "open"
    assert seen == []


def test_before_decode_runs_before_the_probe(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A container whose stream properties cannot be read is refused for a missing
    # length first, as when the kinds were read on a separate open.
    from evidencestore.errors import NotMediaError
    from evidencestore.media import decode

    def unreadable(*args: Any, **kwargs: Any) -> Any:
        raise NotMediaError("stream properties unreadable")

    monkeypatch.setattr(decode, "probe_container", unreadable)
    path = clip(tmp_path, "a.mp4", video=VideoSpec(), audio=AudioSpec())

    def refuse(kinds: set[str]) -> None:
        raise MediaError(f"refused {sorted(kinds)}")

    with pytest.raises(MediaError, match="refused"):
        analyse(path, before_decode=refuse)
    assert analyse(path).errors[0].stage == "open"


def test_hashing_thread_gives_the_same_report_in_frame_order(tmp_path: Path) -> None:
    # More video frames than the hashing thread may hold, interleaved with audio: the
    # report (every frame record, digest and root) is the one of hashing inline.
    path = clip(tmp_path, "a.mp4", video=VideoSpec(frames=40), audio=AudioSpec())
    seen: list[int] = []
    threaded = analyse(path, threads=True, on_frame=lambda i, f: seen.append(i))
    inline = analyse(path, threads=False)
    assert threaded == inline
    video = next(s for s in threaded.decoded if s.type == "video")
    assert video.frames == 40
    assert [r.index for r in video.frame_records] == list(range(40))
    expected = [video_frame_digest(f) for f in av.open(str(path)).decode(video=0)]
    assert [r.digest for r in video.frame_records] == expected
    assert len(seen) == sum(s.frames for s in threaded.decoded)


def test_decode_threads_setting_changes_no_digest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from evidencestore.media import decode

    path = clip(tmp_path, "v.mp4", video=VideoSpec(), audio=AudioSpec())
    threaded = analyse(path, threads=True)
    seen: list[bool] = []
    real = decode._fold

    def spy(frames: Any, accumulators: Any, on_frame: Any, threads: bool) -> None:
        seen.append(threads)
        real(frames, accumulators, on_frame, threads)

    monkeypatch.setattr(decode, "_fold", spy)
    assert decode.set_decode_threads(False) is True
    try:
        one = analyse(path)
    finally:
        assert decode.set_decode_threads(True) is False
    assert seen == [False]  # the setting, not the default, was used
    assert [s.root for s in one.decoded] == [s.root for s in threaded.decoded]
    assert [s.frames for s in one.decoded] == [s.frames for s in threaded.decoded]
    analyse(path)
    assert seen == [False, True]
