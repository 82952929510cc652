"""Statistics for 3+ runs a side: mean, sample standard deviation, and Welch's t-test with the
Student t distribution computed from the regularized incomplete beta function (the continued
fraction of Numerical Recipes, 3rd ed., section 6.4), so no SciPy is needed."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass


def mean_sd(values: Sequence[float]) -> tuple[float, float | None]:
    """Mean and sample standard deviation (None for one value), as the runbook's block computes them."""
    return statistics.mean(values), statistics.stdev(values) if len(values) > 1 else None


def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction of the incomplete beta function (modified Lentz)."""
    tiny, eps = 1e-300, 3e-16
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 1000):
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
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < eps:
            break
    return h


def betainc(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function I_x(a, b)."""
    if not 0.0 <= x <= 1.0:
        raise ValueError(f"x must be in [0, 1], got {x}")
    if x in (0.0, 1.0):
        return x
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def t_sf_two_sided(t: float, df: float) -> float:
    """P(|T| >= |t|) for Student's t with ``df`` degrees of freedom."""
    if math.isinf(t):
        return 0.0
    return betainc(df / 2.0, 0.5, df / (df + t * t))


def t_cdf(t: float, df: float) -> float:
    """P(T <= t) for Student's t with ``df`` degrees of freedom."""
    tail = t_sf_two_sided(t, df) / 2.0
    return 1.0 - tail if t > 0 else tail


@dataclass(frozen=True)
class Welch:
    """Welch's unequal-variance t-test of B against A."""

    t: float
    df: float
    p: float  # two-sided


def welch(a: Sequence[float], b: Sequence[float]) -> Welch:
    """Welch's t-test; both samples need two or more values. Zero spread on both sides: p is 1
    for equal means and 0 otherwise (any difference is then exact)."""
    if len(a) < 2 or len(b) < 2:
        raise ValueError("Welch's t-test needs at least two values a side")
    ma, mb = statistics.mean(a), statistics.mean(b)
    va, vb = statistics.variance(a) / len(a), statistics.variance(b) / len(b)
    if va + vb == 0:
        return Welch(0.0 if ma == mb else math.copysign(math.inf, mb - ma), float(len(a) + len(b) - 2),
                     1.0 if ma == mb else 0.0)
    t = (mb - ma) / math.sqrt(va + vb)
    df = (va + vb) ** 2 / (va ** 2 / (len(a) - 1) + vb ** 2 / (len(b) - 1))
    return Welch(t, df, t_sf_two_sided(t, df))


def correlation(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Pearson's r, or None when either side has no spread."""
    if len(x) < 2 or len(x) != len(y):
        return None
    mx, my = statistics.mean(x), statistics.mean(y)
    sxy = sum((a - mx) * (b - my) for a, b in zip(x, y, strict=True))
    sxx, syy = sum((a - mx) ** 2 for a in x), sum((b - my) ** 2 for b in y)
    return None if sxx == 0 or syy == 0 else sxy / math.sqrt(sxx * syy)
