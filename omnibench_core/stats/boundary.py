"""The alpha-spending boundary of a sequential paired t test: the level each look is held to so
that, over all the looks of an experiment, an unchanged metric is called changed with chance at
most alpha (docs/verdicts.md, "Rounds until the answer is known").

The spending function is Lan and DeMets' Pocock type (Lan & DeMets 1983, Biometrika 70(3),
659-663): by information fraction t (rounds judged / --max-rounds), ``alpha * ln(1 + (e - 1) t)``
of alpha has been spent; each look spends the increase since the last. Their boundaries assume a
known variance (normal z statistics); a look of 4 rounds estimates its variance from 4 values, and
the z boundary taken as a t test's nominal level spends more than planned (a simulation of 12
rounds a look, 10 % noise: 5.6 % false alarms at alpha 5 %). So the boundary here is computed on
the t statistics themselves: under no change, with the rounds' log-ratios independent and normal
(what the fixed design's paired t assumes), the joint law of the looks' t statistics does not
depend on the spread at all, so ``PATHS`` seeded null experiments give each look's critical |t|
such that the share of them first crossing at that look is what the spending function allots it.
The level a look is held to is that critical |t|'s two-sided p with n - 1 degrees of freedom.
Monte Carlo error: at ``PATHS`` = 2^18 the alpha spent by the end is within about 0.0009 of
alpha (two standard errors at 0.05).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import lru_cache

import numpy as np

PATHS = 2 ** 18  # simulated null experiments: alpha spent within about 0.0009 of 0.05 (2 SE)
SEED = 20261206  # fixed: the same rule on every host and in every run


def pocock_spent(fraction: float, alpha: float) -> float:
    """Lan-DeMets Pocock-type spending: the alpha spent by information fraction ``fraction``
    (0 to 1), ``alpha * ln(1 + (e - 1) * fraction)``; all of alpha at 1."""
    return alpha * math.log1p((math.e - 1) * min(1.0, max(0.0, fraction)))


@lru_cache(maxsize=64)
def _null_t(rounds: tuple[int, ...]) -> np.ndarray:
    """|t| of each look (rows) in each of PATHS null experiments (columns): the paired t statistic
    of the first n standard normal values, for n in ``rounds``. Values are drawn round by round,
    so every schedule sees the same first rounds."""
    rng = np.random.default_rng(SEED)
    total = np.zeros(PATHS)
    squares = np.zeros(PATHS)
    out = np.empty((len(rounds), PATHS), dtype=np.float64)
    k = 0
    for n in range(1, rounds[-1] + 1):
        x = rng.standard_normal(PATHS)
        total += x
        squares += x * x
        if n == rounds[k]:
            mean = total / n
            var = (squares - n * mean * mean) / (n - 1)
            out[k] = np.abs(mean) / np.sqrt(var / n)
            k += 1
    return out


@lru_cache(maxsize=256)
def critical_t(rounds: tuple[int, ...], max_rounds: int, alpha: float) -> tuple[float, ...]:
    """Each look's critical |t| (a look after ``rounds[k]`` rounds calls a change when its |t|
    exceeds it): the share of null experiments that first cross at look k is the Pocock-type
    spending of ``alpha`` between the previous look's information fraction and this one's."""
    if not rounds or rounds[0] < 2 or list(rounds) != sorted(set(rounds)) or rounds[-1] > max_rounds:
        raise ValueError(f"looks must be increasing round counts of at least 2, up to {max_rounds}: {rounds}")
    stats = _null_t(rounds)
    alive = np.ones(PATHS, dtype=bool)
    out = []
    before = 0.0
    for k, n in enumerate(rounds):
        spent = alpha if n == max_rounds else pocock_spent(n / max_rounds, alpha)
        crossing = int(round((spent - before) * PATHS))
        before = spent
        left = stats[k][alive]
        if crossing <= 0 or not left.size:
            c = math.inf
        elif crossing >= left.size:
            c = 0.0
        else:
            # the (crossing + 1)-th largest |t| of those still running: exactly ``crossing`` lie above it
            c = float(np.partition(left, left.size - crossing - 1)[left.size - crossing - 1])
        out.append(c)
        alive &= ~(stats[k] > c)
    return tuple(out)


def nominal_levels(rounds: Sequence[int], max_rounds: int, alpha: float) -> tuple[float, ...]:
    """The level each look is held to: the two-sided p, with n - 1 degrees of freedom, of its
    critical |t| (:func:`critical_t`); a paired t test at that level at every look calls an
    unchanged metric changed at some look with chance ``alpha``."""
    from .estimators import t_sf_two_sided  # SciPy, lazily, as every t here

    cs = critical_t(tuple(rounds), max_rounds, float(alpha))
    out = [t_sf_two_sided(c, n - 1) if math.isfinite(c) else 0.0 for c, n in zip(cs, rounds, strict=True)]
    # the first look's crossing is its own test's: its level is its spending exactly, no simulation error
    out[0] = alpha if rounds[0] == max_rounds else pocock_spent(rounds[0] / max_rounds, alpha)
    return tuple(out)
