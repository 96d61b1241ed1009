"""AIPerf's real layouts and values: one ``--num-profile-runs`` execution is one run,
requests pair by what was asked (another warmup count and order compare right),
impossible values refuse the import, and concurrent imports of one folder register
once. Fixtures: real AIPerf 0.13 directories (benches/make_aiperf_fixtures.py and
benches/make_aiperf_layouts.py)."""

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


def _repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / "evidence").mkdir(parents=True)
    return root


def test_num_profile_runs_is_one_execution(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--num-profile-runs 3`` (``profile_runs/run_000N/`` + ``aggregate/``) imports as
    one run holding three passes, every file sealed, aggregate and top-level log
    included (was: refused at the artifact directory; from ``profile_runs/``, three
    runs with the aggregate unsealed). ``profile_runs/`` alone is refused."""
    root = _repo(tmp_path)
    src = FIXTURES / "multirun"
    assert main(["import", "aiperf", str(src), "--name", "m", "--root", str(root)]) == 0
    assert sorted(p.name for p in (root / "evidence").iterdir()) == ["m"]
    record = load_run(root, "m")
    harness = record.harness
    assert harness is not None and harness.passes == (8, 6, 6)
    assert record.counts["warmup"].requests == 2 and record.counts["measured"].requests == 18
    # Each measured prompt was sent once per pass: repetitions 0, 1, 2 of one request.
    reps = sorted(r.repetition for r in record.requests if r.phase == "measured" and r.request == 2)
    assert reps == [0, 1, 2]
    entries = {
        e.path: e.descriptor.digest
        for e in load_registration(registration_path(root, "m")).manifest.entries
    }
    files = [p for p in src.rglob("*") if p.is_file()]
    assert {f"harness/{p.relative_to(src).as_posix()}" for p in files} == {
        k for k in entries if k.startswith("harness/")
    }
    for p in files:
        assert entries[f"harness/{p.relative_to(src).as_posix()}"] == hash_file(p).digest
    assert "harness/aggregate/profile_export_aiperf_aggregate.json" in entries
    assert "harness/logs/aiperf.log" in entries
    capsys.readouterr()
    assert main(["import", "aiperf", str(src / "profile_runs"), "--name", "p",
                 "--root", str(root)]) == 2  # fmt: skip
    assert "these are the profile passes of one AIPerf execution" in capsys.readouterr().err
    assert not (root / "evidence" / "p").exists()


PROTOCOL = """name = "ai"
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
runs = 1
"""


def _campaign(tmp_path: Path, root: Path) -> None:
    proto = tmp_path / "proto"
    proto.mkdir()
    shutil.copy(FIXTURES / "baseline-1" / "inputs.json", proto / "inputs.json")
    (proto / "protocol.toml").write_text(PROTOCOL)
    assert main(["campaign", "init", "ai", "--protocol", str(proto / "protocol.toml"),
                 "--root", str(root)]) == 0  # fmt: skip
    for k in (1, 2):
        assert main(["import", "aiperf", str(FIXTURES / f"baseline-{k}"), "--name",
                     f"baseline-{k}", "--arm", "baseline", "--campaign", "ai",
                     "--condition", "chat", "--root", str(root)]) == 0  # fmt: skip


def _adjudicate(root: Path, src: Path, name: str) -> object:
    from evidencestore.campaign.protocol import load_campaign
    from evidencestore.campaign.status import evaluate

    assert main(["import", "aiperf", str(src), "--name", name, "--arm", "candidate",
                 "--campaign", "ai", "--condition", "chat", "--root", str(root)]) == 0  # fmt: skip
    return evaluate(root, load_campaign(root, "ai")).adjudications["chat/candidate"]


def test_requests_pair_by_what_was_asked(tmp_path: Path) -> None:
    """A candidate at concurrency 4 with 4 warmup requests (baseline: 2 and 2), every
    output equal to the baseline's: PASS over all 10 of its outputs (was: FAIL, "request
    2 warmup #0: run 'baseline-1' has no such request"). Negative control: the same
    directory with one measured response's last token changed FAILs at that request."""
    root = _repo(tmp_path)
    _campaign(tmp_path, root)
    adj = _adjudicate(root, FIXTURES / "warmup-4", "w4")
    assert adj.verdict == "PASS", adj.reasons  # type: ignore[attr-defined]
    assert len(adj.comparisons) == 10  # type: ignore[attr-defined]
    bad = tmp_path / "w4-bad"
    shutil.copytree(FIXTURES / "warmup-4", bad)
    raw = bad / "profile_export_raw.jsonl"
    lines = raw.read_text().splitlines()
    at = next(i for i, x in enumerate(lines) if '"benchmark_phase":"profiling"' in x)
    obj = json.loads(lines[at])
    packet = [p for r in obj["responses"] for p in r["packets"] if '"token_ids"' in p["value"]][
        -1
    ]  # the last content chunk
    chunk = json.loads(packet["value"])
    chunk["choices"][0]["delta"]["content"] = " w1"
    chunk["choices"][0]["token_ids"] = [1]
    packet["value"] = json.dumps(chunk)
    lines[at] = json.dumps(obj)
    raw.write_text("\n".join(lines) + "\n")
    shutil.rmtree(root / "evidence" / "w4")
    adj = _adjudicate(root, bad, "w4-bad")
    assert adj.verdict == "FAIL"  # type: ignore[attr-defined]
    failed = [c for c in adj.comparisons if c.verdict == "FAIL"]  # type: ignore[attr-defined]
    assert len(failed) == 1 and failed[0].key.endswith("measured #0")


def _edit_line(src: Path, dst: Path, number: int, edit: object) -> Path:
    shutil.copytree(src, dst)
    path = dst / "profile_export.jsonl"
    lines = path.read_text().splitlines()
    obj = json.loads(lines[number - 1])
    edit(obj)  # type: ignore[operator]
    lines[number - 1] = json.dumps(obj).replace('"INF"', "1e999")  # JSON has no inf
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize(
    ("edit", "said"),
    [
        (lambda o: o["metrics"]["request_latency"].update(value=-5.0),
         "field metrics.request_latency is -5.0: expected a finite value >= 0"),
        (lambda o: o["metrics"]["time_to_first_token"].update(value="INF"),
         "not JSON: Number out of range"),  # non-finite never parses
        (lambda o: o["metrics"]["output_token_count"].update(value=9),
         "field metrics.output_token_count is 9 but the response in "
         "profile_export_raw.jsonl carries 8 token ids"),
        (lambda o: o["metrics"]["output_token_count"].update(value=7.5),
         "field metrics.output_token_count is 7.5: expected whole tokens"),
        (lambda o: o["metrics"]["time_to_first_token"].update(value=1e6),
         "field metrics.time_to_first_token (1e+06 ms) exceeds metrics.request_latency"),
        (lambda o: o["metadata"].update(request_end_ns=o["metadata"]["request_start_ns"] - 1),
         "field metadata.request_end_ns is"),
    ],
)  # fmt: skip
def test_impossible_values_refuse_the_import(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], edit: object, said: str
) -> None:
    """Was: a -5 ms request_latency became e2e_s = -0.005 in a complete run."""
    root = _repo(tmp_path)
    path = _edit_line(FIXTURES / "baseline-1", tmp_path / "bad", 4, edit)
    assert main(["import", "aiperf", str(path.parent), "--name", "bad", "--root", str(root)]) == 2
    err = capsys.readouterr().err
    assert f"{path}: line 4: {said}" in err, err
    assert not (root / "evidence" / "bad").exists()


