"""Planning a campaign from its baseline runs, before spending GPU hours on candidates.

For each condition, the baseline's complete runs give the run-to-run spread ``sd`` (the
standard deviation of their log run values, ``claims.run_value``) and the within-run
spread. A spread from a few runs is rough (from 3 runs it is under half the truth one
time in ten), and a plan that takes it at face value falls short as often as it holds:
the plan takes the spread's upper confidence bound at :data:`ASSURANCE`
(``sd · sqrt((n - 1) / chi2_{1-a}(n - 1))``, a chi-square bound for normal log values),
so that with probability ``ASSURANCE`` over pilots the planned runs reach the stated
power. With that spread for both arms, ``estimator.runs_needed`` gives the fewest runs
per arm (never fewer than ``timing.min_runs``) whose interval clears
``timing.min_speedup`` at the level each claim is stated at (``claims.claim_family``: the
family's Bonferroni level), for each assumed true speedup, and ``estimator.power`` the
power the protocol's required runs have. A plan can be made from a protocol file before
``campaign init`` (``plan_protocol``: pilot runs are matched to conditions by their
workload digest), so the run counts it suggests can still be written into the protocol.

The A/A check splits the baseline runs by their recorded start into the earlier and the
later half and computes the claim's interval between them: it must include 1.0, or the
baseline drifts over time (or its runs are otherwise not alike) and no speedup over it
means what it says. With too few runs it could not see a drift of :data:`DRIFT` either:
then it says so (``aa_conclusive = false``), instead of passing.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from ..models import Model
from .claims import family_size, run_value
from .estimator import family_confidence, power, runs_needed, welch_log_interval
from .members import Member, Members
from .models import Protocol, Speedup
from .protocol import Campaign

__all__ = [
    "ASSURANCE",
    "DRIFT",
    "ConditionPlan",
    "PlanRow",
    "pilot_runs",
    "plan_campaign",
    "plan_protocol",
    "spread_bound",
]

DEFAULT_RATIOS = (1.02, 1.05, 1.1, 1.25, 1.5, 2.0)
#: The probability over pilots that a plan reaches its stated power (the spread's bound).
ASSURANCE = 0.9
#: The drift the A/A check must be able to see, and how often, to count as a check.
DRIFT = 1.3
DRIFT_POWER = 0.8


class PlanRow(Model, frozen=True, kw_only=True, omit_defaults=False):
    """For an assumed true speedup: the runs per arm needed, and the power of the
    protocol's required runs (``None``: not computable, e.g. no spread measured)."""

    ratio: float
    runs_needed: int | None
    power_at_required: float | None


class ConditionPlan(Model, frozen=True, kw_only=True, omit_defaults=False):
    """One condition's plan: the baseline spreads it rests on, the A/A check, the rows."""

    condition: str
    baseline_runs: tuple[str, ...]
    run_spread: float | None
    within_spread: float | None
    required_runs: int
    min_speedup: float
    confidence: float
    power: float
    rows: tuple[PlanRow, ...]
    aa: Speedup | None
    aa_includes_one: bool | None
    aa_halves: tuple[tuple[str, ...], tuple[str, ...]] = ((), ())
    notes: tuple[str, ...] = ()
    planned_spread: float | None = None  # the spread's upper bound the rows use
    assurance: float = ASSURANCE
    min_runs: int = 2
    interval_confidence: float | None = None  # each claim's level (the family's)
    aa_conclusive: bool | None = None  # False: too few runs to see a DRIFT drift


def plan_campaign(
    campaign: Campaign,
    members: Members,
    *,
    ratios: Sequence[float] = (),
    target_power: float = 0.8,
) -> list[ConditionPlan]:
    """The plan of every condition of ``campaign`` from its recorded baseline runs."""
    base = campaign.baseline
    pilots = {
        cond.name: [m for m in members.of(cond.name, base.name) if m.complete]
        for cond in campaign.protocol.condition
    }
    return plan_protocol(campaign.protocol, pilots, ratios=ratios, target_power=target_power)


