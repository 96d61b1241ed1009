"""The one verification pipeline (issue 14): background hashing, many bundles at once.

The forked workers send back only outcomes that differ from the expected digest; the
bundle checks run while they hash; findings still land in their own bundle, in the
order a sorted directory walk gives.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from helpers.fresh import rerun_fresh
from helpers.repos import add_bundle, init_repo

import evidencestore.verify._shares as shares_module
from evidencestore._fork import can_fork
from evidencestore.digest import Hashed, NotRegularFileError, hash_bytes, start_hash_files
from evidencestore.errors import IntegrityError
from evidencestore.remotes import local_store
from evidencestore.verify import verify_registration, verify_repository
from evidencestore.verify._pipeline import Context


def test_forked_workers_report_every_outcome_that_differs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> None:
    monkeypatch.delenv("EVSTORE_NO_FORK", raising=False)
    if not can_fork():  # an earlier test's thread lives on: fork in a fresh process
        return rerun_fresh(request)
    paths: list[str] = []
    sizes: list[int | None] = []
    digests: list[str | None] = []
    for i in range(2100):
        data = i.to_bytes(4, "little") * 8
        p = tmp_path / f"f{i:05d}"
        p.write_bytes(data)
        paths.append(str(p))
        sizes.append(len(data))
        digests.append(hash_bytes(data).digest)
    wrong = hash_bytes(b"not it").digest
    digests[7] = wrong  # hashes fine, to something else
    os.remove(paths[100])  # missing
    sizes[2000] = 31  # size disagrees
    os.remove(paths[2001])
    os.mkdir(paths[2001])  # not a regular file
    sizes[5] = None  # no size: the digest is sent back, not assumed
    out = start_hash_files(paths, sizes, threads=2, expected_digests=digests).result()
    assert len(out) == 2100
    assert out[7] == Hashed(hash_bytes((7).to_bytes(4, "little") * 8).digest, 32)
    assert isinstance(out[100], FileNotFoundError) and out[100].filename == paths[100]
    assert isinstance(out[2000], IntegrityError)
    assert "size is 32 bytes, expected 31" in str(out[2000])
    assert isinstance(out[2001], NotRegularFileError)
    assert out[5] == Hashed(hash_bytes((5).to_bytes(4, "little") * 8).digest, 32)
    ok = [o for i, o in enumerate(out) if i not in (7, 100, 2000, 2001) and type(o) is Hashed]
    assert len(ok) == 2096
    assert [o.digest for o in ok] == [
        d for i, d in enumerate(digests) if i not in (7, 100, 2000, 2001)
    ]


def test_many_bundles_in_one_run_keep_their_own_findings(tmp_path: Path) -> None:
    root = init_repo(tmp_path / "repo")
    for b in range(450):  # 2,250 files: the forked path
        add_bundle(root, f"b{b:03d}", {f"d/f{i}.bin": bytes([b % 256, i]) * 40 for i in range(5)})
    (root / "evidence/b007/d/f3.bin").write_bytes(b"x" * 80)  # same size, other bytes
    (root / "evidence/b300/d/f0.bin").unlink()
    (root / "evidence/b449/d/x").mkdir()
    (root / "evidence/b449/d/x/z").write_bytes(b"z")
    (root / "evidence/b449/d/x-y").write_bytes(b"y")
    report = verify_repository(root, store=local_store(root))
    assert not report.ok and report.totals.bundles == 450
    assert report.totals.checked == 450 * 5 - 2
    bad = {r.name: [(f.code, f.path) for f in r.findings] for r in report.bundles if r.findings}
    assert bad == {
        "b007": [("hash-mismatch", "d/f3.bin")],
        "b300": [("missing-file", "d/f0.bin")],
        # as a walk with each directory sorted meets them: d/x/ before d/x-y
        "b449": [("unregistered-file", "d/x/z"), ("unregistered-file", "d/x-y")],
    }
    [one] = [r for r in report.bundles if r.name == "b007"]
    from evidencestore.inventory import load_inventory

    alone = verify_registration(
        root, load_inventory(root).registrations["b007"], store=local_store(root)
    )
    assert alone == one


def test_symlinked_subdirectory_inside_is_followed_and_outside_is_an_escape(
    tmp_path: Path,
) -> None:
    root = init_repo(tmp_path / "repo")
    add_bundle(root, "inner", {"d/f.bin": b"inside"})
    add_bundle(root, "outer", {"d/f.bin": b"outside"})
    moved = root / "moved"
    (root / "evidence/inner/d").rename(moved)
    (root / "evidence/inner/d").symlink_to(moved)
    elsewhere = tmp_path / "elsewhere"
    (root / "evidence/outer/d").rename(elsewhere)
    (root / "evidence/outer/d").symlink_to(elsewhere)
    report = verify_repository(root, store=local_store(root))
    by = {r.name: r for r in report.bundles}
    assert by["inner"].ok and by["inner"].checked == 1
    [f] = by["outer"].findings
    assert f.code == "symlink-escape" and f.path == "d/f.bin"
    assert str(elsewhere) in f.message


def _split_repo(tmp_path: Path) -> Path:
    """80 bundles with one of each kind of problem, store entries included."""
    root = init_repo(tmp_path / "repo")
    for b in range(80):
        files = {f"d/f{i}.bin": bytes([b, i]) * 30 for i in range(4)}
        files["blob.bin"] = bytes([b]) * 100
        add_bundle(root, f"b{b:02d}", files, external=("blob.bin",))
    (root / "evidence/b03/d/f1.bin").write_bytes(b"y" * 60)  # same size, other bytes
    (root / "evidence/b41/d/f0.bin").unlink()
    (root / "evidence/b77/d/extra").write_bytes(b"e")
    blob = local_store(root).path_of(hash_bytes(bytes([50]) * 100).digest)
    blob.chmod(0o644)
    blob.write_bytes(bytes([51]) * 100)  # a corrupt store blob
    return root


# Forking needs a single-threaded process (see _fork.py), and a test session may have
# server threads running: the split is exercised in a fresh interpreter.
_SPLIT_SCRIPT = """
import json, os, sys
import evidencestore.verify as v
import evidencestore.verify._shares as s
from evidencestore.remotes import local_store

