"""Claims from runs a harness recorded through the library, with exact, chosen times.

No server and no clock: every time is given, so run values, intervals, verdicts within the
measurement resolution and refusals are checked against independent computations.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import pytest

pytest.importorskip("scipy")

from scipy import stats

from evidencestore.campaign.claims import make_claim
from evidencestore.campaign.members import campaign_runs
from evidencestore.campaign.models import Claim
from evidencestore.campaign.protocol import Campaign, init_campaign, load_campaign
from evidencestore.config import local_store
from evidencestore.runs import open_run
from evidencestore.runs.transport import Observation
from evidencestore.testing.video_server import sample_workload


def _campaign(tmp: Path, timing: str = "", requests: int = 1) -> Campaign:
    src = tmp / "src"
    src.mkdir()
    wl = sample_workload(seconds=tuple(range(1, requests + 1)), warmup=0, measured=1)
    (src / "workload.toml").write_text(wl)
    (src / "protocol.toml").write_text(
        f'name = "p"\n[timing]\n{timing}\n[[condition]]\nname = "c"\nworkload = "workload.toml"\n'
        '[[arm]]\nname = "base"\nbaseline = true\nruns = 2\n[[arm]]\nname = "fast"\nruns = 2\n'
    )
    root = tmp / "repo"
    (root / "evidence").mkdir(parents=True)
    init_campaign(root, "p", src / "protocol.toml")
    return load_campaign(root, "p")


def _run(
    root: Path,
    campaign: Campaign,
    name: str,
    arm: str,
    times: Sequence[Sequence[float]],
    resolution: float | None = 1e-9,
    polls: int = 0,
) -> None:
    """A complete run: ``times[request]`` are that request's measured e2e times (s)."""
    workload = (root / "evidence/p/workload.toml").read_bytes()
    run = open_run(root, name, arm=arm, workload=workload, campaign="p",
                   protocol_digest=campaign.digest, condition="c")  # fmt: skip
    t = 0
    for request, values in enumerate(times):
        for rep, value in enumerate(values):
            end = t + round(value * 1e9)
            seen = Observation(
                sent_ns=t, first_byte_ns=end, last_byte_ns=end, end_ns=end, status=200,
                polls=polls, resolution_s=resolution,
            )  # fmt: skip
            run.record_request(
                seen, phase="measured", payload=b"p%d" % request, body=b"out",
                request=request, repetition=rep,
            )  # fmt: skip
            t = end + 1
    run.seal()


def _claim(root: Path, campaign: Campaign) -> Claim:
    return make_claim(local_store(root), campaign, campaign_runs(root, campaign), "c", "fast")


def test_one_value_per_run_per_distinct_request_and_welch_over_runs(tmp_path: Path) -> None:
    c = _campaign(tmp_path, requests=2)
    root = tmp_path / "repo"
    base = {"b1": [[1.0, 4.0], [8.0, 8.0]], "b2": [[2.2, 2.2], [9.0, 8.0]], "b3": [[2.0, 2.1], [7.0, 8.0]]}  # fmt: skip
    fast = {"f1": [[1.0, 1.0], [4.0, 4.1]], "f2": [[1.2, 1.0], [4.0, 4.4]], "f3": [[0.9, 1.1], [4.2, 4.0]]}  # fmt: skip
    for (bn, bt), (fn, ft) in zip(base.items(), fast.items(), strict=True):
        _run(root, c, bn, "base", bt)
        _run(root, c, fn, "fast", ft)
    claim = _claim(root, c)

    def value(times: list[list[float]]) -> float:  # mean over requests of mean log time
        return math.exp(sum(sum(map(math.log, r)) / len(r) for r in times) / len(times))

    values = {rv.run: rv.value for rv in claim.runs}
    assert values["b1"] == pytest.approx(4.0)  # sqrt(gm(1, 4) * gm(8, 8)) = sqrt(2 * 8)
    for name, times in (*base.items(), *fast.items()):
        assert values[name] == pytest.approx(value(times), rel=1e-9)
    # An independent Welch interval (SciPy's two-sample t test) on the runs' log values.
    x = [math.log(value(t)) for t in base.values()]
    y = [math.log(value(t)) for t in fast.values()]
    ci = stats.ttest_ind(x, y, equal_var=False).confidence_interval(0.95)
    assert claim.speedup is not None
    assert claim.speedup.low == pytest.approx(math.exp(ci.low), rel=1e-9)
    assert claim.speedup.high == pytest.approx(math.exp(ci.high), rel=1e-9)
    assert claim.df is not None and claim.df < 4.0 + 1e-9  # from 3 + 3 runs, not 12 + 12 requests
    assert (claim.runs_baseline, claim.runs_candidate, claim.n_baseline) == (3, 3, 12)
    assert claim.order == "alternating" and claim.verdict == "STANDS"
    assert claim.run_spread_baseline == pytest.approx(stats.tstd(x))


