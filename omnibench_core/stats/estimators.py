"""Statistics for a few runs a side: mean and sample standard deviation (as the runbook's block),
Student t quantiles and tails, the paired t and Welch t estimates of a change, and the exact
permutation p-values the verdicts use when there is no spread to estimate.

The t distribution comes from SciPy's ``scipy.special.stdtr``/``stdtrit`` (the functions
``scipy.stats.t.cdf``/``.ppf`` call; imported from ``scipy.special`` because ``scipy.stats`` takes
three times as long to import on every ``invoke compare``). Intervals need the quantile, the
inverse of the tail; SciPy's is tested far beyond what a hand-written inversion here would be.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass


def mean_sd(values: Sequence[float]) -> tuple[float, float | None]:
    """Mean and sample standard deviation (None for one value), as the runbook's block computes them."""
    return statistics.mean(values), statistics.stdev(values) if len(values) > 1 else None


def t_quantile(q: float, df: float) -> float:
    """The ``q`` quantile of Student's t with ``df`` degrees of freedom (``df`` may be fractional)."""
    from scipy.special import stdtrit  # lazily: only a comparison needs SciPy

    return float(stdtrit(df, q))


def t_sf_two_sided(t: float, df: float) -> float:
    """P(|T| >= |t|) for Student's t with ``df`` degrees of freedom."""
    from scipy.special import stdtr

    if math.isinf(t):
        return 0.0
    return float(min(1.0, 2.0 * stdtr(df, -abs(t))))


def t_cdf(t: float, df: float) -> float:
    """P(T <= t) for Student's t with ``df`` degrees of freedom."""
    from scipy.special import stdtr

    return float(stdtr(df, t))


@dataclass(frozen=True)
class TEstimate:
    """A change estimated with a t statistic: ``estimate`` on the scale it was computed on, its
    standard error and degrees of freedom; ``p`` is two-sided against no change."""

    estimate: float
    se: float
    df: float
    p: float

    def interval(self, level: float) -> tuple[float, float]:
        """The two-sided ``1 - level`` confidence interval of the estimate."""
        half = t_quantile(1.0 - level / 2.0, self.df) * self.se
        return self.estimate - half, self.estimate + half


def paired_t(differences: Sequence[float]) -> TEstimate:
    """The paired t estimate of the mean of per-round differences; needs two or more rounds with
    some spread (no spread is the exact rule's case, never a t of infinity)."""
    n = len(differences)
    if n < 2:
        raise ValueError("a paired t interval needs at least two rounds")
    sd = statistics.stdev(differences)
    if sd == 0:
        raise ValueError("the differences have no spread")
    mean = statistics.mean(differences)
    se = sd / math.sqrt(n)
    return TEstimate(mean, se, float(n - 1), t_sf_two_sided(mean / se, n - 1))


def welch_df(var_a: float, n_a: int, var_b: float, n_b: int) -> float:
    """Welch-Satterthwaite degrees of freedom of two sample variances."""
    va, vb = var_a / n_a, var_b / n_b
    return (va + vb) ** 2 / (va ** 2 / (n_a - 1) + vb ** 2 / (n_b - 1))


def welch_t(a: Sequence[float], b: Sequence[float]) -> TEstimate:
    """Welch's unequal-variance t estimate of mean(B) - mean(A); two or more values a side and
    some spread on at least one side."""
    if len(a) < 2 or len(b) < 2:
        raise ValueError("Welch's t needs at least two values a side")
    var_a, var_b = statistics.variance(a), statistics.variance(b)
    if var_a == var_b == 0:
        raise ValueError("neither side has spread")
    diff = statistics.mean(b) - statistics.mean(a)
    se = math.sqrt(var_a / len(a) + var_b / len(b))
    df = welch_df(var_a, len(a), var_b, len(b))
    return TEstimate(diff, se, df, t_sf_two_sided(diff / se, df))


def exact_p_paired(rounds: int) -> float:
    """Two-sided p of the sign-flip permutation test when every round moved by the same nonzero
    amount: the observed mean is the most extreme of the 2^n sign patterns, and 2 of them reach it."""
    return min(1.0, 2.0 / 2.0 ** rounds)


def exact_p_unpaired(n_a: int, n_b: int) -> float:
    """Two-sided p of the permutation test when each side is constant and the two differ: the
    observed split is the most extreme of the C(n_a + n_b, n_a) ways to label the runs, and 2 of
    them (all B above all A, or all below) reach it."""
    return min(1.0, 2.0 / math.comb(n_a + n_b, n_a))


def correlation(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Pearson's r, or None when either side has no spread."""
    if len(x) < 2 or len(x) != len(y):
        return None
    mx, my = statistics.mean(x), statistics.mean(y)
    sxy = sum((a - mx) * (b - my) for a, b in zip(x, y, strict=True))
    sxx, syy = sum((a - mx) ** 2 for a in x), sum((b - my) ** 2 for b in y)
    return None if sxx == 0 or syy == 0 else sxy / math.sqrt(sxx * syy)
