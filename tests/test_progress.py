"""Progress on a terminal, nothing elsewhere: byte-level progress of transfers (issue 12),
and every long command's line (issue 38: run, import, verify, pull, campaign status)
through a real pseudo-terminal."""

from __future__ import annotations

import io
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from helpers.repos import add_bundle

import evidencestore.storage.transfer as transfer
from evidencestore import _steps
from evidencestore.cli import main
from evidencestore.remotes import pull

BLOB = bytes(range(256)) * 4096  # 1 MiB


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _shown(drawn: str) -> str:
    """A transfer line without its rate (timing) and its erase-to-end sequence."""
    return re.sub(r", [0-9.]+ MiB/s", "", drawn.replace("\x1b[K", ""))


def _repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    add_bundle(root, "p", {"ext/big.bin": BLOB, "r.txt": b"r"}, external=("ext/*",))
    assert main(["remote", "add", "m", str(tmp_path / "remote"), "--root", str(root)]) == 0
    assert main(["push", "--root", str(root)]) == 0
    shutil.rmtree(root / ".evstore")
    return root


def test_a_single_streamed_blob_moves_the_line_before_it_completes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = _repo(tmp_path)
    monkeypatch.setattr(transfer, "STREAM_THRESHOLD", 1024)  # stream the 1 MiB blob
    seen: list[str] = []

    def at(point: str) -> None:
        # Deterministic pause point: every byte is in the temporary, none published yet.
        if point == "fetch-written":
            for bar in list(transfer._active_bars):
                bar.render()
            seen.append(term.getvalue())

    monkeypatch.setattr(_steps, "_observer", at)
    term = Terminal()
    summary = pull(root, progress=term)
    assert summary.transferred == 1 and summary.bytes == len(BLOB)
    [mid] = seen
    assert (
        _shown(mid.rsplit("\r", 1)[-1]) == "pull: 0/1 blobs, 1.0/1.0 MiB"
    )  # bytes before the blob
    assert term.getvalue().endswith("\r\x1b[K")  # the line is cleared at the end
    assert not transfer._active_bars and not transfer._inflight


def test_nothing_on_a_non_terminal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = _repo(tmp_path)
    monkeypatch.setattr(transfer, "STREAM_THRESHOLD", 1024)
    stream = io.StringIO()
    assert pull(root, progress=stream).transferred == 1
    assert stream.getvalue() == "" and not transfer._active_bars


