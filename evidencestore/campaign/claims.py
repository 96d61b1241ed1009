"""Speedup claims: baseline / candidate end-to-end latency with a confidence interval.

Values are the ``e2e_s`` of measured requests without failure, from complete runs of
this protocol, condition, workload and arm configuration (``members.py``); the
estimator is the Welch interval on log times (``estimator.py``). A claim is refused,
with every reason, when an arm has fewer complete runs than the protocol requires (its
failed runs are named: they stay in the record and never contribute a number), when
either arm has fewer values than ``timing.min_runs``, or when a run was excluded because
its workload differs from the condition's. The claim cites every run digest, each run's
values, mean and coefficient of variation, and the configuration difference between the
arms (``evidencestore.runs.diff_configs`` of their first runs, which stands for every
run: a claim is refused when an arm's runs differ in configuration or server,
``identity.py``); runs that did not
complete are named in ``failed_runs`` whether or not the claim stands.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from ..errors import ConfigError, EvidenceStoreError
from ..runs import diff_configs
from ..storage import BlobStore
from .estimator import welch_log_interval
from .identity import config_changes
from .members import Member, Members
from .models import Claim, RunValue, Speedup
from .protocol import Campaign

__all__ = ["make_claim", "run_value"]


def _cv(values: Sequence[float]) -> float | None:
    if len(values) < 2:
        return None
    mean = math.fsum(values) / len(values)
    var = math.fsum((v - mean) ** 2 for v in values) / (len(values) - 1)
    return math.sqrt(var) / mean


def run_value(member: Member) -> RunValue:
    """A run's measured, successful end-to-end latencies and their summary."""
    values = tuple(
        r.e2e_s
        for r in member.record.requests
        if r.phase == "measured" and r.failure is None and r.e2e_s is not None
    )
    return RunValue(
        run=member.name,
        digest=member.digest,
        arm=member.record.arm,
        values=values,
        mean=math.fsum(values) / len(values) if values else 0.0,
        cv=_cv(values),
    )


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
    values = [run_value(m) for m in (*b_runs, *c_runs) if m.complete]
    xs = [v for rv in values if rv.arm == base.name for v in rv.values]
    ys = [v for rv in values if rv.arm == arm for v in rv.values]
    for who, sample in ((base.name, xs), (arm, ys)):
        if len(sample) < timing.min_runs:
            reasons.append(
                f"{condition}: arm {who!r} has n = {len(sample)} measured requests of complete "
                f"runs, below the protocol's min_runs = {timing.min_runs}"
            )
    diff: list[dict[str, Any]] = []
    b_done = [m for m in b_runs if m.complete]
    c_done = [m for m in c_runs if m.complete]
    reasons += [f.message for f in members.findings if f.arm in (base.name, arm)]
    reasons += [*config_changes(store, b_done), *config_changes(store, c_done)]
    if b_done and c_done:
        try:
            diff = [d.as_dict() for d in diff_configs(b_done[0].record, c_done[0].record, store)]
        except EvidenceStoreError as exc:
            reasons.append(f"the configuration difference cannot be computed: {exc}")
    speedup = None
    df = None
    if not reasons:
        interval = welch_log_interval(xs, ys, timing.confidence)
        speedup = Speedup(ratio=interval.ratio, low=interval.low, high=interval.high)
        df = interval.df
    return Claim(
        protocol_digest=campaign.digest,
        condition=condition,
        arm=arm,
        baseline_arm=base.name,
        refused=speedup is None,
        reasons=tuple(reasons),
        confidence=timing.confidence,
        speedup=speedup,
        n_baseline=len(xs),
        n_candidate=len(ys),
        df=df,
        cv_baseline=_cv(xs),
        cv_candidate=_cv(ys),
        runs=tuple(values),
        failed_runs=tuple(m.name for m in (*b_runs, *c_runs) if not m.complete),
        config_diff=tuple(diff),
        excluded=excluded,
    )