RACE = """
import sys
import time
from pathlib import Path
from evidencestore.cli import main
go = Path(sys.argv[3])
give_up = time.monotonic() + 60
while not go.exists():
    if time.monotonic() > give_up:
        raise SystemExit("go file never appeared: " + str(go))
    time.sleep(0.001)
raise SystemExit(main(["import", "aiperf", sys.argv[1], "--name", sys.argv[2],
                       "--root", sys.argv[4]]))
"""


def test_concurrent_imports_of_one_folder_register_once(tmp_path: Path) -> None:
    """Real processes importing one folder under different names at once: exactly one
    registers, the others are refused naming it (was: 15 of 15 rounds registered
    twice). Three rounds of four processes."""
    root = _repo(tmp_path)
    src = FIXTURES / "candidate-1"
    env_path = str(paths.ROOT)
    for round_ in range(3):
        go = tmp_path / f"go-{round_}"
        procs = [
            subprocess.Popen(
                [sys.executable, "-c", RACE, str(src), f"r{round_}-{k}", str(go), str(root)],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                env={"PYTHONPATH": env_path, "PATH": "/usr/bin:/bin"},
            )
            for k in range(4)
        ]  # fmt: skip
        go.touch()
        results = [(p.wait(timeout=120), p.communicate()) for p in procs]
        codes = sorted(code for code, _ in results)
        registered = [p.name for p in (root / "evidence").iterdir() if p.name.startswith("r")]
        if round_ == 0:
            assert codes == [0, 2, 2, 2], results
            assert len(registered) == 1
            first = registered[0]
            for code, (_out, err) in results:
                if code == 2:
                    assert f"already imported as bundle {first!r}" in err
        else:  # the folder is imported already: every process is refused
            assert codes == [2, 2, 2, 2] and registered == [first]


def _raw_edit(tmp_path: Path, name: str, edit: object, error: dict[str, object]) -> Path:
    """baseline-1 with its last measured request's raw response edited and AIPerf's
    error record set, as AIPerf writes them."""
    bad = tmp_path / name
    shutil.copytree(FIXTURES / "baseline-1", bad)
    records = (bad / "profile_export.jsonl").read_text().splitlines()
    obj = json.loads(records[-1])
    obj["error"] = error
    records[-1] = json.dumps(obj)
    (bad / "profile_export.jsonl").write_text("\n".join(records) + "\n")
    request_id = obj["metadata"]["x_request_id"]
    raw = (bad / "profile_export_raw.jsonl").read_text().splitlines()
    at = next(i for i, x in enumerate(raw) if request_id in x)
    entry = json.loads(raw[at])
    edit(entry)  # type: ignore[operator]
    raw[at] = json.dumps(entry)
    (bad / "profile_export_raw.jsonl").write_text("\n".join(raw) + "\n")
    return bad