def plan_protocol(
    protocol: Protocol,
    pilots: Mapping[str, Sequence[Member]],
    *,
    ratios: Sequence[float] = (),
    target_power: float = 0.8,
) -> list[ConditionPlan]:
    """The plan of every condition of ``protocol`` (registered or not) from the complete
    baseline runs ``pilots`` gives each (condition name -> runs)."""
    timing = protocol.timing
    candidates = [a for a in protocol.arm if not a.baseline]
    required = max(timing.min_runs, *(a.runs for a in candidates))
    each = (
        family_confidence(timing.confidence, family_size(protocol))
        if timing.claim
        else (timing.confidence)
    )
    wanted = tuple(ratios) or tuple(r for r in DEFAULT_RATIOS if r > timing.min_speedup)
    out: list[ConditionPlan] = []
    for cond in protocol.condition:
        runs = sorted(
            (m for m in pilots.get(cond.name, ()) if m.complete),
            key=lambda m: (m.record.started, m.name),
        )
        values = [run_value(m, timing.metric) for m in runs]
        values = [v for v in values if v.value > 0]
        logs = [math.log(v.value) for v in values]
        notes: list[str] = []
        sd: float | None = None
        planned: float | None = None
        if len(logs) >= 2:
            mean = math.fsum(logs) / len(logs)
            sd = math.sqrt(math.fsum((v - mean) ** 2 for v in logs) / (len(logs) - 1))
            planned = spread_bound(sd, len(logs), ASSURANCE)
            notes.append(
                f"planned with the spread's {ASSURANCE:.0%} upper bound, {planned:.2%} "
                f"(measured {sd:.2%} from {len(logs)} runs): in {ASSURANCE:.0%} of pilots "
                "the planned runs reach the stated power"
            )
        else:
            notes.append(
                f"{len(logs)} complete baseline run(s): at least 2 are needed to measure the "
                "run-to-run spread"
            )
        rows = tuple(
            PlanRow(
                ratio=r,
                runs_needed=None
                if planned is None
                else _at_least(
                    runs_needed(r, timing.min_speedup, planned, each, target_power),
                    timing.min_runs,
                ),
                power_at_required=None
                if sd is None
                else power(r, timing.min_speedup, sd, required, each),
            )
            for r in wanted
        )
        aa = None
        includes: bool | None = None
        conclusive: bool | None = None
        halves: tuple[tuple[str, ...], tuple[str, ...]] = ((), ())
        if len(values) >= 4:
            first, second = values[: len(values) // 2], values[len(values) // 2 :]
            halves = (tuple(v.run for v in first), tuple(v.run for v in second))
            iv = welch_log_interval(
                [v.value for v in first], [v.value for v in second], timing.confidence
            )
            aa = Speedup(ratio=iv.ratio, low=iv.low, high=iv.high)
            includes = iv.low <= 1.0 <= iv.high
            if not includes:
                notes.append(
                    f"A/A check failed: the earlier baseline runs against the later give "
                    f"{iv.ratio:.4f} [{iv.low:.4f}, {iv.high:.4f}], excluding 1.0: the "
                    "baseline drifts or its runs are not alike, and a speedup over it would "
                    "not mean what it says"
                )
            else:
                seen = power(DRIFT, 1.0, sd or 0.0, min(len(first), len(second)),
                             timing.confidence)  # fmt: skip
                conclusive = seen >= DRIFT_POWER
                if not conclusive:
                    notes.append(
                        f"A/A check inconclusive: with {len(first)} + {len(second)} runs it "
                        f"would see a {DRIFT:g}x drift only {seen:.0%} of the time (at the "
                        f"measured spread): it includes 1.0 without showing the baseline is "
                        f"steady; record more baseline runs"
                    )
        else:
            notes.append(
                f"A/A check needs at least 4 complete baseline runs (2 per half); there are "
                f"{len(values)}"
            )
        within = None
        ss, dof = 0.0, 0
        for v in values:
            if len(v.values) > 1:
                lv = [math.log(x) for x in v.values if x > 0]
                mean = math.fsum(lv) / len(lv)
                ss += math.fsum((x - mean) ** 2 for x in lv)
                dof += len(lv) - 1
        if dof:
            within = math.sqrt(ss / dof)
        out.append(
            ConditionPlan(
                condition=cond.name,
                baseline_runs=tuple(v.run for v in values),
                run_spread=sd,
                within_spread=within,
                required_runs=required,
                min_speedup=timing.min_speedup,
                confidence=timing.confidence,
                power=target_power,
                rows=rows,
                aa=aa,
                aa_includes_one=includes,
                aa_halves=halves,
                notes=tuple(notes),
                planned_spread=planned,
                assurance=ASSURANCE,
                min_runs=timing.min_runs,
                interval_confidence=each,
                aa_conclusive=conclusive,
            )
        )
    return out


def _at_least(n: int | None, floor: int) -> int | None:
    return None if n is None else max(n, floor, 2)


def spread_bound(sd: float, n: int, level: float) -> float:
    """The ``level`` upper confidence bound of a run-to-run spread ``sd`` measured from
    ``n`` runs (chi-square, ``n - 1`` degrees of freedom)."""
    from scipy.special import chdtri  # the chi-square quantile without scipy.stats

    return sd * math.sqrt((n - 1) / float(chdtri(n - 1, level)))


def pilot_runs(
    root: str | os.PathLike[str], protocol: Protocol, source: Path, pilots: Sequence[str]
) -> dict[str, list[Member]]:
    """The pilot runs ``pilots`` (run bundles of ``root``) by the condition of
    ``protocol`` (read from ``source``) whose workload they ran (by digest)."""
    from ..config import as_repository
    from ..confined import read_file
    from ..digest import hash_bytes
    from ..errors import ConfigError
    from ..inventory import load_registration, registration_path
    from ..runs.recorder import load_run

    repo = as_repository(root)
    by_digest: dict[str, str] = {}
    for cond in protocol.condition:
        digest = (
            cond.workload_digest
            or hash_bytes(
                read_file(
                    source.parent / cond.workload,
                    [source.parent],
                    where=f"{{protocol}} {source}",
                    parameters=("protocol",),
                )
            ).digest
        )
        by_digest[digest] = cond.name
    out: dict[str, list[Member]] = {c.name: [] for c in protocol.condition}
    for name in pilots:
        record = load_run(repo, name)
        reg = load_registration(registration_path(repo.root, name))
        cond_name = by_digest.get(record.workload_digest)
        if cond_name is None:
            raise ConfigError(
                f"{{pilots}} {name}: it ran workload {record.workload_digest}, which no "
                f"condition of {source} names",
                parameters=("pilots",),
            )
        out[cond_name].append(Member(name, reg.digest, reg, record))
    return out
