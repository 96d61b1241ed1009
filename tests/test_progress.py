"""Progress on a terminal, nothing elsewhere: byte-level progress of transfers (issue 12),
and every long command's line (issue 38: run, import, verify, pull, campaign status)
through a real pseudo-terminal."""

from __future__ import annotations

import io
import os
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from helpers.fresh import rerun_fresh
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


# -- issue 38 item 4: verify's count moves while it works ------------------------------
def _many(root: Path, n: int) -> None:
    for k in range(n):
        add_bundle(root, f"b{k:03d}", {"a.txt": b"a%d" % k})


def _ticks(root: Path) -> list[tuple[int, int | None, int]]:
    from evidencestore.progress import Tick
    from evidencestore.verify import verify_repository

    seen: list[Tick] = []
    report = verify_repository(root, observer=seen.append)
    assert not report.ok and [b.name for b in report.bundles if not b.ok] == ["b040"]
    return [(t.done, t.total, t.failed) for t in seen]


@pytest.mark.parametrize("fork", [True, False])
def test_verify_counts_bundles_a_step_at_a_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fork: bool, request: pytest.FixtureRequest
) -> None:
    """Many bundles: the observer hears of the bundles done and failed after each step
    (forked workers count in shared memory, this process tells), not only at the end;
    forked or not, the counts only grow and end at the total with the one failure."""
    from evidencestore import _fork
    from evidencestore.verify import _repository, _shares

    root = tmp_path / "repo"
    _many(root, 80)
    (root / "evidence/b040/a.txt").write_bytes(b"A40")  # same size, other bytes
    if fork:
        monkeypatch.setattr(_fork, "_CPUS", 2)  # two shares of 40, whatever the machine
        if not _fork.can_fork():  # an earlier test's thread lives on
            return rerun_fresh(request)
    else:
        monkeypatch.setenv("EVSTORE_NO_FORK", "1")
        # one share in this process, loaded in steps (as beyond BATCH_DIRS bundles)
        monkeypatch.setattr(_shares, "BATCH_DIRS", 50)
        monkeypatch.setattr(_repository, "BATCH_DIRS", 50)
    ticks = _ticks(root)
    assert ticks[0] == (0, 80, 0) and ticks[-1] == (80, 80, 1)
    assert any(0 < done < 80 for done, _, _ in ticks)  # moved while it worked
    assert [t[0] for t in ticks] == sorted(t[0] for t in ticks)
    assert [t[2] for t in ticks] == sorted(t[2] for t in ticks)
    if not fork:  # one process, steps of 32: every count is known
        assert ticks == [(0, 80, 0), (32, 80, 0), (64, 80, 1), (80, 80, 1), (80, 80, 1)]


def test_verify_of_many_bundles_on_a_terminal(tmp_path: Path) -> None:
    """`evstore verify` on a terminal draws bundles done of the total with the failures
    so far and a rate while it works, then clears the line; with -q or on a pipe it
    draws nothing, and standard output is the same report either way."""
    from helpers.terminal import lines_drawn, on_terminal, piped

    root = tmp_path / "repo"
    _many(root, 80)
    (root / "evidence/b040/a.txt").write_bytes(b"A40")
    code, out, term = on_terminal("verify", "--root", str(root))
    assert code == 1 and term.endswith("\r\x1b[K")
    drawn = lines_drawn(term)
    assert drawn[0] == "verify: 0/80 bundles (hashing every entry)"
    assert _counts(drawn, "verify")[-1] == "verify: 80/80 bundles, 1 failed"
    if (os.cpu_count() or 1) > 1:  # split across workers: counted a step at a time
        between = [d for d in drawn if re.match(r"verify: [1-7]?[0-9]/80 bundles, ", d)]
        assert between and all(re.search(r", [0-9.]+/s$", d) for d in between), drawn
    code, _, term = on_terminal("-q", "verify", "--root", str(root))
    assert code == 1 and "\r" not in term and "bundles" not in term
    code, piped_out, err = piped("verify", "--root", str(root))
    assert code == 1 and "\r" not in err and "bundles" not in err
    assert piped_out == out


def test_verify_remote_on_a_terminal(tmp_path: Path) -> None:
    """`evstore verify --remote` draws the store entries checked of the total (with
    --deep, as each copy is hashed); nothing with -q or on a pipe."""
    from helpers.terminal import lines_drawn, on_terminal, piped

    root = _repo(tmp_path)
    argv = ("verify", "--remote", "m", "--root", str(root))
    code, out, term = on_terminal(*argv)
    assert code == 0, out
    assert _counts(lines_drawn(term), "verify remote m") == [
        "verify remote m: 0/1 store entries (asking for sizes)",
        "verify remote m: 1/1 store entries",
    ]
    code, out, term = on_terminal(*argv, "--deep")
    assert code == 0 and _counts(lines_drawn(term), "verify remote m")[-1] == (
        "verify remote m: 1/1 store entries"
    )
    code, _, term = on_terminal("-q", *argv)
    assert code == 0 and "\r" not in term
    code, _, err = piped(*argv, "--deep")
    assert code == 0 and "\r" not in err and "store entries" not in err


def test_launch_readiness_wait_on_a_terminal(tmp_path: Path) -> None:
    """`evstore run --launch` draws the seconds waited for the server (of its ready
    timeout) until it is ready or given up on; nothing with -q or on a pipe."""
    pytest.importorskip("aiohttp")
    import socket
    import sys

    from helpers.terminal import lines_drawn, on_terminal, piped

    from evidencestore.testing.llm_server import chat_workload

    root = tmp_path / "repo"
    (root / "evidence").mkdir(parents=True)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    wl = tmp_path / "w.toml"
    wl.write_text(chat_workload(("a",), max_tokens=4) + "\n[server]\nready_timeout = 1.5\n")
    command = f'{sys.executable} -c "import time; time.sleep(60)"'

    def run(name: str, how: Any, *flags: str) -> tuple[int, str, str]:
        argv = ["run", str(wl), "--arm", "a", "--server", f"http://127.0.0.1:{port}"]
        argv += ["--name", name, "--launch", command, "--root", str(root)]
        return how(*flags, *argv)  # type: ignore[no-any-return]

    code, out, term = run("tty", on_terminal)
    assert code == 1 and "failed-before-inference" in out
    drawn = _counts(lines_drawn(term), "run tty")
    assert drawn[0] == "run tty: 0/2 s (waiting for the server)"
    assert "run tty: 1/2 s (waiting for the server)" in drawn  # no rate: seconds waited
    assert term.endswith("\r\x1b[K")
    for name, how, flags in (("quiet", on_terminal, ["-q"]), ("pipe", piped, [])):
        code, out, err = run(name, how, *flags)
        assert code == 1 and "\r" not in err and "waiting" not in err, err
