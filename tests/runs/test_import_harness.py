"""`evstore import aiperf` / `import loadgen`: real AIPerf artifact directories (fixtures
made by benches/make_aiperf_fixtures.py against the reference LLM server) and real
MLPerf LoadGen logs written at test time by a tiny deterministic SUT."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import paths

from evidencestore.cli import main
from evidencestore.digest import hash_file
from evidencestore.inventory import load_registration, registration_path
from evidencestore.runs import load_run

FIXTURES = paths.FIXTURES / "aiperf"
SUT = paths.HELPERS / "loadgen_sut.py"


def _repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / "evidence").mkdir(parents=True)
    return root


def _lines(path: Path) -> list[dict[str, object]]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


# -- AIPerf -------------------------------------------------------------------------
def test_aiperf_import_equals_aiperf_values(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _repo(tmp_path)
    src = FIXTURES / "baseline-1"
    assert main(["import", "aiperf", str(src), "--name", "b1", "--root", str(root)]) == 0
    assert "run b1: complete" in capsys.readouterr().out
    record = load_run(root, "b1")
    assert record.outcome == "complete"
    assert record.counts["warmup"].requests == 2 and record.counts["measured"].requests == 6
    harness = record.harness
    assert harness is not None and harness.name == "aiperf" and harness.version == "0.13.0"
    assert harness.command is not None and harness.command.startswith("aiperf profile")
    assert "inter_token_latency" in harness.metrics["itl_s"]
    assert harness.sources == {
        "requests": "profile_export.jsonl",
        "payloads": "profile_export_raw.jsonl",
    }
    # Every request's TTFT, ITL and latency are AIPerf's own values, request by request.
    by_start = {r.sent_ns: r for r in record.requests}
    aiperf = _lines(src / "profile_export.jsonl")
    assert len(aiperf) == len(record.requests) == 8
    for line in aiperf:
        meta, metrics = line["metadata"], line["metrics"]
        assert isinstance(meta, dict) and isinstance(metrics, dict)
        r = by_start[meta["request_start_ns"]]
        assert r.phase == ("warmup" if meta["benchmark_phase"] == "warmup" else "measured")
        assert r.e2e_s == metrics["request_latency"]["value"] * 1e-3
        assert r.ttft_s == metrics["time_to_first_token"]["value"] * 1e-3
        assert r.itl_s == metrics["inter_token_latency"]["value"] * 1e-3
        assert r.output_tokens == metrics["output_token_count"]["value"]
        assert r.last_byte_ns == meta["request_end_ns"] and r.worker == meta["worker_id"]
        assert r.completion is not None and r.finish_reason == "length"
    # Every file sealed byte for byte.
    reg = load_registration(registration_path(root, "b1"))
    entries = {e.path: e.descriptor.digest for e in reg.manifest.entries}
    for path in src.rglob("*"):
        if path.is_file():
            rel = path.relative_to(src).as_posix()
            assert entries[f"harness/{rel}"] == hash_file(path).digest
    assert reg.manifest.metadata.annotations["harness"] == "aiperf"
    # run show names the harness and its definitions.
    assert main(["run", "show", "b1", "--root", str(root)]) == 0
    out = capsys.readouterr().out
    assert "imported from aiperf 0.13.0: aiperf profile" in out
    assert "itl_s: AIPerf inter_token_latency" in out


def test_aiperf_import_twice_and_under_another_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _repo(tmp_path)
    src = str(FIXTURES / "baseline-1")
    assert main(["import", "aiperf", src, "--name", "b1", "--root", str(root)]) == 0
    first = load_registration(registration_path(root, "b1")).digest
    capsys.readouterr()
    assert main(["import", "aiperf", src, "--name", "b1", "--root", str(root)]) == 0
    assert f"b1 is already registered from the same files ({first})" in capsys.readouterr().out
    assert load_registration(registration_path(root, "b1")).digest == first
    assert main(["import", "aiperf", src, "--name", "b1-again", "--root", str(root)]) == 2
    err = capsys.readouterr().err
    assert "already imported as bundle 'b1'" in err and "a run counts once" in err
    assert not (root / "evidence" / "b1-again").exists()


def test_aiperf_directory_that_is_not_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _repo(tmp_path)
    empty = tmp_path / "empty"
    (empty / "x").mkdir(parents=True)
    (empty / "x" / "notes.txt").write_text("hi")
    assert main(["import", "aiperf", str(empty), "--name", "e", "--root", str(root)]) == 2
    assert "not an AIPerf artifact directory: no profile_export.jsonl" in capsys.readouterr().err
    bad = tmp_path / "bad"
    shutil.copytree(FIXTURES / "baseline-1", bad)
    lines = (bad / "profile_export.jsonl").read_text().splitlines()
    obj = json.loads(lines[2])
    obj["metadata"]["request_start_ns"] = "soon"
    lines[2] = json.dumps(obj)
    (bad / "profile_export.jsonl").write_text("\n".join(lines) + "\n")
    assert main(["import", "aiperf", str(bad), "--name", "bad", "--root", str(root)]) == 2
    err = capsys.readouterr().err
    assert f"{bad / 'profile_export.jsonl'}: line 3: metadata: field 'request_start_ns'" in err
    assert "expected int" in err
    assert not (root / "evidence" / "bad").exists()


def test_aiperf_failed_requests_keep_error_type(tmp_path: Path) -> None:
    root = _repo(tmp_path)
    bad = tmp_path / "failed"
    shutil.copytree(FIXTURES / "baseline-1", bad)
    (bad / "profile_export_raw.jsonl").unlink()  # the status then comes from AIPerf's error
    lines = (bad / "profile_export.jsonl").read_text().splitlines()
    obj = json.loads(lines[-1])
    obj["error"] = {"code": 500, "type": "Internal Server Error", "message": "boom"}
    lines[-1] = json.dumps(obj)
    (bad / "profile_export.jsonl").write_text("\n".join(lines) + "\n")
    assert main(["import", "aiperf", str(bad), "--name", "f", "--root", str(root)]) == 0
    record = load_run(root, "f")
    failed = [r for r in record.requests if r.failure is not None]
    assert len(failed) == 1
    assert failed[0].failure == "http-status" and failed[0].status == 500
    assert failed[0].error_type == "Internal Server Error" and failed[0].message == "boom"
    assert failed[0].e2e_s is None and failed[0].completion is None
    assert record.outcome == "partial"
    assert record.harness is not None
    assert any("no profile_export_raw.jsonl" in x for x in record.harness.not_recorded)
    assert all(r.completion is None for r in record.requests)


# -- LoadGen ------------------------------------------------------------------------
def _loadgen(tmp_path: Path, name: str, *args: str) -> Path:
    pytest.importorskip("mlperf_loadgen")
    out = tmp_path / name
    subprocess.run([sys.executable, str(SUT), args[0], args[1], str(out), *args[2:]], check=True)
    return out


@pytest.mark.parametrize(
    ("scenario", "args", "validity", "unmet"),
    [
        # 110 samples of 2 ms each: at least 220 ms, past the 100 ms minimum.
        ("offline", ("2000", "1000", "1", "100"), "VALID", []),
        # 110 instant samples against a 100 s minimum duration.
        ("offline", ("0", "1", "1", "100000"), "INVALID", ["min_duration"]),
        # 600 queries, a 5 s latency bound: early stopping met whatever the load.
        ("server", ("0", "1000", "600", "100", "5000"), "VALID", []),
        # 32 queries are too few for early stopping at the 99th percentile.
        ("server", ("1000", "100", "32", "100", "5000"), "INVALID", ["early_stopping"]),
    ],
)
def test_loadgen_import(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    scenario: str,
    args: tuple[str, ...],
    validity: str,
    unmet: list[str],
) -> None:
    logs = _loadgen(tmp_path, "logs", scenario, "perf", *args)
    queries = args[2]
    summary = (logs / "mlperf_log_summary.txt").read_text()
    assert f"Result is : {validity}" in summary  # what LoadGen itself says
    root = _repo(tmp_path)
    assert main(["import", "loadgen", str(logs), "--name", "lg", "--root", str(root)]) == 0
    record = load_run(root, "lg")
    assert record.harness is not None and record.harness.loadgen is not None
    lg = record.harness.loadgen
    assert record.harness.name == "loadgen" and record.harness.version
    assert record.harness.version.split(" ")[0] in (logs / "mlperf_log_detail.txt").read_text()
    assert lg.scenario == scenario.capitalize() and lg.mode == "PerformanceOnly"
    assert lg.validity == validity
    assert [r.name for r in lg.rules if not r.met] == unmet
    expected = {"min_duration", "min_queries", "early_stopping"}
    if scenario == "server":
        expected.add("perf_constraints")
    assert {r.name for r in lg.rules} == expected
    # As many rules as the summary lists, and the same ones unmet.
    satisfied = [x for x in summary.splitlines() if "satisfied" in x]
    assert len(satisfied) == len(lg.rules)
    assert sum(x.rstrip().endswith("NO") for x in satisfied) == len(unmet)
    # The percentiles equal the summary's, in ns.
    for pct, ns in lg.percentiles_ns.items():
        assert f"{pct} percentile latency (ns)   : {ns}" in summary
    assert "50.00" in lg.percentiles_ns and "99.00" in lg.percentiles_ns
    assert lg.settings["scenario"] == scenario.capitalize()
    assert lg.settings["min_query_count"] == int(queries)
    # INVALID is its own outcome: never complete, so it never counts for a claim.
    assert record.outcome == ("complete" if validity == "VALID" else "invalid")
    assert validity in (record.reason or "")
    assert lg.early_stopping is not None and lg.early_stopping_met is not None
    assert main(["run", "show", "lg", "--root", str(root)]) == 0
    out = capsys.readouterr().out
    assert f"LoadGen {scenario.capitalize()} PerformanceOnly: {validity}" in out
    assert f"outcome {record.outcome}" in out
    for name in unmet:
        assert f"    {name}: NOT met" in out


def test_loadgen_accuracy_log_sealed_whole(tmp_path: Path) -> None:
    logs = _loadgen(tmp_path, "acc", "offline", "acc", "0", "1000", "1")
    root = _repo(tmp_path)
    assert main(["import", "loadgen", str(logs), "--name", "acc", "--root", str(root)]) == 0
    record = load_run(root, "acc")
    assert record.harness is not None and record.harness.loadgen is not None
    assert record.harness.loadgen.mode == "AccuracyOnly"
    accuracy = json.loads((logs / "mlperf_log_accuracy.json").read_text())
    assert record.harness.loadgen.accuracy_entries == len(accuracy) == 16
    reg = load_registration(registration_path(root, "acc"))
    entries = {e.path: e.descriptor for e in reg.manifest.entries}
    sealed = entries["harness/mlperf_log_accuracy.json"]
    assert sealed.digest == hash_file(logs / "mlperf_log_accuracy.json").digest
    assert sealed.size == (logs / "mlperf_log_accuracy.json").stat().st_size  # not truncated


def test_loadgen_directory_that_is_not_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _repo(tmp_path)
    d = tmp_path / "d"
    d.mkdir()
    (d / "mlperf_log_summary.txt").write_text("Result is : VALID\n")
    assert main(["import", "loadgen", str(d), "--name", "x", "--root", str(root)]) == 2
    err = capsys.readouterr().err
    assert f"{d}: not a LoadGen log directory: no mlperf_log_detail.txt" in err
    (d / "mlperf_log_detail.txt").write_text(
        ':::MLLOG {"key": "effective_test_mode", "value": "PerformanceOnly"}\n'
    )
    assert main(["import", "loadgen", str(d), "--name", "x", "--root", str(root)]) == 2
    err = capsys.readouterr().err
    assert (
        f"{d / 'mlperf_log_detail.txt'}: not a LoadGen detail log: no 'effective_scenario'" in err
    )
    (d / "mlperf_log_detail.txt").write_text(":::MLLOG {not json\n")
    assert main(["import", "loadgen", str(d), "--name", "x", "--root", str(root)]) == 2
    assert "mlperf_log_detail.txt: line 1: not a :::MLLOG JSON line" in capsys.readouterr().err
    assert not (root / "evidence" / "x").exists()


# -- an imported AIPerf campaign ----------------------------------------------------
AIPERF_PROTOCOL = """name = "ai"

