"""Percentiles with distribution-free confidence intervals from order statistics.

For ``n`` values and quantile ``q`` the number of values below the true quantile is
Binomial(``n``, ``q``), whatever the distribution, so the interval between the order
statistics ``x_(l)`` and ``x_(u)`` (1-based) covers it with probability
``F(u - 1) - F(l - 1)`` (``F`` the binomial CDF). ``l`` and ``u`` are chosen by SciPy's
binomial quantiles so each tail has at most ``(1 - confidence) / 2``; when ``l < 1`` or
``u > n`` there are too few values for a two-sided interval, and the number of values it
would need is given instead. The point estimate is the nearest-rank percentile
``x_(ceil(q n))``.

The binomial quantile and CDF are the ufuncs ``scipy.stats.binom`` evaluates (Boost's,
``_binom_ppf`` and ``_binom_cdf`` in SciPy's private ``scipy.special._ufuncs``): the same
numbers without importing ``scipy.stats``, which costs about a second at start-up;
``scipy.stats.binom`` is used where a SciPy lacks them or has moved them.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from ..models import Model

__all__ = ["Percentile", "percentile", "requests_needed"]


class Percentile(Model, frozen=True, kw_only=True, omit_defaults=False):
    """One percentile of one arm's values: the estimate, its order-statistic interval
    (None with too few values, when ``needed`` says how many it takes), ``n`` and the
    interval's exact coverage."""

    arm: str
    q: float
    n: int
    value: float | None
    low: float | None = None
    high: float | None = None
    coverage: float | None = None
    needed: int | None = None


def _binom() -> tuple[Callable[..., Any], Callable[..., Any]]:
    """``(ppf, cdf)`` of the binomial distribution for probabilities strictly inside
    (0, 1) and integer counts, as ``scipy.stats.binom`` computes them."""
    try:  # private to SciPy: the module scipy.stats.binom itself calls into
        from scipy.special import _ufuncs
    except ImportError:  # pragma: no cover - a SciPy that moved it
        _ufuncs = None
    ppf, cdf = getattr(_ufuncs, "_binom_ppf", None), getattr(_ufuncs, "_binom_cdf", None)
    if ppf is None or cdf is None:  # pragma: no cover - a SciPy without Boost's binomial
        from scipy.stats import binom

        return binom.ppf, binom.cdf
    return ppf, cdf


def _ranks(n: int, q: float, confidence: float) -> tuple[int, int]:
    ppf, _ = _binom()
    alpha = (1.0 - confidence) / 2
    low = int(ppf(alpha, n, q))
    high = int(ppf(1.0 - alpha, n, q)) + 1
    return low, high


def requests_needed(q: float, confidence: float, limit: int = 10_000_000) -> int:
    """The fewest values for which a two-sided interval of quantile ``q`` exists."""
    lo, hi = 1, 2
    while hi < limit:
        low, high = _ranks(hi, q, confidence)
        if low >= 1 and high <= hi:
            break
        hi *= 2
    while lo < hi:
        mid = (lo + hi) // 2
        low, high = _ranks(mid, q, confidence)
        if low >= 1 and high <= mid:
            hi = mid
        else:
            lo = mid + 1
    return hi


def percentile(arm: str, values: Sequence[float], q: float, confidence: float) -> Percentile:
    """Quantile ``q`` of ``values`` with its order-statistic interval (module doc)."""
    xs = sorted(values)
    n = len(xs)
    if n == 0:
        return Percentile(arm=arm, q=q, n=0, value=None, needed=requests_needed(q, confidence))
    value = xs[max(1, math.ceil(q * n)) - 1]
    low, high = _ranks(n, q, confidence)
    if low < 1 or high > n:
        return Percentile(arm=arm, q=q, n=n, value=value, needed=requests_needed(q, confidence))
    _, cdf = _binom()

    def below(k: int) -> float:  # clipped to [0, 1], as scipy.stats does
        return min(1.0, max(0.0, float(cdf(k, n, q))))

    coverage = below(high - 1) - below(low - 1)
    return Percentile(
        arm=arm, q=q, n=n, value=value, low=xs[low - 1], high=xs[high - 1], coverage=coverage
    )
