"""The speedup estimator: a Welch interval on log end-to-end times.

Campaign runs are few and long (3 to 10 runs of minutes each), where rank tests have
too little resolution and the bootstrap under-covers. Times are positive and their
spread scales with their level, so the estimator works on logarithms: with ``x`` the
log baseline latencies and ``y`` the log candidate latencies (measured requests of
complete runs), the speedup is ``exp(mean(x) - mean(y))`` (the ratio of geometric
means, baseline / candidate) and its ``c`` confidence interval is
``exp(d ± t_{(1+c)/2, df} · se)`` with ``se = sqrt(s_x²/n_x + s_y²/n_y)`` and the
Welch-Satterthwaite ``df = se⁴ / ((s_x²/n_x)²/(n_x-1) + (s_y²/n_y)²/(n_y-1))``. When
both samples have zero spread the interval is the point itself (``df`` is undefined).

Student's t quantile is computed here (no SciPy): the CDF from the regularized
incomplete beta function (Lentz's continued fraction), inverted by bisection to
machine precision.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["WelchInterval", "betainc", "t_cdf", "t_quantile", "welch_log_interval"]


def _betacf(a: float, b: float, x: float) -> float:
    tiny = 1e-300
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 10_000):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        step = d * c
        h *= step
        if abs(step - 1.0) < 1e-16:
            break
    return h


def betainc(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function ``I_x(a, b)``."""
    if not 0.0 <= x <= 1.0:
        raise ValueError(f"betainc: x = {x} is outside [0, 1]")
    if x in (0.0, 1.0):
        return x
    log_front = (
        math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    )
    front = math.exp(log_front)
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def t_cdf(t: float, df: float) -> float:
    """Student's t cumulative distribution function with ``df`` degrees of freedom."""
    if df <= 0:
        raise ValueError(f"t_cdf: df = {df} must be positive")
    tail = 0.5 * betainc(df / 2.0, 0.5, df / (df + t * t))
    return 1.0 - tail if t > 0 else tail


def t_quantile(p: float, df: float) -> float:
    """The ``p`` quantile of Student's t with ``df`` degrees of freedom (bisection)."""
    if not 0.0 < p < 1.0:
        raise ValueError(f"t_quantile: p = {p} must be in (0, 1)")
    if p == 0.5:
        return 0.0
    if p < 0.5:
        return -t_quantile(1.0 - p, df)
    lo, hi = 0.0, 1.0
    while t_cdf(hi, df) < p:
        lo, hi = hi, hi * 2.0
        if hi > 1e300:
            raise ValueError(f"t_quantile: p = {p} too close to 1 for df = {df}")
    for _ in range(2000):
        mid = 0.5 * (lo + hi)
        if mid in (lo, hi):
            break
        if t_cdf(mid, df) < p:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


@dataclass(frozen=True)
class WelchInterval:
    """``ratio`` (baseline / candidate) in ``[low, high]`` at ``confidence``."""

    ratio: float
    low: float
    high: float
    df: float | None
    se: float
    t: float | None


def _mean_var(values: Sequence[float]) -> tuple[float, float]:
    n = len(values)
    mean = math.fsum(values) / n
    return mean, math.fsum((v - mean) ** 2 for v in values) / (n - 1)


def welch_log_interval(
    baseline: Sequence[float], candidate: Sequence[float], confidence: float
) -> WelchInterval:
    """The Welch interval on log times for baseline / candidate latency (module doc)."""
    if len(baseline) < 2 or len(candidate) < 2:
        raise ValueError("the Welch interval needs at least 2 values per arm")
    if any(v <= 0 or not math.isfinite(v) for v in (*baseline, *candidate)):
        raise ValueError("latencies must be positive and finite")
    x = [math.log(v) for v in baseline]
    y = [math.log(v) for v in candidate]
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
