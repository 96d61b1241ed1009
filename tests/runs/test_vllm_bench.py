"""`evstore import vllm-bench`: real `vllm bench serve --save-result --save-detailed`
result files (tests/data/vllm_bench/, made against vLLM's CPU build serving a tiny
random Llama; COMMAND.txt there has every command)."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest
from helpers import paths

from evidencestore.cli import main
from evidencestore.digest import hash_file
from evidencestore.inventory import load_registration, registration_path
from evidencestore.runs import load_run

DATA = paths.DATA / "vllm_bench"
BASE = sorted(DATA.glob("base-*.json"))
PLAIN = next(DATA.glob("plain-*.json"))
SHADOW = next(DATA.glob("shadow-*.json"))
APPEND = DATA / "sweep-append.json"


def _repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / "evidence").mkdir(parents=True)
    return root


def _import(root: Path, path: Path, name: str, *extra: str) -> int:
    return main(["import", "vllm-bench", str(path), "--name", name, "--root", str(root), *extra])


def test_vllm_bench_values_are_vllms(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The default file name is vLLM's ({label}-{rate}qps-concurrency{N}-{model}-{date});
    every request's latency, TTFT, ITL, TPOT, tokens and text are vLLM's own values."""
    assert BASE[0].name.startswith("base-infqps-concurrency2-tiny-llama-2026")
    root = _repo(tmp_path)
    assert _import(root, BASE[0], "b1") == 0
    record = load_run(root, "b1")
    result = json.loads(BASE[0].read_text())
    assert record.outcome == "complete" and len(record.requests) == result["num_prompts"] == 6
    assert record.harness is not None and record.harness.name == "vllm-bench"
    assert record.harness.concurrency == 2
    for r in sorted(record.requests, key=lambda r: r.request):
        i = r.request
        assert r.e2e_s == result["latencies"][i] and r.ttft_s == result["ttfts"][i]
        assert r.itl_s == pytest.approx(math.fsum(result["itls"][i]) / len(result["itls"][i]))
        n = result["output_lens"][i]
        assert r.output_tokens == n
        assert r.tpot_s == pytest.approx((result["latencies"][i] - result["ttfts"][i]) / (n - 1))
        assert r.sent_ns == round(result["start_times"][i] * 1e9)
    reg = load_registration(registration_path(root, "b1"))
    entries = {e.path: e.descriptor.digest for e in reg.manifest.entries}
    assert entries[f"harness/{BASE[0].name}"] == hash_file(BASE[0]).digest
    capsys.readouterr()
    assert main(["run", "show", "b1", "--root", str(root)]) == 0
    out = capsys.readouterr().out
    assert "ttft" in out.lower() and "tpot" in out.lower()


def test_vllm_bench_refusals(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A result without --save-detailed, a --metadata key shadowing vLLM's, and an
    impossible latency are refused naming the file and field; nothing registered."""
    root = _repo(tmp_path)
    assert _import(root, PLAIN, "p") == 2
    err = capsys.readouterr().err
    assert f"{PLAIN}: line 1: no per-request 'ttfts'" in err and "--save-detailed" in err
    assert _import(root, SHADOW, "s") == 2
    err = capsys.readouterr().err
    assert "field 'num_prompts' is '99'" in err and "--metadata num_prompts" in err
    bad = tmp_path / BASE[0].name
    obj = json.loads(BASE[0].read_text())
    obj["latencies"][3] = -0.5
    bad.write_text(json.dumps(obj))
    assert _import(root, bad, "x") == 2
    assert f"{bad}: line 1: request 3: field latencies[3] is -0.5" in capsys.readouterr().err
    obj["latencies"][3] = 9.0
    bad.write_text(json.dumps(obj))
    assert _import(root, bad, "x") == 2
    assert "field latencies[3] is 9.0 but ttfts[3] + sum(itls[3])" in capsys.readouterr().err
    assert sorted(p.name for p in (root / "evidence").iterdir()) == []


def test_vllm_bench_append_result_splits(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--append-result wrote two objects into one file: two runs, each once."""
    assert APPEND.read_text().count("\n") >= 1
    root = _repo(tmp_path)
    assert _import(root, APPEND, "sweep") == 0
    assert {load_run(root, n).harness.sources["requests"] for n in ("sweep-1", "sweep-2")} == {  # type: ignore[union-attr]
        "sweep-append.json#line 1",
        "sweep-append.json#line 2",
    }
    capsys.readouterr()
    assert _import(root, APPEND, "sweep") == 0
    assert "already registered from the same files" in capsys.readouterr().out
    assert _import(root, APPEND, "again") == 2
    assert "already imported as bundle 'sweep-1'" in capsys.readouterr().err


def test_vllm_bench_campaign_is_text_exact(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two baseline result files and a candidate from the same seed and greedy
    sampling: repeatable and PASS; the candidate with one text changed FAILs at that
    request (negative control)."""
    from evidencestore.campaign.protocol import load_campaign
    from evidencestore.campaign.status import evaluate
    from evidencestore.config import local_store

    scratch = _repo(tmp_path / "scratch")
    assert _import(scratch, BASE[0], "probe") == 0
    wl = load_run(scratch, "probe").workload
    root = _repo(tmp_path)
    proto = tmp_path / "proto"
    proto.mkdir()
    (proto / "settings.json").write_bytes(local_store(scratch).get(wl.digest, wl.size))
    (proto / "protocol.toml").write_text(
        'name = "vb"\n[timing]\nmin_runs = 2\nclaim = false\n'
        '[[condition]]\nname = "c2"\nworkload = "settings.json"\nharness = "vllm-bench"\n'
        '[[arm]]\nname = "baseline"\nbaseline = true\nruns = 2\n'
        '[[arm]]\nname = "candidate"\nruns = 1\n'
    )
    assert main(["campaign", "init", "vb", "--protocol", str(proto / "protocol.toml"),
                 "--root", str(root)]) == 0  # fmt: skip
    for k, path in enumerate(BASE, 1):
        assert _import(root, path, f"b{k}", "--arm", "baseline", "--campaign", "vb",
                       "--condition", "c2") == 0  # fmt: skip
    cand = tmp_path / "cand.json"
    shutil.copy(APPEND, cand)
    assert _import(root, cand, "c", "--arm", "candidate", "--campaign", "vb",
                   "--condition", "c2") == 0  # fmt: skip
    ev = evaluate(root, load_campaign(root, "vb"))
    assert ev.repeatability["c2"].exact is True
    adj = ev.adjudications["c2/candidate"]
    assert adj.verdict == "PASS" and len(adj.comparisons) == 12
    lines = cand.read_text().splitlines()
    obj = json.loads(lines[0])
    obj["generated_texts"][4] = obj["generated_texts"][4][:-2] + "zz"
    (tmp_path / "bad.json").write_text(json.dumps(obj) + "\n")
    assert _import(root, tmp_path / "bad.json", "bad", "--arm", "candidate", "--campaign",
                   "vb", "--condition", "c2") == 0  # fmt: skip
    adj = evaluate(root, load_campaign(root, "vb")).adjudications["c2/candidate"]
    assert adj.verdict == "FAIL"
    assert [c.key for c in adj.comparisons if c.verdict == "FAIL"] == ["request 4 measured #0"]
