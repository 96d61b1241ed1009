"""The fixed costs of verification (issue 28 item 3), each short cut proven to change
nothing: only the outcomes that differ are judged one by one, a bundle directory that
lists exactly its names is not walked, the parent joins the forked check (a dead child's
chunks are hashed here), and one large bundle is hashed while its registration is
decoded, with the guess dropped when the plan's files differ from it."""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers.paths import TESTS
from helpers.repos import add_bundle, init_repo

import evidencestore.digest as dg
import evidencestore.verify._pipeline as pipeline_module
from evidencestore.digest import Hashed, hash_bytes, hash_files, start_hash_files
from evidencestore.errors import IntegrityError
from evidencestore.models import VerifyReport
from evidencestore.verify import verify_repository


def _files(tmp_path: Path, n: int) -> tuple[list[str], list[int | None], list[str | None]]:
    paths: list[str] = []
    sizes: list[int | None] = []
    digests: list[str | None] = []
    for i in range(n):
        data = i.to_bytes(4, "little") * 8
        p = tmp_path / f"f{i:05d}"
        p.write_bytes(data)
        paths.append(str(p))
        sizes.append(len(data))
        digests.append(hash_bytes(data).digest)
    return paths, sizes, digests


def _damage(paths: list[str], sizes: list[int | None], digests: list[str | None]) -> None:
    for i, data in ((11, b"L" * (100 << 10)), (12, b"M" * (100 << 10))):
        Path(paths[i]).write_bytes(data)  # larger than the quick check takes
        sizes[i], digests[i] = len(data), hash_bytes(data).digest
    digests[12] = hash_bytes(b"other").digest  # a large file that differs
    digests[7] = hash_bytes(b"not it").digest  # hashes fine, to something else
    os.remove(paths[100])  # missing
    sizes[1500] = 31  # size disagrees
    os.remove(paths[2001])
    os.mkdir(paths[2001])  # not a regular file
    sizes[5] = None  # no size: the digest is sent back, not assumed
    os.symlink(paths[0], paths[3] + ".link")
    paths[9] = paths[3] + ".link"  # a symlink, not followed
    sizes[9] = sizes[0]
    digests[9] = digests[0]


def _norm(o: object) -> object:
    if isinstance(o, Hashed):
        return o
    assert isinstance(o, OSError | IntegrityError)
    return (type(o).__name__, str(o))


