"""The speedup estimators: Welch and paired intervals on log per-run values, and planning.

The run is the unit of replication: requests inside one run share its server start,
placement and caches, so each complete run contributes one value per arm (``claims.py``
computes it: the geometric mean of its measured end-to-end times) and the degrees of
freedom come from runs. Campaign runs are few and long (3 to 10), where rank tests have
too little resolution and the bootstrap under-covers. Times are positive and their
spread scales with their level, so the estimators work on logarithms.

- ``welch_log_interval``: with ``x`` the log baseline run values and ``y`` the log
  candidate run values, the speedup is ``exp(mean(x) - mean(y))`` (baseline / candidate)
  and its ``c`` interval ``exp(d ± t_{(1+c)/2, df} · se)`` with
  ``se = sqrt(s_x²/n_x + s_y²/n_y)`` and the Welch-Satterthwaite ``df``.
- ``paired_log_interval``: for interleaved runs paired in order, the one-sample t interval
  of the pairs' log ratios (``df = pairs - 1``); drift common to a pair cancels.
- ``family_confidence``: claims made jointly are a family (``claims.claim_family``: the
  candidate arms under ``any-arm``, the conditions under ``every-arm``): each interval is
  stated at Bonferroni's
  ``1 - (1 - c) / m`` so that all ``m`` cover together with probability ``c``, and a
  false "faster" anywhere in the family is no likelier than the stated level.
- ``log_bounds``: the same Welch bounds over whole arrays of simulated campaigns at once
  (the coverage test runs thousands through it).
- ``power`` / ``runs_needed``: the probability that the interval's low end clears
  ``min_speedup`` when the true speedup is ``ratio`` and both arms have run-to-run spread
  ``sd`` (log scale), by seeded simulation of this very interval; the smallest runs per
  arm that reach a stated power (the search starts where the noncentral t, an upper
  bound, first reaches it).

When both samples have zero spread the interval is the point itself (``df`` undefined).
Quantiles and distributions are SciPy's (``scipy.special.stdtrit`` for t quantiles,
``scipy.stats`` for the noncentral t; the ``campaign`` extra), imported on first use.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = [
    "WelchInterval",
    "family_confidence",
    "log_bounds",
    "paired_log_interval",
    "power",
    "runs_needed",
    "t_quantile",
    "welch_log_interval",
]


def _stats() -> Any:
    from scipy import stats

    return stats


def _stdtrit(df: Any, p: Any) -> Any:
    """Student's t quantile (``scipy.special.stdtrit``: the function ``stats.t.ppf``
    evaluates, without importing ``scipy.stats``, which costs a second at start-up)."""
    from scipy.special import stdtrit

    return stdtrit(df, p)


def t_quantile(p: float, df: float) -> float:
    """The ``p`` quantile of Student's t with ``df`` degrees of freedom (SciPy)."""
    if not 0.0 < p < 1.0:
        raise ValueError(f"t_quantile: p = {p} must be in (0, 1)")
    if df <= 0:
        raise ValueError(f"t_quantile: df = {df} must be positive")
    return float(_stdtrit(df, p))


@dataclass(frozen=True)
class WelchInterval:
    """``ratio`` (baseline / candidate) in ``[low, high]`` at ``confidence``."""

    ratio: float
    low: float
    high: float
    df: float | None
    se: float
    t: float | None


def family_confidence(confidence: float, claims: int) -> float:
    """The confidence each of ``claims`` intervals is computed at so that all of them
    cover together with probability at least ``confidence`` (Bonferroni's simultaneous
    intervals: ``1 - (1 - confidence) / claims``); ``confidence`` itself for one claim.
    A campaign whose claims are read jointly (several candidate arms, several
    conditions) states each at this level, so its family-wise error is the stated one."""
    if claims < 1:
        raise ValueError(f"family_confidence: {claims} claims")
    return 1.0 - (1.0 - confidence) / claims


def _logs(values: Sequence[float], what: str) -> list[float]:
    if any(not math.isfinite(v) or v <= 0 for v in values):
        raise ValueError(f"{what}: latencies must be positive and finite")
    return [math.log(v) for v in values]


def _mean_var(values: Sequence[float]) -> tuple[float, float]:
    n = len(values)
    mean = math.fsum(values) / n
    return mean, math.fsum((v - mean) ** 2 for v in values) / (n - 1)


