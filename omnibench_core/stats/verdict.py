"""Four verdicts on a change of B against base A, each with its confidence interval: better,
worse, equivalent, inconclusive (and context for metrics with no better side).

Pure functions over numbers; ``invoke compare`` (two campaigns, unpaired), ``matrix``, ``bisect``
and A/B experiments (rounds, paired) all decide here. The rules (docs/verdicts.md):

- paired (rounds): the per-round log-ratios log(B/A) (B - A where a value is not positive), a
  paired t interval back-transformed to a percent change;
- unpaired (two campaigns): Welch's t interval of the difference of the means, B - A, as a
  fraction of A's mean (the same change the table's means show);
- no spread to estimate: an exact permutation rule, never a p-value of 0 from a variance of 0;
- many metrics: the family is held to ``alpha`` with Holm's step-down correction (rows that could
  never reach alpha, such as a count equal in every run, are left out of the count), and each
  row's interval is at ``1 - level``, the level it was held to, so the interval and the verdict
  agree; with ``primary`` (an A/B's decisive metrics) the family is two, tested in series
  (gatekeeping): the primary rows by Holm at ``alpha``, the others by Holm at ``alpha`` only once
  every primary row is called changed (else none of them is called better or worse);
- ``better``/``worse``: the interval excludes 0 and the change is at least the minimum effect;
  ``equivalent``: the whole interval lies within plus or minus the minimum effect;
  ``inconclusive``: neither, with about how many rounds (runs a side) would resolve it.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from enum import Enum

from .. import defaults
from .designs import Design as Design  # re-exported: callers name a design here, as before
from .designs import estimator
from .estimators import TEstimate

CORRECTION = "Holm"
NEEDED_CAP = 10_000  # past this many rounds the estimate says "more than"
LOG_OVERFLOW = 700.0  # math.expm1 overflows past about 709.78


class Verdict(str, Enum):
    """What a row says about B against A."""

    BETTER = "better"
    WORSE = "worse"
    EQUIVALENT = "equivalent"
    INCONCLUSIVE = "inconclusive"
    CONTEXT = "context"  # no better side (runbook): read with the others

    def __str__(self) -> str:
        return self.value


VERDICTS: tuple[str, ...] = tuple(v.value for v in Verdict)


@dataclass(frozen=True)
class Samples:
    """One metric's values on each side (paired: in round order, as many on each side)."""

    metric: str
    direction: str  # higher, lower or context
    a: tuple[float, ...]
    b: tuple[float, ...]
    # paired: the requests matched by id in each round, when a and b are each side's geometric
    # mean over them (stats.matched); () when they are the rounds' own values
    matched: tuple[int, ...] = ()


@dataclass(frozen=True)
class Change:
    """One metric's change before a level is chosen. ``t`` is None under the exact rule (no
    spread); ``problem`` says why no change could be estimated (the row is then inconclusive)."""

    samples: Samples
    design: str  # the estimator's name (a Design member for the built-in ones)
    log_scale: bool  # log(B/A) (paired, all values positive); else B - A
    estimate: float  # on that scale
    base: float  # |mean of A|: B - A is relative to it (unused on the log scale)
    t: TEstimate | None
    p: float
    sds: tuple[float, ...]  # paired: the differences' sd; unpaired: A's and B's, on that scale
    problem: str = ""

    @property
    def relative(self) -> bool:
        """Whether the change reads as a fraction of A (always, except B - A with A's mean 0)."""
        return self.log_scale or self.base > 0

    @property
    def method(self) -> str:
        """How the interval was made, in words."""
        if self.problem:
            return "none"
        scale = "log(B/A)" if self.log_scale else "B - A"
        if self.samples.matched:
            scale += f" of {min(self.samples.matched)}+ matched requests a round"
        if self.t is None:
            return f"exact (no spread), {scale}"
        return f"{estimator(self.design).test}, {scale}"

    def interval(self, level: float) -> tuple[float, float]:
        """The ``1 - level`` interval on the analysis scale (a point under the exact rule)."""
        return (self.estimate, self.estimate) if self.t is None else self.t.interval(level)

    def reported(self, x: float) -> float:
        """A value of the analysis scale as a change: a fraction of A (0.1 is +10 %), or B - A."""
        if self.log_scale:
            # a t interval of 2 runs at a small level can reach e^1000: "+inf %", never an OverflowError
            return math.expm1(x) if x < LOG_OVERFLOW else math.inf
        return x / self.base if self.base > 0 else x

    def bounds(self, min_effect: float) -> tuple[float, float]:
        """Plus or minus the minimum effect, on the analysis scale."""
        if self.log_scale:
            return (math.log1p(-min_effect) if min_effect < 1 else -math.inf), math.log1p(min_effect)
        return -min_effect * self.base, min_effect * self.base


