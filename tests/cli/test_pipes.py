"""A closed stdout never changes an exit code: ``evstore verify | head -1`` on tampered
evidence exits 1, as it does unpiped; the verdict's code survives for every command, and
141 (128 + SIGPIPE) is what a command whose verdict is not known yet exits with.

Each command runs as its own process (``python -m evidencestore``) with stdout a real
pipe: either closed before the process writes anything, or closed after the first line
(``| head -1``) while the command still has far more than a pipe's buffer to write."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import paths
from helpers.repos import add_bundle

from evidencestore.cli import main

_ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(paths.ROOT), *sys.path])}


def _piped(argv: list[str], *, lines: int) -> tuple[int, str]:
    """Run ``evstore ARGV`` with stdout a pipe closed after ``lines`` lines were read (0:
    before the process writes); return its exit code and its stderr."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "evidencestore", *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=_ENV,
    )
    assert proc.stdout is not None and proc.stderr is not None
    for _ in range(lines):
        proc.stdout.readline()
    proc.stdout.close()
    err = proc.stderr.read().decode()
    return proc.wait(timeout=300), err


def _unpiped(argv: list[str]) -> int:
    return subprocess.run(
        [sys.executable, "-m", "evidencestore", *argv], capture_output=True, env=_ENV
    ).returncode


N_FILES = 3000