def welch_log_interval(
    baseline: Sequence[float], candidate: Sequence[float], confidence: float
) -> WelchInterval:
    """The Welch interval on log values for baseline / candidate latency (module doc)."""
    if len(baseline) < 2 or len(candidate) < 2:
        raise ValueError("the Welch interval needs at least 2 values per arm")
    x = _logs(baseline, "baseline")
    y = _logs(candidate, "candidate")
    mx, vx = _mean_var(x)
    my, vy = _mean_var(y)
    d = mx - my
    ax, ay = vx / len(x), vy / len(y)
    se = math.sqrt(ax + ay)
    if se == 0.0:
        ratio = math.exp(d)
        return WelchInterval(ratio, ratio, ratio, None, 0.0, None)
    df = (ax + ay) ** 2 / (ax * ax / (len(x) - 1) + ay * ay / (len(y) - 1))
    t = t_quantile((1.0 + confidence) / 2.0, df)
    return WelchInterval(math.exp(d), math.exp(d - t * se), math.exp(d + t * se), df, se, t)


def paired_log_interval(pairs: Sequence[tuple[float, float]], confidence: float) -> WelchInterval:
    """The t interval of ``log(baseline / candidate)`` over paired runs (module doc)."""
    if len(pairs) < 2:
        raise ValueError("the paired interval needs at least 2 pairs")
    b = _logs([p[0] for p in pairs], "baseline")
    c = _logs([p[1] for p in pairs], "candidate")
    diffs = [x - y for x, y in zip(b, c, strict=True)]
    d, var = _mean_var(diffs)
    se = math.sqrt(var / len(diffs))
    if se == 0.0:
        ratio = math.exp(d)
        return WelchInterval(ratio, ratio, ratio, None, 0.0, None)
    df = float(len(diffs) - 1)
    t = t_quantile((1.0 + confidence) / 2.0, df)
    return WelchInterval(math.exp(d), math.exp(d - t * se), math.exp(d + t * se), df, se, t)


def log_bounds(
    x: npt.NDArray[np.float64], y: npt.NDArray[np.float64], confidence: float
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Welch bounds on ``mean(x) - mean(y)`` along the last axis of log-value arrays:
    ``(d, low, high)`` per leading index (many simulated campaigns at once)."""
    import numpy as np

    nx, ny = x.shape[-1], y.shape[-1]
    if nx < 2 or ny < 2:
        raise ValueError("the Welch interval needs at least 2 values per arm")
    ax = x.var(axis=-1, ddof=1) / nx
    ay = y.var(axis=-1, ddof=1) / ny
    d = x.mean(axis=-1) - y.mean(axis=-1)
    se = np.sqrt(ax + ay)
    with np.errstate(divide="ignore", invalid="ignore"):
        df = (ax + ay) ** 2 / (ax * ax / (nx - 1) + ay * ay / (ny - 1))
    t = np.where(se > 0, _stdtrit(np.where(se > 0, df, 1.0), (1.0 + confidence) / 2.0), 0.0)
    return d, d - t * se, d + t * se


def _noncentral_power(shift: float, sd: float, runs: int, confidence: float) -> float:
    """Power by the noncentral t with the pooled ``df = 2·runs - 2``: an upper bound on the
    Welch interval's (whose ``df`` is smaller), used to start the search for runs."""
    stats = _stats()
    df = 2 * runs - 2
    crit = float(_stdtrit(df, (1.0 + confidence) / 2.0))
    return float(stats.nct.sf(crit, df, shift / (sd * math.sqrt(2.0 / runs))))


def power(
    ratio: float,
    min_speedup: float,
    sd: float,
    runs: int,
    confidence: float,
    *,
    draws: int = 20_000,
    seed: int = 0,
) -> float:
    """The probability that the ``confidence`` Welch interval's low end exceeds
    ``min_speedup`` when the true speedup is ``ratio``, with ``runs`` runs per arm of log
    spread ``sd``: ``draws`` seeded campaigns through :func:`log_bounds` (the Welch
    ``df`` varies with the sample, so no closed form is exact)."""
    import numpy as np

    if runs < 2:
        return 0.0
    shift = math.log(ratio) - math.log(min_speedup)
    if sd <= 0:
        return 1.0 if shift > 0 else 0.0
    rng = np.random.default_rng(seed)
    x = rng.normal(shift, sd, size=(draws, runs))
    y = rng.normal(0.0, sd, size=(draws, runs))
    _, low, _ = log_bounds(x, y, confidence)
    return float(np.mean(low > 0.0))


def runs_needed(
    ratio: float,
    min_speedup: float,
    sd: float,
    confidence: float,
    target: float = 0.8,
    limit: int = 200,
) -> int | None:
    """The fewest runs per arm whose :func:`power` reaches ``target``; ``None`` when no
    number up to ``limit`` does (or the true ratio does not exceed ``min_speedup``)."""
    if ratio <= min_speedup:
        return None
    shift = math.log(ratio) - math.log(min_speedup)
    runs = 2
    if sd > 0:  # the noncentral t over-states power: no smaller number can reach the target
        while runs < limit and _noncentral_power(shift, sd, runs, confidence) < target:
            runs += 1
    for n in range(runs, limit + 1):
        if power(ratio, min_speedup, sd, n, confidence) >= target:
            return n
    return None
