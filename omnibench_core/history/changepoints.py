"""Change points of one series: asv's step detection over the per-commit means (a Potts fit with
its gamma chosen by an information criterion, weighted by each commit's run count), then each step
kept only when Welch's t interval of the relative change between the two segments either side
excludes no change and the change is at least the minimum effect (5 %, as compare's). benchmarks/bench_changepoints.py measured this against Apache Otava's and
MongoDB's E-Divisive and ruptures (docs/history.md has the figures and the reasons).

Pure functions over numbers; the series' commits and environments are the caller's.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from ..defaults import MIN_EFFECT
from ..stats.estimators import welch_t

CONFIDENCE = 0.95
# asv's own penalty (times this), 4 ln(n) / n a breakpoint: lower ones found more candidates, and the
# interval test did not throw the noise among them out (bench_changepoints.py; docs/history.md).
BETA_SCALE = 1.0


def describe(min_effect: float = MIN_EFFECT) -> str:
    """The method and its parameters, as ``History.detector`` shows them."""
    return (f"asv step_detect (Potts, beta {BETA_SCALE} x 4 ln(n)/n), each step kept when its Welch t "
            f"{CONFIDENCE:.0%} interval excludes 0 and it is at least {min_effect:.0%}")


@dataclass(frozen=True)
class Step:
    """A kept step: ``index`` is the first point after it; the segments' pooled runs either side,
    their means and the relative change after/before - 1 with its interval."""

    index: int
    before: tuple[float, ...]
    after: tuple[float, ...]
    before_mean: float
    after_mean: float
    step: float
    low: float
    high: float
    p: float


def _candidates(runs: Sequence[Sequence[float]], beta_scale: float) -> list[int]:
    from asv.step_detect import solve_potts_autogamma  # asv is heavy to import; only a query needs it

    means = [statistics.fmean(r) for r in runs]
    n = len(means)
    right, _, _, _ = solve_potts_autogamma(means, [float(len(r)) for r in runs], beta=beta_scale * 4 * math.log(n) / n)
    return [int(r) for r in right[:-1]]


def relative_change(before: Sequence[float], after: Sequence[float], confidence: float = CONFIDENCE
                    ) -> tuple[float, float, float, float] | None:
    """(change, low, high, p) of mean(after) against mean(before), as a fraction of |mean(before)|:
    Welch's t interval, or the exact point when neither side has spread; None with fewer than two
    values a side or a before mean of 0."""
    if len(before) < 2 or len(after) < 2:
        return None
    base = abs(statistics.fmean(before))
    if base == 0:
        return None
    diff = statistics.fmean(after) - statistics.fmean(before)
    if statistics.pvariance(before) == statistics.pvariance(after) == 0:
        return diff / base, diff / base, diff / base, 0.0 if diff else 1.0
    t = welch_t(before, after)
    lo, hi = t.interval(1.0 - confidence)
    return diff / base, lo / base, hi / base, t.p


def _judge(runs: Sequence[Sequence[float]], cuts: Sequence[int], confidence: float, min_effect: float
           ) -> list[Step | int]:
    """Each cut as a Step when its interval excludes 0 and the change is at least ``min_effect``
    (as compare's better/worse), else the cut index itself (to drop)."""
    out: list[Step | int] = []
    edges = [0, *cuts, len(runs)]
    for j, k in enumerate(cuts, start=1):
        before = tuple(v for r in runs[edges[j - 1]:k] for v in r)
        after = tuple(v for r in runs[k:edges[j + 1]] for v in r)
        change = relative_change(before, after, confidence)
        if change is None or change[1] <= 0 <= change[2] or abs(change[0]) < min_effect:
            out.append(k)
            continue
        out.append(Step(k, before, after, statistics.fmean(before), statistics.fmean(after), *change))
    return out


def find_steps(runs: Sequence[Sequence[float]], *, confidence: float = CONFIDENCE, min_effect: float = MIN_EFFECT,
               beta_scale: float = BETA_SCALE) -> list[Step]:
    """The steps of a series given as each point's run values (first-parent order, oldest first).

    A step smaller than ``min_effect`` is not flagged even when sure: with a few tight runs a
    commit, a host that got a little busier between two campaigns is a sure step of a few percent
    (seen on the 2-core CI machine), and a flag starts a bisect. A step whose interval holds 0,
    or that is too small, is dropped and the rest judged again over the merged segments,
    the least certain first, until every step left is sure. Fewer than two points: no steps.
    """
    if len(runs) < 2 or any(not r for r in runs):
        return []
    cuts = _candidates(runs, beta_scale)
    while True:
        judged = _judge(runs, cuts, confidence, min_effect)
        failing = [j for j in judged if isinstance(j, int)]
        if not failing:
            return [j for j in judged if isinstance(j, Step)]
        # Drop one at a time: merging two segments can make the step next to them sure.
        worst = max(failing, key=lambda k: _p_at(runs, cuts, k, confidence, min_effect))
        cuts = [c for c in cuts if c != worst]


def _p_at(runs: Sequence[Sequence[float]], cuts: Sequence[int], k: int, confidence: float, min_effect: float) -> float:
    """How unsure the cut at ``k`` is: its p, above every p when it is too small or has no interval."""
    edges = [0, *cuts, len(runs)]
    j = edges.index(k)
    change = relative_change([v for r in runs[edges[j - 1]:k] for v in r], [v for r in runs[k:edges[j + 1]] for v in r],
                             confidence)
    if change is None:
        return 3.0
    return 2.0 - abs(change[0]) if abs(change[0]) < min_effect else change[3]
