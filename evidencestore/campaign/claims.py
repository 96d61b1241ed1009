"""Speedup claims: baseline / candidate end-to-end latency, with an interval over runs.

The run is the unit of replication. Each complete run of this protocol, condition,
workload and arm configuration (``members.py``) contributes one value: the geometric mean,
over the workload's distinct requests, of each request's geometric mean of measured
``e2e_s``. The interval is the Welch interval on the log run values (``estimator.py``),
its degrees of freedom from runs; with ``timing.order = "interleaved"`` the runs must
alternate by their recorded start and are paired in that order (``paired-log-t``).

A claim is refused, with every reason, when an arm has fewer complete runs than the
protocol requires or than ``timing.min_runs`` (its failed runs are named: they stay in the
record and never contribute a number), when a run was excluded because its workload
differs from the condition's, or when interleaving is required and the runs do not
alternate. Otherwise it *stands* only when the interval's low end exceeds
``timing.min_speedup`` (1.0 unless the protocol says otherwise) and still does with every
request's time anywhere within its measurement bound (``resolution_s``: the job flow's
polling); if the bound could change the verdict the claim says so and does not stand. A
protocol with ``timing.claim = false`` makes no timing claim: the interval is shown, and
the verdict says it is not a claim. When every run of one arm started before every run of
the other, the claim says that drift cannot be told apart from the effect.

The claim cites every run digest, each run's values and one value, the run-to-run and
within-run spreads, and the configuration difference between the arms
(``evidencestore.runs.diff_configs`` of their first runs).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any, Literal

from ..errors import ConfigError, EvidenceStoreError
from ..runs.diff import diff_configs
from ..storage import BlobStore
from .estimator import WelchInterval, paired_log_interval, welch_log_interval
from .members import Member, Members
from .models import Claim, ClaimVerdict, RunValue, Speedup, TimingRule
from .protocol import Campaign

__all__ = ["make_claim", "run_value"]

Order = Literal["alternating", "baseline-first", "candidate-first", "mixed"]


def _cv(values: Sequence[float]) -> float | None:
    if len(values) < 2:
        return None
    mean = math.fsum(values) / len(values)
    var = math.fsum((v - mean) ** 2 for v in values) / (len(values) - 1)
    return math.sqrt(var) / mean


def _sd(values: Sequence[float]) -> float | None:
    if len(values) < 2:
        return None
    mean = math.fsum(values) / len(values)
    return math.sqrt(math.fsum((v - mean) ** 2 for v in values) / (len(values) - 1))


@dataclass(frozen=True)
class _Timed:
    """One measured request: which request of the workload, its time and its bound."""

    request: int
    e2e: float
    resolution: float


def _timed(member: Member) -> list[_Timed]:
    return [
        _Timed(r.request, r.e2e_s, r.resolution_s or 0.0)
        for r in member.record.requests
        if r.phase == "measured" and r.failure is None and r.e2e_s is not None and r.e2e_s > 0
    ]


def _by_request(timed: Sequence[_Timed], shift: bool = False) -> dict[int, list[float]]:
    """Log times per distinct request; ``shift``: each time at the low end of its bound."""
    out: dict[int, list[float]] = {}
    for t in timed:
        value = max(t.e2e - t.resolution, t.e2e * 1e-6) if shift else t.e2e
        out.setdefault(t.request, []).append(math.log(value))
    return out


def _geo(logs: dict[int, list[float]]) -> float:
    """The geometric mean over requests of each request's geometric mean."""
    means = [math.fsum(v) / len(v) for _, v in sorted(logs.items())]
    return math.exp(math.fsum(means) / len(means))


def run_value(member: Member) -> RunValue:
    """A run's measured, successful end-to-end latencies and its one value (module doc)."""
    timed = _timed(member)
    values = tuple(t.e2e for t in timed)
    logs = _by_request(timed)
    return RunValue(
        run=member.name,
        digest=member.digest,
        arm=member.record.arm,
        values=values,
        mean=math.fsum(values) / len(values) if values else 0.0,
        cv=_cv(values),
        value=_geo(logs) if logs else 0.0,
        request_values=tuple(math.exp(math.fsum(v) / len(v)) for _, v in sorted(logs.items())),
        started=member.record.started,
        resolution_s=max((t.resolution for t in timed), default=None),
        audit_findings=tuple(
            f"{a.name}: {f.message}" for a in member.record.audits for f in a.findings
        ),
    )


def _within_spread(members: Sequence[Member]) -> float | None:
    """The pooled log-scale standard deviation of requests around their run's mean."""
    ss, dof = 0.0, 0
    for m in members:
        for logs in _by_request(_timed(m)).values():
            if len(logs) > 1:
                mean = math.fsum(logs) / len(logs)
                ss += math.fsum((v - mean) ** 2 for v in logs)
                dof += len(logs) - 1
    return math.sqrt(ss / dof) if dof else None