@pytest.fixture(scope="module")
def tampered(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    """Two repositories with one bundle of 3,000 files: intact, and every file tampered."""
    roots = []
    for name in ("intact", "tampered"):
        root = tmp_path_factory.mktemp(name)
        assert main(["init", "--root", str(root)]) == 0
        files = {f"d/f{i:04d}.txt": f"value {i}\n".encode() for i in range(N_FILES)}
        add_bundle(root, "b", files)
        if name == "tampered":
            for i in range(N_FILES):
                (root / "evidence" / "b" / "d" / f"f{i:04d}.txt").write_bytes(
                    f"VALUE {i}\n".encode()
                )
        roots.append(str(root))
    return roots[0], roots[1]


@pytest.mark.parametrize("lines", [0, 1])
def test_verify_of_tampered_evidence_exits_1_through_a_closed_pipe(
    tampered: tuple[str, str], lines: int
) -> None:
    intact, bad = tampered
    argv = ["-v", "verify", "--root", bad]
    assert _piped(["verify", "--json", "-", "--root", bad], lines=lines)[0] == 1
    # -v lists every finding: far more than a pipe's buffer, so ``head -1`` closes it
    # while verify is still writing.
    listing = subprocess.run(
        [sys.executable, "-m", "evidencestore", *argv], capture_output=True, env=_ENV
    )
    assert listing.returncode == 1
    assert len(listing.stdout) > 1 << 17 and listing.stdout.count(b"\n") > N_FILES
    code, err = _piped(argv, lines=lines)
    assert code == 1, err
    assert "Traceback" not in err and "Exception ignored" not in err
    # Negative control: the intact twin exits 0 through the same pipe, so the code is the
    # verdict, not a constant.
    assert _piped(["-v", "verify", "--root", intact], lines=lines)[0] == 0


def test_verify_with_stdout_closed_from_the_start_exits_with_its_verdict(
    tampered: tuple[str, str],
) -> None:
    """``evstore verify >&-``: no stdout at all (Python's ``sys.stdout`` is None), the
    verdict's code all the same, and nothing said on stderr but the findings' summary."""
    intact, bad = tampered
    for root, code in ((bad, 1), (intact, 0)):  # the intact twin: the code is the verdict
        done = subprocess.run(
            ["sh", "-c", '"$0" -m evidencestore verify --root "$1" >&-', sys.executable, root],
            capture_output=True,
            env=_ENV,
        )
        assert done.returncode == code, done.stderr.decode()
        assert b"internal error" not in done.stderr and b"Traceback" not in done.stderr


@pytest.fixture(scope="module")
def campaign(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A registered campaign with no run: status NOT_ACCEPTED and every claim refused."""
    from helpers.protocols import SMALLEST, protocol_tree

    tmp = tmp_path_factory.mktemp("campaign")
    src = protocol_tree(tmp, SMALLEST.replace('"h3-lossless"', '"h3"', 1))
    root = str(tmp / "repo")
    assert main(["campaign", "init", "h3", "--protocol", str(src), "--root", root]) == 0
    return root


@pytest.mark.parametrize(
    "argv",
    [
        ["campaign", "status", "h3"],
        ["campaign", "claim", "h3", "--condition", "5s", "--arm", "rank-local"],
        ["campaign", "verify", "h3"],
        ["campaign", "plan", "h3", "--condition", "5s"],
    ],
    ids=lambda a: " ".join(a[:2]),
)
def test_campaign_verdicts_survive_a_closed_pipe(campaign: str, argv: list[str]) -> None:
    argv = [*argv, "--root", campaign]
    expected = _unpiped(argv)
    assert expected != 0  # nothing is accepted, stands or is verified without runs
    for lines in (0, 1):
        code, err = _piped(argv, lines=lines)
        assert code == expected, err


@pytest.fixture(scope="module")
def clips(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    pytest.importorskip("av")
    from helpers.media import AV_EXPECT_TOML, AudioSpec, VideoSpec, clip, lossless, nudge_frame

    d = tmp_path_factory.mktemp("clips")
    (d / "expect.toml").write_text(AV_EXPECT_TOML)
    (d / "loose.toml").write_text("[video]\nframes = 15\n[audio]\nduration = 0.5\n")
    return {
        "dir": str(d),
        "base": clip(d, "base.mp4", video=lossless(), audio=AudioSpec()),
        "short": clip(d, "short.mp4", video=lossless(), audio=AudioSpec(samples=12000)),
        "nudged": clip(
            d, "nudged.mp4", video=lossless(), audio=AudioSpec(), video_hook=nudge_frame(3)
        ),
        "small": clip(d, "small.mp4", video=VideoSpec(width=32, height=32), audio=AudioSpec()),
    }


@pytest.mark.parametrize(
    ("cand", "expect", "code"),
    [("short", "expect", 1), ("nudged", "expect", 3), ("small", "loose", 4)],
)
@pytest.mark.parametrize("json_out", [False, True])
def test_media_compare_verdicts_survive_a_closed_pipe(
    clips: dict[str, str], cand: str, expect: str, code: int, json_out: bool
) -> None:
    argv = ["media", "compare", clips["base"], clips[cand], "--expect"]
    argv += [str(Path(clips["dir"]) / f"{expect}.toml"), *(["--json"] if json_out else [])]
    assert _unpiped(argv) == code
    assert _piped(argv, lines=0)[0] == code
    assert _piped(argv, lines=1)[0] == code


def test_a_command_that_cannot_know_its_verdict_exits_141(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Output written past the guard (a BrokenPipeError the command sees) leaves the
    verdict unknown: 141, never 0."""
    from evidencestore.cli import core

    def cut(args: object) -> int:
        raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setattr(core, "_cmd_hash", cut)
    assert main(["hash", str(tmp_path)]) == 141


def test_a_closed_stdout_drops_output_and_keeps_the_code(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In process, as an embedding program calls ``main``: a stdout whose reader has gone
    takes no more writes, and ``hash --check`` still exits 1 on a changed file."""

    class Closed:
        writes = 0

        def write(self, data: str) -> int:
            Closed.writes += 1
            raise BrokenPipeError(32, "Broken pipe")

        def flush(self) -> None:
            raise BrokenPipeError(32, "Broken pipe")

    files = [tmp_path / f"f{i}" for i in range(20)]
    for f in files:
        f.write_text("a")
    listing = tmp_path / "list.txt"
    monkeypatch.setattr(sys, "stdout", open(listing, "w"))  # noqa: SIM115
    assert main(["hash", *map(str, files)]) == 0
    sys.stdout.close()
    files[7].write_text("b")
    monkeypatch.setattr(sys, "stdout", Closed())
    assert main(["hash", "--check", str(listing)]) == 1
    assert Closed.writes == 1  # the first write found the reader gone; the rest were dropped
    files[7].write_text("a")
    assert main(["hash", "--check", str(listing)]) == 0
