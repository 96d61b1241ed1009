"""Planning a campaign from its baseline runs, before spending GPU hours on candidates.

For each condition, the baseline's complete runs give the run-to-run spread ``sd`` (the
standard deviation of their log run values, ``claims.run_value``) and the within-run
spread. With that spread taken for both arms, ``estimator.runs_needed`` gives the fewest
runs per arm whose interval clears ``timing.min_speedup`` at the protocol's confidence
with the stated power, for each assumed true speedup, and ``estimator.power`` the power
the protocol's required runs have. The A/A check splits the baseline runs by their
recorded start into the earlier and the later half and computes the claim's interval
between them: it must include 1.0, or the baseline drifts over time (or its runs are
otherwise not alike) and no speedup over it means what it says.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from ..models import Model
from .claims import run_value
from .estimator import power, runs_needed, welch_log_interval
from .members import Members
from .models import Speedup
from .protocol import Campaign

__all__ = ["ConditionPlan", "PlanRow", "plan_campaign"]

DEFAULT_RATIOS = (1.02, 1.05, 1.1, 1.25, 1.5, 2.0)


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


def plan_campaign(
    campaign: Campaign,
    members: Members,
    *,
    ratios: Sequence[float] = (),
    target_power: float = 0.8,
) -> list[ConditionPlan]:
    """The plan of every condition of ``campaign`` from its recorded baseline runs."""
    timing = campaign.protocol.timing
    base = campaign.baseline
    required = max(timing.min_runs, *(a.runs for a in campaign.candidates))
    wanted = tuple(ratios) or tuple(r for r in DEFAULT_RATIOS if r > timing.min_speedup)
    out: list[ConditionPlan] = []
    for cond in campaign.protocol.condition:
        runs = sorted(
            (m for m in members.of(cond.name, base.name) if m.complete),
            key=lambda m: (m.record.started, m.name),
        )
        values = [run_value(m, timing.metric) for m in runs]
        values = [v for v in values if v.value > 0]
        logs = [math.log(v.value) for v in values]
        notes: list[str] = []
        sd: float | None = None
        if len(logs) >= 2:
            mean = math.fsum(logs) / len(logs)
            sd = math.sqrt(math.fsum((v - mean) ** 2 for v in logs) / (len(logs) - 1))
            if len(logs) < 5:
                notes.append(
                    f"the spread comes from {len(logs)} baseline runs: a rough estimate; "
                    "plan with margin or record more baseline runs first"
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
                if sd is None
                else runs_needed(r, timing.min_speedup, sd, timing.confidence, target_power),
                power_at_required=None
                if sd is None
                else power(r, timing.min_speedup, sd, required, timing.confidence),
            )
            for r in wanted
        )
        aa = None
        includes: bool | None = None
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
            )
        )
    return out
