"""How the two sides' values belong together, and the estimator each design is judged by.

The verdict rule (:mod:`.verdict`) is the same for every design: an interval of the change, an
exact permutation rule when there is no spread, Holm over the family, the minimum effect. What
differs by design is here, behind one protocol, so the rule never branches on a design and a new
statistic is a new :class:`Estimator` in :data:`ESTIMATORS`, called by its name:

- ``paired`` (A/B rounds): value i of A and value i of B come from the same round; the per-round
  differences (of logs, when every value is positive), a paired t interval;
- ``unpaired`` (two campaigns, one after the other): Welch's t interval of the difference of the
  means.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Protocol

from .estimators import TEstimate, exact_p_paired, exact_p_unpaired, paired_t, t_quantile, welch_df, welch_t


class Design(str, Enum):
    """The built-in designs, by the name their estimator is registered under."""

    PAIRED = "paired"  # value i of A and value i of B were measured in the same round
    UNPAIRED = "unpaired"  # two campaigns, one after the other

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class Fit:
    """What an estimator made of two sides' values on the analysis scale: the change, its t
    estimate (None under the exact rule: no spread), its p-value and the spreads it used."""

    estimate: float
    t: TEstimate | None
    p: float
    sds: tuple[float, ...]


def constant(xs: Sequence[float]) -> bool:
    """No spread, up to rounding: log(4) - log(2) and log(2) - log(1) may differ in the last bit,
    and a t statistic over that would be astronomically large."""
    return max(xs) - min(xs) <= 1e-12 * max(abs(x) for x in xs)


class Estimator(Protocol):
    """One design's statistics. ``test`` names its interval in reports (``paired t``); ``unit``
    is what more of would resolve an inconclusive row (``rounds``); ``logs`` whether its change is
    taken on log values when every value is positive (a ratio cancels a slowdown both sides share)."""

    test: str
    unit: str
    logs: bool

    def problem(self, a: Sequence[float], b: Sequence[float]) -> str:
        """Why these sides cannot be estimated by this design ("" when they can)."""
        ...

    def fit(self, a: Sequence[float], b: Sequence[float]) -> Fit:
        """The change of B against A on the analysis scale (the exact rule when there is no spread)."""
        ...

    def exact_p(self, n_a: int, n_b: int) -> float:
        """The exact permutation p of a change with no spread, with these many values a side."""
        ...

    def half_width(self, sds: tuple[float, ...], n: int, level: float) -> float:
        """The ``1 - level`` interval's half-width with ``n`` values a side at the spreads ``sds``."""
        ...

    def sizes(self, n_a: int, n_b: int) -> str:
        """How many values were judged, in words (``5 rounds``, ``3 and 4 runs``)."""
        ...


class PairedT:
    """Rounds: the per-round differences, a paired t interval; every round moved by the same
    amount is the exact sign-flip rule."""

    test, unit, logs = "paired t", "rounds", True

    def problem(self, a: Sequence[float], b: Sequence[float]) -> str:
        """Paired sides must be as long as each other."""
        return "" if len(a) == len(b) else f"paired sides differ in length ({len(a)} and {len(b)} rounds)"

    def fit(self, a: Sequence[float], b: Sequence[float]) -> Fit:
        """The mean per-round difference."""
        diffs = [y - x for x, y in zip(a, b, strict=True)]
        if constant(diffs):
            d = statistics.mean(diffs)
            return Fit(d, None, 1.0 if d == 0 else exact_p_paired(len(diffs)), (0.0,))
        t = paired_t(diffs)
        return Fit(t.estimate, t, t.p, (statistics.stdev(diffs),))

    def exact_p(self, n_a: int, n_b: int) -> float:
        """The sign-flip test's p over ``n_a`` rounds."""
        return exact_p_paired(n_a)

    def half_width(self, sds: tuple[float, ...], n: int, level: float) -> float:
        """t over n - 1 degrees of freedom times the differences' standard error."""
        return t_quantile(1 - level / 2, n - 1) * sds[0] / math.sqrt(n)

    def sizes(self, n_a: int, n_b: int) -> str:
        """``5 rounds``."""
        return f"{n_a} rounds"


class WelchT:
    """Two campaigns: Welch's t interval of the difference of the means; each side constant is the
    exact permutation rule."""

    test, unit, logs = "Welch t", "runs a side", False

    def problem(self, a: Sequence[float], b: Sequence[float]) -> str:
        """Any two sides of two values or more."""
        return ""

    def fit(self, a: Sequence[float], b: Sequence[float]) -> Fit:
        """The difference of the means."""
        if constant(a) and constant(b):
            d = statistics.mean(b) - statistics.mean(a)
            return Fit(d, None, 1.0 if d == 0 else exact_p_unpaired(len(a), len(b)), (0.0, 0.0))
        t = welch_t(a, b)
        return Fit(t.estimate, t, t.p, (statistics.stdev(a), statistics.stdev(b)))

    def exact_p(self, n_a: int, n_b: int) -> float:
        """The two-sample permutation test's p."""
        return exact_p_unpaired(n_a, n_b)

    def half_width(self, sds: tuple[float, ...], n: int, level: float) -> float:
        """Welch's t quantile times the standard error of the difference, n runs a side."""
        var_a, var_b = sds[0] ** 2, sds[1] ** 2
        return t_quantile(1 - level / 2, welch_df(var_a, n, var_b, n)) * math.sqrt((var_a + var_b) / n)

    def sizes(self, n_a: int, n_b: int) -> str:
        """``3 and 4 runs``."""
        return f"{n_a} and {n_b} runs"


# Each design's estimator, by name (a Design member is its name). A new statistic is a new entry.
ESTIMATORS: dict[str, Estimator] = {Design.PAIRED.value: PairedT(), Design.UNPAIRED.value: WelchT()}


def estimator(design: str) -> Estimator:
    """The estimator registered under ``design`` (a :class:`Design` or another registered name)."""
    try:
        return ESTIMATORS[str(design)]
    except KeyError:
        raise ValueError(f"no estimator is registered as {design!r}; known: {', '.join(sorted(ESTIMATORS))}") from None