@dataclass(frozen=True)
class MetricVerdict:
    """One row: the verdict, the change and its interval at ``1 - level``. ``change``, ``low``
    and ``high`` are fractions of A (``relative``) or, when A's mean is 0, B - A."""

    metric: str
    direction: str
    verdict: Verdict
    change: float | None
    low: float | None
    high: float | None
    relative: bool
    level: float  # the alpha this row was held to (Holm); the interval is at 1 - level
    p: float | None
    method: str
    design: str
    n_a: int
    n_b: int
    needed: int | None  # inconclusive: about this many rounds (paired) or runs a side would resolve it
    why: str
    in_family: bool = False  # counted in the family Holm held to alpha

    @property
    def confidence(self) -> float:
        """The interval's confidence, 1 - level."""
        return 1.0 - self.level


def _problem(samples: Samples, design: str) -> str:
    values = samples.a + samples.b
    if not all(math.isfinite(v) for v in values):
        return "a value is not a finite number"
    if len(samples.a) < 2 or len(samples.b) < 2:
        return "fewer than two values a side: no spread to estimate"
    return estimator(design).problem(samples.a, samples.b)


def estimate(samples: Samples, design: str) -> Change:
    """The change of ``samples`` (B against A), by the estimator registered as ``design``."""
    est = estimator(design)
    problem = _problem(samples, design)
    # Rounds share their host's state, so each round's ratio cancels a slowdown that stretches both
    # sides; two campaigns have no such pairs, and their means are what the table shows (B - A).
    log_scale = not problem and est.logs and all(v > 0 for v in samples.a + samples.b)
    a = [math.log(v) for v in samples.a] if log_scale else list(samples.a)
    b = [math.log(v) for v in samples.b] if log_scale else list(samples.b)
    base = abs(statistics.mean(samples.a)) if samples.a and not problem else 0.0
    if problem:
        return Change(samples, design, False, 0.0, base, None, 1.0, (), problem)
    fit = est.fit(a, b)
    return Change(samples, design, log_scale, fit.estimate, base, fit.t, fit.p, fit.sds)


def smallest_p(change: Change) -> float:
    """The smallest p-value the row's test could give over every relabelling of its values: 0 for
    a t statistic; under the exact rule 1 when nothing differs at all, else the permutation p. A
    row that cannot reach alpha is left out of the family's count (Tarone's refinement for
    discrete tests): it can never be called a change, so it spends none of alpha."""
    if change.t is not None:
        return 0.0
    if change.estimate == 0:
        return 1.0
    return estimator(change.design).exact_p(len(change.samples.a), len(change.samples.b))


def holm_levels(ps: Sequence[float], alpha: float = defaults.ALPHA,
                at: Callable[[float], float] | None = None) -> list[float]:
    """The level each p-value is held to by Holm's step-down procedure: the smallest p against
    alpha/m, the next against alpha/(m-1), ...; from the first that fails, every later one is held
    to that same level (so none of them is called a change). ``at`` (a look of a sequential
    experiment) maps each step's alpha to the level its boundary holds a test to at this look."""
    m = len(ps)
    levels = [alpha if at is None else at(alpha)] * m
    stopped: float | None = None
    for rank, i in enumerate(sorted(range(m), key=lambda j: ps[j])):
        step = alpha / (m - rank)
        level = (step if at is None else at(step)) if stopped is None else stopped
        if stopped is None and not ps[i] < level:
            stopped = level
        levels[i] = level
    return levels


