"""Claims made jointly keep the family's error at the stated level (issue 36 item 6).

Seeded, vectorised simulations of whole campaigns where no candidate is faster (true
ratio 1.0 everywhere). ``any-arm``: k candidate arms against one shared baseline (their
intervals are correlated through it); ``every-arm``: one arm over k conditions, each with
its own baseline runs. A family-wise false claim is any interval of the family whose low
end clears 1.0. A 95 % interval's low end misses the truth from above with probability
2.5 %: that is the nominal rate of a false "faster", and the family's must not exceed it
(within Monte Carlo error, 3 standard errors) when each interval is stated at
``family_confidence`` (Bonferroni), as ``make_claim`` states it. The negative control, each
interval at the plain 95 %, exceeds it for every k >= 2. Every claim's interval is the
library's (``estimator.log_bounds``, checked against ``welch_log_interval``).
"""

from __future__ import annotations

import math
from typing import Any

import pytest

np = pytest.importorskip("numpy")
pytest.importorskip("scipy")

from evidencestore.campaign.estimator import (  # noqa: E402
    family_confidence,
    log_bounds,
    welch_log_interval,
)

CAMPAIGNS = 20_000  # per cell (at least 4,000): the standard error at 2.5 % is 0.11 %
KS = (1, 2, 4, 8)
RUNS = (3, 5)
RUN_SD = 0.1
CONFIDENCE = 0.95
NOMINAL = (1 - CONFIDENCE) / 2  # a false "faster": the low end above the truth
SLACK = 3 * math.sqrt(NOMINAL * (1 - NOMINAL) / CAMPAIGNS)


def _family(shape: str, k: int, n: int, rng: Any) -> tuple[Any, Any]:
    """Log run values: baseline ``(campaigns, k, n)`` and candidates ``(campaigns, k, n)``."""
    if shape == "any-arm":  # one baseline shared by the k candidate arms
        base = np.broadcast_to(rng.normal(0.0, RUN_SD, (CAMPAIGNS, 1, n)), (CAMPAIGNS, k, n))
    else:  # every-arm over k conditions: a baseline of its own in each
        base = rng.normal(0.0, RUN_SD, (CAMPAIGNS, k, n))
    return base, rng.normal(0.0, RUN_SD, (CAMPAIGNS, k, n))


def simulate(seed: int = 20261205) -> list[dict[str, Any]]:
    rng = np.random.default_rng(seed)
    rows = []
    for shape in ("any-arm", "every-arm"):
        for n in RUNS:
            for k in KS:
                base, cand = _family(shape, k, n, rng)
                row: dict[str, Any] = {"shape": shape, "n": n, "k": k}
                for label, conf in (
                    ("corrected", family_confidence(CONFIDENCE, k)),
                    ("uncorrected", CONFIDENCE),
                ):
                    _, low, high = log_bounds(np.asarray(base), cand, conf)
                    row[label] = float(np.mean((low > 0.0).any(axis=-1)))
                    row[f"{label}_cover"] = float(
                        np.mean(((low <= 0.0) & (high >= 0.0)).all(axis=-1))
                    )
                rows.append(row)
    return rows


def test_family_confidence_is_bonferroni() -> None:
    assert family_confidence(0.95, 1) == 0.95
    assert family_confidence(0.95, 4) == pytest.approx(0.9875)
    with pytest.raises(ValueError):
        family_confidence(0.95, 0)


def test_vectorised_bounds_are_the_claims_interval() -> None:
    rng = np.random.default_rng(7)
    base, cand = rng.lognormal(0.0, 0.1, (2, 20, 4))
    conf = family_confidence(CONFIDENCE, 8)
    _, low, high = log_bounds(np.log(base), np.log(cand), conf)
    for i in range(20):
        w = welch_log_interval(list(base[i]), list(cand[i]), conf)
        assert (math.log(w.low), math.log(w.high)) == pytest.approx((low[i], high[i]), abs=1e-12)


def test_family_wise_false_claims_at_or_below_nominal_and_control_exceeds() -> None:
    rows = simulate()
    assert len(rows) == 2 * len(RUNS) * len(KS)
    over = [r for r in rows if r["corrected"] > NOMINAL + SLACK]
    assert over == [], over
    assert all(r["corrected_cover"] >= CONFIDENCE - 3 * SLACK for r in rows)
    # The control, no correction: above the nominal rate for every family of 2 or more,
    # and far above it at k = 8.
    control = [r for r in rows if r["k"] > 1 and r["uncorrected"] <= NOMINAL + SLACK]
    assert control == [], control
    assert min(r["uncorrected"] for r in rows if r["k"] == 8) > 3 * NOMINAL
    # With one claim the two are the same interval.
    assert all(r["corrected"] == r["uncorrected"] for r in rows if r["k"] == 1)


def table() -> str:
    """The simulation as a text table (``python tests/campaign/test_multiplicity.py``)."""
    lines = [
        f"family-wise false 'faster' at true ratio 1.0, {CAMPAIGNS} campaigns a cell, "
        f"run sd {RUN_SD}, nominal {NOMINAL:.1%}",
        "shape      n  k  corrected (all cover)  uncorrected (all cover)",
    ]
    for r in simulate():
        lines.append(
            f"{r['shape']:<9} {r['n']:>2} {r['k']:>2}  {r['corrected']:>9.2%} "
            f"({r['corrected_cover']:.2%})  {r['uncorrected']:>11.2%} ({r['uncorrected_cover']:.2%})"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    print(table())
