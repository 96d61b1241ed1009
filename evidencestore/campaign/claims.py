"""Speedup claims: baseline / candidate request time on the protocol's metric, with an
interval over runs.

The metric (``timing.metric``) is ``e2e`` (``e2e_s``), ``ttft``, ``itl``, ``tpot`` (the
request record's ``ttft_s``, ``itl_s``, ``tpot_s``), ``output_throughput``: a run's
seconds per output token over its measured span (first intended send to last byte), so
the ratio is candidate over baseline throughput, or ``goodput``: the run's requests per
second meeting its workload's SLO (``runs/goodput.py``; the run is the unit, its value
the seconds per good request). TTFT, ITL and TPOT claims are refused on runs that were
not streamed; per-token metrics on arms whose output tokens were not counted, or were
counted differently (``_metric_rules``). Every claim also gives each arm's p50,
p90 and p99 of the metric over its measured requests, with order-statistic intervals
(``percentiles.py``), and names the runs flagged client-bound (their send lag or CPU
says the client, not the server, may have set the pace).

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

Claims made jointly are a family (``claim_family``): the candidate arms under
``accept = "any-arm"`` (one of k arms faster suffices), the conditions under
``"every-arm"``. With more than one, each interval is stated at Bonferroni's
simultaneous level (``estimator.family_confidence``: at 95 % over 4 claims, each at
98.75 %), so the chance of any false "faster" in the family is at most the stated one;
the claim names it (``correction``, ``family_size``, ``interval_confidence``).
Percentiles describe one arm and stay at the stated level.

The claim cites every run digest, each run's values and one value, the run-to-run and
within-run spreads, and the configuration difference between the arms
(``evidencestore.runs.diff_configs`` of their first runs, which stands for every run: a
claim is refused when an arm's runs differ in configuration or server, ``identity.py``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any, Literal

from ..errors import ConfigError, EvidenceStoreError
from ..runs.diff import diff_configs
from ..runs.models import RequestRecord
from ..storage import BlobStore
from .estimator import (
    WelchInterval,
    family_confidence,
    paired_log_interval,
    welch_log_interval,
)
from .identity import config_changes
from .members import Member, Members
from .models import Claim, ClaimVerdict, Protocol, RunValue, Speedup
from .percentiles import percentile
from .protocol import Campaign

__all__ = ["claim_family", "family_size", "make_claim", "run_value"]

Order = Literal["alternating", "baseline-first", "candidate-first", "mixed"]
#: The percentiles every claim gives per arm.
PERCENTILES = (0.5, 0.9, 0.99)


def _cv(values: Sequence[float]) -> float | None:
    if len(values) < 2:
        return None
    mean = math.fsum(values) / len(values)
    var = math.fsum((v - mean) ** 2 for v in values) / (len(values) - 1)
    return math.sqrt(var) / mean if mean > 0 else None


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


_FIELDS = {"e2e": "e2e_s", "ttft": "ttft_s", "itl": "itl_s", "tpot": "tpot_s"}


def _request_value(r: RequestRecord, metric: str) -> float | None:
    """One request's time on ``metric`` (seconds per output token for throughput; its
    end-to-end time for goodput, whose value is the run's)."""
    if metric == "goodput":
        return r.e2e_s
    if metric == "output_throughput":
        if r.e2e_s is None or not r.output_tokens:
            return None
        return r.e2e_s / r.output_tokens
    value: float | None = getattr(r, _FIELDS[metric])
    return value


def _timed(member: Member, metric: str = "e2e") -> list[_Timed]:
    good = member.record.goodput
    if metric == "goodput" and (good is None or good.rate <= 0):
        return []  # no goodput to claim on (``_metric_rules`` says why)
    out = []
    for r in member.record.requests:
        if r.phase != "measured" or r.failure is not None:
            continue
        value = _request_value(r, metric)
        if value is not None and value > 0:
            # Only end-to-end time waits for a job-flow poll: the bound is its alone.
            out.append(
                _Timed(r.request, value, (r.resolution_s or 0.0) if metric == "e2e" else 0.0)
            )
    return out


