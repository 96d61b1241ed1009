"""Claims on LLM metrics over real runs against the reference server: a per-token ITL
claim between a 3-tokens-per-event baseline and a 1-token candidate with the same
per-token schedule is near 1.0 (never 3x); TTFT on runs that were not streamed, and
per-token metrics without a token count, are refused with that reason; goodput under a
workload SLO is a metric with the run as the unit."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("aiohttp")
pytest.importorskip("scipy")

from evidencestore.cli import main
from evidencestore.runs import load_run
from evidencestore.testing.llm_server import LlmServer, chat_workload


def _campaign(tmp_path: Path, metric: str, workload: str) -> Path:
    root = tmp_path / "repo"
    (root / "evidence").mkdir(parents=True)
    src = tmp_path / "proto"
    (src / "workloads").mkdir(parents=True)
    (src / "workloads/c.toml").write_text(workload)
    (src / "protocol.toml").write_text(
        f'name = "k"\n\n[timing]\nmin_runs = 2\nmetric = "{metric}"\n\n'
        '[[condition]]\nname = "c"\nworkload = "workloads/c.toml"\n\n'
        '[[arm]]\nname = "baseline"\nbaseline = true\nruns = 2\n\n[[arm]]\nname = "cand"\nruns = 2\n'
    )
    assert main(["campaign", "init", "k", "--protocol", str(src / "protocol.toml"),
                 "--root", str(root)]) == 0  # fmt: skip
    return root


def _claim(root: Path, llm: LlmServer, base: dict[str, object], cand: dict[str, object],
           capsys: pytest.CaptureFixture[str]) -> dict[str, object]:  # fmt: skip
    def run(arm: str, name: str, knobs: dict[str, object]) -> None:
        saved = {k: getattr(llm, k) for k in knobs}
        for k, v in knobs.items():
            setattr(llm, k, v)
        try:
            assert main(["-q", "run", str(root / "evidence/k/workloads/c.toml"), "--arm", arm,
                         "--server", llm.url, "--name", name, "--campaign", "k",
                         "--condition", "c", "--root", str(root)]) == 0  # fmt: skip
        finally:
            for k, v in saved.items():
                setattr(llm, k, v)

    for i in (1, 2):
        run("baseline", f"b{i}", base)
        run("cand", f"c{i}", cand)
    capsys.readouterr()
    main(["campaign", "claim", "k", "--condition", "c", "--arm", "cand", "--json",
          "--root", str(root)])  # fmt: skip
    out, err = capsys.readouterr()
    assert out, err
    return json.loads(out)  # type: ignore[no-any-return]


def _wl(**kw: object) -> str:
    return chat_workload(("a", "b"), max_tokens=30, measured=3, logprobs=False, **kw)  # type: ignore[arg-type]


def test_itl_claim_does_not_depend_on_tokens_per_event(
    tmp_path: Path, llm_server: LlmServer, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _campaign(tmp_path, "itl", _wl())
    same = {"itl": 0.005, "token_ids": "asked"}  # vLLM's framing: usage, no ids
    claim = _claim(root, llm_server, {**same, "tokens_per_event": 3},
                   {**same, "tokens_per_event": 1}, capsys)  # fmt: skip
    assert claim["refused"] is False, claim["reasons"]
    ratio = claim["speedup"]["ratio"]  # type: ignore[index]
    # Truth 1.0 per token; the 3-token arm's first event holds 3 tokens, so its span
    # is 27 of 29 token gaps (0.93). Counting events would give about 3.
    assert 0.85 < ratio < 1.1, ratio


def test_ttft_claim_refused_when_not_streamed(
    tmp_path: Path, llm_server: LlmServer, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _campaign(tmp_path, "ttft", _wl(stream=False))
    claim = _claim(root, llm_server, {"ttft": 0.02}, {"ttft": 0.01}, capsys)
    assert claim["refused"] is True
    assert any(
        "run 'b1' was not streamed ([endpoint] stream = false)" in r and "no TTFT" in r
        for r in claim["reasons"]  # type: ignore[attr-defined]
    ), claim["reasons"]


def test_per_token_claim_refused_without_token_count(
    tmp_path: Path, llm_server: LlmServer, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _campaign(tmp_path, "tpot", _wl())
    none = {"token_ids": "asked", "usage": False}
    claim = _claim(root, llm_server, none, none, capsys)
    assert claim["refused"] is True
    assert any("requests without a token count" in r for r in claim["reasons"])  # type: ignore[attr-defined]


def test_goodput_claim_with_the_run_as_unit(
    tmp_path: Path, llm_server: LlmServer, capsys: pytest.CaptureFixture[str]
) -> None:
    wl = _wl().replace("[run]", "[timing]\nslo = { ttft = 0.5, tpot = 0.5, e2e = 5.0 }\n\n[run]")
    root = _campaign(tmp_path, "goodput", wl)
    claim = _claim(root, llm_server, {"itl": 0.006}, {"itl": 0.002}, capsys)
    assert claim["refused"] is False, claim["reasons"]
    b1 = load_run(root, "b1")
    g = b1.goodput
    assert (
        g is not None and g.good == g.measured == 6 and g.missed == {"ttft": 0, "tpot": 0, "e2e": 0}
    )
    runs = {rv["run"]: rv for rv in claim["runs"]}  # type: ignore[attr-defined]
    assert runs["b1"]["value"] == pytest.approx(1 / g.rate)
    capsys.readouterr()
    main(["run", "show", "b1", "--root", str(root)])
    assert "(6 of 6 measured met the SLO over" in capsys.readouterr().out
    assert claim["speedup"]["ratio"] > 1.5  # type: ignore[index]


def test_goodput_counts_requests_beyond_an_objective(
    tmp_path: Path, llm_server: LlmServer, capsys: pytest.CaptureFixture[str]
) -> None:
    wl = _wl().replace("[run]", "[timing]\nslo = { ttft = 0.05 }\n\n[run]")
    root = _campaign(tmp_path, "goodput", wl)
    claim = _claim(root, llm_server, {"ttft": 0.2}, {"ttft": 0.0}, capsys)
    g = load_run(root, "b1").goodput
    assert g is not None and (g.good, g.measured, g.missed) == (0, 6, {"ttft": 6})
    assert claim["refused"] is True
    assert any("none of its 6 measured requests met the SLO" in r for r in claim["reasons"])  # type: ignore[attr-defined]
    c = load_run(root, "c1").goodput
    assert c is not None and c.good == 6