def _sse_error(entry: dict[str, object]) -> None:
    responses = entry["responses"]
    assert isinstance(responses, list)
    del responses[3:]
    last = responses[-1]["perf_ns"]
    responses.append({"perf_ns": last + 1000, "packets": [
        {"name": "event", "value": "error"},
        {"name": "data", "value": json.dumps({"error": {"message": "engine died"}})},
    ]})  # fmt: skip


def _dropped(entry: dict[str, object]) -> None:
    responses = entry["responses"]
    assert isinstance(responses, list)
    del responses[3:]


@pytest.mark.parametrize(
    ("edit", "error", "failure", "said"),
    [
        (_sse_error, {"code": 500, "type": "SSEError", "message": "engine died"},
         "stream-error", "(AIPerf: engine died)"),
        (_dropped, {"type": "ClientPayloadError", "message": "Response payload is not completed"},
         "truncated", "the stream stopped before its end (AIPerf: Response payload"),
    ],
)  # fmt: skip
def test_imported_failures_get_evstores_classes(
    tmp_path: Path, edit: object, error: dict[str, object], failure: str, said: str
) -> None:
    """The one judge reads AIPerf's received stream back: an SSE error event is
    ``stream-error`` (was: ``http-status`` with status 200), a stream cut short is
    ``truncated`` (was: ``stream-error``); AIPerf's words are kept beside, its error
    type in ``error_type``."""
    root = _repo(tmp_path)
    bad = _raw_edit(tmp_path, failure, edit, error)
    assert main(["import", "aiperf", str(bad), "--name", "f", "--root", str(root)]) == 0
    record = load_run(root, "f")
    failed = [r for r in record.requests if r.failure is not None]
    assert len(failed) == 1 and failed[0].failure == failure
    assert said in (failed[0].message or "")
    assert failed[0].error_type == error["type"] and failed[0].e2e_s is None
    assert record.outcome == "partial"
    # The successful requests carry evstore's own TPOT and event times beside AIPerf's.
    ok = [r for r in record.requests if r.failure is None]
    assert all(r.tpot_s is not None and r.events is not None for r in ok)


def test_imported_runs_work_like_evstore_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """run determinism (was: refused, the workload parsed as TOML), run show's TTFT /
    ITL / TPOT, run diff and the HTML report's LLM metrics, for imported runs."""
    root = _repo(tmp_path)
    for name in ("baseline-1", "warmup-4"):
        assert main(["import", "aiperf", str(FIXTURES / name), "--name", name,
                     "--root", str(root)]) == 0  # fmt: skip
    capsys.readouterr()
    assert main(["run", "determinism", "baseline-1", "warmup-4", "--root", str(root)]) == 0
    out = capsys.readouterr().out
    assert "deterministic across baseline-1 (concurrency 2), warmup-4 (concurrency 4)" in out
    assert main(["run", "show", "warmup-4", "--root", str(root)]) == 0
    out = capsys.readouterr().out
    for metric in ("TTFT s (n=6)", "ITL s (n=6)", "TPOT s (n=6)"):
        assert metric in out
    assert main(["run", "diff", "baseline-1", "warmup-4", "--root", str(root)]) in (0, 1)
    assert "harness command" in capsys.readouterr().out
    page = tmp_path / "w.html"
    assert main(["report", "warmup-4", "-o", str(page), "--root", str(root)]) == 0
    text = page.read_text()
    assert "Time to first token per request" in text and "Time per output token" in text


def test_num_profile_runs_is_one_value_in_claims(tmp_path: Path) -> None:
    """A claim takes one value per run: the three passes of one execution give one
    value, over all their measured requests (never three values of n = 1 each)."""
    from evidencestore.campaign.claims import run_value
    from evidencestore.campaign.members import Member

    root = _repo(tmp_path)
    assert main(["import", "aiperf", str(FIXTURES / "multirun"), "--name", "m",
                 "--root", str(root)]) == 0  # fmt: skip
    reg = load_registration(registration_path(root, "m"))
    member = Member("m", reg.digest, reg, load_run(root, "m"))
    value = run_value(member)
    assert value.run == "m" and len(value.values) == 18  # 6 measured x 3 passes
    measured = [
        json.loads(x)["metrics"]["request_latency"]["value"] * 1e-3
        for run in ("run_0001", "run_0002", "run_0003")
        for x in (FIXTURES / "multirun" / "profile_runs" / run / "profile_export.jsonl")
        .read_text()
        .splitlines()
        if json.loads(x)["metadata"]["benchmark_phase"] != "warmup"
    ]
    assert sorted(value.values) == sorted(measured)
