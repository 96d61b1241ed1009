"""Verdict rules over real runs, for LLM and video outputs alike: under
``non_repeatable_baseline = "inconclusive"`` a candidate difference at a request where
the baseline disagrees with itself is INCONCLUSIVE, one where the baseline is repeatable
still FAILs; a verdict's first reason is one that produces it; and every run's audit
findings are shown by ``campaign status``."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("aiohttp")

from evidencestore.campaign.protocol import load_campaign
from evidencestore.campaign.status import evaluate
from evidencestore.cli import main
from evidencestore.testing.llm_server import LlmServer, chat_workload


def _protocol(name: str, arms: tuple[str, ...], rule: str = "inconclusive") -> str:
    lines = [f'name = "{name}"', "", "[timing]", "min_runs = 2", "claim = false", "",
             "[quality]", f'non_repeatable_baseline = "{rule}"', "", "[[condition]]",
             'name = "c"', 'workload = "workloads/c.toml"', "", "[[arm]]",
             'name = "baseline"', "baseline = true", "runs = 2"]  # fmt: skip
    for arm in arms:
        lines += ["", "[[arm]]", f'name = "{arm}"', "runs = 1"]
    return "\n".join(lines) + "\n"


def _init(tmp_path: Path, name: str, workload: str, arms: tuple[str, ...]) -> Path:
    root = tmp_path / "repo"
    (root / "evidence").mkdir(parents=True)
    src = tmp_path / "proto"
    (src / "workloads").mkdir(parents=True)
    (src / "workloads/c.toml").write_text(workload)
    (src / "protocol.toml").write_text(_protocol(name, arms))
    assert main(["campaign", "init", name, "--protocol", str(src / "protocol.toml"),
                 "--root", str(root)]) == 0  # fmt: skip
    return root


def _runner(root: Path, campaign: str, url: str, server: Any) -> Callable[..., int]:
    def run(arm: str, name: str, **knobs: object) -> int:
        saved = {k: getattr(server, k) for k in knobs if k != "render"}
        for k, v in knobs.items():
            setattr(server, k, v)
        try:
            return main(["-q", "run", str(root / f"evidence/{campaign}/workloads/c.toml"),
                         "--arm", arm, "--server", url, "--name", name, "--campaign",
                         campaign, "--condition", "c", "--root", str(root)])  # fmt: skip
        finally:
            for k, v in saved.items():
                setattr(server, k, v)
            server.__dict__.pop("render", None)

    return run


def test_llm_difference_where_baseline_disagrees_is_inconclusive(
    tmp_path: Path, llm_server: LlmServer, capsys: pytest.CaptureFixture[str]
) -> None:
    wl = chat_workload(("one", "two"), max_tokens=12)
    root = _init(tmp_path, "nr", wl, ("at-unstable", "at-stable"))
    run = _runner(root, "nr", llm_server.url, llm_server)
    assert run("baseline", "b1") == 0
    # The baseline disagrees with itself on prompt "one" (request 0) only.
    assert run("baseline", "b2", diverge_at=3, diverge_on={"one"}) == 0
    assert run("at-unstable", "u1", diverge_at=5, diverge_on={"one"}) == 0
    # Differs where the baseline is repeatable (request 1), and its logprobs differ
    # everywhere: request 0 is INCONCLUSIVE, request 1 FAIL.
    assert run("at-stable", "s1", diverge_at=5, diverge_on={"two"}, logprob_shift=0.5) == 0
    ev = evaluate(root, load_campaign(root, "nr"))
    assert ev.repeatability["c"].exact is False
    unstable = ev.adjudications["c/at-unstable"]
    assert [c.verdict for c in unstable.comparisons] == ["FAIL", "PASS"]  # the pair's facts
    assert unstable.verdict == "INCONCLUSIVE"
    assert unstable.reasons[0].startswith(
        "request 0 measured #0: the baseline disagrees with itself here"
    )
    stable = ev.adjudications["c/at-stable"]
    assert stable.verdict == "FAIL"
    # Headline: the failing pair, not request 0's INCONCLUSIVE (logprobs) nor the rule.
    assert stable.reasons[0].startswith(
        "request 1 measured #0: first divergent token at position 5 (content token 5)"
    )
    assert any("logprobs differ" in r for r in stable.reasons[1:])
    capsys.readouterr()
    main(["campaign", "status", "nr", "--root", str(root)])
    out = capsys.readouterr().out
    assert "candidate at-stable is FAIL: request 1 measured #0: first divergent token" in out


def test_llm_audit_findings_in_campaign_status(
    tmp_path: Path, llm_server: LlmServer, capsys: pytest.CaptureFixture[str]
) -> None:
    text = chat_workload(("alpha",), max_tokens=8, logprobs=False)
    head, _, req = text.partition("[[request]]")
    wl = head + "".join("[[request]]" + req.replace("seed = 7", f"seed = {s}") for s in (1, 2))
    root = _init(tmp_path, "au", wl, ("cand",))
    run = _runner(root, "au", llm_server.url, llm_server)
    for arm, name in (("baseline", "b1"), ("baseline", "b2"), ("cand", "c1")):
        assert run(arm, name, ignore_seed=True) == 0
    capsys.readouterr()
    main(["campaign", "status", "au", "--json", "--root", str(root)])
    status = json.loads(capsys.readouterr().out)
    found = [n for n in status["notes"] if n.startswith("audit seed-ignored:")]
    assert [n.split(":")[1].strip() for n in found] == ["run 'b1' (c/baseline)",
                                                        "run 'b2' (c/baseline)",
                                                        "run 'c1' (c/cand)"]  # fmt: skip
    assert "the server ignored the seed" in found[0]
    main(["campaign", "status", "au", "--root", str(root)])
    assert "note: audit seed-ignored: run 'c1' (c/cand): 1 finding(s)" in capsys.readouterr().out
    html = tmp_path / "s.html"
    main(["campaign", "status", "au", "--html", str(html), "--root", str(root)])
    assert "audit seed-ignored: run &#39;c1&#39;" in html.read_text()


def test_llm_honest_server_has_no_audit_note(
    tmp_path: Path, llm_server: LlmServer, capsys: pytest.CaptureFixture[str]
) -> None:
    text = chat_workload(("alpha",), max_tokens=8, logprobs=False)
    head, _, req = text.partition("[[request]]")
    wl = head + "".join("[[request]]" + req.replace("seed = 7", f"seed = {s}") for s in (1, 2))
    root = _init(tmp_path, "ok", wl, ("cand",))
    run = _runner(root, "ok", llm_server.url, llm_server)
    for arm, name in (("baseline", "b1"), ("baseline", "b2"), ("cand", "c1")):
        assert run(arm, name) == 0
    ev = evaluate(root, load_campaign(root, "ok"))
    assert not [n for n in ev.status.notes if n.startswith("audit ")]  # negative control
    assert ev.adjudications["c/cand"].verdict == "PASS"


# -- video ----------------------------------------------------------------------------
def _video_wl() -> str:
    from evidencestore.testing.video_server import sample_workload

    return sample_workload(seconds=(1, 2), size="64x48", fps=8, warmup=0, measured=1)


def _reseed_request(
    server: Any, seconds: str, offset: int
) -> Callable[[dict[str, str], int], bytes]:
    """The server's content, reseeded for the request of ``seconds`` only."""
    render = server.render

    def out(fields: dict[str, str], number: int) -> bytes:
        if fields.get("seconds") == seconds:
            fields = {**fields, "seed": str(int(fields["seed"]) + offset)}
        return render(fields, number)  # type: ignore[no-any-return]

    return out


