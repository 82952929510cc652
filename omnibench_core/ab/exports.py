"""The rows ``invoke ab`` exports (``--csv``/``--json``): one a metric, exact values, each column's
unit in its name or in ``unit``."""

from __future__ import annotations

import statistics

from ..store.exports import Cell
from ..units import unit_of
from .analysis import Analysis


def ab_rows(a: Analysis) -> list[dict[str, Cell]]:
    """Each judged metric: its unit, direction, both sides' means over the rounds (in ``unit``), the
    change and its interval (fractions of A, or B - A in ``unit``: ``interval_in``), the level it was
    held to, p, the rounds and the verdict; then each metric that got none, with why."""
    values = {v.metric: v for v in a.values}
    rows: list[dict[str, Cell]] = []
    for v in a.verdicts:
        vals, unit = values.get(v.metric), unit_of(v.metric)
        numbers = ([float(x) for x in vals.a if isinstance(x, (int, float))],
                   [float(x) for x in vals.b if isinstance(x, (int, float))]) if vals else ([], [])
        rows.append({"metric": v.metric, "unit": unit, "better": v.direction,
                     "a_mean": statistics.fmean(numbers[0]) if numbers[0] else None,
                     "b_mean": statistics.fmean(numbers[1]) if numbers[1] else None,
                     "change": v.change, "interval_low": v.low, "interval_high": v.high,
                     "interval_in": "fraction of A" if v.relative else unit, "held_to_alpha": v.level, "p": v.p,
                     "rounds": len(vals.rounds) if vals else None, "verdict": v.verdict.value, "why": v.why})
    rows += [{"metric": n.metric, "unit": unit_of(n.metric), "better": n.direction,
              "verdict": "not scored" if n.unscored else "not compared", "why": n.why} for n in a.not_compared]
    return rows
