"""Hostile servers: whatever a server sends, the run is registered, valid, bounded.

One test per mode of ``evidencestore.testing.hostile`` (a raw-socket server that sends
what no well-behaved server would): the run exits 0 or 1 (never 2, never an internal
error), is registered, passes ``verify``, names the failure class it expects, keeps no
byte past a limit and leaves no temporary behind; ``run show``, ``bundle list`` and
``gc`` keep working on the repository.

``make test`` runs every mode once; ``EVSTORE_HOSTILE_ROUNDS=3`` runs every mode three
times (the odd rounds with two requests in flight) and ``EVSTORE_HOSTILE_BIG=4`` sends a
4 GiB body to the peak-memory test (default: 256 MiB).
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
import threading
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest

from evidencestore.cli import main
from evidencestore.config import local_store
from evidencestore.inventory import load_registration, registration_path
from evidencestore.runs import load_run
from evidencestore.runs.transport import CONTROL_MAX
from evidencestore.testing.hostile import MODES, hostile_workload, serve_hostile

ROUNDS = int(os.environ.get("EVSTORE_HOSTILE_ROUNDS", "1"))
BIG = int(os.environ.get("EVSTORE_HOSTILE_BIG", "0")) << 30 or 256 << 20
LIMIT = 1 << 20  # the workloads' max_output_size

# mode -> the failure class of the first measured request (None: delivered)
EXPECTED: dict[str, str | None] = {
    "well-behaved": None,
    "content-type-script": None,
    "content-type-bare": None,
    "content-type-control": None,
    "content-type-unicode": None,
    "content-type-long": None,
    "health-type-json": None,
    "output-type-script": None,
    "models-type-script": None,
    "models-nested": None,
    "models-ids-odd": None,
    "models-surrogate": None,
    "models-huge": None,
    "server-header-odd": None,
    "gzip-bomb": None,
    "header-control": None,
    "job-created-nested": "invalid-response",
    "job-created-nested-field": "invalid-response",
    "job-poll-nested": "invalid-response",
    "job-id-path": "invalid-response",
    "job-id-query": "invalid-response",
    "job-id-object": "invalid-response",
    "job-id-missing": "invalid-response",
    "job-id-control": "invalid-response",
    "job-created-not-json": "invalid-response",
    "job-status-missing": "invalid-response",
    "job-status-failed": "http-status",
    "job-created-huge": "too-large",
    "job-created-huge-declared": "too-large",
    "job-poll-huge": "too-large",
    "output-endless": "too-large",
    "output-huge-declared": "too-large",
    "error-500-huge": "too-large",
    "error-500-endless": "too-large",
    "job-content-endless": "too-large",
    "json-cut": "invalid-response",
    "json-nested-output": "invalid-response",
    "content-length-short": "invalid-response",
    "content-length-long": "truncated",
    "content-length-negative": "invalid-response",
    "content-length-twice": "invalid-response",
    "no-content-with-body": "invalid-response",
    "status-line-garbage": "invalid-response",
    "status-line-not-http": "invalid-response",
    "status-999": "http-status",
    "header-huge": "invalid-response",
    "headers-many": "invalid-response",
    "chunked-bad": "invalid-response",
    "close-before-headers": "connect",
    "close-mid-body": "truncated",
    "redirect-away": "http-status",
    "health-huge": "server",
    "health-500": "server",
}


def _cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


def test_every_mode_has_an_expectation() -> None:
    assert set(EXPECTED) == set(MODES)
    assert len(MODES) >= 50


class _Watch:
    """The largest incoming temporary seen while a run lasts (bytes on disk)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.largest = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def _poll(self) -> None:
        while not self._stop.is_set():
            try:
                for item in os.scandir(self.folder):
                    self.largest = max(self.largest, item.stat().st_size)
            except OSError:
                pass
            self._stop.wait(0.001)

    def __enter__(self) -> _Watch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


@pytest.mark.parametrize("round_", range(ROUNDS))
@pytest.mark.parametrize("mode", sorted(MODES))
def test_a_hostile_server_leaves_a_registered_valid_bounded_run(
    tmp_path: Path, mode: str, round_: int
) -> None:
    repo = tmp_path / "repo"
    (repo / "evidence").mkdir(parents=True)
    wl = hostile_workload(tmp_path, mode, max_output_size=LIMIT)
    if round_ % 2:
        wl.write_text(wl.read_text().replace("measured = 2", "measured = 4\nconcurrency = 2"))
    incoming = local_store(repo).root / "incoming"
    with serve_hostile(mode) as server, _Watch(incoming) as watch:
        code, out, err = _cli(
            "run", str(wl), "--arm", "a", "--server", server.url, "--name", "r", "--root", str(repo)
        )
    expected = EXPECTED[mode]
    assert "internal error" not in err + out, err
    assert code == (0 if expected is None else 1), (code, out, err)
    record = load_run(repo, "r")  # registered, its run.json checked
    assert (
        f"registered evidence/r/ ({load_registration(registration_path(repo, 'r')).digest})" in out
    )
    if expected == "server":
        assert record.outcome == "failed-before-inference" and not record.server.ok
        assert record.requests == () and record.server.message
    else:
        first = record.requests[0]
        assert first.failure == expected, (first.failure, first.message)
        assert (first.message is None) == (expected is None)
        assert record.outcome == ("complete" if expected is None else record.outcome)
    for r in record.requests:
        if r.failure in ("too-large", "truncated", "connect", "invalid-response"):
            if r.failure != "invalid-response" or r.body is None:
                assert r.body is None  # a partial or oversized body is never an output
            assert r.e2e_s is None
        if r.body is not None:
            assert r.body.size <= LIMIT
    # nothing past a limit reached the disk, nothing is left behind
    assert watch.largest <= LIMIT
    assert not incoming.exists() or os.listdir(incoming) == []
    store = local_store(repo)
    assert all(b.size <= max(LIMIT, CONTROL_MAX) for b in store.upkeep.iter_blobs())
    # the repository works as before: verify, show, list, gc
    code, out, err = _cli("verify", "--root", str(repo))
    assert code == 0, out + err
    assert _cli("run", "show", "r", "--root", str(repo))[0] == 0
    assert _cli("bundle", "list", "--root", str(repo))[0] == 0