def _throughput_value(member: Member) -> float:
    """Seconds per output token over the run's measured span (0.0 without tokens)."""
    ok = [r for r in member.record.requests if r.phase == "measured" and r.failure is None]
    tokens = sum(r.output_tokens or 0 for r in ok)
    ends = [r.last_byte_ns for r in ok if r.last_byte_ns is not None]
    starts = [r.intended_ns if r.intended_ns is not None else r.sent_ns for r in ok]
    if not tokens or not ends:
        return 0.0
    return (max(ends) - min(starts)) / 1e9 / tokens


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


def run_value(member: Member, metric: str = "e2e") -> RunValue:
    """A run's measured, successful request times on ``metric`` and its one value
    (module doc)."""
    timed = _timed(member, metric)
    values = tuple(t.e2e for t in timed)
    logs = _by_request(timed)
    value = _geo(logs) if logs else 0.0
    if metric == "output_throughput":
        value = _throughput_value(member)
    if metric == "goodput":  # seconds per good request: lower is better, as for times
        good = member.record.goodput
        value = 1.0 / good.rate if good is not None and good.rate > 0 else 0.0
    load = member.record.load
    return RunValue(
        run=member.name,
        digest=member.digest,
        arm=member.record.arm,
        values=values,
        mean=math.fsum(values) / len(values) if values else 0.0,
        cv=_cv(values),
        value=value,
        request_values=tuple(math.exp(math.fsum(v) / len(v)) for _, v in sorted(logs.items())),
        started=member.record.started,
        resolution_s=max((t.resolution for t in timed), default=None),
        audit_findings=tuple(
            f"{a.name}: {f.message}" for a in member.record.audits for f in a.findings
        ),
        client_bound=load is not None and load.client_bound,
    )


def _within_spread(members: Sequence[Member], metric: str) -> float | None:
    """The pooled log-scale standard deviation of requests around their run's mean."""
    ss, dof = 0.0, 0
    for m in members:
        for logs in _by_request(_timed(m, metric)).values():
            if len(logs) > 1:
                mean = math.fsum(logs) / len(logs)
                ss += math.fsum((v - mean) ** 2 for v in logs)
                dof += len(logs) - 1
    return math.sqrt(ss / dof) if dof else None


def _low(member: Member, metric: str, value_of: dict[str, RunValue]) -> float:
    """A run's value with every request time at the low end of its bound (only
    end-to-end times have a bound: the job flow's polling)."""
    if metric != "e2e":
        return value_of[member.name].value
    return _geo(_by_request(_timed(member, metric), shift=True))


#: Metrics that need a first-token time (only a streamed output has one).
_STREAMED = ("ttft", "itl", "tpot")
#: Metrics that count output tokens, whose value depends on how they were counted.
_PER_TOKEN = ("itl", "tpot", "output_throughput")


def _metric_rules(condition: str, metric: str, arms: dict[str, Sequence[Member]]) -> list[str]:
    """Why ``metric`` cannot be claimed on these runs: TTFT, ITL and TPOT of a run that
    was not streamed; per-token metrics where an arm's tokens were not counted, or were
    counted differently (the legacy count of events is not a count of tokens); goodput
    of a run recorded without an SLO or with none met."""
    reasons: list[str] = []
    sources: dict[str, set[str | None]] = {}
    for arm, runs in arms.items():
        done = [m for m in runs if m.complete]
        for m in done:
            ok = [r for r in m.record.requests if r.phase == "measured" and r.failure is None]
            llm = [r for r in ok if r.completion is not None]
            if metric in _STREAMED and llm and all(r.ttft_s is None for r in llm):
                reasons.append(
                    f"{condition}: arm {arm!r} run {m.name!r} was not streamed ([endpoint] "
                    f"stream = false): an output that was not streamed has no first-token "
                    f"time, so no {metric.upper()}; claim on e2e, or stream"
                )
            if metric in _PER_TOKEN and llm:
                sources.setdefault(arm, set()).update(r.output_tokens_from for r in llm)
            if metric == "goodput":
                good = m.record.goodput
                if good is None:
                    reasons.append(
                        f"{condition}: arm {arm!r} run {m.name!r} has no goodput: its "
                        "workload sets no [timing] slo"
                    )
                elif good.good == 0:
                    reasons.append(
                        f"{condition}: arm {arm!r} run {m.name!r}: none of its "
                        f"{good.measured} measured requests met the SLO (missed: "
                        f"{good.missed}): its goodput is 0"
                    )
    for arm, seen in sources.items():
        if None in seen:
            reasons.append(
                f"{condition}: arm {arm!r} has requests without a token count (no token "
                f"ids, logprobs or usage): {metric} needs one; set [endpoint] "
                "include_usage or token_ids"
            )
    counted = {arm: frozenset(s) for arm, s in sources.items()}
    if len(set(counted.values())) > 1 and any("events" in s for s in counted.values()):
        shown = "; ".join(f"{a} by {', '.join(sorted(map(str, s)))}" for a, s in counted.items())
        reasons.append(
            f"{condition}: the arms count output tokens differently ({shown}): counting "
            f"events is not counting tokens, so {metric} would depend on how each server "
            "groups tokens into events; record both arms with token ids or usage"
        )
    return reasons


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
    confidence: float,
    b: Sequence[float],
    c: Sequence[float],
    pairs: Sequence[tuple[float, float]] | None,
) -> WelchInterval:
    if pairs is not None:
        return paired_log_interval(pairs, confidence)
    return welch_log_interval(b, c, confidence)


