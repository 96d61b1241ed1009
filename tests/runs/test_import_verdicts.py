"""Verdicts over imported harness results: nothing compared is never PASS, LoadGen's
INVALID is never complete, accuracy runs compare token for token, one execution counts
once. LoadGen logs are real, written at test time by tests/helpers/loadgen_sut.py."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import paths

from evidencestore.cli import main
from evidencestore.runs import load_run
from tests.helpers.repos import git

SUT = paths.HELPERS / "loadgen_sut.py"

# Offline: 110 samples; at 2 ms each the run lasts past its 100 ms minimum (VALID); the
# same settings answered instantly fall short of it (INVALID). The latency is the SUT's
# own, not a setting: both runs bind the same workload.
VALID = ("offline", "perf", "2000", "1000", "1", "100")
INVALID = ("offline", "perf", "0", "1000", "1", "100")
ACCURATE = ("offline", "acc", "0", "1000", "1", "100", "50", "tokens", "0")
NINETY = ("offline", "acc", "0", "1000", "1", "100", "50", "tokens", "10")


def _loadgen(out: Path, args: tuple[str, ...]) -> Path:
    pytest.importorskip("mlperf_loadgen")
    subprocess.run([sys.executable, str(SUT), args[0], args[1], str(out), *args[2:]], check=True)
    return out


def _repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / "evidence").mkdir(parents=True)
    git(root, "init", "-q")
    return root


def _settings(logs: Path) -> bytes:
    """The workload an imported LoadGen run binds: its effective settings, canonical."""
    from evidencestore._canonical import canonical
    from evidencestore.runs.importing import harness_dir
    from evidencestore.runs.loadgen import loadgen_result

    return canonical(loadgen_result(harness_dir(logs, "loadgen"))[0].settings)


def _campaign(tmp_path: Path, root: Path, settings: bytes, candidate_runs: int = 1) -> None:
    proto = tmp_path / "proto"
    proto.mkdir()
    (proto / "settings.json").write_bytes(settings)
    (proto / "protocol.toml").write_text(
        'name = "lg"\n[timing]\nmin_runs = 2\nclaim = false\n'
        '[[condition]]\nname = "offline"\nworkload = "settings.json"\nharness = "loadgen"\n'
        '[[arm]]\nname = "baseline"\nbaseline = true\nruns = 2\n'
        f'[[arm]]\nname = "candidate"\nruns = {candidate_runs}\n'
    )
    assert main(["campaign", "init", "lg", "--protocol", str(proto / "protocol.toml"),
                 "--root", str(root)]) == 0  # fmt: skip
    git(root, "add", "-A")
    git(root, "commit", "-qm", "protocol")
    time.sleep(1.1)  # LoadGen stamps its start to the second: after the protocol's commit


def _import(root: Path, logs: Path, name: str, arm: str) -> int:
    return main(["import", "loadgen", str(logs), "--name", name, "--arm", arm,
                 "--campaign", "lg", "--condition", "offline", "--root", str(root)])  # fmt: skip


def _status(root: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, object]]:
    git(root, "add", "-A")
    git(root, "commit", "-qm", "runs")
    capsys.readouterr()
    code = main(["campaign", "status", "lg", "--json", "--root", str(root)])
    return code, json.loads(capsys.readouterr().out)


def test_nothing_compared_is_unavailable_never_accepted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """LoadGen performance runs keep no outputs: repeatability and the lossless verdict
    over them compare nothing, so both are UNAVAILABLE with that reason (was: exact and
    PASS with ``comparisons: []``, the campaign ACCEPTED, exit 0). The INVALID candidate
    is its own outcome, counted as a failed run (was: ``complete``)."""
    probe = _loadgen(tmp_path / "probe", VALID)
    root = _repo(tmp_path)
    _campaign(tmp_path, root, _settings(probe), candidate_runs=2)
    for k in (1, 2):
        assert _import(root, _loadgen(tmp_path / f"b{k}", VALID), f"b{k}", "baseline") == 0
    assert _import(root, _loadgen(tmp_path / "c1", VALID), "c1", "candidate") == 0
    capsys.readouterr()
    assert _import(root, _loadgen(tmp_path / "c2", INVALID), "c2", "candidate") == 0
    assert "run c2: invalid" in capsys.readouterr().out
    assert load_run(root, "c2").outcome == "invalid"
    code, status = _status(root, capsys)
    assert code == 1 and status["verdict"] != "ACCEPTED"
    cells = {c["arm"]: c for c in status["cells"]}  # type: ignore[attr-defined]
    assert cells["baseline"]["repeatability"] == "unavailable"
    assert cells["candidate"]["lossless"] == "UNAVAILABLE"
    assert cells["candidate"]["runs_done"] == 1 and cells["candidate"]["runs_failed"] == 1
    reasons = " ".join(cells["baseline"]["reasons"])
    assert "baseline repeatability is UNAVAILABLE: nothing compared" in reasons
    assert "run c2 failed (invalid)" in " ".join(cells["candidate"]["reasons"])
    from evidencestore.campaign.protocol import load_campaign
    from evidencestore.campaign.status import evaluate

    ev = evaluate(root, load_campaign(root, "lg"))
    repeat = ev.repeatability["offline"]
    assert repeat.comparisons == () and repeat.exact is False
    assert repeat.unavailable is not None and "nothing compared" in repeat.unavailable
    adj = ev.adjudications["offline/candidate"]
    assert adj.verdict == "UNAVAILABLE" and adj.comparisons == ()
    assert adj.candidate_run_names == ("c1",)  # the INVALID run is never judged
    # run show and the HTML report say invalid, never complete.
    assert main(["run", "show", "c2", "--root", str(root)]) == 0
    assert "outcome invalid" in capsys.readouterr().out
    out = tmp_path / "c2.html"
    assert main(["report", "c2", "-o", str(out), "--root", str(root)]) == 0
    page = out.read_text()
    assert "found the run INVALID" in page and "every output is valid" not in page


def test_loadgen_accuracy_runs_compare_token_for_token(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """AccuracyOnly runs (no result_validity) import as complete runs whose outputs are
    the decoded accuracy entries (was: failed-before-inference): a 100 % accurate
    candidate is PASS, a 90 % one FAILs at the first divergent token of the samples it
    answered differently (negative control)."""
    probe = _loadgen(tmp_path / "probe", ACCURATE)
    root = _repo(tmp_path)
    _campaign(tmp_path, root, _settings(probe))
    for k in (1, 2):
        assert _import(root, _loadgen(tmp_path / f"b{k}", ACCURATE), f"b{k}", "baseline") == 0
    assert _import(root, _loadgen(tmp_path / "c", ACCURATE), "c", "candidate") == 0
    record = load_run(root, "c")
    assert record.outcome == "complete" and len(record.requests) == 16
    first = min(record.requests, key=lambda r: r.request)
    assert first.request == 0 and first.output_tokens == 3 and first.completion is not None
    from evidencestore.campaign.protocol import load_campaign
    from evidencestore.campaign.status import evaluate
    from evidencestore.campaign.tokens import load_completion
    from evidencestore.config import local_store

    done = load_completion(local_store(root), first.completion.digest)
    assert done.token_ids == (0, 1000, 7)  # the SUT's int32 ids, decoded from hex
    ev = evaluate(root, load_campaign(root, "lg"))
    assert ev.repeatability["offline"].exact is True
    assert len(ev.repeatability["offline"].comparisons) == 16
    adj = ev.adjudications["offline/candidate"]
    assert adj.verdict == "PASS" and len(adj.comparisons) == 16
    # The 90 % accurate candidate: samples 3 and 13 end with another token.
    assert _import(root, _loadgen(tmp_path / "c90", NINETY), "c90", "candidate") == 0
    ev = evaluate(root, load_campaign(root, "lg"))
    adj = ev.adjudications["offline/candidate"]
    assert adj.verdict == "FAIL"
    failed = sorted(c.key for c in adj.comparisons if c.verdict == "FAIL")
    assert failed == ["request 13 measured #0", "request 3 measured #0"]
    assert all(c.token_position == 2 for c in adj.comparisons if c.verdict == "FAIL")


def test_loadgen_logs_that_cannot_be_trusted_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A VALID appended after LoadGen's own INVALID (was: imported as "VALID … rules not
    met"), a summary that disagrees with the detail log, non-hex accuracy data and a
    token_count that does not match its data (was: accepted) refuse the import, naming
    the file, line and field; nothing is registered."""
    root = _repo(tmp_path)
    logs = _loadgen(tmp_path / "inv", INVALID)
    edited = tmp_path / "appended"
    shutil.copytree(logs, edited)
    detail = edited / "mlperf_log_detail.txt"
    lines = detail.read_text().splitlines()
    line = next(x for x in lines if '"result_validity"' in x)
    lines.append(line.replace('"INVALID"', '"VALID"'))
    detail.write_text("\n".join(lines) + "\n")
    assert main(["import", "loadgen", str(edited), "--name", "x", "--root", str(root)]) == 2
    err = capsys.readouterr().err
    assert f"{detail}: line {len(lines)}: result_validity logged again as 'VALID'" in err
    summary = tmp_path / "summary"
    shutil.copytree(logs, summary)
    text = (summary / "mlperf_log_summary.txt").read_text()
    (summary / "mlperf_log_summary.txt").write_text(text.replace("INVALID", "VALID"))
    assert main(["import", "loadgen", str(summary), "--name", "x", "--root", str(root)]) == 2
    err = capsys.readouterr().err
    assert "mlperf_log_summary.txt: result is 'VALID' but" in err and "'INVALID'" in err
    acc = _loadgen(tmp_path / "acc", ACCURATE)
    for name, edit, said in (
        ("nonhex", lambda x: x.replace('"data" : "0D', '"data" : "ZZ'), "field 'data' is 'ZZ"),
        ("count", lambda x: x.replace('"token_count" : 3 },\n{ "seq_id" : 2',
                                      '"token_count" : 4 },\n{ "seq_id" : 2'),
         "field 'token_count' is 4 but field 'data' holds 12 bytes"),
    ):  # fmt: skip
        bad = tmp_path / name
        shutil.copytree(acc, bad)
        path = bad / "mlperf_log_accuracy.json"
        path.write_text(edit(path.read_text()))
        assert main(["import", "loadgen", str(bad), "--name", "x", "--root", str(root)]) == 2
        err = capsys.readouterr().err
        assert f"{path}: line 3: {said}" in err, err
    assert not (root / "evidence" / "x").exists()


