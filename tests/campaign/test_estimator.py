"""The speedup estimator: Student's t quantile (SciPy) and the Welch interval on log
times, checked against tabulated values, closed forms and an independent implementation
(the regularized incomplete beta function by Lentz's continued fraction, kept here)."""

from __future__ import annotations

import math

import pytest

pytest.importorskip("scipy")

from evidencestore.campaign.estimator import t_quantile, welch_log_interval


# -- an independent Student's t (no SciPy): the cross-check of the library's quantiles --
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
    """Student's t CDF from the incomplete beta function."""
    tail = 0.5 * betainc(df / 2.0, 0.5, df / (df + t * t))
    return 1.0 - tail if t > 0 else tail


# Two-sided 95 % and 99 % critical values (upper 0.975 / 0.995 quantiles), as tabulated
# (NIST/SEMATECH e-Handbook, table 1.3.6.7.2, to 3 decimals; the further digits are the
# standard high-precision values).
TABLE = [
    (1, 0.975, 12.706204736174698),
    (2, 0.975, 4.302652729749464),
    (3, 0.975, 3.182446305284263),
    (5, 0.975, 2.570581835636314),
    (10, 0.975, 2.228138851986274),
    (30, 0.975, 2.042272456301238),
    (1, 0.995, 63.65674116287399),
    (4, 0.995, 4.604094871415897),
    (9, 0.995, 3.249835541592143),
]


@pytest.mark.parametrize(("df", "p", "expected"), TABLE)
def test_t_quantile_tabulated(df: int, p: float, expected: float) -> None:
    assert abs(t_quantile(p, df) - expected) < 1e-9


def _closed_form(p: float, df: int) -> float:
    """Exact quantiles for 1, 2 and 4 degrees of freedom (Hill 1970)."""
    if df == 1:
        return math.tan(math.pi * (p - 0.5))
    if df == 2:
        return (2 * p - 1) / math.sqrt(2 * p * (1 - p))
    alpha = 4 * p * (1 - p)
    q = math.cos(math.acos(math.sqrt(alpha)) / 3) / math.sqrt(alpha)
    return math.copysign(2 * math.sqrt(q - 1), p - 0.5)


@pytest.mark.parametrize("df", [1, 2, 4])
@pytest.mark.parametrize("p", [0.6, 0.8, 0.9, 0.95, 0.975, 0.99, 0.995, 0.05, 0.3])
def test_t_quantile_closed_forms(df: int, p: float) -> None:
    expected = _closed_form(p, df)
    assert abs(t_quantile(p, df) - expected) < 1e-9 * max(1.0, abs(expected))


def test_t_quantile_against_independent_cdf() -> None:
    # The library's (SciPy's) quantile, put back through the independent CDF.
    for df in (1, 1.5, 2.7, 3, 6.4, 12, 47.3, 200):
        for p in (0.55, 0.9, 0.975, 0.999):
            assert abs(t_cdf(t_quantile(p, df), df) - p) < 1e-10


def test_cdf_and_beta_properties() -> None:
    assert t_cdf(0.0, 5) == 0.5
    assert abs(t_cdf(2.570581835636314, 5) - 0.975) < 1e-12
    assert abs(betainc(2.0, 3.0, 0.4) - 0.5248) < 1e-12  # I_0.4(2,3) = 0.5248 exactly
    assert t_quantile(0.5, 3) == 0.0
    with pytest.raises(ValueError, match="must be in"):
        t_quantile(1.0, 3)
    with pytest.raises(ValueError, match="must be positive"):
        t_quantile(0.9, 0)


def test_welch_interval_by_hand() -> None:
    base = [10.0, 11.0, 10.5, 10.2]
    cand = [8.0, 8.4, 8.1]
    iv = welch_log_interval(base, cand, 0.95)
    x = [math.log(v) for v in base]
    y = [math.log(v) for v in cand]
    mx, my = sum(x) / 4, sum(y) / 3
    sx = sum((v - mx) ** 2 for v in x) / 3
    sy = sum((v - my) ** 2 for v in y) / 2
    se = math.sqrt(sx / 4 + sy / 3)
    df = (sx / 4 + sy / 3) ** 2 / ((sx / 4) ** 2 / 3 + (sy / 3) ** 2 / 2)
    assert abs(iv.df - df) < 1e-9 if iv.df is not None else False
    assert abs(iv.ratio - math.exp(mx - my)) < 1e-12
    # The geometric means' ratio, baseline over candidate.
    gm = math.prod(base) ** 0.25 / math.prod(cand) ** (1 / 3)
    assert abs(iv.ratio - gm) < 1e-12
    half = t_quantile(0.975, df) * se
    assert abs(iv.low - math.exp(mx - my - half)) < 1e-12
    assert abs(iv.high - math.exp(mx - my + half)) < 1e-12
    assert iv.low < iv.ratio < iv.high


def test_welch_interval_degenerate_and_invalid() -> None:
    iv = welch_log_interval([2.0, 2.0, 2.0], [1.0, 1.0, 1.0], 0.95)
    assert (iv.ratio, iv.low, iv.high, iv.df) == (2.0, 2.0, 2.0, None)
    with pytest.raises(ValueError, match="at least 2"):
        welch_log_interval([1.0], [1.0, 2.0], 0.95)
    with pytest.raises(ValueError, match="positive"):
        welch_log_interval([1.0, -1.0], [1.0, 2.0], 0.95)