root, mode = sys.argv[1], sys.argv[2]
os.environ.pop("EVSTORE_NO_FORK", None)
s.cpu_count = lambda: 2
calls, redone = [], []
real_map, real_pipeline = s.fork_map, s.pipeline
parent = os.getpid()

def counting(func, shares, *more):
    calls.append(len(shares))
    return real_map(func, shares, *more)

def dying(ctx, regs, **kw):
    if "b03" in regs:
        if os.getpid() != parent:
            os._exit(3)  # this worker dies before sending anything
        redone.append(len(regs))
    return real_pipeline(ctx, regs, **kw)

s.fork_map = counting
if mode == "dying":
    s.pipeline = dying
split = v.verify_repository(root, store=local_store(root))
s.pipeline = real_pipeline
os.environ["EVSTORE_NO_FORK"] = "1"
alone = v.verify_repository(root, store=local_store(root))
print(json.dumps({
    "calls": calls,
    "redone": redone,
    "same": split == alone,
    "names": [r.name for r in split.bundles],
    "bad": {r.name: [[f.code, f.path] for f in r.findings] for r in split.bundles if r.findings},
}))
"""


def _split_run(root: Path, mode: str) -> dict[str, Any]:
    import json
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", _SPLIT_SCRIPT, str(root), mode],
        capture_output=True,
        text=True,
        check=True,
        env={k: v for k, v in os.environ.items() if k != "EVSTORE_NO_FORK"},
    )
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def test_bundles_split_across_workers_report_exactly_what_one_process_does(
    tmp_path: Path,
) -> None:
    out = _split_run(_split_repo(tmp_path), "plain")
    assert out["calls"] == [2]  # the split path ran, with two workers
    assert out["same"] is True
    assert out["names"] == [f"b{b:02d}" for b in range(80)]
    assert out["bad"] == {
        "b03": [["hash-mismatch", "d/f1.bin"]],
        "b41": [["missing-file", "d/f0.bin"]],
        "b50": [["blob-corrupt", "blob.bin"]],
        "b77": [["unregistered-file", "d/extra"]],
    }


def test_a_worker_that_dies_has_its_share_verified_here(tmp_path: Path) -> None:
    out = _split_run(_split_repo(tmp_path), "dying")
    assert out["calls"] == [2]
    assert out["same"] is True  # the report does not depend on the worker that died
    [share] = out["redone"]  # its share alone, redone in the parent
    assert 0 < share < 80


def _seventy_bundles(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """70 bundles of 1 to 3 entries, on a 2-CPU machine that could fork (no fork made)."""
    monkeypatch.setattr(shares_module, "can_fork", lambda: True)  # shares only: no fork
    monkeypatch.setattr(shares_module, "cpu_count", lambda: 2)
    root = init_repo(tmp_path / "repo")
    for b in range(70):
        add_bundle(root, f"b{b:02d}", {f"f{i}": bytes([b, i]) for i in range(1 + b % 3)})
    return root


def test_shares_balance_by_entries_and_keep_large_or_remote_work_here(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = _seventy_bundles(tmp_path, monkeypatch)
    from evidencestore.inventory import load_inventory
    from evidencestore.storage import MemoryBlobStore

    regs = load_inventory(root).registrations
    ctx = Context(root, local_store(root), False)
    shares = shares_module.shares(ctx, regs)
    assert len(shares) == 2
    assert sorted(n for s in shares for n in s) == sorted(regs)
    loads = [sum(1 + len(regs[n].manifest.entries) for n in s) for s in shares]
    assert max(loads) - min(loads) <= 4  # largest first onto the least loaded
    memory = Context(root, MemoryBlobStore(), False)
    assert shares_module.shares(memory, regs) == []  # never fork over a non-local store
    few = dict(list(regs.items())[:10])
    assert shares_module.shares(ctx, few) == []


def test_workers_that_load_their_own_registrations_print_what_one_process_does(
    tmp_path: Path,
) -> None:
    """Many bundles, no inventory given: each worker reads its share of registrations.
    Problems with the registrations themselves land in the same order, and the CLI's
    text and JSON reports are byte for byte those of a run that does not fork."""
    import subprocess
    import sys

    root = _split_repo(tmp_path)
    # one large bundle: the worker that loads it hashes it on forked workers of its own
    add_bundle(root, "large", {f"f{i:04d}": i.to_bytes(2, "little") for i in range(2100)})
    (root / "evidence/large/f0042").write_bytes(b"xx")  # same size, other bytes
    (root / "evidence/b10/bundle.json").write_text("{not json")  # invalid-registration
    (root / "evidence/b20/bundle.json").unlink()  # missing-registration
    (root / "evidence/b30").rename(root / "evidence/B30x")  # name-mismatch
    (root / "evidence/stray.txt").write_text("s")  # stray-file
    (root / "evidence/b60").rename(root / "evidence/B60")
    (root / "evidence/b61").rename(root / "evidence/b60")  # B60 and b60: name-collision
    (root / "evidence/loop").symlink_to("loop")  # symlink-loop
    runs = {}
    for fork in ("", "1"):
        env = {k: v for k, v in os.environ.items() if k != "EVSTORE_NO_FORK"}
        if fork:
            env["EVSTORE_NO_FORK"] = fork
        runs[fork] = [
            subprocess.run(
                [sys.executable, "-m", "evidencestore", *args, "--root", str(root)],
                capture_output=True,
                env=env,
            )
            for args in (["verify"], ["verify", "--json", "-"], ["-v", "verify"])
        ]
    for split, alone in zip(runs[""], runs["1"], strict=True):
        assert split.returncode == alone.returncode == 1
        assert split.stdout == alone.stdout
        assert split.stderr == alone.stderr
    import json

    report = json.loads(runs[""][1].stdout)
    codes = [f["code"] for f in report["findings"]]
    assert {"invalid-registration", "missing-registration", "name-mismatch", "stray-file"} <= set(
        codes
    )
    assert {"symlink-loop", "name-collision"} <= set(codes)
    assert report["totals"]["bundles"] == 81 - 2  # b10 and b20 are not registered
    [large] = [b for b in report["bundles"] if b["name"] == "large"]
    assert [(f["code"], f["path"]) for f in large["findings"]] == [("hash-mismatch", "f0042")]
    assert large["checked"] == 2099


def test_the_shares_of_directories_are_contiguous_and_even(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from evidencestore.inventory import BundleDirs

    root = _seventy_bundles(tmp_path, monkeypatch)
    dirs = BundleDirs(root)
    ctx = Context(root, local_store(root), False)
    shares = shares_module.dir_shares(ctx, dirs)
    assert [d.name for share in shares for d in share] == [d.name for d in dirs.dirs]
    assert [len(share) for share in shares] == [35, 35]
    monkeypatch.setattr(shares_module, "cpu_count", lambda: 3)
    assert [len(share) for share in shares_module.dir_shares(ctx, dirs)] == [35, 35]
    for b in range(70, 100):
        add_bundle(root, f"b{b:02d}", {"f": bytes([b])})
    dirs = BundleDirs(root)
    assert [len(share) for share in shares_module.dir_shares(ctx, dirs)] == [34, 33, 33]
    monkeypatch.setattr(shares_module, "cpu_count", lambda: 128)  # 32 bundles a worker at least
    assert [len(share) for share in shares_module.dir_shares(ctx, dirs)] == [34, 33, 33]
    few = BundleDirs(root)
    few.dirs = few.dirs[:10]
    assert shares_module.dir_shares(ctx, few) == []


def test_the_view_reads_the_registrations_it_needs_as_the_inventory_did(tmp_path: Path) -> None:
    """Without a preloaded inventory the CLI view reads registrations itself: the
    unavailable notice sums every hidden entry's size, annotations point into each
    registration, and a bundle name that is not UTF-8 is shown escaped, not a crash."""
    import shutil
    import subprocess
    import sys

    root = init_repo(tmp_path / "repo")
    add_bundle(root, "good", {"ext/a.bin": b"x" * 100, "r.json": b"{}"}, external=("ext/*",))
    add_bundle(root, "bad", {"ext/a.bin": b"y" * 200, "r.json": b"{}"}, external=("ext/*",))
    for b in range(70):  # the split path
        add_bundle(root, f"n{b:02d}", {"ext/c.bin": bytes([b]) * 10}, external=("ext/*",))
    shutil.rmtree(root / ".evstore")
    os.rename(os.fsencode(root / "evidence/bad"), os.fsencode(root / "evidence") + b"/bad\xff")

    def run(*args: str) -> str:
        done = subprocess.run(
            [sys.executable, "-m", "evidencestore", *args, "--root", str(root)],
            capture_output=True,
            env={k: v for k, v in os.environ.items() if k != "EVSTORE_NO_FORK"},
        )
        assert b"Traceback" not in done.stderr, done.stderr
        return done.stdout.decode("utf-8", "replace")

    text = run("verify")
    assert "72 store entries of 72 bundles (1000 bytes) are not in the local store" in text
    github = run("verify", "--github", "--unavailable=each")
    marks = [line for line in github.splitlines() if line.startswith("::warning")]
    assert len(marks) == 72
    plain = [line for line in marks if "file=evidence/bad" not in line]
    assert len(plain) == 71 and all("/bundle.json,line=" in line for line in plain), plain[:3]
    # a name that is not UTF-8 is shown escaped, as in every other finding
    [odd] = [line for line in marks if "file=evidence/bad" in line]
    assert odd.startswith("::warning file=evidence/bad\\xff/bundle.json,")
    import json

    report = json.loads(run("verify", "--json", "-"))  # the raw name is shown, not a crash
    [bad] = [b for b in report["bundles"] if b["name"] == "bad\\xff"]
    assert [(f["code"], f["bundle"]) for f in bad["findings"]] == [("unavailable", "bad\\xff")]


def test_the_plan_is_frozen_and_says_what_is_hashed(tmp_path: Path) -> None:
    """``plan`` decides from the registration and the layout alone: path findings, the
    files to hash (a repo entry beside its registration, a store entry in the local
    store) and the store entries that are unavailable; nothing in it can be changed."""
    from evidencestore.inventory import load_inventory
    from evidencestore.verify._pipeline import Plan, plan

    root = init_repo(tmp_path / "repo")
    add_bundle(root, "b", {"a.txt": b"a", "blob.bin": b"B" * 50}, external=("blob.bin",))
    store = local_store(root)
    reg = load_inventory(root).registrations["b"]
    planned = plan(Context(root, store, False), "b", reg)
    assert isinstance(planned, Plan)
    assert planned.findings == () and planned.n_path == 0 and not planned.bdir_escapes
    jobs = {entry.path: where for entry, where in planned.jobs}
    assert jobs["a.txt"] == str(root / "evidence/b/a.txt")
    assert jobs["blob.bin"] == str(store.path_of(hash_bytes(b"B" * 50).digest))
    with pytest.raises(AttributeError):
        planned.jobs = ()  # type: ignore[misc]
    elsewhere = plan(Context(root, None, True), "b", reg)  # no local store at all
    assert [entry.path for entry, _ in elsewhere.jobs] == ["a.txt"]
    assert elsewhere.unavailable == 1
    assert [(f.code, f.severity) for f in elsewhere.findings] == [("unavailable", "error")]


def test_many_bundles_are_loaded_verified_and_dropped_a_batch_at_a_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """However many bundles, a verifier holds one batch of registrations at a time
    (memory flat in the repository's size), and the report is exactly the one of the
    whole inventory loaded at once."""
    import evidencestore.verify._repository as repository_module
    from evidencestore.inventory import BundleDirs, load_inventory

    root = _split_repo(tmp_path)
    (root / "evidence/b10/bundle.json").write_text("{not json")  # invalid-registration
    (root / "evidence/stray.txt").write_text("s")  # stray-file
    monkeypatch.setenv("EVSTORE_NO_FORK", "1")  # the batches of one process, here
    whole = verify_repository(root, inventory=load_inventory(root))
    loaded: list[int] = []
    verified: list[int] = []
    real_load, real_pipeline = BundleDirs.load, shares_module.pipeline

    def load(self: BundleDirs, dirs: Any = None) -> Any:
        loaded.append(len(self.dirs if dirs is None else dirs))
        return real_load(self, dirs)

    def pipeline(ctx: Context, regs: Any, **kw: Any) -> Any:
        verified.append(len(regs))
        return real_pipeline(ctx, regs, **kw)

    monkeypatch.setattr(BundleDirs, "load", load)
    monkeypatch.setattr(shares_module, "pipeline", pipeline)
    monkeypatch.setattr(shares_module, "BATCH_DIRS", 7)
    monkeypatch.setattr(repository_module, "BATCH_DIRS", 7)
    batched = verify_repository(root)
    assert loaded == [7] * 11 + [4]  # 81 directories (stray.txt among them), 7 at a time
    # b10 does not decode, stray.txt is no bundle: neither is verified
    assert verified == [7, 6, *[7] * 9, 3]
    assert batched == whole
    assert not batched.ok
    assert {f.code for f in batched.findings} >= {"invalid-registration", "stray-file"}
    assert [r.name for r in batched.bundles] == [f"b{b:02d}" for b in range(80) if b != 10]