def test_one_loadgen_execution_counts_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A copy of one LoadGen result with a byte added to a side file is the same
    execution (its detail log): refused under another name (was: a second run)."""
    root = _repo(tmp_path)
    logs = _loadgen(tmp_path / "lg", VALID)
    (logs / "stderr.txt").write_text("")
    assert main(["import", "loadgen", str(logs), "--name", "one", "--root", str(root)]) == 0
    copy = tmp_path / "copy"
    shutil.copytree(logs, copy)
    (copy / "stderr.txt").write_text(" ")
    capsys.readouterr()
    assert main(["import", "loadgen", str(copy), "--name", "two", "--root", str(root)]) == 2
    err = capsys.readouterr().err
    assert "this loadgen execution was already imported as bundle 'one'" in err
    assert not (root / "evidence" / "two").exists()
    # Registered anyway (by an older evstore, or a hand-made bundle): the campaign's
    # identity rule counts it once by the same execution digest.
    from evidencestore.campaign.identity import duplicates, run_keys

    record = load_run(root, "one")
    keys = {"one": run_keys(record, "blake3:" + "1" * 64),
            "two": run_keys(record, "blake3:" + "2" * 64)}  # fmt: skip
    dup = duplicates(["one", "two"], keys)
    assert dup["two"][0] == "one" and "the same harness execution" in dup["two"][1]


def test_nothing_compared_is_unavailable_for_evstore_runs_too(tmp_path: Path) -> None:
    """The rule is the verdict code's, not the importers': native runs of a protocol
    comparing only warmup outputs, with no warmup, compare nothing: UNAVAILABLE (was:
    exact and PASS over ``comparisons: []``). Negative control: the same runs compared
    on their measured outputs are exact and PASS."""
    from evidencestore.campaign.protocol import load_campaign
    from evidencestore.campaign.status import evaluate
    from evidencestore.testing.llm_server import chat_workload, serve_llm

    for phases, want in (('["warmup"]', "UNAVAILABLE"), ('["measured"]', "PASS")):
        root = tmp_path / phases.strip('[]"') / "repo"
        (root / "evidence").mkdir(parents=True)
        src = root.parent / "proto"
        src.mkdir()
        (src / "w.toml").write_text(chat_workload(("one",), max_tokens=4))
        (src / "protocol.toml").write_text(
            f'name = "n"\n[quality]\ncompare_phases = {phases}\n'
            '[[condition]]\nname = "c"\nworkload = "w.toml"\n'
            '[[arm]]\nname = "baseline"\nbaseline = true\nruns = 2\n'
            '[[arm]]\nname = "candidate"\nruns = 1\n'
        )
        assert main(["campaign", "init", "n", "--protocol", str(src / "protocol.toml"),
                     "--root", str(root)]) == 0  # fmt: skip
        with serve_llm() as llm:
            for arm, name in (("baseline", "b1"), ("baseline", "b2"), ("candidate", "c1")):
                assert main(["-q", "run", str(root / "evidence/n/w.toml"), "--arm", arm,
                             "--server", llm.url, "--name", name, "--campaign", "n",
                             "--condition", "c", "--root", str(root)]) == 0  # fmt: skip
        ev = evaluate(root, load_campaign(root, "n"))
        assert ev.adjudications["c/candidate"].verdict == want
        assert ev.repeatability["c"].exact is (want == "PASS")
        if want == "UNAVAILABLE":
            assert "nothing compared" in (ev.repeatability["c"].unavailable or "")
