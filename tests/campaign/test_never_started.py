"""Issue 38 item 5: an operator's error is not an engine failure. A run that reached no
server (connection refused, host name not resolved: nothing was sent) is registered as
``never-started``, shown by ``campaign status`` and counted against no arm; a run whose
server accepted the connection and then failed still counts, and every status that
counts it names ``campaign void``. Real runs over HTTP, in a real git repository, with
an ACCEPTED campaign as the truth built in."""

from __future__ import annotations

import json
import shutil
import socket
import threading
from pathlib import Path
from typing import Any

import msgspec
import pytest

pytest.importorskip("aiohttp")
pytest.importorskip("av")

from helpers.accepted_campaign import CAMPAIGN, accepted_campaign, commit

from evidencestore.cli import main
from evidencestore.runs.recorder import load_run, never_started
from evidencestore.testing.video_server import VideoServer


def _cli(capsys: pytest.CaptureFixture[str], root: Path, *argv: str) -> tuple[int, str]:
    capsys.readouterr()
    code = main([*argv, "--root", str(root)])
    return code, capsys.readouterr().out


def _run(
    capsys: pytest.CaptureFixture[str], root: Path, url: str, arm: str, name: str
) -> tuple[int, str]:
    workload = str(root / f"evidence/{CAMPAIGN}/workloads/5s.toml")
    return _cli(capsys, root, "run", workload, "--arm", arm, "--server", url, "--name", name,
                "--campaign", CAMPAIGN, "--condition", "5s")  # fmt: skip


def _status(capsys: pytest.CaptureFixture[str], root: Path) -> tuple[int, dict[str, Any]]:
    code, out = _cli(capsys, root, "campaign", "status", CAMPAIGN, "--json")
    return code, json.loads(out)


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # closed again: nothing listens there


@pytest.fixture(scope="module")
def accepted(tmp_path_factory: pytest.TempPathFactory, video_server: VideoServer) -> Path:
    return accepted_campaign(tmp_path_factory.mktemp("accepted"), video_server)