def _required(campaign: Campaign, condition: str, arm: str, runs: Sequence[Member]) -> list[str]:
    need = campaign.arm(arm).runs
    done = [m for m in runs if m.complete]
    reasons: list[str] = []
    for m in runs:
        if not m.complete:
            reasons.append(
                f"{condition}: arm {arm!r} run {m.name!r} {m.record.outcome}"
                + (f" ({m.record.reason})" if m.record.reason else "")
                + (
                    f"; the server said: {m.record.server.message}"
                    if m.record.server.message
                    else ""
                )
                + ": it contributes no number"
            )
    if len(done) < need:
        reasons.insert(
            0, f"{condition}: arm {arm!r} has {len(done)} of {need} required complete runs"
        )
        return reasons
    return []


def _order(base: Sequence[Member], cand: Sequence[Member]) -> tuple[Order, list[Member]]:
    """The runs of both arms by their recorded start, and how the arms interleave."""
    seq = sorted((*base, *cand), key=lambda m: (m.record.started, m.name))
    arms = [m.record.arm for m in seq]
    b_arm = base[0].record.arm
    if all(a != b for a, b in pairwise(arms)):
        return "alternating", seq
    switches = sum(1 for a, b in pairwise(arms) if a != b)
    if switches == 1:
        return ("baseline-first" if arms[0] == b_arm else "candidate-first"), seq
    return "mixed", seq


def _pairs(
    seq: Sequence[Member], order: Order, condition: str, b_arm: str
) -> tuple[list[tuple[Member, Member]], list[str]]:
    """Consecutive (baseline, candidate) pairs of alternating runs, or why there are none."""
    if order != "alternating":
        names = ", ".join(f"{m.name} ({m.record.arm})" for m in seq)
        return [], [
            f"{condition}: the protocol requires interleaved runs (timing.order = "
            f"'interleaved'), but by their start they ran {order}: {names}"
        ]
    pairs = []
    for a, b in zip(seq[0::2], seq[1::2], strict=False):
        pairs.append((a, b) if a.record.arm == b_arm else (b, a))
    return pairs, []


def _interval(
    timing: TimingRule,
    b: Sequence[float],
    c: Sequence[float],
    pairs: Sequence[tuple[float, float]] | None,
) -> WelchInterval:
    if pairs is not None:
        return paired_log_interval(pairs, timing.confidence)
    return welch_log_interval(b, c, timing.confidence)