def test_video_difference_where_baseline_disagrees_is_inconclusive(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("av")
    from evidencestore.testing.video_server import serve_video

    with serve_video() as server:
        root = _init(tmp_path, "nv", _video_wl(), ("at-unstable", "at-stable"))
        run = _runner(root, "nv", server.url, server)
        assert run("baseline", "b1") == 0
        assert run("baseline", "b2", render=_reseed_request(server, "1", 1)) == 0
        assert run("at-unstable", "u1", render=_reseed_request(server, "1", 2)) == 0
        assert run("at-stable", "s1", render=_reseed_request(server, "2", 2)) == 0
        ev = evaluate(root, load_campaign(root, "nv"))
        assert ev.repeatability["c"].exact is False
        assert [c.verdict for c in ev.repeatability["c"].comparisons] == ["FAIL", "PASS"]
        unstable = ev.adjudications["c/at-unstable"]
        assert unstable.verdict == "INCONCLUSIVE", unstable.reasons
        assert "the baseline disagrees with itself here" in unstable.reasons[0]
        stable = ev.adjudications["c/at-stable"]
        assert stable.verdict == "FAIL"
        assert stable.reasons[0].startswith("request 1 measured #0")


def test_video_audit_findings_in_campaign_status(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("av")
    from evidencestore.testing.video_server import sample_workload, serve_video

    wl = sample_workload(seconds=(1, 1), size="64x48", fps=8, warmup=0, measured=1)
    wl = wl[::-1].replace("seed = 42"[::-1], "seed = 43"[::-1], 1)[::-1]  # the last request
    with serve_video() as server:
        root = _init(tmp_path, "va", wl, ("cand",))
        run = _runner(root, "va", server.url, server)
        assert run("baseline", "b1") == 0  # honest: the negative control
        assert run("baseline", "b2", ignore_seed=True) == 0
        assert run("cand", "c1", ignore_seed=True) == 0
        ev = evaluate(root, load_campaign(root, "va"))
    notes = [n for n in ev.status.notes if n.startswith("audit ")]
    assert [n.split(":")[1].strip() for n in notes] == ["run 'b2' (c/baseline)",
                                                        "run 'c1' (c/cand)"]  # fmt: skip
    assert all("the server ignored the seed" in n for n in notes)
