"""A round's values from the requests matched by id across the two sides (docs/verdicts.md, "A
round's estimate").

Both sides of an A/B round serve the same requests in the same order, so each request gives its
own ratio B_i / A_i. The round's estimate of the change is the mean of the matched requests'
log-ratios, which is the log of the ratio of the two sides' geometric means over those requests:
so each side's value of the round is its geometric mean over the matched requests, and the
paired rule (:mod:`.designs`) takes the rounds' log-ratios of those as ever, with the rounds as
the unit of its inference. Against the round's mean metric, every request weighs the same (a long
request does not outweigh the short ones, whose noise is the same in relative terms), and a
request that failed on one side is left out of both.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class MatchedRounds:
    """Each round's geometric mean over its matched requests, per side, and how many matched."""

    a: tuple[float, ...]
    b: tuple[float, ...]
    requests: tuple[int, ...]  # the requests matched in each round


def geometric_mean(values: Sequence[float]) -> float:
    """exp(mean(log x)) of positive values."""
    return math.exp(sum(math.log(v) for v in values) / len(values))


def matched_rounds(a: Sequence[Mapping[str, float] | None],
                   b: Sequence[Mapping[str, float] | None]) -> MatchedRounds | None:
    """Round by round, A's and B's per-request values (request id -> positive value) matched by
    id; None when a round of either side has none, or no request matched in a round (the metric
    is then compared by its round values)."""
    out_a: list[float] = []
    out_b: list[float] = []
    counts: list[int] = []
    for ra, rb in zip(a, b, strict=True):
        if not ra or not rb:
            return None
        ids = sorted(set(ra) & set(rb))
        if not ids:
            return None
        out_a.append(geometric_mean([ra[i] for i in ids]))
        out_b.append(geometric_mean([rb[i] for i in ids]))
        counts.append(len(ids))
    return MatchedRounds(tuple(out_a), tuple(out_b), tuple(counts))
