"""Interrupted transfers: a real ``python -m evidencestore`` process is killed midway
(held at a named interleaving point, then SIGKILLed); a rerun completes and every blob verifies."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers.remotes import blobs, digest_of, make_repo, run, set_remotes, store_files

from evidencestore.inventory import load_inventory
from evidencestore.remotes import local_store, verify_remote
from evidencestore.storage import LocalBlobStore
from evidencestore.testing.s3 import s3_options

N = 12


# The child installs an interleaving-point observer (evidencestore._steps) that holds
# every worker from the n-th arrival at ``point`` on, after writing the marker file.
_CHILD = """
import os, sys, threading, time
from evidencestore import _steps
from evidencestore.cli import main
point, n, marker = sys.argv[1], int(sys.argv[2]), sys.argv[3]
lock, seen = threading.Lock(), [0]
def hold(step):
    if step != point:
        return
    with lock:
        seen[0] += 1
        arrival = seen[0]
    if arrival >= n:
        if arrival == n:
            with open(marker, "w") as fh:
                fh.write(str(os.getpid()))
        while True:
            time.sleep(3600)
_steps.set_observer(hold)
sys.exit(main(sys.argv[4:]))
"""


def _start(root: Path, argv: list[str], stall: str, marker: Path) -> subprocess.Popen[bytes]:
    point, _, count = stall.partition(":")
    return subprocess.Popen(
        [
            sys.executable,
            "-c",
            _CHILD,
            point,
            count or "1",
            str(marker),
            *argv,
            "--jobs",
            "2",
            "--root",
            str(root),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def _kill_when_stalled(proc: subprocess.Popen[bytes], marker: Path) -> None:
    """Wait until the process reports it is held at the hook, then SIGKILL it."""
    deadline = time.monotonic() + 120  # a guard against hanging, not a measurement
    while not marker.exists():
        if proc.poll() is not None:
            _out, err = proc.communicate()
            pytest.fail(f"process ended before the hook (rc={proc.returncode}): {err.decode()}")
        if time.monotonic() > deadline:
            proc.kill()
            pytest.fail("the process never reached the hook")
        time.sleep(0.01)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL


def _final_blobs(store_root: Path) -> list[Path]:
    return [p for p in store_files(store_root / "blobs") if not p.name.startswith(".tmp-")]


def test_interrupted_push_to_directory_then_rerun(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    files = blobs(N, size=50_000)
    make_repo(root, files)
    remote = tmp_path / "remote"
    set_remotes(root, origin={"url": str(remote)})
    marker = tmp_path / "held"
    _kill_when_stalled(_start(root, ["push"], "push-uploaded:4", marker), marker)

    # Whatever is under a final name on the remote is complete and intact.
    published = _final_blobs(remote)
    assert 4 <= len(published) < N
    store = LocalBlobStore(remote)
    for path in published:
        store.verify("blake3:" + path.name)

    code, out, err = run("push", "--root", str(root))
    assert code == 0, err
    assert f"{N - len(published)} of {N} blobs transferred" in out
    regs = load_inventory(root).registrations
    assert verify_remote(root, regs, "origin", deep=True) == {"run1": []}
    assert sorted(p.name for p in _final_blobs(remote)) == sorted(
        digest_of(d)[7:] for d in files.values()
    )


def test_interrupted_push_to_s3_then_rerun(
    tmp_path: Path, s3_endpoint: str, s3_bucket: str
) -> None:
    pytest.importorskip("s3fs")
    root = tmp_path / "repo"
    files = blobs(N, size=50_000)
    make_repo(root, files)
    set_remotes(root, s3={"url": f"s3://{s3_bucket}/ev", "options": s3_options(s3_endpoint)})
    marker = tmp_path / "held"
    _kill_when_stalled(_start(root, ["push"], "push-uploaded:5", marker), marker)

    regs = load_inventory(root).registrations
    findings = verify_remote(root, regs, "s3", deep=True)["run1"]
    # Only absent blobs: nothing partial or corrupt under a final key.
    assert findings and {f.code for f in findings} == {"remote-missing"}
    missing = len(findings)
    assert missing <= N - 5

    code, out, err = run("push", "--root", str(root))
    assert code == 0, err
    assert f"{missing} of {N} blobs transferred" in out
    assert verify_remote(root, regs, "s3", deep=True) == {"run1": []}


def test_interrupted_pull_then_rerun(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    files = blobs(N, size=50_000)
    make_repo(root, files)
    remote = tmp_path / "remote"
    set_remotes(root, origin={"url": str(remote)})
    assert run("push", "--root", str(root))[0] == 0
    cache_root = local_store(root).root
    for path in store_files(cache_root):
        os.unlink(path)
    marker = tmp_path / "held"
    _kill_when_stalled(_start(root, ["pull"], "fetch-written:3", marker), marker)

    # The blob being written when killed is only a temporary; final names are intact.
    leftovers = [p for p in store_files(cache_root) if p.name.startswith(".tmp-")]
    assert leftovers
    cache = local_store(root)
    for path in _final_blobs(cache_root):
        cache.verify("blake3:" + path.name)
    assert len(_final_blobs(cache_root)) < N

    code, _out, err = run("pull", "--root", str(root))
    assert code == 0, err
    for data in files.values():
        assert cache.get(digest_of(data), len(data)) == data
    # gc removes the leftover temporaries of the killed run (grace 0 for the test).
    code, _out, err = run("gc", "--grace", "0", "--yes", "--root", str(root))
    assert code == 0, err
    assert not [p for p in store_files(cache_root) if p.name.startswith(".tmp-")]
    assert len(_final_blobs(cache_root)) == N


def test_interrupted_fetch_then_rerun(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    files = blobs(3, size=10_000)
    make_repo(root, files)
    remote = tmp_path / "remote"
    set_remotes(root, origin={"url": str(remote)})
    assert run("push", "--root", str(root))[0] == 0
    for path in store_files(local_store(root).root):
        os.unlink(path)
    digests = [digest_of(d) for d in files.values()]
    marker = tmp_path / "held"
    _kill_when_stalled(_start(root, ["fetch", *digests], "fetch-written:1", marker), marker)

    # At the kill: the blob being written is only a temporary, never under its final
    # name; whatever is under a final name is complete and intact.
    cache_root = local_store(root).root
    assert [p for p in store_files(cache_root) if p.name.startswith(".tmp-")]
    finals = _final_blobs(cache_root)
    assert len(finals) < len(digests)
    for path in finals:
        local_store(root).verify("blake3:" + path.name)

    code, _out, err = run("fetch", *digests, "--root", str(root))
    assert code == 0, err
    cache = local_store(root)
    for data in files.values():
        assert cache.get(digest_of(data), len(data)) == data
