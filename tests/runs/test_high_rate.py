"""The runner at high request rates (issue 28 item 1): small bodies are hashed in memory
and stored by digest without a temporary file; large ones still stream to a locked
temporary; the run records its own load; no PyAV import when media checks are off."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.cli import cli

from evidencestore.digest import hash_bytes
from evidencestore.runs.body import SMALL, BodySink, MemoryBudget
from evidencestore.storage import LocalBlobStore


def test_small_body_in_memory_then_stored(tmp_path: Path) -> None:
    store = LocalBlobStore(tmp_path / "store")
    budget = MemoryBudget(2 * SMALL)
    sink = BodySink(store, 1 << 20, budget)
    sink.write(b"a" * 1000)
    sink.write(b"b" * 24)
    assert sink.tmp is None and budget.left == 2 * SMALL - 1024  # no temporary; bytes held
    assert sink.head(5) == b"aaaaa"
    digest = sink.finish()
    assert digest == hash_bytes(b"a" * 1000 + b"b" * 24).digest
    desc = sink.publish("application/json")
    assert (desc.digest, desc.size) == (digest, 1024)
    assert store.get(digest) == b"a" * 1000 + b"b" * 24
    assert budget.left == 2 * SMALL  # given back


def test_growing_body_spills_to_a_locked_temporary(tmp_path: Path) -> None:
    store = LocalBlobStore(tmp_path / "store")
    budget = MemoryBudget(SMALL)
    sink = BodySink(store, None, budget)
    data = bytes(range(256)) * (SMALL // 256 + 10)
    sink.write(data[:1000])
    assert sink.tmp is None
    sink.write(data[1000:])
    assert sink.tmp is not None and sink.tmp.exists() and budget.left == SMALL  # given back
    # Budget spent: the next sink streams to a file from its first byte.
    other = BodySink(store, None, MemoryBudget(0))
    assert other.tmp is not None
    other.discard()
    assert sink.finish() == hash_bytes(data).digest
    assert store.get(sink.publish("application/octet-stream").digest) == data


def test_too_large_in_memory_body_is_refused(tmp_path: Path) -> None:
    from evidencestore.errors import BodyTooLarge

    sink = BodySink(LocalBlobStore(tmp_path / "s"), 10, MemoryBudget())
    with pytest.raises(BodyTooLarge):
        sink.write(b"x" * 11)
    sink.discard()


def test_run_without_media_checks_never_imports_pyav(tmp_path: Path) -> None:
    pytest.importorskip("aiohttp")
    code = r"""
import json, sys
from pathlib import Path
from evidencestore.testing.llm_server import chat_workload, serve_llm
from evidencestore.runs import run_workload
root = Path(sys.argv[1]); (root / "evidence").mkdir()
(root / "w.toml").write_text(chat_workload(("a",), max_tokens=4, measured=3, concurrency=2))
with serve_llm() as s:
    _, rec = run_workload(root, root / "w.toml", arm="a", server=s.url, name="r")
print(json.dumps({"av": "av" in sys.modules, "outcome": rec.outcome,
                  "pyav": rec.client.pyav, "cpu": rec.load.cpu_s, "wall": rec.load.wall_s}))
