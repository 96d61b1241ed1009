"""SIGKILL loops: writers and gc killed at many points never leave a wrong blob, a
partial registration, or a lost one.

``make test`` runs a few dozen kills; ``EVSTORE_KILL_TRIALS=400`` runs the campaign's
count. Kill points are spread over one uninterrupted run's duration with a fixed
seed, and gc is also killed at each of its named steps (exactly, by an observer in
the child that kills its own process there).
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from helpers.remotes import digest_of
from helpers.repos import init_repo

from evidencestore.digest import hash_file
from evidencestore.inventory import load_inventory
from evidencestore.remotes import local_store
from evidencestore.verify import verify_repository

TRIALS = int(os.environ.get("EVSTORE_KILL_TRIALS", "24"))


def _evstore(*args: str) -> list[str]:
    return [
        sys.executable,
        "-c",
        "import sys; from evidencestore.cli import main; sys.exit(main(sys.argv[1:]))",
        *args,
    ]


def _store_is_sound(root: Path) -> int:
    """Every blob under its final name hashes to that name; return how many."""
    store = local_store(root)
    count = 0
    for digest in store.iter_digests():
        got, _size = hash_file(store.path_of(digest))
        assert got == digest, f"{store.path_of(digest)} holds {got}"
        count += 1
    return count


def test_bundle_create_killed_anywhere(tmp_path: Path) -> None:
    root = init_repo(tmp_path / "repo")
    assert (
        subprocess.run(_evstore("init", "--root", str(root)), capture_output=True).returncode == 0
    )
    src = tmp_path / "src"
    src.mkdir()
    rng = random.Random(8)
    for i in range(12):
        (src / f"part{i:02d}.bin").write_bytes(rng.randbytes(1 << 20))
    (src / "notes.txt").write_text("small, kept in git\n")
    started = time.monotonic()
    probe = subprocess.run(
        _evstore("bundle", "create", "probe", str(src), "--external", "*.bin", "--root", str(root)),
        capture_output=True,
        text=True,
    )
    assert probe.returncode == 0, probe.stderr
    span = time.monotonic() - started
    failures = []
    for trial in range(TRIALS):
        name = f"killed-{trial}"
        proc = subprocess.Popen(
            _evstore(
                "bundle", "create", name, str(src), "--external", "*.bin", "--root", str(root)
            ),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        time.sleep(span * rng.random())  # where the kill lands, not an ordering
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        inventory = load_inventory(root)
        if name in inventory.registrations:
            continue  # it finished before the kill: verified below with the rest
        rerun = subprocess.run(
            _evstore(
                "bundle", "create", name, str(src), "--external", "*.bin", "--root", str(root)
            ),
            capture_output=True,
            text=True,
        )
        if rerun.returncode != 0:
            failures.append(f"{name}: rerun failed: {rerun.stderr}")
    assert failures == []
    _store_is_sound(root)
    report = verify_repository(root, require_available=True)
    errors = [f for f in report.findings if f.severity == "error"]
    assert errors == []
    assert len(load_inventory(root).registrations) == TRIALS + 1


@pytest.mark.parametrize("point", ["gc:marked", "gc:quarantined", "gc:reread", "gc:swept"])
def test_gc_killed_at_each_step_loses_nothing(tmp_path: Path, point: str) -> None:
    from helpers.repos import add_bundle

    root = init_repo(tmp_path / "repo")
    kept = {f"ext/k{i}.bin": f"kept {i}".encode() * 500 for i in range(5)}
    add_bundle(root, "kept", kept, external=("ext/*",))
    store = local_store(root)
    garbage = [store.put(f"garbage {i}".encode() * 300).digest for i in range(5)]
    old = time.time() - 7 * 24 * 3600
    for digest in [*garbage, *(digest_of(d) for d in kept.values())]:
        os.utime(store.path_of(digest), (old, old))
    script = textwrap.dedent(
        f"""
        import os, signal, sys
        from evidencestore import _steps
        from evidencestore.cli import main
        def die(step):
            if step == {point!r}:
                os.kill(os.getpid(), signal.SIGKILL)
        _steps.set_observer(die)
        sys.exit(main(["gc", "--yes", "--root", {str(root)!r}]))
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True)
    assert done.returncode == -signal.SIGKILL
    # Killed after quarantining: referenced blobs are all still there (only
    # candidates are ever quarantined), and the next gc restores before deciding.
    for data in kept.values():
        assert store.get(digest_of(data)) == data
    left = len(list(store.upkeep.iter_quarantined()))
    assert left == (5 if point in ("gc:quarantined", "gc:reread") else 0)
    done = subprocess.run(
        _evstore("gc", "--yes", "--root", str(root)), capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    if left:
        assert "5 left in quarantine by an interrupted gc" in done.stdout
    assert list(store.upkeep.iter_quarantined()) == []
    assert not any(store.has(d) for d in garbage)
    for data in kept.values():
        assert store.get(digest_of(data)) == data
    _store_is_sound(root)
