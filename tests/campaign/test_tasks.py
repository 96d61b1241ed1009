"""A campaign's validation as content-addressed tasks: listed, sharded, computed by
workers, published by key to a remote, and collected by a status on a fresh clone that
then computes nothing; a forged remote result never changes a verdict."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

pytest.importorskip("av")
pytest.importorskip("cryptography")

from helpers.remotes import run, set_remotes
from helpers.scale_campaign import NAME, clone, count, records

import evidencestore.config as config_module
from evidencestore.campaign.memo import kept_bytes
from evidencestore.campaign.protocol import load_campaign
from evidencestore.campaign.results import find, publish
from evidencestore.campaign.status import evaluate
from evidencestore.campaign.tasks import Task, plan, shard
from evidencestore.config import Repository
from evidencestore.dsse import generate_key, load_private_key
from evidencestore.scale.local import LocalProcesses
from evidencestore.storage import LocalBlobStore
from evidencestore.testing.interleave import Interleaving

_clone, _count, _records = clone, count, records


def _no_walking_up(*args: object) -> Path:
    raise AssertionError(f"find_root called with {args}: a resolved repository walked up")


def _truth(author: Path, tmp_path: Path) -> bytes:
    """The records a clone computes alone, with no remote result (none pushed there)."""
    alone = tmp_path / "alone-remote"
    shutil.copytree(author.parent / "remote", alone, ignore=shutil.ignore_patterns("results"))
    clone = _clone(author, tmp_path / "alone", alone)
    ev = evaluate(clone, load_campaign(clone, NAME))
    assert ev.computed > 0 and ev.decoded > 0
    return _records(ev)


def test_tasks_are_listed_in_order_and_sharded_by_key(scale_author: Path, tmp_path: Path) -> None:
    clone = _clone(scale_author, tmp_path / "c")
    campaign = load_campaign(clone, NAME)
    tasks = plan(clone, campaign).tasks
    again = plan(clone, campaign).tasks
    assert [t.key for t in tasks] == [t.key for t in again]
    kinds = [t.kind for t in tasks]
    assert kinds == sorted(kinds, key=lambda k: k != "output-check")  # checks first
    pairs = [t for t in tasks if t.kind == "output-pair"]
    checks = [t for t in tasks if t.kind == "output-check"]
    runs = {
        n: [
            r["body"]
            for r in json.loads((clone / f"evidence/{n}/run.json").read_text())["requests"]
        ]
        for n in ("b1", "b2", "f1", "f2", "l1")
    }
    # truth from the run records: every run's output at each request against b1's (the
    # expectations are the same for the three requests, so a pair is its two digests)
    want = {(b["digest"], o["digest"]) for n in ("b2", "f1", "f2", "l1")
            for b, o in zip(runs["b1"], runs[n], strict=True)}  # fmt: skip
    assert {(p.inputs["reference"], p.inputs["candidate"]) for p in pairs} == want
    same = [p for p in pairs if p.inputs["reference"] == p.inputs["candidate"]]
    differ = [p for p in pairs if p not in same]
    assert same and differ  # l1's audio differs by one LSB where the server's seed shows it
    assert all(p.cost == 0 and p.needs == () for p in same)
    sizes = {b["digest"]: b["size"] for outs in runs.values() for b in outs}
    decoded = {d for p in differ for d in (p.inputs["reference"], p.inputs["candidate"])}
    assert sorted((c.inputs["output"], c.cost) for c in checks) == sorted(
        (d, sizes[d]) for d in decoded
    )
    assert all(p.cost == sizes[p.inputs["reference"]] + sizes[p.inputs["candidate"]]
               for p in differ)  # fmt: skip
    assert all(len(p.needs) == 2 and set(p.needs) <= {c.key for c in checks} for p in differ)
    parts = [shard(tasks, i, 3) for i in range(3)]
    assert sorted(t.key for p in parts for t in p) == sorted(t.key for t in tasks)
    # stable: a shard of a subset is the subset of the shard
    rest = tasks[5:]
    assert [t.key for t in shard(rest, 1, 3)] == [t.key for t in parts[1] if t in rest]
    code, out, _ = run("campaign", "tasks", NAME, "--json", "--shard", "1/3",
                       "--root", str(clone))  # fmt: skip
    assert code == 0
    listed = json.loads(out)
    assert [t["key"] for t in listed] == [t.key for t in parts[1]]
    assert {t["kind"] for t in listed} <= {"output-check", "output-pair"}
    assert all(t["inputs"] for t in listed)
    code, _, err = run("campaign", "tasks", NAME, "--shard", "3/3", "--root", str(clone))
    assert code == 2 and "--shard '3/3': expected I/N with 0 <= I < N" in err
    # once a status has computed them, nothing is left
    evaluate(clone, campaign)
    assert plan(clone, campaign).tasks == []
    code, out, _ = run("campaign", "tasks", NAME, "--root", str(clone))
    assert code == 0 and out.strip().endswith("0 task(s), 0 byte(s) to decode (estimated)")


def test_work_then_a_fresh_clone_computes_nothing(scale_author: Path, tmp_path: Path) -> None:
    truth, n = _truth(scale_author, tmp_path), _count(scale_author)
    remote = tmp_path / "remote"
    shutil.copytree(
        scale_author.parent / "remote", remote, ignore=shutil.ignore_patterns("results")
    )
    key = str(scale_author.parent / "p" / "keys" / "worker")
    # two workers, each a shard, on clones of their own
    for i in (0, 1):
        w = _clone(scale_author, tmp_path / f"w{i}", remote)
        code, out, err = run("campaign", "work", NAME, "--shard", f"{i}/2", "--sign", key,
                             "--root", str(w))  # fmt: skip
        assert code == 0, err
        assert "published to remote 'origin'" in out and "0 failed" in out
    # again: idempotent, nothing computed or written
    names = sorted(p.relative_to(remote) for p in (remote / "results").rglob("*.json"))
    code, out, _ = run("campaign", "work", NAME, "--sign", key, "--root", str(tmp_path / "w0"))
    assert code == 0 and "0 computed, 0 published" in out and f"{n} already there" in out
    assert sorted(p.relative_to(remote) for p in (remote / "results").rglob("*.json")) == names
    assert len(names) == n  # one entry per task: registered once
    fresh = _clone(scale_author, tmp_path / "fresh", remote)
    ev = evaluate(fresh, load_campaign(fresh, NAME), recheck=0)
    assert (ev.computed, ev.decoded) == (0, 0)
    assert _records(ev) == truth
    assert any(f"{n} remote result(s) signed by a worker key" in note for note in ev.status.notes)
    # the second status is whole from the memo and still says what it rests on
    again = evaluate(fresh, load_campaign(fresh, NAME))
    assert again.reused and again.computed == 0
    assert any("signed by a worker key" in n for n in again.status.notes)


def _forge(author: Path, tmp_path: Path, signer: Path | None) -> tuple[Path, Task]:
    """A remote whose one pair result says PASS where the outputs differ (l1's LSB)."""
    from evidencestore.campaign.models import OutputComparison

    remote = tmp_path / "forged-remote"
    shutil.copytree(author.parent / "remote", remote, ignore=shutil.ignore_patterns("results"))
    clone = _clone(author, tmp_path / "forger", remote)
    tasks = plan(clone, load_campaign(clone, NAME)).tasks
    lsb = json.loads((author / "evidence/l1/run.json").read_text())["requests"][0]["body"]
    target = next(t for t in tasks if t.kind == "output-pair" and t.inputs["candidate"]
                  == lsb["digest"])  # fmt: skip
    assert target.pair is not None
    lie = OutputComparison(key="", verdict="PASS", reference=target.inputs["reference"],
                           candidate=target.inputs["candidate"], reasons=("forged",))  # fmt: skip
    store = LocalBlobStore(remote)
    key = load_private_key(signer) if signer else None
    publish(store, target.key, kept_bytes(target.key, lie), key)
    # and every other task's honest result, unsigned, as a worker without a key would
    assert run("campaign", "work", NAME, "--root", str(clone))[0] == 0
    return remote, target


def test_a_forged_unsigned_result_is_caught_by_recheck_or_not_used(
    scale_author: Path, tmp_path: Path
) -> None:
    truth, n = _truth(scale_author, tmp_path), _count(scale_author)
    remote, target = _forge(scale_author, tmp_path, None)
    # recheck 0: unsigned results are not used at all; computed here
    c0 = _clone(scale_author, tmp_path / "c0", remote)
    ev = evaluate(c0, load_campaign(c0, NAME), recheck=0)
    assert _records(ev) == truth and ev.computed > 0
    assert any(f"{n} unsigned remote result(s) not used" in note for note in ev.status.notes)
    # recheck of every result: the forgery is found, every remote result refused
    c1 = _clone(scale_author, tmp_path / "c1", remote)
    ev = evaluate(c1, load_campaign(c1, NAME), recheck=n)
    assert _records(ev) == truth
    finding = [n for n in ev.status.notes if n.startswith("finding: remote-result-mismatch")]
    assert len(finding) == 1 and target.key in finding[0], ev.status.notes
    assert not any("counted after" in note for note in ev.status.notes)
    assert ev.status.verdict == "NOT_ACCEPTED"
    lsb = next(c for c in ev.status.cells if c.arm == "lsb")
    assert lsb.conclusion == "rejected" and lsb.lossless != "PASS"
    # negative control: the same remote without the forgery is counted after a recheck
    honest = tmp_path / "honest-remote"
    shutil.copytree(remote, honest)
    for entry in (honest / "results" / target.key.removeprefix("blake3:")).iterdir():
        entry.unlink()
    c2 = _clone(scale_author, tmp_path / "c2", honest)
    ev = evaluate(c2, load_campaign(c2, NAME), recheck=2)
    assert _records(ev) == truth
    assert any(
        f"{n - 1} unsigned remote result(s), counted after 2" in note for note in ev.status.notes
    )


def test_a_result_signed_by_an_unpinned_key_does_not_count(
    scale_author: Path, tmp_path: Path
) -> None:
    truth = _truth(scale_author, tmp_path)
    other, _ = generate_key(tmp_path / "other")
    remote, target = _forge(scale_author, tmp_path, other)
    clone = _clone(scale_author, tmp_path / "c", remote)
    ev = evaluate(clone, load_campaign(clone, NAME), recheck=0)
    assert _records(ev) == truth
    assert not any("signed by a worker key" in note for note in ev.status.notes)
    store = LocalBlobStore(remote)
    workers = load_campaign(clone, NAME).worker_keys(clone)
    from evidencestore.campaign.tasks import task_types

    found, _ = find(store, {target.key: task_types(target.kind)}, workers)
    assert [f.signer for f in found[target.key]] == [None]


def test_jobs_give_the_records_of_one_process(
    scale_author: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Worker processes compute the records one process does, in the repository the
    parent resolved: a forked worker that walked up from its root again would fail."""
    one = _clone(scale_author, tmp_path / "one")
    two = _clone(scale_author, tmp_path / "two")
    set_remotes(one, origin={"url": str(tmp_path / "bare1")})
    shutil.copytree(
        scale_author.parent / "remote", tmp_path / "bare1", ignore=shutil.ignore_patterns("results")
    )
    shutil.copytree(
        scale_author.parent / "remote", tmp_path / "bare2", ignore=shutil.ignore_patterns("results")
    )
    set_remotes(two, origin={"url": str(tmp_path / "bare2")})
    a = evaluate(one, load_campaign(one, NAME))
    campaign = load_campaign(two, NAME)
    with monkeypatch.context() as m:
        m.setattr(config_module, "find_root", _no_walking_up)
        b = evaluate(Repository(two), campaign, executor=LocalProcesses(2))
    assert a.computed == b.computed == _count(scale_author)
    assert b.decoded == 0  # every task ran in the worker processes
    assert _records(a) == _records(b)
    assert a.status == b.status


def test_the_same_result_published_twice_at_once_is_registered_once(tmp_path: Path) -> None:
    store = LocalBlobStore(tmp_path / "remote")
    key = "blake3:" + "ab" * 32
    data = kept_bytes(key, {"verdict": "PASS"})
    with Interleaving() as il:
        il.start("a", lambda: publish(store, key, data), pause_at="results:blobs-written")
        il.wait_paused("a")
        # between a's blobs and its entry, a reader sees no result: a miss, never an error
        assert find(store, {key: dict}, {}) == ({}, [])
        il.start("b", lambda: publish(store, key, data))
        name_b = il.join("b")
        il.resume("a")
        name_a = il.join("a")
    assert name_a == name_b
    entries = list((tmp_path / "remote" / "results").rglob("*.json"))
    assert len(entries) == 1
    found, skipped = find(store, {key: dict}, {})
    assert skipped == [] and [f.data for f in found[key]] == [data]


def test_unknown_task_is_named(scale_author: Path, tmp_path: Path) -> None:
    clone = _clone(scale_author, tmp_path / "c")
    code, _, err = run("campaign", "work", NAME, "--task", "blake3:" + "0" * 64,
                       "--root", str(clone))  # fmt: skip
    assert code == 2
    assert f"campaign {NAME!r}: no task blake3:{'0' * 64}" in err
    assert f"evstore campaign tasks {NAME}" in err


def test_a_worker_signs_only_what_it_computed(scale_author: Path, tmp_path: Path) -> None:
    """A record in the worker's own memo (taken from a remote, or altered) is never
    published under its signature: work computes every result from the outputs."""
    from evidencestore.campaign.memo import open_memo
    from evidencestore.campaign.models import OutputComparison
    from evidencestore.campaign.tasks import task_types
    from evidencestore.config import as_repository

    remote = tmp_path / "remote"
    shutil.copytree(
        scale_author.parent / "remote", remote, ignore=shutil.ignore_patterns("results")
    )
    w = _clone(scale_author, tmp_path / "w", remote)
    tasks = plan(w, load_campaign(w, NAME)).tasks
    target = next(t for t in tasks if t.kind == "output-pair" and t.cost > 0)
    lie = OutputComparison(key="", verdict="PASS", reference=target.inputs["reference"],
                           candidate=target.inputs["candidate"], reasons=("planted",))  # fmt: skip
    memo = open_memo(as_repository(w).local_store())
    memo.put(target.key, lie)
    key = str(scale_author.parent / "p" / "keys" / "worker")
    code, _, err = run("campaign", "work", NAME, "--sign", key, "--root", str(w))
    assert code == 0, err
    workers = load_campaign(w, NAME).worker_keys(w)
    found, _ = find(LocalBlobStore(remote), {target.key: task_types(target.kind)}, workers)
    (hit,) = found[target.key]
    assert hit.signer is not None and b"planted" not in hit.data
    assert b'"verdict":"FAIL"' in hit.data or b'"verdict":"INCONCLUSIVE"' in hit.data
    # and the memo now holds what was computed, not what was planted
    assert memo.stored(target.key) == hit.data


def test_status_flags_are_checked_and_the_text_says_what_it_rests_on(
    scale_author: Path, tmp_path: Path
) -> None:
    remote = tmp_path / "remote"
    shutil.copytree(
        scale_author.parent / "remote", remote, ignore=shutil.ignore_patterns("results")
    )
    c = _clone(scale_author, tmp_path / "c", remote)
    for flag, value, said in (("--jobs", "0", "--jobs 0: expected at least 1"),
                              ("--recheck", "-1", "--recheck -1: expected 0 or more")):  # fmt: skip
        code, _, err = run("campaign", "status", NAME, flag, value, "--root", str(c))
        assert code == 2 and said in err
    key = str(scale_author.parent / "p" / "keys" / "worker")
    assert run("campaign", "work", NAME, "--sign", key, "--jobs", "2", "--root", str(c))[0] == 0
    fresh = _clone(scale_author, tmp_path / "fresh", remote)
    code, out, _ = run("campaign", "status", NAME, "--jobs", "2", "--recheck", "0",
                       "--root", str(fresh))  # fmt: skip
    assert code == 1 and "verdict NOT_ACCEPTED" in out  # lsb is not lossless
    n = _count(scale_author)
    assert f"note: protection: {n} remote result(s) signed by a worker key" in out
    ev = evaluate(fresh, load_campaign(fresh, NAME))
    assert ev.reused and ev.computed == 0


def test_unsigned_results_that_cannot_be_rechecked_are_not_used(
    scale_author: Path, tmp_path: Path
) -> None:
    """Negative control for the recheck: results on a remote that lacks the outputs
    cannot be rechecked, so they are not used and the status is UNAVAILABLE."""
    from evidencestore.storage import blob_key

    remote = tmp_path / "remote"
    shutil.copytree(
        scale_author.parent / "remote", remote, ignore=shutil.ignore_patterns("results")
    )
    w = _clone(scale_author, tmp_path / "w", remote)
    assert run("campaign", "work", NAME, "--root", str(w))[0] == 0  # unsigned
    for name in ("b1", "b2", "f1", "f2", "l1"):
        for r in json.loads((scale_author / f"evidence/{name}/run.json").read_text())["requests"]:
            (remote / blob_key(r["body"]["digest"])).unlink(missing_ok=True)
    c = _clone(scale_author, tmp_path / "c", remote)
    # every one chosen (a byte-identical pair needs no output: a smaller sample could
    # pick only those)
    ev = evaluate(c, load_campaign(c, NAME), recheck=_count(scale_author))
    assert ev.status.verdict == "UNAVAILABLE"
    assert any("could not be computed here (an input missing)" in n for n in ev.status.notes)
    assert not any("counted after" in n for n in ev.status.notes)
