"""``make run``: the main job end to end on the embedded local store.

Builds a sample evidence repository in a temporary directory (several bundles, files
kept in git and external blobs in ``.evstore/``), verifies it, tampers with a copy and
shows every tampering caught, then compares generated media clips.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

from .cli import main as evstore


def _say(text: str) -> None:
    print(f"\n=== {text}", flush=True)


def _run(*argv: str) -> int:
    print(f"$ evstore {' '.join(argv)}", flush=True)
    code = evstore(list(argv))
    sys.stdout.flush()
    print(f"(exit {code})", flush=True)
    return code


def _write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def build_sample(repo: Path) -> None:
    """Write three campaigns' outputs and register each as a bundle."""
    os.chdir(repo)
    (repo / ".gitignore").write_text(".evstore/\nout/\n")
    assert _run("init") == 0
    for run, (seconds, speedup) in {
        "baseline-5s": (5, "1.00"),
        "optimised-5s": (5, "1.38"),
        "optimised-15s": (15, "1.41"),
    }.items():
        out = repo / "out" / run
        _write(
            out / "results" / "timing.json",
            json.dumps(
                {"run": run, "clip_seconds": seconds, "end_to_end_s": "400.9", "speedup": speedup},
                indent=1,
            ).encode(),
        )
        _write(out / "results" / "summary.md", f"# {run}\nEnd to end: 400.9 s\n".encode())
        _write(out / "logs" / "host.log", b"".join(b"step %d ok\n" % i for i in range(20000)))
        _write(out / "raw" / "trace.bin", os.urandom(3 << 20))
        rel = f"out/{run}"
        assert (
            _run(
                "bundle",
                "create",
                run,
                f"{rel}/results",
                f"{rel}/logs",
                f"{rel}/raw",
                "--external",
                "raw/*",
                "--external",
                "logs/*",
                "--ref",
                "PR-42",
                "--meta",
                f"clip_seconds={seconds}",
            )
            == 0
        )


def tamper(repo: Path) -> None:
    """Flip a bit in a git file and a stored blob, edit a manifest, add a stray file."""
    timing = repo / "evidence" / "optimised-5s" / "results" / "timing.json"
    data = bytearray(timing.read_bytes())
    data[10] ^= 0x01
    timing.write_bytes(bytes(data))
    reg = json.loads((repo / "evidence" / "optimised-15s" / "bundle.json").read_text())
    blob = next(e for e in reg["manifest"]["entries"] if e["path"].startswith("raw/"))
    hexd = blob["descriptor"]["digest"].split(":")[1]
    path = repo / ".evstore" / "blobs" / "blake3" / hexd[:2] / hexd
    os.chmod(path, 0o644)
    with open(path, "r+b") as fh:
        fh.seek(1000)
        byte = fh.read(1)
        fh.seek(1000)
        fh.write(bytes([byte[0] ^ 0x80]))
    reg["manifest"]["metadata"]["annotations"]["clip_seconds"] = "5"
    (repo / "evidence" / "optimised-15s" / "bundle.json").write_text(json.dumps(reg, indent=2))
    (repo / "evidence" / "baseline-5s" / "results" / "extra.txt").write_text("not registered\n")