def test_paired_interval_by_hand() -> None:
    from evidencestore.campaign.estimator import paired_log_interval

    pairs = [(10.0, 8.0), (11.0, 8.9), (10.4, 8.1), (12.0, 9.9)]
    iv = paired_log_interval(pairs, 0.95)
    d = [math.log(b / c) for b, c in pairs]
    mean = sum(d) / 4
    se = math.sqrt(sum((v - mean) ** 2 for v in d) / 3 / 4)
    half = 3.182446305284263 * se  # t(0.975, 3), tabulated
    assert iv.df == 3.0
    assert abs(iv.ratio - math.exp(mean)) < 1e-12
    assert abs(iv.low - math.exp(mean - half)) < 1e-9
    assert abs(iv.high - math.exp(mean + half)) < 1e-9
    with pytest.raises(ValueError, match="at least 2 pairs"):
        paired_log_interval(pairs[:1], 0.95)


def test_power_agrees_with_simulation_and_noncentral_bounds() -> None:
    np = pytest.importorskip("numpy")
    from scipy import stats

    from evidencestore.campaign.estimator import log_bounds, power, runs_needed

    rng = np.random.default_rng(7)
    for ratio, sd, n in ((1.2, 0.1, 4), (1.1, 0.05, 3), (1.05, 0.04, 6), (1.3, 0.2, 5)):
        x = rng.normal(math.log(ratio), sd, size=(20000, n))
        y = rng.normal(0.0, sd, size=(20000, n))
        _, low, _ = log_bounds(x, y, 0.95)
        simulated = float(np.mean(low > 0.0))  # another seed: an independent estimate
        got = power(ratio, 1.0, sd, n, 0.95)
        assert abs(got - simulated) < 0.02, (ratio, sd, n)
        # Welch's df lies between n - 1 and 2n - 2: its power between theirs.
        delta = math.log(ratio) / (sd * math.sqrt(2 / n))
        lo, hi = (stats.nct.sf(stats.t.ppf(0.975, df), df, delta) for df in (n - 1, 2 * n - 2))
        assert lo - 0.01 < got < hi + 0.01
    need = runs_needed(1.2, 1.0, 0.1, 0.95, 0.8)
    assert need is not None
    assert power(1.2, 1.0, 0.1, need, 0.95) >= 0.8 > power(1.2, 1.0, 0.1, need - 1, 0.95)
    assert runs_needed(1.0, 1.0, 0.1, 0.95) is None  # no speedup cannot be resolved
    assert power(0.9, 0.98, 0.0, 5, 0.95) == 0.0 and power(1.01, 0.98, 0.0, 5, 0.95) == 1.0


def test_percentile_order_statistic_interval_against_binomial() -> None:
    """The order-statistic interval's coverage, recomputed from the binomial directly."""
    from math import comb

    from evidencestore.campaign.percentiles import percentile, requests_needed

    values = [float(v) for v in range(1, 101)]
    p = percentile("a", values, 0.5, 0.95)
    assert p.value == 50.0 and p.low is not None and p.high is not None
    lo, hi = int(p.low), int(p.high)  # values are their own ranks
    cover = sum(comb(100, k) * 0.5**100 for k in range(lo, hi))
    assert cover == pytest.approx(p.coverage) and cover >= 0.95
    # Each tail at most 2.5 %.
    assert sum(comb(100, k) * 0.5**100 for k in range(lo)) <= 0.025
    assert sum(comb(100, k) * 0.5**100 for k in range(hi, 101)) <= 0.025
    # A high quantile's upper rank needs q**n <= 2.5 %: the largest value must be able
    # to lie above it (the lower rank is no constraint there).
    assert requests_needed(0.99, 0.95) == 368
    assert 0.99**368 <= 0.025 < 0.99**367
    few = percentile("a", values[:10], 0.9, 0.95)
    assert few.low is None and few.needed == requests_needed(0.9, 0.95) == 36
    assert 0.9**36 <= 0.025 < 0.9**35


def test_percentile_ranks_are_scipy_stats_binomial_without_importing_it() -> None:
    """The ranks and coverage equal scipy.stats.binom's to the bit, and computing a
    percentile imports scipy.special only, never scipy.stats (a second at start-up)."""
    import subprocess
    import sys

    from scipy.stats import binom

    from evidencestore.campaign import percentiles

    for confidence in (0.9, 0.95, 0.99):
        alpha = (1.0 - confidence) / 2
        for q in (0.5, 0.9, 0.99):
            for n in (*range(1, 60), 100, 368, 1000, 4321):
                low = int(binom.ppf(alpha, n, q))
                high = int(binom.ppf(1.0 - alpha, n, q)) + 1
                assert percentiles._ranks(n, q, confidence) == (low, high), (confidence, q, n)
                values = [float(v) for v in range(1, n + 1)]
                p = percentiles.percentile("a", values, q, confidence)
                if low >= 1 and high <= n:
                    cover = float(binom.cdf(high - 1, n, q) - binom.cdf(low - 1, n, q))
                    assert p.coverage == cover and (p.low, p.high) == (low, high)
                else:
                    assert p.coverage is None and p.needed is not None
    code = (
        "import sys\n"
        "from evidencestore.campaign.percentiles import percentile\n"
        "p = percentile('a', [float(v) for v in range(1, 101)], 0.5, 0.95)\n"
        "assert p.coverage is not None\n"
        "print('scipy.stats' in sys.modules, 'scipy.special' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "True"]
