"""``gc --grace 0`` never takes an entry from a run being recorded (issue 36 item 3).

A run holds an ``ActiveLease`` from before its first blob until its registration is
written (``storage/leases.py``, ``gc.py``). Checked in every order of the run's steps
against gc's (``testing/interleave.py`` pause points, no sleeps), with a negative control
(the lease disregarded: the same schedule loses entries), and with real processes: a
child recording runs back to back while this process collects with ``--grace 0``.
"""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from helpers.remotes import make_repo

from evidencestore import _steps
from evidencestore.config import local_store
from evidencestore.gc import collect_garbage
from evidencestore.inventory import load_registration, registration_path
from evidencestore.runs import open_run
from evidencestore.storage import BlobStore
from evidencestore.testing.interleave import Interleaving

pytestmark = pytest.mark.skipif(os.name != "posix", reason="runs lease by flock")

WORKLOAD = b'[run]\nname = "w"\n'
CONFIG = b"offload: 16\n"  # found present (an earlier run's), relied on
BODY = b"\x00body" * 512  # an output another run stored already
OLD = time.time() - 7 * 24 * 3600

GC_STEPS = ("gc:marked", "gc:quarantined", "gc:reread")
RUN_STEPS = ("put:kept-alive", "run:opened", "run:stored", "run:before-seal")
SCHEDULES = [
    *[(g, None, "gc") for g in GC_STEPS],
    *[(None, r, "run") for r in RUN_STEPS],
    *[(g, r, f) for g, r in itertools.product(GC_STEPS, RUN_STEPS) for f in ("gc", "run")],
]


def _repo(tmp: Path) -> tuple[Path, BlobStore]:
    """A repository whose store holds, unreferenced and a week old, the workload, a
    configuration and an output the run will find present (and one garbage blob)."""
    root = tmp / "repo"
    make_repo(root, {"other.bin": b"kept by another bundle"}, "other")
    store = local_store(root)
    for data in (WORKLOAD, CONFIG, BODY, b"garbage nobody names"):
        desc = store.put(data)
        os.utime(store.path_of(desc.digest), (OLD, OLD))
    return root, store


def _record(root: Path, name: str, tmp: Path) -> Callable[[], Any]:
    def run() -> Any:
        rec = open_run(root, name, arm="a", workload=WORKLOAD)  # relies on the old copy
        _steps.reached("run:opened")
        config = tmp / "offload.yaml"
        config.write_bytes(CONFIG)
        rec.attach_config(config)
        rec.put("requests/00000/payload", os.urandom(64), "application/json", "payload")
        sink = rec.body_sink()
        sink.write(BODY)
        sink.finish()
        rec.add_entry("requests/00000/output", rec.publish(sink, "video/mp4"), "output")
        _steps.reached("run:stored")
        _steps.reached("run:before-seal")
        return rec.seal()[0]

    return run


def _schedule(
    il: Interleaving,
    gc_fn: Callable[[], Any],
    run_fn: Callable[[], Any],
    gc_pause: str | None,
    run_pause: str | None,
    first: str,
) -> None:
    """Pause one side at its step, run the other to its step or its end, finish both."""
    a, b = ("gc", "run") if first == "gc" else ("run", "gc")
    fns = {"gc": gc_fn, "run": run_fn}
    pauses = {"gc": gc_pause, "run": run_pause}
    il.start(a, fns[a], pause_at=pauses[a] or ())
    if pauses[a]:
        il.wait_paused(a)
    il.start(b, fns[b], pause_at=pauses[b] or ())
    if pauses[b]:
        il.wait_paused(b)
        il.resume(a)
        il.join(a)
        il.resume(b)
    else:
        il.join(b)
        il.resume(a)
    il.join(a)
    il.join(b)


def _missing(root: Path, store: BlobStore, name: str) -> list[str]:
    reg = load_registration(registration_path(root, name))
    lost = []
    for e in reg.manifest.entries:
        if e.location != "store":
            continue
        try:
            store.verify(e.descriptor.digest, e.descriptor.size)
        except Exception:
            lost.append(e.path)
    return lost


@pytest.mark.parametrize(("gc_pause", "run_pause", "first"), SCHEDULES)
def test_gc_grace_zero_never_takes_a_run_entry(
    tmp_path: Path, gc_pause: str | None, run_pause: str | None, first: str
) -> None:
    root, store = _repo(tmp_path)
    with Interleaving() as il:
        _schedule(
            il,
            lambda: collect_garbage(root, scope="worktree", grace=0, delete=True),
            _record(root, "r1", tmp_path),
            gc_pause,
            run_pause,
            first,
        )
        plan = il.join("gc")
    assert _missing(root, store, "r1") == []
    assert list(store.upkeep.iter_quarantined()) == []
    assert not [p for p in (Path(store.location) / "leases").glob("active-*")]  # released
    # gc still collects: the unnamed garbage goes whenever gc ran with no live run.
    if (first == "run" and run_pause is None) or (first == "gc" and gc_pause is None):
        assert len(plan.garbage) >= 1


@pytest.mark.parametrize("run_pause", ["run:stored", "run:before-seal"])
def test_without_the_run_lease_gc_takes_its_entries(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, run_pause: str
) -> None:
    """Negative control: with the live lease disregarded, gc run while the run is between
    its puts and its seal deletes the workload, configuration, payload and output it
    relied on; the run registers without them (the issue's 4 of 10 entries lost)."""
    from evidencestore import gc

    monkeypatch.setattr(gc, "active_floor", lambda *a: None)
    root, store = _repo(tmp_path)
    with Interleaving() as il:
        _schedule(
            il,
            lambda: collect_garbage(root, scope="worktree", grace=0, delete=True),
            _record(root, "r1", tmp_path),
            None,
            run_pause,
            "run",
        )
    assert sorted(_missing(root, store, "r1")) == [
        "configs/offload.yaml",
        "requests/00000/output",
        "requests/00000/payload",
        "workload/workload.toml",
    ]


CHILD = """
import os, sys, time
from pathlib import Path
from evidencestore.runs import open_run
root, rounds = Path(sys.argv[1]), int(sys.argv[2])
shared = [bytes([i]) * 2048 for i in range(4)]
for i in range(rounds):
    rec = open_run(root, f"r{i}", arm="a", workload=b'[run]\\nname = "w"\\n')
    for k, data in enumerate(shared):  # the same bytes every round: found present
        rec.put(f"requests/{k:05d}/payload", data, "application/json", "payload")
        time.sleep(0.002)
    rec.put("requests/99999/output", os.urandom(4096), "video/mp4", "output")
    time.sleep(0.005)
    rec.seal()
print("done", flush=True)
"""


def test_real_processes_gc_grace_zero_during_runs(tmp_path: Path) -> None:
    """A child process records 24 runs back to back (each relying on blobs earlier runs
    stored) while this process runs ``gc --grace 0 --yes`` in a loop, adding garbage
    before each pass: every run registers with every entry, and gc did collect."""
    rounds = 24
    root, store = _repo(tmp_path)
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(root), str(rounds)],
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    passes = collected = 0
    try:
        while child.poll() is None:
            store.put(os.urandom(256))  # garbage for this pass
            plan = collect_garbage(root, scope="worktree", grace=0, delete=True)
            passes += 1
            collected += len(plan.garbage)
    finally:
        out, err = child.communicate(timeout=120)
    assert child.returncode == 0, err.decode()
    assert out.decode().strip() == "done"
    lost = {f"r{i}": m for i in range(rounds) if (m := _missing(root, store, f"r{i}"))}
    assert lost == {}
    assert passes >= 3 and collected >= passes  # gc ran throughout, and deleted