"""
    out = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, check=True
    ).stdout
    got = json.loads(out.strip().splitlines()[-1])
    assert got["av"] is False and got["outcome"] == "complete"
    assert got["cpu"] > 0 and got["wall"] > 0
    try:
        from importlib.metadata import version

        assert got["pyav"] == version("av")  # the version is still recorded
    except Exception:
        assert got["pyav"] is None


def test_client_load_flags_send_lag() -> None:
    from evidencestore.runs.runner import client_load
    from evidencestore.runs.transport import Observation

    obs = [Observation(sent_ns=t + lag, end_ns=t + 10**7, intended_ns=t)
           for t, lag in ((0, 2_000_000), (10**8, 3_000_000), (2 * 10**8, 100_000))]  # fmt: skip
    load = client_load(obs, {"cpu": 0.1, "wall": 1.0}, 0.001)
    assert load is not None and load.client_bound is True
    assert load.send_lag_median_s == 0.002 and load.send_lag_max_s == 0.003
    assert load.reasons == (
        "median send lag 2.000 ms exceeds [run] max_send_lag = 1 ms: requests left later "
        "than intended",
    )
    busy = client_load(obs[2:], {"cpu": 0.95, "wall": 1.0}, 0.001)
    assert busy is not None and busy.client_bound is True
    assert busy.reasons == ("the client used 95% of a core while sending: its CPU was saturated",)
    calm = client_load(obs[2:], {"cpu": 0.2, "wall": 1.0}, 0.001)
    assert calm is not None and calm.client_bound is False and calm.reasons == ()


def _counting_fsync(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    import os

    calls: list[int] = []
    real = os.fsync

    def fsync(fd: int) -> None:
        calls.append(fd)
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    return calls


def test_deferred_sync_makes_blobs_durable_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import threading

    from evidencestore.storage import _local

    store = LocalBlobStore(tmp_path / "store")
    fsyncs = _counting_fsync(monkeypatch)
    synced: list[Path] = []
    monkeypatch.setattr(_local, "sync_filesystem", lambda root: synced.append(root) or True)
    monkeypatch.setattr(_local, "SYNCFS_FROM", 5)
    store.put(b"durable at once")
    assert len(fsyncs) == 2  # outside a deferral: the file, then its directory
    fsyncs.clear()
    other: list[int] = []
    with store.upkeep.deferred_sync():
        with store.upkeep.deferred_sync():  # nested: one deferral
            descs = [store.put(b"blob %d" % i) for i in range(5)]
        assert [store.get(d.digest) for d in descs] == [b"blob %d" % i for i in range(5)]
        assert fsyncs == [] and synced == []  # published, not yet flushed

        def elsewhere() -> None:  # another thread's write stays durable by itself
            before = len(fsyncs)
            store.put(b"from another thread")
            other.append(len(fsyncs) - before)

        worker = threading.Thread(target=elsewhere)
        worker.start()
        worker.join()
    assert other == [2]
    # one flush of the filesystem at the end (the fsyncs are the other thread's own)
    assert synced == [store.root] and len(fsyncs) == 2
    fsyncs.clear()
    with store.upkeep.deferred_sync():  # fewer than SYNCFS_FROM: an fsync each is cheaper
        descs = [store.put(b"few %d" % i) for i in range(2)]
    folders = {store.path_of(d.digest).parent for d in descs}
    assert synced == [store.root] and len(fsyncs) == 2 + len(folders)
    # Where the OS has no syncfs: each file, then each directory, once.
    monkeypatch.setattr(_local, "sync_filesystem", lambda root: False)
    monkeypatch.setattr(_local, "SYNCFS_FROM", 1)
    fsyncs.clear()
    with store.upkeep.deferred_sync():
        descs = [store.put(b"fallback %d" % i) for i in range(4)]
        assert fsyncs == []
    folders = {store.path_of(d.digest).parent for d in descs}
    assert len(fsyncs) == 4 + len(folders)


def test_a_blob_kept_while_another_writer_defers_its_sync_is_flushed_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A concurrent run storing the same payload keeps the deferring run's blob instead
    of writing it; it must not register a name for bytes that are not on disk yet."""
    import threading

    from evidencestore.storage import _local

    store = LocalBlobStore(tmp_path / "store")
    monkeypatch.setattr(_local, "sync_filesystem", lambda root: False)
    fsyncs = _counting_fsync(monkeypatch)
    flushed: list[list[Path]] = []
    real_fsync_paths = _local.fsync_paths

    def fsync_paths(paths: list[Path]) -> None:
        flushed.append(list(paths))
        real_fsync_paths(paths)

    monkeypatch.setattr(_local, "fsync_paths", fsync_paths)
    durable = store.put(b"written durably")
    mode = lambda d: store.path_of(d.digest).stat().st_mode & 0o777  # noqa: E731
    assert mode(durable) == _local.BLOB_MODE
    in_block = threading.Event()
    kept = threading.Event()
    results: dict[str, object] = {}

    def deferring() -> None:
        with store.upkeep.deferred_sync():
            results["payload"] = store.put(b"the same payload")
            results["mode inside"] = mode(results["payload"])  # type: ignore[arg-type]
            in_block.set()
            kept.wait(10)

    writer = threading.Thread(target=deferring)
    writer.start()
    assert in_block.wait(10)
    payload = results["payload"]
    assert results["mode inside"] == _local.UNSYNCED_MODE
    flushed.clear()
    fsyncs.clear()
    assert store.put(b"the same payload") == payload  # kept, not written
    assert flushed == [[store.path_of(payload.digest)]]  # type: ignore[attr-defined]
    assert len(fsyncs) == 2  # the blob, then its folder
    assert mode(payload) == _local.BLOB_MODE  # type: ignore[arg-type]
    fsyncs.clear()
    assert store.put(b"written durably") == durable  # a durable blob kept: no fsync
    assert fsyncs == []
    kept.set()
    writer.join()
    # Inside a deferral, a kept blob is flushed with the writer's own at the block end.
    other = store.put(b"kept inside a block")
    flushed.clear()
    with store.upkeep.deferred_sync():
        store.put(b"kept inside a block")
        store.put(b"new inside a block")
        assert flushed == []
    assert flushed == [
        [store.path_of(other.digest), store.path_of(hash_bytes(b"new inside a block").digest)]
    ]


