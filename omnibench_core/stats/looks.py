"""When an experiment of at most N rounds looks at its verdicts, and the level each look is held
to: the boundary of ``invoke ab --max-rounds N`` (docs/verdicts.md, "Rounds until the answer is
known"). Pure functions of N, alpha and the boundary, never of the data; the A/B layer runs the
looks (:mod:`omnibench_core.ab.sequential`).

Two boundaries, by the word an experiment records:

- ``pocock`` (every experiment since format 2 of the A/B record): looks after 4, 6, 8, 12, 16,
  24, ... rounds, each held to its level on Lan-DeMets' Pocock-type spending of alpha over the
  information fraction rounds / N (:mod:`.boundary`);
- ``bonferroni`` (experiments begun before): looks after 3, 4, 6, 8, 12, ... rounds, each held to
  alpha / K. Kept so such an experiment is resumed and judged by the rule its looks were made by.
"""

from __future__ import annotations

import enum
from collections.abc import Callable

from .. import defaults
from .boundary import nominal_levels


class Boundary(str, enum.Enum):
    """How an experiment of ``--max-rounds`` spends alpha over its looks."""

    POCOCK = "pocock"  # Lan-DeMets Pocock-type spending, t boundaries; first look at 4 rounds
    BONFERRONI = "bonferroni"  # alpha / K at each of K looks, first look at 3 (records before format 2)

    def __str__(self) -> str:
        return self.value


# The first two looks; each later pair is the one before doubled.
_PAIRS = {Boundary.POCOCK: (defaults.SPENDING_FIRST_LOOK, defaults.SPENDING_FIRST_LOOK * 3 // 2),
          Boundary.BONFERRONI: (defaults.FIRST_LOOK, defaults.FIRST_LOOK + 1)}


def looks(max_rounds: int, boundary: Boundary = Boundary.POCOCK) -> tuple[int, ...]:
    """The round counts at which an experiment of at most ``max_rounds`` rounds looks at its
    verdicts, then ``max_rounds`` itself, always the last. Pocock: 4, 6, 8, 12, 16, 24, ... below
    ``max_rounds`` (``looks(12)`` is ``(4, 6, 8, 12)``; ``looks(3)`` is ``(3,)``); Bonferroni: 3, 4,
    6, 8, 12, ... (``(3, 4, 6, 8, 12)``). Geometric, so a large N costs few looks (each look's
    round is scored for quality when only some rounds are), and fixed by N before the first round."""
    if max_rounds < defaults.FIRST_LOOK:
        raise ValueError(f"max_rounds must be at least {defaults.FIRST_LOOK}, got {max_rounds}")
    pair = _PAIRS[boundary]
    out: list[int] = []
    k = 0
    while (n := 2 ** (k // 2) * pair[k % 2]) < max_rounds:  # the count doubles every two looks
        out.append(n)
        k += 1
    return (*out, max_rounds)


def level(alpha: float, max_rounds: int, rounds: int, boundary: Boundary = Boundary.POCOCK) -> float:
    """The level the look after ``rounds`` rounds holds a family of one metric to (the family's
    ``alpha``); a family of more shares it by Holm (:func:`at`)."""
    return at(max_rounds, rounds, boundary)(alpha)


def at(max_rounds: int, rounds: int, boundary: Boundary = Boundary.POCOCK) -> Callable[[float], float]:
    """The look after ``rounds`` rounds as a map from an alpha to the level a test is held to
    there: Holm's step ``alpha / (m - rank)`` becomes that step's boundary (Maurer & Bretz 2013),
    so each metric's own chance of a false call over all the looks stays within its share."""
    schedule = looks(max_rounds, boundary)
    if rounds not in schedule:
        raise ValueError(f"{rounds} is not a look of {', '.join(map(str, schedule))}")
    if boundary is Boundary.BONFERRONI:
        return lambda alpha: alpha / len(schedule)
    k = schedule.index(rounds)  # a look's level depends on the looks before it only (the spending's point)
    return lambda alpha: nominal_levels(schedule, max_rounds, alpha)[k]
