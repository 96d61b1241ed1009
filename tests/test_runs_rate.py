"""The runner at high request rates (issue 28 item 1): small bodies are hashed in memory
and stored by digest without a temporary file; large ones still stream to a locked
temporary; the run records its own load; no PyAV import when media checks are off."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

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
    from evidencestore.runs.body import BodyTooLarge

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
    from evidencestore.runs.endpoints import Observation
    from evidencestore.runs.runner import client_load

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