def test_a_single_large_push_moves_the_line_part_by_part(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import uuid

    import fsspec

    from evidencestore.remotes import push

    big = bytes(range(256)) * (48 << 10)  # 12 MiB: three of fsspec's 4 MiB blocks
    root = tmp_path / "repo"
    add_bundle(root, "p", {"ext/big.bin": big, "r.txt": b"r"}, external=("ext/*",))
    base = f"/progress-{uuid.uuid4().hex}"
    assert main(["remote", "add", "m", f"memory://{base}", "--root", str(root)]) == 0
    monkeypatch.setattr(transfer, "STREAM_THRESHOLD", 1024)  # the upload_file path
    lines: list[str] = []
    real_sent = transfer.Progress.sent

    def sent(self: transfer.Progress, key: str, nbytes: int) -> None:
        real_sent(self, key, nbytes)
        self.render()  # deterministic: redraw at each part instead of on the ticker
        lines.append(_shown(term.getvalue().rsplit("\r", 1)[-1]))

    monkeypatch.setattr(transfer.Progress, "sent", sent)
    term = Terminal()
    try:
        summary = push(root, remote="m", progress=term)
    finally:
        fsspec.filesystem("memory").rm(base, recursive=True)
    assert summary.transferred == 1
    assert lines[:3] == [
        "push m: 0/1 blobs, 4.0/12.0 MiB",
        "push m: 0/1 blobs, 8.0/12.0 MiB",
        "push m: 0/1 blobs, 12.0/12.0 MiB",
    ]
    assert term.getvalue().endswith("\r\x1b[K")


def test_bundle_create_reports_bytes_hashed_then_stored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys

    from evidencestore.digest import hash_bytes

    big = bytes(range(256)) * (40 << 10)  # 10 MiB
    src = tmp_path / "src"
    src.mkdir()
    (src / "clip.bin").write_bytes(big)
    root = tmp_path / "repo"
    assert main(["init", "--root", str(root)]) == 0
    lines: list[str] = []
    real_sent = transfer.Progress.sent

    def sent(self: transfer.Progress, key: str, nbytes: int) -> None:
        real_sent(self, key, nbytes)
        self.render()  # deterministic: redraw at each chunk instead of on the ticker
        lines.append(_shown(term.getvalue().rsplit("\r", 1)[-1]))

    monkeypatch.setattr(transfer.Progress, "sent", sent)
    term = Terminal()
    monkeypatch.setattr(sys, "stderr", term)
    code = main(["bundle", "create", "b", str(src), "--external", "*.bin", "--root", str(root)])
    assert code == 0
    assert len(lines) >= 3  # several chunks while hashing, then the store
    assert lines[0].startswith("bundle create b (hash, store): 0/1 blobs, ")
    assert lines[-1] == "bundle create b (hash, store): 0/1 blobs, 20.0/20.0 MiB"
    assert term.getvalue().endswith("\r\x1b[K")
    from evidencestore.remotes import local_store

    assert local_store(root).get(hash_bytes(big).digest) == big
    # Not a terminal: nothing is drawn.
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    lines.clear()
    assert main(["bundle", "create", "c", str(src), "--external", "*", "--root", str(root)]) == 0
    assert lines == []


def test_quiet_silences_the_transfer_line_on_a_terminal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`evstore -q pull` on a terminal draws no progress line; without -q it does (the
    control), with items done of total."""
    import sys

    root = _repo(tmp_path)
    term = Terminal()
    monkeypatch.setattr(sys, "stderr", term)
    assert main(["-q", "pull", "--root", str(root)]) == 0
    assert "blobs" not in term.getvalue()
    shutil.rmtree(root / ".evstore")
    assert main(["pull", "--root", str(root)]) == 0
    assert "1/1 blobs" in term.getvalue()


# -- issue 38 item 4: every long command on a real terminal ----------------------------
# The CLI runs as a subprocess with standard error on a pseudo-terminal (os.openpty) and
# standard output on a pipe. The tests assert on the counts drawn, never on timing: the
# first ticks of an operation are always drawn (the line's burst) and so is the last.
def _counts(lines: list[str], label: str) -> list[str]:
    """The drawn lines of one operation without their rate (timing)."""
    return [re.sub(r", [0-9.]+/s", "", x) for x in lines if x.startswith(label + ": ")]


def test_run_on_a_terminal_counts_sent_done_and_failed(tmp_path: Path) -> None:
    """`evstore run` on a terminal: the server check, a request sent before any is done,
    each done with the failures so far, the last line, then the line cleared and the run's
    own output on standard output only. With -q, or standard error on a pipe: nothing."""
    pytest.importorskip("aiohttp")
    pytest.importorskip("av")
    from helpers.terminal import lines_drawn, on_terminal, piped

    from evidencestore.testing.video_server import sample_workload, serve_video

    root = tmp_path / "repo"
    assert main(["init", "--root", str(root)]) == 0
    wl = tmp_path / "w.toml"
    wl.write_text(sample_workload(seconds=(1,), size="64x48", fps=8, warmup=1, measured=3))
    with serve_video() as server:
        server.fail_on = {3}  # the second measured request: HTTP 500

        def run(name: str, how: Any, *flags: str) -> tuple[int, str, str]:
            argv = ["run", str(wl), "--arm", "a", "--server", server.url, "--name", name]
            return how(*flags, *argv, "--root", str(root))  # type: ignore[no-any-return]

        code, out, term = run("tty", on_terminal)
        assert code == 1 and out.startswith("run tty: partial, 4 requests")
        drawn = _counts(lines_drawn(term), "run tty")
        assert drawn[:2] == [
            "run tty: 0/4 requests, 0 sent (checking the server)",
            "run tty: 0/4 requests, 1 sent",  # shown while the first request runs
        ]
        assert drawn[-1] == "run tty: 4/4 requests, 4 sent, 1 failed"
        assert term.endswith("\r\x1b[K")  # cleared before the command ends
        assert "registered" not in term and "registered evidence/tty/" in out
        for name, how, flags in (("quiet", on_terminal, ["-q"]), ("pipe", piped, [])):
            server.fail_on = set()
            code, out, err = run(name, how, *flags)
            assert code == 0 and out.startswith(f"run {name}: complete, 4 requests")
            assert "\r" not in err and "requests" not in err, err


def test_import_and_verify_on_a_terminal(tmp_path: Path) -> None:
    """`evstore import` counts the harness files it reads; `evstore verify` the bundles
    to check, then those checked and failed (a bundle whose file was overwritten)."""
    from helpers.terminal import lines_drawn, on_terminal, piped

    from evidencestore.runs.importing import harness_dir

    src = Path(__file__).parent / "fixtures/aiperf/baseline-1"
    n = len(harness_dir(src, "aiperf").files)
    root = tmp_path / "repo"
    (root / "evidence").mkdir(parents=True)
    code, out, term = on_terminal("import", "aiperf", str(src), "--name", "b1", "--root", str(root))
    assert code == 0 and out.startswith("import aiperf: run b1: ")
    drawn = _counts(lines_drawn(term), "import aiperf b1")
    assert [d.split(" (")[0] for d in drawn[:3]] == [
        f"import aiperf b1: {k}/{n} files" for k in (1, 2, 3)
    ]
    assert drawn[-1].startswith(f"import aiperf b1: {n}/{n} files (")
    add_bundle(root, "plain", {"a.txt": b"a", "b.txt": b"b"})
    code, out, term = on_terminal("verify", "--root", str(root))
    assert code == 0 and _counts(lines_drawn(term), "verify") == [
        "verify: 0/2 bundles (hashing every entry)",
        "verify: 2/2 bundles",
    ]
    (root / "evidence/plain/a.txt").write_bytes(b"A")  # same size, other bytes
    code, out, term = on_terminal("verify", "--root", str(root))
    assert code == 1 and _counts(lines_drawn(term), "verify")[-1] == "verify: 2/2 bundles, 1 failed"
    assert "verify:" not in out.replace("verified", "")  # standard output is the report's
    code, _, err = piped("verify", "--root", str(root))
    assert code == 1 and "\r" not in err and "bundles" not in err
    code, _, term = on_terminal("-q", "verify", "--root", str(root))
    assert code == 1 and "\r" not in term


def test_pull_on_a_terminal(tmp_path: Path) -> None:
    """`evstore pull` draws blobs done of the total and bytes on a terminal; nothing
    with -q or on a pipe."""
    from helpers.terminal import lines_drawn, on_terminal, piped

    root = _repo(tmp_path)
    code, _, err = piped("pull", "--root", str(root))
    assert code == 0 and "\r" not in err and "blobs" not in err
    shutil.rmtree(root / ".evstore")
    code, _, term = on_terminal("-q", "pull", "--root", str(root))
    assert code == 0 and "\r" not in term
    shutil.rmtree(root / ".evstore")
    code, _, term = on_terminal("pull", "--root", str(root))
    assert code == 0 and _shown(lines_drawn(term)[-1]) == "pull: 1/1 blobs, 1.0/1.0 MiB"


def test_campaign_status_on_a_terminal_counts_items(tmp_path: Path) -> None:
    """`evstore campaign status` counts what it computes: the condition's repeatability,
    the candidate's adjudication, the claims (3 items here); the verdict on standard
    output only. A status reusing what is kept computes nothing and draws nothing."""
    pytest.importorskip("aiohttp")
    pytest.importorskip("av")
    from helpers.accepted_campaign import CAMPAIGN, accepted_campaign
    from helpers.terminal import lines_drawn, on_terminal, piped

    from evidencestore.testing.video_server import serve_video

    with serve_video() as server:
        root = accepted_campaign(tmp_path, server)
    argv = ("campaign", "status", CAMPAIGN, "--root", str(root))
    code, out, term = on_terminal(*argv, "--no-memo")
    assert code == 0 and out.rstrip().splitlines()[-1] == "ACCEPTED"
    assert _counts(lines_drawn(term), f"campaign {CAMPAIGN}") == [
        f"campaign {CAMPAIGN}: 1/3 items (5s: repeatability)",
        f"campaign {CAMPAIGN}: 2/3 items (5s: fast)",
        f"campaign {CAMPAIGN}: 3/3 items (claims)",
    ]
    assert "ACCEPTED" not in term
    code, out, err = piped(*argv)  # computed, and kept
    assert code == 0 and "\r" not in err and "items" not in err
    code, out, term = on_terminal(*argv)
    assert code == 0 and out.rstrip().splitlines()[-1] == "ACCEPTED"
    assert lines_drawn(term) == []  # reused: nothing computed, nothing drawn