@pytest.fixture
def accepted_copy(accepted: Path, tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    shutil.copytree(accepted, root, symlinks=True)
    return root


def test_runs_that_reached_no_server_never_started_and_count_against_no_arm(
    accepted_copy: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, status = _status(capsys, accepted_copy)
    assert code == 0 and status["verdict"] == "ACCEPTED", status["remaining"]
    port = _closed_port()
    typos = {
        "typo-refused": (f"http://127.0.0.1:{port}/", "refused", "the connection was refused"),
        "typo-unresolved": ("http://nonexistent.invalid:1/", "unresolved",
                            "the host name did not resolve"),
    }  # fmt: skip
    for name, (url, why, words) in typos.items():
        code, out = _run(capsys, accepted_copy, url, "fast", name)
        assert code == 1
        assert f"run {name}: never-started, 0 requests" in out
        assert f"no server was reached at {url.rstrip('/')} ({words}): nothing was sent" in out
        assert out.splitlines()[-1] == (
            f"campaign {CAMPAIGN}: run {name} never started (no server was reached); it "
            "counts against no arm"
        )
        assert "campaign void" not in out
        record = load_run(accepted_copy, name)
        assert record.outcome == "never-started" and never_started(record)
        assert record.server.health.unreached == why and record.server.health.status is None
        assert record.requests == () and record.server.health.error  # the client's words
    commit(accepted_copy, "two mistyped --server runs")
    code, status = _status(capsys, accepted_copy)
    assert code == 0 and status["verdict"] == "ACCEPTED", status["remaining"]
    shown = {e["run"]: e for e in status["never_started"]}
    assert sorted(shown) == sorted(typos)
    assert all(e["code"] == "never-started" and e["arm"] == "fast" for e in shown.values())
    assert "the connection was refused" in shown["typo-refused"]["message"]
    fast = next(c for c in status["cells"] if c["arm"] == "fast")
    assert (fast["runs_done"], fast["runs_failed"], fast["failed_runs"]) == (3, 0, [])
    assert status["excluded"] == []
    code, text = _cli(capsys, accepted_copy, "campaign", "status", CAMPAIGN)
    assert code == 0 and text.rstrip().splitlines()[-1] == "ACCEPTED"
    assert "  never-started: typo-refused: run 'typo-refused': no server was reached at " in text
    code, out = _cli(capsys, accepted_copy, "campaign", "verify", CAMPAIGN, "--json")
    verified = json.loads(out)
    assert code == 0 and verified["ok"] and verified["findings"] == []
    assert sorted(e["run"] for e in verified["never_started"]) == sorted(typos)


class _AcceptThenClose:
    """A TCP server that accepts every connection and closes it without a byte: a server
    was reached, so a run against it is the engine's failure."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            conn.close()

    def close(self) -> None:
        self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()
        self.thread.join()


@pytest.mark.parametrize("fault", ["accept-then-close", "health-503", "http-500", "drop-mid-body"])
def test_a_server_that_accepted_the_connection_and_failed_counts(
    fault: str, accepted_copy: Path, video_server: VideoServer, capsys: pytest.CaptureFixture[str]
) -> None:
    """The negative control: the same campaign turns NOT_ACCEPTED, its status names
    `campaign void` for the failed run, and the void it names restores ACCEPTED."""
    closer = _AcceptThenClose() if fault == "accept-then-close" else None
    url = closer.url if closer is not None else video_server.url
    knobs = {"health-503": ("startup_error", "model failed to load"),
             "http-500": ("fail_on", True), "drop-mid-body": ("drop_on", True)}  # fmt: skip
    knob = knobs.get(fault)
    try:
        if knob is not None:
            setattr(video_server, knob[0], knob[1])
        code, out = _run(capsys, accepted_copy, url, "fast", "bad")
    finally:
        if knob is not None:
            setattr(video_server, knob[0], None if knob[0] == "startup_error" else set())
        if closer is not None:
            closer.close()
    assert code == 1
    record = load_run(accepted_copy, "bad")
    outcome = "partial" if fault == "drop-mid-body" else "failed-before-inference"
    assert record.outcome == outcome and not never_started(record)
    assert record.server.health.unreached is None
    void = f"`evstore campaign void {CAMPAIGN} --run bad --reason TEXT --record BUNDLE`"
    assert f"campaign {CAMPAIGN}: run bad counts as a failed run of arm fast" in out
    assert void in out
    commit(accepted_copy, "a failed run")
    code, status = _status(capsys, accepted_copy)
    assert code == 1 and status["verdict"] == "NOT_ACCEPTED" and status["never_started"] == []
    fast = next(c for c in status["cells"] if c["arm"] == "fast")
    assert (fast["runs_failed"], fast["failed_runs"]) == (1, ["bad"])
    [said] = [n for n in status["notes"] if "failed run bad" in n]
    assert said == (
        f"5s: failed run bad ({outcome}) counts against arm fast; if it failed for a reason "
        f"that is not the arm's, set it aside with {void} (effective once committed)"
    )
    code, text = _cli(capsys, accepted_copy, "campaign", "status", CAMPAIGN)
    assert code == 1 and f"  note: {said}" in text
    # The remedy it names works: the void, once committed, sets the run aside.
    code, _ = _cli(capsys, accepted_copy, "campaign", "void", CAMPAIGN, "--run", "bad", "--reason",
                   "the server was misconfigured", "--record", "void-bad")  # fmt: skip
    assert code == 0
    commit(accepted_copy, "void")
    code, status = _status(capsys, accepted_copy)
    assert code == 0 and status["verdict"] == "ACCEPTED", status["remaining"]


def test_a_record_that_says_never_started_but_shows_a_server_is_not_believed(
    accepted_copy: Path,
) -> None:
    """``never_started`` reads the record's own evidence, not only its outcome word: a
    complete run relabelled, or one whose server check got an answer, is not one."""
    record = load_run(accepted_copy, "c1")
    relabelled = msgspec.structs.replace(record, outcome="never-started")
    assert not never_started(relabelled)  # it has requests and a server that answered
    empty = msgspec.structs.replace(relabelled, requests=())
    assert not never_started(empty)  # its server check was answered (status 200)
    health = msgspec.structs.replace(
        record.server.health, status=None, unreached="refused", body=None
    )
    unreached = msgspec.structs.replace(
        empty, server=msgspec.structs.replace(record.server, ok=False, health=health, models=None)
    )
    assert never_started(unreached)  # the control: the shape of a run that never started