def _first(n0: int, ok: Callable[[int], bool]) -> int | None:
    """The smallest n > n0 (up to NEEDED_CAP) where ``ok(n)`` holds; ``ok`` is monotone in n."""
    hi = max(n0 + 1, 2)
    while not ok(hi):
        if hi >= NEEDED_CAP:
            return None
        hi = min(NEEDED_CAP, hi * 2)
    lo = n0  # ok(lo) is false, or lo is the current count
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if ok(mid):
            hi = mid
        else:
            lo = mid
    return hi


def needed(change: Change, level: float, min_effect: float) -> int | None:
    """About how many rounds (paired) or runs a side (unpaired) would resolve an inconclusive row,
    at the observed spread, the observed change and the row's level; None when none would."""
    n = max(len(change.samples.a), len(change.samples.b))
    if change.problem:
        return None
    est = estimator(change.design)
    lo_b, hi_b = change.bounds(min_effect)
    big = not change.relative or abs(change.reported(change.estimate)) >= min_effect
    if change.t is None:  # exact rule: as many rounds as make the permutation p fall below the level
        if not big or change.estimate == 0:
            return None
        return _first(n, lambda k: est.exact_p(k, k) < level)
    # a change of at least the minimum effect resolves once the interval excludes 0; a smaller one
    # once the interval fits inside plus or minus the minimum effect
    margin = abs(change.estimate) if big else min(change.estimate - lo_b, hi_b - change.estimate)
    if margin <= 0:
        return None
    return _first(n, lambda k: k >= 2 and est.half_width(change.sds, k, level) < margin)


def decide(change: Change, level: float, min_effect: float, in_family: bool = False,
           gate: str = "") -> MetricVerdict:
    """The row of one change held to ``level``. ``gate``: why the row may not be called better or
    worse (gatekeeping: a primary metric was not called changed); "" when it may."""
    s = change.samples
    n_a, n_b = len(s.a), len(s.b)
    if change.problem:
        verdict = Verdict.CONTEXT if s.direction == "context" else Verdict.INCONCLUSIVE
        return MetricVerdict(s.metric, s.direction, verdict, None, None, None, False, level, None, change.method,
                             change.design, n_a, n_b, None, change.problem, in_family)
    low, high = change.interval(level)
    point, lo_r, hi_r = change.reported(change.estimate), change.reported(low), change.reported(high)
    lo_b, hi_b = change.bounds(min_effect)
    excludes = change.estimate != 0 and change.p < level
    big = not change.relative or abs(point) >= min_effect
    within = lo_b <= low and high <= hi_b
    shown = f"[{_fmt(lo_r, change.relative)}, {_fmt(hi_r, change.relative)}] at {1 - level:.4g}"
    more: int | None = None
    if s.direction == "context":
        verdict, why = Verdict.CONTEXT, "no better side (runbook): read with the others"
    elif excludes and big and gate:
        verdict, why = Verdict.INCONCLUSIVE, f"{shown} excludes 0, but {gate}"
    elif excludes and big:
        verdict = Verdict.BETTER if (change.estimate > 0) == (s.direction == "higher") else Verdict.WORSE
        why = (f"every run of B differs from every run of A by the same amount (exact p {change.p:.3g} < "
               f"{level:.3g})" if change.t is None else f"{shown} excludes 0") + \
            (f"; |change| {abs(point):.1%} >= {min_effect:.0%}" if change.relative else "; A's mean is 0")
    elif within:
        verdict = Verdict.EQUIVALENT
        why = ("no spread and the same change in every run" if change.t is None else shown) + \
            f" within ±{min_effect:.0%}"
    else:
        verdict = Verdict.INCONCLUSIVE
        more = needed(change, level, min_effect)
        if change.t is None:
            runs = estimator(change.design).sizes(n_a, n_b)
            why = f"no spread, but {runs} give at best an exact p of {change.p:.3g}, not below {level:.3g}"
        elif big:
            why = f"{shown} includes 0"
        else:
            why = f"{shown} reaches beyond ±{min_effect:.0%}"
        unit = estimator(change.design).unit
        why += (f"; about {more} {unit} would resolve it at the observed spread" if more
                else f"; no number of {unit} up to {NEEDED_CAP} would resolve it at the observed spread")
    return MetricVerdict(s.metric, s.direction, verdict, point, lo_r, hi_r, change.relative, level,
                         change.p, change.method, change.design, n_a, n_b, more, why, in_family)


