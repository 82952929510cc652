"""``--csv PATH`` and ``--json PATH`` of report, compare, sweep and ab: the task's rows written
where asked (omnibench_core/store/exports.py), each file named in a line."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..ab.exports import ab_rows
from ..campaign.exports import compare_rows, report_rows
from ..store.exports import Cell, Kind, write_rows
from ..sweep.exports import sweep_rows
from ..tables import emit
from .command import Given

KINDS: tuple[Kind, ...] = ("csv", "json")
Rows = Sequence[Mapping[str, Cell]]


def export(given: Given, rows: Callable[[], Rows]) -> list[str]:
    """Write ``rows()`` to ``given.csv`` and/or ``given.json`` (each "" when not asked for) and
    print a line for each file written; those lines."""
    asked = [(kind, str(given[kind])) for kind in KINDS if given.get(kind)]
    made = rows() if asked else []
    lines = [f"wrote {kind.upper()} rows: {write_rows(path, made, kind)}" for kind, path in asked]
    for line in lines:
        emit(line)
    return lines


def report(given: Given, made: Any) -> list[str]:
    """``invoke report``'s rows: one a run, one column a metric (``campaign.front_door.Reported``)."""
    return export(given, lambda: report_rows(made.stats))


def compare(given: Given, made: Any) -> list[str]:
    """``invoke compare``'s rows of two campaigns: one a metric (``campaign.front_door.Compared``)."""
    return export(given, lambda: compare_rows(made.comparison))


def sweep_compare(given: Given, swept: Any) -> list[str]:
    """``invoke compare``'s rows of two sweeps: one a metric at each common point."""
    return export(given, lambda: [row for p in swept.points for row in compare_rows(p.comparison, point=p.label)])


def sweep(given: Given, result: Any) -> list[str]:
    """``invoke sweep``'s rows: one a load point."""
    return export(given, lambda: sweep_rows(result))


def ab(given: Given, done: Any) -> list[str]:
    """``invoke ab``'s rows: one a metric (``ab.front_door.Done``)."""
    return export(given, lambda: ab_rows(done.analysis))