def make_claim(
    store: BlobStore, campaign: Campaign, members: Members, condition: str, arm: str
) -> Claim:
    """The speedup claim of ``arm`` over the baseline at ``condition`` (see module doc)."""
    campaign.workload_digest(condition)  # a ConfigError naming the conditions if unknown
    spec = campaign.arm(arm)
    base = campaign.baseline
    if spec.baseline:
        raise ConfigError(f"campaign {campaign.name!r}: arm {arm!r} is the baseline itself")
    timing = campaign.protocol.timing
    paired = timing.order == "interleaved"
    estimator = "paired-log-t" if paired else timing.estimator
    b_runs, c_runs = members.of(condition, base.name), members.of(condition, arm)
    reasons = _required(campaign, condition, base.name, b_runs)
    reasons += _required(campaign, condition, arm, c_runs)
    excluded = tuple(
        e
        for e in members.excluded
        if e.condition == condition
        and e.arm in (base.name, arm)
        and e.code in ("workload-mismatch", "config-mismatch")
    )
    reasons += [f"excluded: {e.message}" for e in excluded if e.code == "workload-mismatch"]
    b_done = [m for m in b_runs if m.complete and _timed(m)]
    c_done = [m for m in c_runs if m.complete and _timed(m)]
    for who, done in ((base.name, b_done), (arm, c_done)):
        if len(done) < timing.min_runs:
            reasons.append(
                f"{condition}: arm {who!r} has {len(done)} complete runs with measured "
                f"times, below the protocol's min_runs = {timing.min_runs} (the run is the "
                "unit: more requests per run do not count as more runs)"
            )
    notes: list[str] = []
    order: Order | None = None
    pairs: list[tuple[Member, Member]] = []
    if b_done and c_done:
        order, seq = _order(b_done, c_done)
        if order in ("baseline-first", "candidate-first"):
            first, then = (base.name, arm) if order == "baseline-first" else (arm, base.name)
            notes.append(
                f"every {first} run started before every {then} run: drift over time "
                "(thermal, clocks, neighbours, caches) cannot be told apart from the effect; "
                "interleave the runs (timing.order = 'interleaved' requires it)"
            )
        if paired:
            pairs, why = _pairs(seq, order, condition, base.name)
            reasons += why
            used = {m.name for p in pairs for m in p}
            unpaired = [m.name for m in seq if m.name not in used]
            if pairs and unpaired:
                notes.append(f"runs without a partner, not used: {', '.join(unpaired)}")
            if not why and len(pairs) < timing.min_runs:
                reasons.append(
                    f"{condition}: {len(pairs)} interleaved pairs, below the protocol's "
                    f"min_runs = {timing.min_runs}"
                )
    values = [run_value(m) for m in (*b_runs, *c_runs) if m.complete]
    value_of = {rv.run: rv for rv in values}
    xs = [value_of[m.name].value for m in b_done]
    ys = [value_of[m.name].value for m in c_done]
    diff: list[dict[str, Any]] = []
    unavailable: list[str] = []
    if b_done and c_done:
        try:
            diff = [d.as_dict() for d in diff_configs(b_done[0].record, c_done[0].record, store)]
        except EvidenceStoreError as exc:
            # What cannot be had makes the claim UNAVAILABLE, never a different verdict.
            unavailable.append(f"{exc}; fetch it with `evstore pull`")
    speedup = bounded = None
    df = None
    clears: bool | None = None
    verdict: ClaimVerdict = "REFUSED"
    resolution = max((t.resolution for m in (*b_done, *c_done) for t in _timed(m)), default=None)
    unbounded = sum(
        1
        for m in (*b_done, *c_done)
        for r in m.record.requests
        if r.phase == "measured" and r.polls > 0 and r.resolution_s is None
    )
    if not reasons:
        pair_values = [(value_of[p[0].name].value, value_of[p[1].name].value) for p in pairs]
        interval = _interval(timing, xs, ys, pair_values if paired else None)
        speedup = Speedup(ratio=interval.ratio, low=interval.low, high=interval.high)
        df = interval.df
        # Every request's true time lies within its bound below the recorded one: the
        # lowest speedup has the baseline's times at their low ends, the highest the
        # candidate's.
        low_b = {m.name: _geo(_by_request(_timed(m), shift=True)) for m in b_done}
        low_c = {m.name: _geo(_by_request(_timed(m), shift=True)) for m in c_done}
        worst = _interval(
            timing,
            [low_b[m.name] for m in b_done],
            ys,
            [(low_b[p[0].name], value_of[p[1].name].value) for p in pairs] if paired else None,
        )
        best = _interval(
            timing,
            xs,
            [low_c[m.name] for m in c_done],
            [(value_of[p[0].name].value, low_c[p[1].name]) for p in pairs] if paired else None,
        )
        low_ends = (interval.low, worst.low, best.low)
        bounded = Speedup(
            ratio=interval.ratio,
            low=min(low_ends),
            high=max(interval.high, worst.high, best.high),
        )
        floor = timing.min_speedup
        clears = interval.low > floor
        if not timing.claim:
            verdict = "NO_TIMING_CLAIM"
            notes.append(
                "the protocol makes no timing claim (timing.claim = false): this interval is "
                "shown for information and claims nothing"
            )
        elif unbounded:
            verdict = "UNRESOLVED"
            notes.append(
                f"{unbounded} job-flow request(s) carry no recorded resolution (recorded "
                "before it was kept): each includes waiting for a poll that this claim "
                "cannot bound, so it cannot stand; record the runs again"
            )
        elif (min(low_ends) > floor) != (max(low_ends) > floor):
            verdict = "UNRESOLVED"
            notes.append(
                f"the verdict could change within the measurement resolution (up to "
                f"{resolution or 0.0:.4g} s per request): with every time anywhere in its "
                f"bound the interval's low end spans {min(low_ends):.4f} to "
                f"{max(low_ends):.4f}, either side of min_speedup = {floor:g}"
            )
        else:
            verdict = "STANDS" if clears else "NOT_CLEARED"
    if unavailable:
        verdict = "UNAVAILABLE"
    b_values = [v for m in b_done for v in value_of[m.name].values]
    c_values = [v for m in c_done for v in value_of[m.name].values]
    return Claim(
        protocol_digest=campaign.digest,
        condition=condition,
        arm=arm,
        baseline_arm=base.name,
        refused=speedup is None,
        reasons=tuple(reasons),
        estimator=estimator,
        confidence=timing.confidence,
        speedup=speedup,
        n_baseline=len(b_values),
        n_candidate=len(c_values),
        df=df,
        cv_baseline=_cv(xs),
        cv_candidate=_cv(ys),
        runs=tuple(values),
        failed_runs=tuple(m.name for m in (*b_runs, *c_runs) if not m.complete),
        config_diff=tuple(diff),
        excluded=excluded,
        verdict=verdict,
        stands=verdict == "STANDS",
        min_speedup=timing.min_speedup if timing.claim else None,
        clears=clears,
        runs_baseline=len(b_done),
        runs_candidate=len(c_done),
        run_spread_baseline=_sd([math.log(v) for v in xs]),
        run_spread_candidate=_sd([math.log(v) for v in ys]),
        within_spread_baseline=_within_spread(b_done),
        within_spread_candidate=_within_spread(c_done),
        bounded=bounded,
        resolution_s=resolution,
        order=order,
        pairs=tuple((a.name, b.name) for a, b in pairs),
        notes=tuple(notes),
        unavailable=tuple(unavailable),
    )
