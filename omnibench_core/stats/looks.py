"""When an experiment of at most N rounds looks at its verdicts, and the level each look is held
to: the alpha-spending boundary of ``invoke ab --max-rounds N`` (docs/verdicts.md, "Rounds until the
answer is known"). Pure functions of N and alpha, never of the data; the A/B layer runs the looks
(:mod:`omnibench_core.ab.sequential`)."""

from __future__ import annotations

from .. import defaults


def looks(max_rounds: int) -> tuple[int, ...]:
    """The round counts at which an experiment of at most ``max_rounds`` rounds looks at its
    verdicts: 3, 4, 6, 8, 12, 16, 24, 32, ... (the count doubles every two looks) while below
    ``max_rounds``, then ``max_rounds`` itself, always the last. It depends on N alone, never on
    the data, so the number of looks, and with it each look's level (:func:`level`), is known
    before the first round; geometric, so N = 48 costs 9 looks, not 46. ``looks(12)`` is
    ``(3, 4, 6, 8, 12)``; ``looks(7)`` is ``(3, 4, 6, 7)``."""
    if max_rounds < defaults.FIRST_LOOK:
        raise ValueError(f"max_rounds must be at least {defaults.FIRST_LOOK}, got {max_rounds}")
    out: list[int] = []
    k = 0
    while (n := 2 ** (k // 2) * (3 if k % 2 == 0 else 4)) < max_rounds:
        out.append(n)
        k += 1
    return (*out, max_rounds)


def level(alpha: float, max_rounds: int) -> float:
    """The level each look is held to: ``alpha`` shared equally among the looks (Bonferroni)."""
    return alpha / len(looks(max_rounds))