def judge(samples: Sequence[Samples], design: str, *, alpha: float = defaults.ALPHA,
          min_effect: float = defaults.MIN_EFFECT, at: Callable[[float], float] | None = None,
          primary: Collection[str] | None = None) -> tuple[MetricVerdict, ...]:
    """Every metric's row by the estimator registered as ``design`` (:mod:`.designs`), the family
    (the metrics with a better side whose change could be estimated and could reach the level)
    held to ``alpha`` with Holm's correction; the other rows (context ones too) get intervals at 1
    - the level. ``at``: a look of a sequential experiment, mapping an alpha to the level its
    boundary holds a test to there (:func:`omnibench_core.stats.looks.at`); each Holm step's
    alpha / (m - rank) goes through it.

    ``primary`` (metric names; None or empty: one family) splits the family in two, tested in
    series (serial gatekeeping, docs/verdicts.md): the primary rows by Holm at ``alpha``; the others
    by Holm at ``alpha`` too, but called better or worse only when every primary metric was called
    changed (one without a row in the family never is). A false call among the others needs the
    gate open, which needs every primary row's null rejected: the chance of any false call stays
    within ``alpha``."""
    full = alpha if at is None else at(alpha)
    changes = [estimate(s, design) for s in samples]
    family = [i for i, c in enumerate(changes)
              if c.samples.direction != "context" and not c.problem and smallest_p(c) < full]
    first = [i for i in family if primary is not None and changes[i].samples.metric in primary]
    rest = [i for i in family if i not in first]
    levels = dict(zip(first, holm_levels([changes[i].p for i in first], alpha, at), strict=True))
    levels |= dict(zip(rest, holm_levels([changes[i].p for i in rest], alpha, at), strict=True))
    # a primary metric with no row in the family (missing, or never able to reach the level) is not
    # called changed either: the gate stays shut
    called = {changes[i].samples.metric for i in first if changes[i].estimate != 0 and changes[i].p < levels[i]}
    shut = [m for m in dict.fromkeys(primary or ()) if m not in called]
    gate = (f"it is called only once every decisive metric is (not {', '.join(shut)}: gatekeeping)"
            if shut else "")
    return tuple(decide(c, levels.get(i, full), min_effect, i in levels, gate if i in rest else "")
                 for i, c in enumerate(changes))


def _fmt(x: float | None, relative: bool) -> str:
    if x is None:
        return "-"
    return f"{x:+.1%}" if relative else f"{x:+.4g}"


def change_text(change: float | None, relative: bool) -> str:
    """A change as a person reads it: ``+12.3%``, or ``B-A +2`` when A's mean is 0."""
    if change is None:
        return "-"
    return _fmt(change, True) if relative else f"B-A {_fmt(change, False)}"


def interval_text(low: float | None, high: float | None, relative: bool, method: str = "") -> str:
    """An interval as a person reads it: ``[+10.1%, +14.6%]``; marked ``exact`` under the exact rule."""
    if low is None or high is None:
        return "-"
    text = f"[{_fmt(low, relative)}, {_fmt(high, relative)}]"
    return text + (" exact" if method.startswith("exact") else "")
