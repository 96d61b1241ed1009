"""The media mutation campaign: mutated MP4 and WAV files give only PASS, FAIL or a clean
error from ``evstore media check``, never a traceback, "internal error" or a hang.

Clips are encoded with PyAV at test time, then mutated deterministically: truncations,
bit flips at offsets spread over the file, zeroed ranges, and chopped container
structure (an MP4 top-level box removed, cut short or given a wrong size; a WAV chunk
size changed). Every mutation is checked by the real CLI in a worker process: each
check is bounded by an alarm, the whole worker by a timeout, so a hang is a failure
naming the mutation, not a stuck test. A truncation that removes content must never
PASS. ``make test`` runs 48 mutations; ``EVSTORE_MEDIA_MUTATIONS=N`` runs about N.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import random
import signal
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.media import AV_EXPECT_TOML
from helpers.paths import ROOT, TESTS

PER_CHECK_S = 20

EXPECT = AV_EXPECT_TOML

WAV_EXPECT = """\
[audio]
sample_rate = 48000
channels = 2
samples = 24000
"""


def _boxes(data: bytes) -> list[tuple[int, int, bytes]]:
    """Top-level ISO-BMFF boxes: (offset, size, type)."""
    out, at = [], 0
    while at + 8 <= len(data):
        size, kind = struct.unpack(">I4s", data[at : at + 8])
        if size < 8 or at + size > len(data):
            break
        out.append((at, size, kind))
        at += size
    return out


def _wav_chunks(data: bytes) -> list[tuple[int, int, bytes]]:
    """RIFF chunks after the 12-byte header: (offset, size, id)."""
    out, at = [], 12
    while at + 8 <= len(data):
        kind, size = struct.unpack("<4sI", data[at : at + 8])
        out.append((at, size, kind))
        at += 8 + size + (size & 1)
    return out


def mutations(data: bytes, kind: str, count: int, seed: int) -> list[tuple[str, bytes, bool]]:
    """``count`` mutations of ``data``: (label, bytes, whether content was removed)."""
    rng = random.Random(seed)
    n = len(data)
    out: list[tuple[str, bytes, bool]] = []
    structure = _boxes(data) if kind == "mp4" else _wav_chunks(data)
    for i in range(count):
        op = ("truncate", "flip", "zero", "chop")[i % 4]
        if op == "truncate":
            cut = rng.randrange(n // 20, n * 9 // 10)  # 5 % .. 90 % of the file kept
            out.append((f"{kind}-truncate-{cut}", data[:cut], True))
        elif op == "flip":
            # flips spread over the whole file, several per mutation
            offs = sorted(rng.randrange(n) for _ in range(1 + i % 5))
            buf = bytearray(data)
            for off in offs:
                buf[off] ^= 1 << rng.randrange(8)
            out.append((f"{kind}-flip-{'-'.join(map(str, offs))}", bytes(buf), False))
        elif op == "zero":
            start = rng.randrange(n)
            length = rng.choice([1, 4, 16, 256, 4096])
            buf = bytearray(data)
            buf[start : start + length] = bytes(len(buf[start : start + length]))
            out.append((f"{kind}-zero-{start}+{length}", bytes(buf), False))
        else:
            at, size, name = structure[rng.randrange(len(structure))]
            size = min(size, n - at)
            how = rng.choice(["remove", "cut", "size"])
            label = f"{kind}-chop-{name.decode('latin-1')}@{at}-{how}"
            # padding (``free``) or metadata boxes and chunks can go without loss
            lost = name in ((b"moov", b"mdat") if kind == "mp4" else (b"fmt ", b"data"))
            if how == "remove":
                out.append((label, data[:at] + data[at + size :], lost))
            elif how == "cut":
                keep = at + 8 + rng.randrange(max(1, size - 8))
                out.append((label, data[:keep] + data[at + size :], lost))
            else:
                wrong = rng.choice([0, 1, 7, size - 1, size + 1, 0xFFFFFFFF])
                field = struct.pack(">I" if kind == "mp4" else "<I", wrong & 0xFFFFFFFF)
                pos = at if kind == "mp4" else at + 4
                buf = bytearray(data)
                buf[pos : pos + 4] = field
                out.append((label, bytes(buf), False))
    return out


def _worker(expect: str, paths: list[str]) -> None:
    """Check each file with the real CLI; one JSON line per file, as soon as known."""
    from evidencestore.cli import main

    def hang(signum: int, frame: object) -> None:
        raise TimeoutError("media check did not finish")

    signal.signal(signal.SIGALRM, hang)
    for path in paths:
        print(json.dumps({"start": path}), flush=True)
        out, err = io.StringIO(), io.StringIO()
        signal.alarm(PER_CHECK_S)
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                code = main(["media", "check", path, "--expect", expect])
        except TimeoutError:
            code = -1
        finally:
            signal.alarm(0)
        result = {"path": path, "code": code, "out": out.getvalue(), "err": err.getvalue()}
        print(json.dumps(result), flush=True)


def _count() -> int:
    return int(os.environ.get("EVSTORE_MEDIA_MUTATIONS", "48"))


@pytest.fixture(scope="module")
def clips(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, Path]]:
    pytest.importorskip("av")
    pytest.importorskip("numpy")
    from helpers.media import AudioSpec, VideoSpec, clip

    d = tmp_path_factory.mktemp("mutation")
    (d / "expect.toml").write_text(EXPECT)
    (d / "wav-expect.toml").write_text(WAV_EXPECT)
    mp4 = clip(d, "base.mp4", video=VideoSpec(), audio=AudioSpec())
    wav = clip(d, "base.wav", audio=AudioSpec(codec="pcm_s16le"))
    return {"mp4": (Path(mp4), d / "expect.toml"), "wav": (Path(wav), d / "wav-expect.toml")}


def _run_worker(expect: Path, paths: list[Path]) -> dict[str, dict[str, object]]:
    proc = subprocess.run(
        [sys.executable, __file__, "worker", str(expect), *map(str, paths)],
        capture_output=True,
        text=True,
        timeout=60 + PER_CHECK_S * len(paths),
        cwd=TESTS,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS), str(ROOT)])},
        check=False,
    )
    lines = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    results = {str(r["path"]): r for r in lines if "path" in r}
    started = [r["start"] for r in lines if "start" in r]
    unfinished = [p for p in started if p not in results]
    assert proc.returncode == 0 and not unfinished, (
        f"worker exit {proc.returncode}; unfinished {unfinished}; {proc.stderr[-2000:]}"
    )
    return results


@pytest.mark.parametrize("kind", ["mp4", "wav"])
def test_mutated_media_give_fail_or_clean_error(
    kind: str, clips: dict[str, tuple[Path, Path]], tmp_path: Path
) -> None:
    base, expect = clips[kind]
    data = base.read_bytes()
    count = _count() // 2
    cases = mutations(data, kind, count, seed=8 if kind == "mp4" else 9)
    paths, removed = [], {}
    for i, (label, blob, lost) in enumerate(cases):
        path = tmp_path / f"{i:04d}-{label}.{kind}"
        path.write_bytes(blob)
        paths.append(path)
        removed[str(path)] = lost
    results = _run_worker(expect, [base, *paths])
    assert results[str(base)]["code"] == 0, results[str(base)]  # the unmutated clip passes
    problems, tally = [], {0: 0, 1: 0, 2: 0}
    for path in map(str, paths):
        r = results[path]
        text = f"{r['out']}{r['err']}"
        code = r["code"]
        if code == -1:
            problems.append(f"{path}: hung (more than {PER_CHECK_S} s)")
        elif code not in (0, 1, 2):
            problems.append(f"{path}: exit {code}")
        elif "internal error" in text or "Traceback" in text:
            problems.append(f"{path}: {text.strip()[-300:]}")
        elif code == 0 and removed[path]:
            problems.append(f"{path}: PASS although content was removed")
        elif code == 2 and not str(r["err"]).startswith("evstore: "):
            problems.append(f"{path}: unclear error {r['err']!r}")
        else:
            tally[int(code)] += 1  # type: ignore[call-overload]
    print(f"{kind}: {len(paths)} mutations, pass/fail/error = {tally}, problems {len(problems)}")
    assert not problems, "\n".join(problems)
    assert tally[1] + tally[2] > 0


def test_mutations_are_deterministic_and_varied() -> None:
    pcm = bytes(range(256)) * 64
    fmt = struct.pack("<HHIIHH", 1, 2, 48000, 192000, 4, 16)
    data = (
        b"RIFF"
        + struct.pack("<I", 4 + 24 + 8 + len(pcm))
        + b"WAVE"
        + b"fmt "
        + struct.pack("<I", len(fmt))
        + fmt
        + b"data"
        + struct.pack("<I", len(pcm))
        + pcm
    )
    assert [c[2] for c in _wav_chunks(data)] == [b"fmt ", b"data"]
    a = mutations(data, "wav", 40, seed=1)
    assert a == mutations(data, "wav", 40, seed=1)
    assert len({blob for _, blob, _ in a}) >= 36
    assert {label.split("-")[1] for label, _, _ in a} == {"truncate", "flip", "zero", "chop"}


if __name__ == "__main__" and sys.argv[1:2] == ["worker"]:
    _worker(sys.argv[2], sys.argv[3:])