def test_resolution_that_could_change_the_verdict_is_said(tmp_path: Path) -> None:
    c = _campaign(tmp_path)
    root = tmp_path / "repo"
    for i, (b, f) in enumerate(((1.00, 0.90), (1.01, 0.91), (0.99, 0.89)), start=1):
        _run(root, c, f"b{i}", "base", [[b, b]], resolution=0.2, polls=3)
        _run(root, c, f"f{i}", "fast", [[f, f]], resolution=0.2, polls=3)
    claim = _claim(root, c)
    assert claim.speedup is not None and claim.speedup.low > 1.0  # nominally faster
    assert claim.verdict == "UNRESOLVED" and claim.stands is False
    assert claim.bounded is not None and claim.bounded.low < 1.0 < claim.bounded.high
    assert claim.resolution_s == 0.2
    assert "could change within the measurement resolution" in claim.notes[0]


def test_fine_resolution_stands_and_unrecorded_resolution_does_not(tmp_path: Path) -> None:
    c = _campaign(tmp_path)
    root = tmp_path / "repo"
    for i, (b, f) in enumerate(((1.00, 0.90), (1.01, 0.91), (0.99, 0.89)), start=1):
        _run(root, c, f"b{i}", "base", [[b, b]], resolution=0.002, polls=3)
        _run(root, c, f"f{i}", "fast", [[f, f]], resolution=None if i == 3 else 0.002, polls=3)
    claim = _claim(root, c)
    assert claim.verdict == "UNRESOLVED"
    assert "2 job-flow request(s) carry no recorded resolution" in claim.notes[0]


def test_min_runs_counts_runs_not_requests(tmp_path: Path) -> None:
    c = _campaign(tmp_path)
    root = tmp_path / "repo"
    for i in (1, 2):
        _run(root, c, f"b{i}", "base", [[1.0] * 20])
        _run(root, c, f"f{i}", "fast", [[0.5] * 20])
    claim = _claim(root, c)
    assert claim.verdict == "REFUSED" and claim.speedup is None
    assert (claim.n_baseline, claim.runs_baseline) == (40, 2)
    assert claim.reasons[0].startswith(
        "c: arm 'base' has 2 complete runs with measured times, below the protocol's min_runs = 3"
    )


def test_protocol_rules_for_the_timing_claim(tmp_path: Path) -> None:
    from evidencestore.campaign.protocol import parse_protocol
    from evidencestore.errors import ConfigError

    text = (
        'name = "p"\n[timing]\n{}\n[[condition]]\nname = "c"\nworkload = "w.toml"\n'
        '[[arm]]\nname = "b"\nbaseline = true\nruns = 2\n[[arm]]\nname = "x"\n'
    )
    default = parse_protocol(text.format("").encode(), "p.toml").timing
    assert (default.min_speedup, default.claim, default.order) == (1.0, True, "any")
    with pytest.raises(ConfigError, match="needs timing.order = 'interleaved'"):
        parse_protocol(text.format('estimator = "paired-log-t"').encode(), "p.toml")
    with pytest.raises(ConfigError, match="min_speedup"):
        parse_protocol(text.format("min_speedup = 0").encode(), "p.toml")


def test_plan_from_baseline_runs_and_a_drifting_baseline_fails_aa(tmp_path: Path) -> None:
    from evidencestore.campaign.plan import plan_campaign

    c = _campaign(tmp_path)
    root = tmp_path / "repo"
    for i, value in enumerate((1.00, 1.02, 0.99, 1.01), start=1):
        _run(root, c, f"b{i}", "base", [[value, value]])
    (plan,) = plan_campaign(c, campaign_runs(root, c), ratios=(1.05, 1.5))
    sd = stats.tstd([math.log(v) for v in (1.00, 1.02, 0.99, 1.01)])
    assert plan.run_spread == pytest.approx(sd) and plan.within_spread == 0.0
    assert plan.aa_includes_one is True and plan.aa_halves == (("b1", "b2"), ("b3", "b4"))
    rows = {r.ratio: r for r in plan.rows}
    assert rows[1.5].runs_needed == 3  # 2 would do (1.3 % spread), but min_runs = 3
    assert plan.min_runs == 3 and plan.planned_spread is not None and plan.planned_spread > sd
    assert rows[1.05].runs_needed is not None and rows[1.05].runs_needed > 3
    assert rows[1.05].power_at_required is not None and rows[1.05].power_at_required < 1.0
    for i, value in enumerate((1.30, 1.31, 1.29, 1.32), start=5):  # the server got slower
        _run(root, c, f"b{i}", "base", [[value, value]])
    (plan,) = plan_campaign(c, campaign_runs(root, c))
    assert plan.aa_includes_one is False and plan.aa is not None and plan.aa.high < 1.0
    assert plan.aa_halves == (("b1", "b2", "b3", "b4"), ("b5", "b6", "b7", "b8"))
    assert any(n.startswith("A/A check failed: the earlier baseline runs") for n in plan.notes)