[timing]
min_runs = 2

[[condition]]
name = "chat"
workload = "inputs.json"
harness = "aiperf"

[[arm]]
name = "baseline"
baseline = true
runs = 2

[[arm]]
name = "candidate"
runs = 2
"""


def test_imported_aiperf_campaign_token_exact_and_claim(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from evidencestore.campaign.protocol import load_campaign
    from evidencestore.campaign.status import evaluate

    root = _repo(tmp_path)
    proto = tmp_path / "proto"
    proto.mkdir()
    shutil.copy(FIXTURES / "baseline-1" / "inputs.json", proto / "inputs.json")
    (proto / "protocol.toml").write_text(AIPERF_PROTOCOL)
    assert main(["campaign", "init", "ai", "--protocol", str(proto / "protocol.toml"),
                 "--root", str(root)]) == 0  # fmt: skip
    for arm in ("baseline", "candidate"):
        for k in (1, 2):
            assert main(["import", "aiperf", str(FIXTURES / f"{arm}-{k}"), "--name", f"{arm}-{k}",
                         "--arm", arm, "--campaign", "ai", "--condition", "chat",
                         "--root", str(root)]) == 0  # fmt: skip
    ev = evaluate(root, load_campaign(root, "ai"))
    assert ev.repeatability["chat"].exact is True
    adjudication = ev.adjudications["chat/candidate"]
    assert adjudication.verdict == "PASS"
    # Two candidate runs, each 2 warmup and 6 measured outputs, paired by AIPerf's
    # conversation (the prompt sent), not by timing.
    assert len(adjudication.comparisons) == 16
    keys = sorted({c.key for c in adjudication.comparisons})
    assert keys[0] == "request 0 measured #0" and "request 5 measured #0" in keys
    assert all(c.verdict == "PASS" and c.token_position is None for c in adjudication.comparisons)
    capsys.readouterr()
    code = main(["campaign", "claim", "ai", "--condition", "chat", "--arm", "candidate",
                 "--json", "--root", str(root)])  # fmt: skip
    claim = json.loads(capsys.readouterr().out)
    assert code == 0 and claim["verdict"] == "STANDS", claim["reasons"]
    assert claim["harness"] == "aiperf 0.13.0"
    assert claim["metric_definition"].startswith("AIPerf request_latency")
    assert claim["speedup"]["low"] > 1.0
    # The claim cites the imported bundles by digest, one value per run.
    cited = {rv["run"]: rv["digest"] for rv in claim["runs"]}
    assert set(cited) == {"baseline-1", "baseline-2", "candidate-1", "candidate-2"}
    for name, digest in cited.items():
        assert digest == load_registration(registration_path(root, name)).digest
    # The values are AIPerf's own request latencies (measured phase).
    b1 = _lines(FIXTURES / "baseline-1" / "profile_export.jsonl")
    want = sorted(
        line["metrics"]["request_latency"]["value"] * 1e-3  # type: ignore[index]
        for line in b1
        if line["metadata"]["benchmark_phase"] != "warmup"  # type: ignore[index]
    )
    assert sorted(next(rv for rv in claim["runs"] if rv["run"] == "baseline-1")["values"]) == want
    main(["campaign", "claim", "ai", "--condition", "chat", "--arm", "candidate",
          "--root", str(root)])  # fmt: skip
    assert "metric e2e from aiperf 0.13.0: AIPerf request_latency" in capsys.readouterr().out
    # run diff names the harness command's difference (another server URL, artifact dir).
    main(["run", "diff", "baseline-1", "candidate-1", "--json", "--root", str(root)])
    diffs = json.loads(capsys.readouterr().out)["differences"]
    command = next(d for d in diffs if (d["section"], d["key"]) == ("harness", "command"))
    assert command["a"].startswith("aiperf profile") and command["a"] != command["b"]
    # A LoadGen run offered to the AIPerf condition is refused before it is registered:
    # harnesses are never mixed within a condition.
    logs = _loadgen(tmp_path, "lg", "offline", "perf", "2000", "1000", "1")
    assert main(["import", "loadgen", str(logs), "--name", "lg", "--arm", "candidate",
                 "--campaign", "ai", "--condition", "chat", "--root", str(root)]) == 2  # fmt: skip
    err = capsys.readouterr().err
    assert "campaign 'ai' takes runs imported from aiperf there" in err
    assert "this run is imported from loadgen: harnesses are not mixed" in err
    assert not (root / "evidence" / "lg").exists()


@pytest.mark.parametrize("arm", ["baseline", "candidate"])
def test_imported_aiperf_times_agree_with_the_servers_log(tmp_path: Path, arm: str) -> None:
    """The reference server logged when it wrote every token (its own monotonic clock,
    fetched by benches/make_aiperf_fixtures.py). Matched in the order of first tokens,
    every imported request has the server's token count; its TTFT places the first token
    at the server's first write up to one clock offset common to all requests (spread
    under 5 ms); its ITL is the server's mean gap between token writes within 2 ms (the
    imported latency also spans the stream's closing events)."""
    root = _repo(tmp_path)
    log = json.loads((FIXTURES / f"reference-server-{arm}.json").read_text())["log"]
    per: dict[int, list[int]] = {}
    for number, _position, ns in log:
        per.setdefault(number, []).append(ns)
    numbers = sorted(per)
    for k in (1, 2):
        assert main(["import", "aiperf", str(FIXTURES / f"{arm}-{k}"), "--name", f"{arm}-{k}",
                     "--root", str(root)]) == 0  # fmt: skip
        record = load_run(root, f"{arm}-{k}")
        mine = numbers[8 * (k - 1) : 8 * k]  # the server numbers requests as they arrive
        server = sorted((min(per[n]), max(per[n]), len(per[n])) for n in mine)
        imported = sorted(
            (r.sent_ns + r.ttft_s * 1e9, r, r.output_tokens)  # type: ignore[operator]
            for r in record.requests
        )
        assert [s[2] for s in server] == [i[2] for i in imported] == [8] * 8
        offsets = [i[0] - s[0] for i, s in zip(imported, server, strict=True)]
        assert max(offsets) - min(offsets) < 5e6
        for (_, r, _), (first, last, count) in zip(imported, server, strict=True):
            server_itl = (last - first) / 1e9 / (count - 1)
            assert r.itl_s == pytest.approx(server_itl, abs=2e-3)