def test_run_publishes_without_an_fsync_per_blob_and_flushes_before_registering(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("aiohttp")
    from evidencestore.runs import run_workload
    from evidencestore.storage import _local
    from evidencestore.testing.llm_server import chat_workload, serve_llm

    (tmp_path / "evidence").mkdir()
    prompts = tuple(f"prompt {i}" for i in range(6))
    (tmp_path / "w.toml").write_text(chat_workload(prompts, max_tokens=4, concurrency=3))
    flushed: list[tuple[set[Path], bool]] = []
    real = _local.fsync_paths

    def fsync_paths(paths: list[Path]) -> None:
        registered = (tmp_path / "evidence" / "r" / "bundle.json").exists()
        flushed.append(({Path(p) for p in paths}, registered))
        real(paths)

    monkeypatch.setattr(_local, "sync_filesystem", lambda root: False)
    monkeypatch.setattr(_local, "fsync_paths", fsync_paths)
    with serve_llm() as server:
        reg, rec = run_workload(tmp_path, tmp_path / "w.toml", arm="a", server=server.url, name="r")
    assert rec.outcome == "complete", rec.reason
    store = LocalBlobStore(tmp_path / ".evstore")
    named = {
        store.path_of(e.descriptor.digest) for e in reg.manifest.entries if e.location == "store"
    }
    assert len(flushed) == 1
    paths, registered = flushed[0]
    assert registered is False  # flushed before the registration names them
    # Every payload, stream and completion (and the server's answers) flushed, once.
    kinds = {e.path.rsplit("/", 1)[-1] for e in reg.manifest.entries if e.location == "store"}
    assert {"payload", "output", "completion.json"} <= kinds
    # (the workload was stored, durably, when the recorder opened: before any request)
    workload = {store.path_of(rec.workload.digest)}
    assert paths == named - workload and workload < named
    for e in reg.manifest.entries:
        if e.location == "store":
            store.verify(e.descriptor.digest, e.descriptor.size)


def test_small_bodies_past_the_budget_share_one_spool_file(tmp_path: Path) -> None:
    from evidencestore.runs.body import Spool

    store = LocalBlobStore(tmp_path / "store")
    incoming = tmp_path / "store" / "incoming"
    budget = MemoryBudget(1500)
    spool = Spool(store)
    a = BodySink(store, 1 << 20, budget, spool)
    a.write(b"a" * 1000)  # in memory
    b = BodySink(store, 1 << 20, budget, spool)
    c = BodySink(store, 1 << 20, budget, spool)
    b.write(b"b" * 300)  # the last of the budget
    b.write(b"B" * 700)  # past it: b's bytes move to the spool
    c.write(b"c" * 200)  # nothing left: straight to the spool, interleaved with b
    b.write(b"b" * 10)
    c.write(b"C" * 20)
    assert spool.tmp is not None and a.tmp is None and b.tmp is None and c.tmp is None
    assert [p.name for p in incoming.iterdir()] == [spool.tmp.name]  # one file for both
    assert list(store.upkeep.iter_temporaries()) == []  # locked: gc leaves it alone
    assert b.head(4) == b"bbbb" and c.head(3) == b"ccc"
    d = BodySink(store, None, budget, spool)
    d.write(b"d" * 100)
    big = bytes(range(256)) * (SMALL // 256)
    d.write(big)  # grew past SMALL: to a file of its own, spooled bytes first
    assert d.tmp is not None and d.tmp.exists()
    e = BodySink(store, 1 << 20, budget, spool)
    e.write(b"e" * 50)
    e.discard()  # gone with the spool
    expect = {
        a: b"a" * 1000,
        b: b"b" * 300 + b"B" * 700 + b"b" * 10,
        c: b"c" * 200 + b"C" * 20,
        d: b"d" * 100 + big,
    }
    for sink, data in expect.items():
        assert sink.content() is None  # not finished
        assert sink.finish() == hash_bytes(data).digest
        # a small body's bytes come from memory or the spool, a large one's from its file
        assert sink.content() == (None if sink is d else data)
        desc = sink.publish("application/octet-stream")
        assert (desc.digest, desc.size) == (hash_bytes(data).digest, len(data))
        assert store.get(desc.digest) == data
    assert budget.left == 1500  # a's bytes given back; b's given back when they moved
    spool.close()
    assert list(incoming.iterdir()) == []


def test_run_past_its_memory_budget_records_the_same_bytes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("aiohttp")
    from evidencestore.runs import body, recorder, run_workload
    from evidencestore.testing.llm_server import chat_workload, serve_llm

    prompts = tuple(f"prompt {i}" for i in range(8))
    created: list[Path] = []
    real = body._locked_temporary

    def locked(store: LocalBlobStore):  # type: ignore[no-untyped-def]
        got = real(store)
        created.append(got[0])
        return got

    def outputs(root: Path) -> list[tuple[str | None, str | None]]:
        (root / "evidence").mkdir(parents=True)
        (root / "w.toml").write_text(chat_workload(prompts, max_tokens=6, concurrency=4))
        with serve_llm() as server:
            _, rec = run_workload(root, root / "w.toml", arm="a", server=server.url, name="r")
        assert rec.outcome == "complete", rec.reason
        return [
            (r.body.digest if r.body else None, r.completion.digest if r.completion else None)
            for r in rec.requests
        ]

    whole = outputs(tmp_path / "memory")
    assert created == []  # every body fit the budget
    monkeypatch.setattr(body, "_locked_temporary", locked)
    monkeypatch.setattr(recorder, "MemoryBudget", lambda: body.MemoryBudget(1500))
    spooled = outputs(tmp_path / "spooled")
    assert spooled == whole  # the same streams and completions, byte for byte
    assert len(created) == 1 and not created[0].exists()  # one spool, removed after


def test_terminal_progress_is_redrawn_at_most_ten_times_a_second() -> None:
    """A run of 1000 requests in one second (1 ms each, by the clock given): the line is
    drawn for the first few ticks (the burst), then ten times a second, and always at
    the last; each line carries the counts of its tick."""
    import io

    from evidencestore.progress import Line, Tick

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    clock = iter(k / 1000 for k in range(10**6))  # 1 ms per tick
    out = Terminal()
    line = Line(out, clock=lambda: next(clock))
    for k in range(1, 1001):
        line(Tick("run r", k, 1000, "requests", failed=k // 100, started=k))
    drawn = [part.split("\x1b[K")[0] for part in out.getvalue().split("\r")[1:]]
    assert line.drawn == len(drawn) == 4 + 10  # the burst, ten a second, the last
    assert drawn[0] == "run r: 1/1000 requests, 1 sent"  # no rate at the first tick
    assert drawn[-1] == "run r: 1000/1000 requests, 1000 sent, 10 failed, 1001.0/s"
    done = [int(d.split()[2].split("/")[0]) for d in drawn]
    assert done == sorted(done) and done[:4] == [1, 2, 3, 4]


def test_deadlines_time_out_an_exchange_and_let_outside_cancellation_through(
    tmp_path: Path,
) -> None:
    aiohttp = pytest.importorskip("aiohttp")
    import asyncio

    from evidencestore.models import Descriptor
    from evidencestore.runs.endpoints import ENDPOINTS
    from evidencestore.runs.transport import Connection, Deadlines, Payload, exchange
    from evidencestore.testing.llm_server import serve_llm

    store = LocalBlobStore(tmp_path / "store")
    data = b'{"messages":[{"role":"user","content":"x"}],"max_tokens":4,"stream":true}'
    d = hash_bytes(data)
    payload = Payload(
        data, "application/json", Descriptor(digest=d.digest, size=d.size, media_type="a/b")
    )
    chat = ENDPOINTS["chat"]
    path = "/v1/chat/completions"

    async def main(url: str, server: object) -> None:
        async with aiohttp.ClientSession() as session:
            deadlines = Deadlines(0.2)
            conn = Connection(
                session=session,
                base=url,
                timeout=0.2,
                new_sink=lambda limit: BodySink(store, limit, MemoryBudget()),
                max_output=1 << 20,
                deadlines=deadlines,
            )
            # the server stalls after its first token: the time limit ends the exchange
            obs, sink = await exchange(conn, chat, payload, path, "t")
            assert (obs.failure, obs.message) == ("timeout", "no complete response within 0.2 s")
            assert sink is None and obs.received > 0  # nothing partial kept
            # a cancellation from outside is no timeout: it propagates
            task = asyncio.ensure_future(exchange(conn, chat, payload, path, "t"))
            await asyncio.sleep(0.05)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            # an exchange that ends in time is left alone, and so is its task afterwards
            server.stall_at = None  # type: ignore[attr-defined]
            obs, sink = await exchange(conn, chat, payload, path, "t")
            assert obs.failure is None and sink is not None
            await asyncio.sleep(0.3)  # past the deadline it had: not cancelled
            deadlines.close()

    with serve_llm(stall_at=1, stall=2.0) as server:
        asyncio.run(main(server.url, server))


def test_run_show_states_the_client_bound_line_either_way(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("aiohttp")
    from evidencestore.testing.llm_server import chat_workload, serve_llm

    root = str(tmp_path)
    assert cli(capsys, "init", "--root", root)[0] == 0
    text = chat_workload(("one", "two"), max_tokens=4)
    (tmp_path / "free.toml").write_text(text)
    # A send-lag limit no client meets: the same run is then client-bound (the control).
    (tmp_path / "bound.toml").write_text(text.replace("[run]\n", "[run]\nmax_send_lag = 1e-12\n"))
    with serve_llm() as server:
        for name in ("free", "bound"):
            code, _, err = cli(capsys, "-q", "run", str(tmp_path / f"{name}.toml"), "--arm", "a",
                                "--server", server.url, "--name", name, "--root", root)  # fmt: skip
            assert code == 0, err
    from evidencestore.runs import load_run

    code, out, _ = cli(capsys, "run", "show", "free", "--root", root)
    assert code == 0
    [line] = [x for x in out.splitlines() if "client-bound" in x]
    load = load_run(root, "free").load
    assert load is not None
    if load.client_bound:  # a saturated CPU (a loaded test machine) makes it so
        assert line.startswith("client-bound: "), line
    else:
        assert line.startswith("not client-bound: client CPU ") and "median send lag " in line
    code, out, _ = cli(capsys, "run", "show", "bound", "--root", root)
    [line] = [x for x in out.splitlines() if "client-bound" in x]
    assert line.startswith("client-bound: median send lag"), line