def _peak_rss_kib(repo: Path, wl: Path, url: str, name: str) -> tuple[int, str]:
    # VmHWM, not ru_maxrss: the latter starts from the forking parent's peak on Linux
    code = (
        "import sys\n"
        "from evidencestore.cli import main\n"
        "rc = main(sys.argv[1:])\n"
        "hwm = [ln for ln in open('/proc/self/status') if ln.startswith('VmHWM:')]\n"
        "print('maxrss', hwm[0].split()[1])\n"
        "sys.exit(rc)\n"
    )
    argv = ["run", str(wl), "--arm", "a", "--server", url, "--name", name, "--root", str(repo)]
    proc = subprocess.run(
        [sys.executable, "-c", code, *argv], capture_output=True, text=True, timeout=1800
    )
    assert proc.returncode in (0, 1), proc.stderr
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("maxrss ")]
    return int(lines[-1].split()[1]), proc.stdout


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="VmHWM is Linux's")
def test_peak_memory_is_flat_with_a_huge_hostile_body(tmp_path: Path) -> None:
    """A body of BIG bytes (256 MiB; 4 GiB with EVSTORE_HOSTILE_BIG=4) kept as an output,
    an endless one past the limit, and endless control answers: the runner's peak
    resident memory stays that of a small run."""
    repo = tmp_path / "repo"
    (repo / "evidence").mkdir(parents=True)
    peaks = {}
    cases = [
        ("small", "well-behaved", None, LIMIT),
        ("kept", "output-huge-declared", BIG, BIG + 1),
        ("endless", "output-endless", None, 64 << 20),
        ("job", "job-created-huge", None, LIMIT),
        ("error", "error-500-endless", None, 64 << 20),
    ]
    for name, mode, size, limit in cases:
        wl = hostile_workload(tmp_path, mode, max_output_size=limit, measured=1, timeout=1200)
        with serve_hostile(mode, size) as server:
            peaks[name], out = _peak_rss_kib(repo, wl, server.url, name)
        record = load_run(repo, name)
        if name == "kept":
            assert record.outcome == "complete", out
            assert record.requests[0].body is not None and record.requests[0].body.size == BIG
        elif name != "small":
            assert record.requests[0].failure == "too-large", out
    # an error answer is bounded like a control answer, whatever max_output_size says
    error = load_run(repo, "error").requests[0]
    assert error.status == 500 and str(CONTROL_MAX) in (error.message or "")
    sys.stderr.write(f"peak RSS KiB by case (body {BIG} bytes): {peaks}\n")
    for name in ("kept", "endless", "job", "error"):
        assert peaks[name] - peaks["small"] < 96 << 10, peaks  # flat: within 96 MiB


KILLS = int(os.environ.get("EVSTORE_RUN_KILLS", "6"))


def test_run_killed_anywhere_leaves_nothing_partial(tmp_path: Path) -> None:
    """``evstore run`` SIGKILLed at points spread over a run's duration: every bundle is
    registered whole or not at all, verify passes, and gc (grace 0) removes what a
    killed run left in ``incoming/`` (its lock died with it) and nothing a live run holds."""
    import random
    import signal
    import time

    from helpers.repos import init_repo

    repo = init_repo(tmp_path / "repo")
    (repo / "evidence").mkdir()
    (repo / "evstore.toml").write_text("")
    size = 48 << 20
    wl = hostile_workload(tmp_path, "output-huge-declared", max_output_size=size, measured=3)
    argv = [
        sys.executable,
        "-c",
        "import sys; from evidencestore.cli import main; sys.exit(main(sys.argv[1:]))",
    ]
    rng = random.Random(19)
    survived = 0
    with serve_hostile("output-huge-declared", size) as server:

        def run(name: str) -> subprocess.Popen[bytes]:
            return subprocess.Popen(
                [*argv, "run", str(wl), "--arm", "a", "--server", server.url, "--name", name,
                 "--root", str(repo)],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )  # fmt: skip

        started = time.monotonic()
        assert run("probe").wait(600) == 0
        span = time.monotonic() - started
        for trial in range(KILLS):
            proc = run(f"killed-{trial}")
            time.sleep(rng.uniform(0.05, 1.0) * span)
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            survived += 1
            assert _cli("verify", "--root", str(repo))[0] == 0
        assert _cli("gc", "--grace", "0", "--yes", "--root", str(repo))[0] == 0
        assert not (local_store(repo).root / "incoming").exists() or not os.listdir(
            local_store(repo).root / "incoming"
        )
        assert run("after").wait(600) == 0
    assert load_run(repo, "after").outcome == "complete"
    assert _cli("verify", "--root", str(repo))[0] == 0
    sys.stderr.write(f"run kills survived: {survived}\n")