def test_claim_refuses_runs_of_different_harnesses() -> None:
    """The claim's own guard (behind the condition's harness check): runs whose metric
    comes from different harnesses are never pooled into one interval."""
    from types import SimpleNamespace

    from evidencestore.campaign.claims import harness_of
    from evidencestore.runs.models import Harness

    digest = "blake3:" + "0" * 64
    aiperf = Harness(name="aiperf", version="0.13.0", metrics={"e2e_s": "AIPerf ..."},
                     source_digest=digest)  # fmt: skip
    native = SimpleNamespace(harness=None)
    imported = SimpleNamespace(harness=aiperf)
    assert harness_of([imported, imported], "e2e") == ("aiperf 0.13.0", "AIPerf ...", None)
    label, definition, refusal = harness_of([imported, native], "e2e")
    assert label == "aiperf 0.13.0 + evidencestore" and definition is None
    assert refusal is not None and "a claim never mixes them" in refusal
    assert harness_of([native], "ttft")[0] == "evidencestore"


def test_a_plain_subfolder_imports_into_its_repository_whole(tmp_path: Path) -> None:
    """A path inside a repository names that repository, once, at the entry point: the
    harness files and the registration land in the same store and repository (they
    used to split: files in the parent's store, the run registered under `sub/`)."""
    from evidencestore.config import Repository
    from evidencestore.runs import open_run
    from evidencestore.runs.aiperf import import_aiperf
    from evidencestore.verify import verify_repository

    root = _repo(tmp_path)
    sub = root / "sub"
    sub.mkdir()
    [result] = import_aiperf(sub, FIXTURES / "baseline-1", "b1")
    assert not result.already and registration_path(root, "b1").is_file()
    assert sorted(p.name for p in sub.iterdir()) == []  # no store, no evidence under sub/
    store = Repository(root).local_store()
    reg = load_registration(registration_path(root, "b1"))
    stored = [e for e in reg.manifest.entries if e.location == "store"]
    assert len(stored) > 10 and all(store.has(e.descriptor.digest) for e in stored)
    assert verify_repository(root, store=store).ok
    assert load_run(sub, "b1").harness is not None  # read back by the same rule
    # the same files again, through the subfolder: the same import, a no-op
    [again] = import_aiperf(sub, FIXTURES / "baseline-1", "b1")
    assert again.already and again.digest == result.digest
    # a harness's own run, opened from the subfolder, lands beside it
    run = open_run(sub, "h", arm="a", workload=b"# w\n")
    assert run.store.root == store.root
    run.seal()
    assert registration_path(root, "h").is_file() and list(sub.iterdir()) == []