# Forking needs a single-threaded process (see _fork.py), and a test session may have
# server threads running: what must fork runs in a fresh interpreter, where the
# patches below need no undoing.
def _fresh(body: str, tmp_path: Path, *args: object) -> None:
    """Run ``body(tmp_path, *args)`` of this module in a fresh interpreter."""
    code = (
        "import sys; from pathlib import Path\n"
        f"sys.path[:0] = [{str(Path(__file__).parent)!r}, {str(TESTS)!r}]\n"
        f"from {Path(__file__).stem} import {body}\n"
        f"{body}(Path({str(tmp_path)!r}), *{args!r})\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "EVSTORE_NO_FORK"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr[-3000:]


def _count_children() -> list[int]:
    """Count the forked children made from now on."""
    made: list[int] = []
    real = dg.Child

    def child(work: Any) -> Any:
        made[:] = [made[0] + 1] if made else [1]
        return real(work)

    dg.Child = child  # type: ignore[misc]
    return made


def _forks() -> list[int]:
    """The process ids of the children forked from now on."""
    pids: list[int] = []
    real = os.fork

    def fork() -> int:
        pid = real()
        if pid:
            pids.append(pid)
        return pid

    os.fork = fork
    return pids


def _all_reaped(pids: list[int]) -> bool:
    for pid in pids:
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            continue  # reaped already: not ours to wait for any more
        return False
    return True


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_only_what_differs_is_built_and_every_outcome_is_as_hashing_one_by_one(
    tmp_path: Path, threads: int
) -> None:
    """Serial (below the fork threshold: 1 thread) and forked (the parent joining one or
    two children) checks give exactly ``hash_files``' outcomes, and ``unexpected`` names
    exactly the ones that are not the expected digest and size."""
    _fresh("_only_what_differs", tmp_path, threads)


def _only_what_differs(tmp_path: Path, threads: int) -> None:
    paths, sizes, digests = _files(tmp_path, 2100)
    _damage(paths, sizes, digests)
    want = hash_files(paths, sizes, threads=1, follow_symlinks=False)
    children = _count_children()
    pending = start_hash_files(
        paths, sizes, threads=threads, follow_symlinks=False, expected_digests=digests
    )
    assert children == ([threads - 1] if threads > 1 else [])
    odd = pending.unexpected()
    assert sorted(odd) == list(odd) == [5, 7, 9, 12, 100, 1500, 2001]
    assert [_norm(o) for o in pending.result()] == [_norm(o) for o in want]
    assert {i: _norm(o) for i, o in odd.items()} == {i: _norm(want[i]) for i in odd}
    assert isinstance(odd[9], OSError) and odd[9].errno == __import__("errno").ELOOP


def test_a_dead_child_s_chunks_are_hashed_here(tmp_path: Path) -> None:
    """A child that dies before answering leaves its chunks to the parent: every
    outcome is still there, and the damaged ones are still found."""
    _fresh("_dead_child", tmp_path)


def _dead_child(tmp_path: Path) -> None:
    paths, sizes, digests = _files(tmp_path, 2100)
    _damage(paths, sizes, digests)

    def die(outcomes: list[Any]) -> bytes:  # only children encode: the parent never does
        os._exit(3)

    dg._encode = die
    children = _count_children()
    pending = start_hash_files(
        paths, sizes, threads=3, follow_symlinks=False, expected_digests=digests
    )
    assert children == [2]  # two children, this process the third worker
    assert list(pending.unexpected()) == [5, 7, 9, 12, 100, 1500, 2001]
    want = hash_files(paths, sizes, threads=1, follow_symlinks=False)
    assert [_norm(o) for o in pending.result()] == [_norm(o) for o in want]


def _big_bundle(tmp_path: Path, n: int = 2100) -> Path:
    root = init_repo(tmp_path / "repo")
    add_bundle(root, "big", {f"d/f{i:05d}.bin": i.to_bytes(4, "little") * 4 for i in range(n)})
    return root


def _findings(report: VerifyReport) -> list[tuple[str, str | None]]:
    return [(f.code, f.path) for b in report.bundles for f in b.findings] + [
        (f.code, f.path) for f in report.findings
    ]


def _counting() -> list[int]:
    calls: list[int] = []
    real = pipeline_module.start_hash_files

    def counting(paths: Any, *args: Any, **kwargs: Any) -> Any:
        calls.append(len(paths))
        return real(paths, *args, **kwargs)

    pipeline_module.start_hash_files = counting
    return calls


def test_one_large_bundle_is_hashed_while_its_registration_is_decoded(tmp_path: Path) -> None:
    root = _big_bundle(tmp_path)
    ev = root / "evidence" / "big"
    (ev / "d" / "f00007.bin").write_bytes(b"X" * 16)  # same size, other bytes
    (ev / "d" / "f00100.bin").unlink()
    (ev / "d" / "extra").write_bytes(b"?")
    (ev / "d" / "f00200.bin").unlink()
    (ev / "d" / "f00200.bin").mkdir()  # a name listed as expected that is no file
    (ev / "d" / "f00200.bin" / "inside").write_bytes(b"!")
    _fresh("_early_used", root)


def _early_used(root: Path) -> None:
    pipeline_module.EARLY_MIN_BYTES = 1  # type: ignore[misc]
    calls = _counting()
    pids = _forks()
    early = verify_repository(root)
    assert calls == [2100]  # hashed once, before the plan: the guess was used
    assert pids and _all_reaped(pids)  # forked, and every child waited for
    pipeline_module.EARLY_MIN_BYTES = 1 << 40  # type: ignore[misc]
    calls.clear()
    late = verify_repository(root)
    assert calls == [2100]  # started by the pipeline
    assert early == late
    assert gc.get_freeze_count() == 0  # what verification froze is unfrozen
    assert _findings(early) == [
        ("hash-mismatch", "d/f00007.bin"),
        ("missing-file", "d/f00100.bin"),
        ("not-a-file", "d/f00200.bin"),
        ("unregistered-file", "d/extra"),
        ("unregistered-file", "d/f00200.bin/inside"),
    ]
    assert early.totals.checked == 2097


def test_a_guess_that_misses_is_dropped_and_the_files_hashed_again(tmp_path: Path) -> None:
    """The light decode believes the registration; the plan does not: a registration
    that fails the strict decode is reported, one whose entry path is not plain is not
    guessed at all, and no forked child is left behind either way."""
    _fresh("_early_dropped", _big_bundle(tmp_path))


def _early_dropped(root: Path) -> None:
    reg_path = root / "evidence" / "big" / "bundle.json"
    pipeline_module.EARLY_MIN_BYTES = 1  # type: ignore[misc]
    calls = _counting()
    pids = _forks()
    hashed_here: list[int] = []
    real_odd = dg._odd_batch

    def counting_odd(paths: Any, *args: Any) -> Any:
        hashed_here.append(len(paths))
        return real_odd(paths, *args)

    dg._odd_batch = counting_odd
    reg = json.loads(reg_path.read_text())
    # a size the strict decode refuses (negative), the light one takes
    reg["manifest"]["entries"][3]["descriptor"]["size"] = -1
    reg_path.write_text(json.dumps(reg, indent=2))
    report = verify_repository(root)
    assert [f.code for f in report.findings] == ["invalid-registration"]
    assert calls == [2100, 0]  # the guess, stopped and dropped; nothing else to hash
    assert sum(hashed_here) == 0  # this process hashed none of the guess's files
    assert pids and _all_reaped(pids)
    # an entry whose directory is a symlink: not guessed at, hashed by the pipeline
    reg["manifest"]["entries"][3]["descriptor"]["size"] = 16
    reg_path.write_text(json.dumps(reg, indent=2))
    assert verify_repository(root).ok
    calls.clear()
    real = root / "evidence" / "big" / "real"
    (root / "evidence" / "big" / "d").rename(real)
    (root / "evidence" / "big" / "d").symlink_to("real")
    report = verify_repository(root)
    assert calls == [2100]  # no guess: a symlink on the way
    assert [f.code for f in report.bundles[0].findings][:1] == ["unregistered-file"]
    assert _all_reaped(pids)
