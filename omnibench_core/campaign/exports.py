"""The rows ``invoke report`` and ``invoke compare`` export (``--csv``/``--json``): exact values,
each column's unit in its name (omnibench_core/store/exports.py writes them)."""

from __future__ import annotations

from ..store.exports import Cell
from ..units import unit_of
from .compare import Comparison
from .summary import RunSetStats


def column(metric: str) -> str:
    """A metric's column, its unit in the name: ``selftest.latency_mean_s [seconds]``."""
    return f"{metric} [{unit_of(metric)}]"


def report_rows(stats: RunSetStats) -> list[dict[str, Cell]]:
    """One row a run, one column a metric (its unit in its name), the run's exact value; a metric
    that is not a number in a run is empty there."""
    rows: list[dict[str, Cell]] = []
    for run in stats.runs:
        row: dict[str, Cell] = {"run": run}
        for m in stats.metrics:
            value = m.values.get(run)
            row[column(m.name)] = value if isinstance(value, (int, float, bool)) else None
        rows.append(row)
    return rows


def compare_rows(c: Comparison, **context: Cell) -> list[dict[str, Cell]]:
    """One row a metric: both means and sds and B - A in ``unit``, the change and its interval as
    fractions of A (or B - A in ``unit`` where A's mean is 0: ``interval_in``), the level it was
    held to, p and the verdict; ``context`` columns first (a sweep's point)."""
    rows: list[dict[str, Cell]] = []
    for m in c.metrics:
        unit = unit_of(m.name)
        rows.append({**context, "metric": m.name, "unit": unit, "better": m.direction, "a_mean": m.a_mean,
                     "a_sd": m.a_sd, "b_mean": m.b_mean, "b_sd": m.b_sd, "b_minus_a": m.diff,
                     "change_fraction_of_a": m.pct, "interval_low": m.low, "interval_high": m.high,
                     "interval_in": "fraction of A" if m.relative else unit, "held_to_alpha": m.level, "p": m.p,
                     "verdict": str(m.verdict)})
    return rows