def claim_family(campaign: Campaign) -> int:
    """How many claims the campaign makes jointly (``family_size`` of its protocol)."""
    return family_size(campaign.protocol)


def family_size(protocol: Protocol) -> int:
    """How many claims a protocol makes jointly, as it declares them (a withdrawal never
    shrinks it: the family is fixed before any result). ``any-arm``: the candidate arms
    (the campaign stands when any one clears, so k chances at a false "faster");
    ``every-arm``: the conditions (each arm's claim is read over all of them)."""
    if protocol.accept == "any-arm":
        return sum(1 for a in protocol.arm if not a.baseline)
    return len(protocol.condition)


def make_claim(
    store: BlobStore, campaign: Campaign, members: Members, condition: str, arm: str
) -> Claim:
    """The speedup claim of ``arm`` over the baseline at ``condition`` (see module doc)."""
    metric = campaign.protocol.timing.metric
    campaign.workload_digest(condition)  # a ConfigError naming the conditions if unknown
    spec = campaign.arm(arm)
    base = campaign.baseline
    if spec.baseline:
        raise ConfigError(f"campaign {campaign.name!r}: arm {arm!r} is the baseline itself")
    timing = campaign.protocol.timing
    family = claim_family(campaign) if timing.claim else 1
    each = family_confidence(timing.confidence, family)
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
        and e.code in ("workload-mismatch", "config-mismatch", "harness-mismatch")
    )
    reasons += [
        f"excluded: {e.message}"
        for e in excluded
        if e.code in ("workload-mismatch", "harness-mismatch")
    ]
    b_done = [m for m in b_runs if m.complete and _timed(m, metric)]
    c_done = [m for m in c_runs if m.complete and _timed(m, metric)]
    for who, done in ((base.name, b_done), (arm, c_done)):
        if len(done) < timing.min_runs:
            reasons.append(
                f"{condition}: arm {who!r} has {len(done)} complete runs with measured "
                f"times, below the protocol's min_runs = {timing.min_runs} (the run is the "
                "unit: more requests per run do not count as more runs)"
            )
    reasons += _metric_rules(condition, metric, {base.name: b_runs, arm: c_runs})
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
    values = [run_value(m, metric) for m in (*b_runs, *c_runs) if m.complete]
    value_of = {rv.run: rv for rv in values}
    xs = [value_of[m.name].value for m in b_done]
    ys = [value_of[m.name].value for m in c_done]
    diff: list[dict[str, Any]] = []
    reasons += [f.message for f in members.findings if f.arm in (base.name, arm)]
    reasons += [*config_changes(store, b_done), *config_changes(store, c_done)]
    unavailable: list[str] = []
    if b_done and c_done:
        try:
            diff = [  # keys sorted: the record is the same kept (canonical) or computed
                dict(sorted(d.as_dict().items()))
                for d in diff_configs(b_done[0].record, c_done[0].record, store)
            ]
        except EvidenceStoreError as exc:
            # What cannot be had makes the claim UNAVAILABLE, never a different verdict.
            unavailable.append(f"{exc}; fetch it with `evstore pull`")
    speedup = bounded = None
    df = None
    clears: bool | None = None
    verdict: ClaimVerdict = "REFUSED"
    resolution = max(
        (t.resolution for m in (*b_done, *c_done) for t in _timed(m, metric)), default=None
    )
    unbounded = sum(
        1
        for m in (*b_done, *c_done)
        for r in m.record.requests
        if r.phase == "measured" and r.polls > 0 and r.resolution_s is None
    )
    if not reasons:
        pair_values = [(value_of[p[0].name].value, value_of[p[1].name].value) for p in pairs]
        interval = _interval(each, xs, ys, pair_values if paired else None)
        speedup = Speedup(ratio=interval.ratio, low=interval.low, high=interval.high)
        df = interval.df
        # Every request's true time lies within its bound below the recorded one: the
        # lowest speedup has the baseline's times at their low ends, the highest the
        # candidate's.
        low_b = {m.name: _low(m, metric, value_of) for m in b_done}
        low_c = {m.name: _low(m, metric, value_of) for m in c_done}
        worst = _interval(
            each,
            [low_b[m.name] for m in b_done],
            ys,
            [(low_b[p[0].name], value_of[p[1].name].value) for p in pairs] if paired else None,
        )
        best = _interval(
            each,
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
    percentiles = tuple(
        percentile(who, vals, q, timing.confidence)
        for who, vals in ((base.name, b_values), (arm, c_values))
        for q in PERCENTILES
    )
    harness, definition, mixed = harness_of([m.record for m in (*b_done, *c_done)], metric)
    if mixed:
        reasons.append(mixed)
        speedup = bounded = None
        verdict = "REFUSED"
    bound = tuple(m.name for m in (*b_done, *c_done) if value_of[m.name].client_bound)
    if bound:
        notes.append(
            f"client-bound run(s) used: {', '.join(bound)}: the client's send lag or CPU "
            "may have set the pace, not the server"
        )
    return Claim(
        protocol_digest=campaign.digest,
        condition=condition,
        arm=arm,
        baseline_arm=base.name,
        refused=speedup is None,
        reasons=tuple(reasons),
        estimator=estimator,
        confidence=timing.confidence,
        correction="bonferroni" if family > 1 else "none",
        family_size=family,
        interval_confidence=each,
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
        within_spread_baseline=_within_spread(b_done, metric),
        within_spread_candidate=_within_spread(c_done, metric),
        bounded=bounded,
        resolution_s=resolution,
        order=order,
        pairs=tuple((a.name, b.name) for a, b in pairs),
        notes=tuple(notes),
        unavailable=tuple(unavailable),
        metric=timing.metric,
        percentiles=percentiles,
        client_bound_runs=bound,
        harness=harness,
        metric_definition=definition,
    )


#: How ``evstore run`` measures each metric (``runs/models.py``'s RequestRecord).
NATIVE_DEFINITIONS = {
    "e2e": "evidencestore: from the request's intended send time to its output's last byte, "
    "at the socket",
    "ttft": "evidencestore: from the intended send time to the first server-sent event "
    "carrying a token of any channel, at the socket",
    "itl": "evidencestore: per token, (e2e - ttft) / (output_tokens - 1), tokens counted "
    "from token ids, logprobs or usage (AIPerf's ITL, vLLM's TPOT)",
    "tpot": "evidencestore: first to last token-carrying event over output_tokens - 1",
    "output_throughput": "evidencestore: output tokens over the run's measured span",
    "goodput": "evidencestore: measured requests meeting every [timing] slo objective per "
    "second of the measured span (vLLM's and AIPerf's goodput)",
}


def harness_of(records: Sequence[Any], metric: str) -> tuple[str, str | None, str | None]:
    """The harness (name and version) the runs' metric comes from, its definition, and
    a refusal reason when the runs come from more than one harness."""
    names: dict[str, str | None] = {}
    for r in records:
        h = r.harness
        if h is None:
            names["evidencestore"] = NATIVE_DEFINITIONS.get(metric)
        else:
            field = _FIELDS.get(metric, "output_tokens")
            label = f"{h.name} {h.version}" if h.version else h.name
            names[label] = h.metrics.get(field) or f"{h.name}: {field} as the harness records it"
    if not names:
        return "evidencestore", NATIVE_DEFINITIONS.get(metric), None
    if len(names) > 1:
        return (
            " + ".join(sorted(names)),
            None,
            f"the runs come from different harnesses ({', '.join(sorted(names))}): their "
            f"{metric} is not defined the same way, and a claim never mixes them",
        )
    ((label, definition),) = names.items()
    return label, definition, None