def demo_comparison(workdir: str | os.PathLike[str]) -> str:
    """Encode three short clips in ``workdir``, compare them, and return a summary.

    A baseline H.264 + AAC MP4; the same content remuxed as faststart (identical decoded
    content, different bytes: PASS); a candidate with one pixel one LSB off in one frame
    (lossless H.264, so the change survives: INCONCLUSIVE); and one whose audio was
    truncated (FAIL against the expected duration).
    """
    from .media.comparison import compare
    from .media.records import AudioExpectation, Expectations, VideoExpectation
    from .testing.synth import AudioSpec, VideoSpec, write_clip

    out = Path(workdir)
    out.mkdir(parents=True, exist_ok=True)
    video = VideoSpec(width=64, height=64, frames=15, options={"qp": "0", "preset": "ultrafast"})
    audio = AudioSpec(samples=24000)

    def nudge(index: int, planes: object) -> object:
        if index == 7:
            planes = planes.copy()  # type: ignore[attr-defined]
            planes[10, 10] ^= 1  # type: ignore[index]
        return planes

    base = write_clip(out / "baseline.mp4", video=video, audio=audio)
    faststart = write_clip(
        out / "faststart.mp4", video=video, audio=audio, container_options={"movflags": "faststart"}
    )
    nudged = write_clip(out / "nudged.mp4", video=video, audio=audio, video_hook=nudge)  # type: ignore[arg-type]
    short = write_clip(out / "short.mp4", video=video, audio=AudioSpec(samples=12000))
    expect = Expectations(
        video=VideoExpectation(width=64, height=64, pix_fmt="yuv420p", frame_rate=30, frames=15),
        audio=AudioExpectation(sample_rate=48000, channels=2, duration=0.5),
    )
    lines = [
        "media comparisons (expectations: 64x64 yuv420p 30 fps x 15 frames, 0.5 s stereo 48 kHz)"
    ]
    for label, cand in (
        ("faststart remux", faststart),
        ("one LSB nudged", nudged),
        ("short audio", short),
    ):
        record = compare(base, cand, expect)
        lines.append(f"  baseline vs {label:<16} {record.verdict:<13} {record.reasons[0]}")
    return "\n".join(lines)


def media_demo(work: Path) -> None:
    """Compare generated clips (needs the media extra)."""
    try:
        summary = demo_comparison(work)
    except ImportError as exc:  # pragma: no cover - media extra not installed
        print(f"(media demo skipped: {exc})")
        return
    print(summary)


def run_demo(repo: Path) -> bool:
    """A short run against the reference video server, then ``run show`` (needs the run
    extra); return whether both behaved as expected."""
    try:
        import aiohttp  # noqa: F401

        from .testing.video_server import sample_workload, serve_video
    except ImportError as exc:  # pragma: no cover - run extra not installed
        print(f"(run demo skipped: {exc})")
        return True
    workload = repo / "out" / "workload.toml"
    workload.write_text(sample_workload(size="160x120", fps=24, measured=2, seconds=(1, 2)))
    with serve_video() as server:
        argv = ["out/workload.toml", "--arm", "baseline", "--server", server.url]
        ok = _run("run", *argv, "--name", "baseline-demo-1") == 0
    return _run("run", "show", "baseline-demo-1") == 0 and ok


def main() -> int:
    """Run the demo; return 0 when every step behaved as expected."""
    with tempfile.TemporaryDirectory(prefix="evstore-demo-") as tmp:
        repo = Path(tmp) / "evidence-repo"
        repo.mkdir()
        _say(f"1. a sample evidence repository in {repo}")
        build_sample(repo)
        _run("bundle", "list")
        _say("2. verify it: every file in git and every external blob is re-hashed")
        ok = _run("verify") == 0
        _say("3. prove one entry belongs to a bundle, and check the proof alone")
        proof = repo / "proof.json"
        saved = sys.stdout
        with open(proof, "w") as fh:
            sys.stdout = fh
            try:
                evstore(["prove", "optimised-5s", "results/timing.json"])
            finally:
                sys.stdout = saved
        ok &= _run("check-proof", str(proof), "--bundle", "optimised-5s") == 0
        proof.unlink()
        _say(
            "4. a tampered copy: a flipped bit in git, a flipped bit in a blob, an edited manifest, a stray file"
        )
        copy = Path(tmp) / "tampered"
        shutil.copytree(repo, copy, symlinks=True)
        tamper(copy)
        os.chdir(copy)
        ok &= _run("verify") == 1
        _say("5. the same report as JSON for CI (its totals)")
        saved = sys.stdout
        report_path = copy / "report.json"
        with open(report_path, "w") as fh:
            sys.stdout = fh
            try:
                evstore(["verify", "--json"])
            finally:
                sys.stdout = saved
        report = json.loads(report_path.read_text())
        print(json.dumps(report["totals"], indent=2))
        _say("6. media: expectations from the request, exact equality apart from thresholds")
        os.chdir(repo)
        media_demo(Path(tmp) / "media")
        _say("7. a run against the reference video server: requests, bytes, outputs as evidence")
        ok &= run_demo(repo)
        os.chdir(tempfile.gettempdir())
    print("\ndemo finished: " + ("every step behaved as expected" if ok else "UNEXPECTED RESULT"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
