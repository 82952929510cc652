"""Exports: the rows of a report, comparison, sweep or A/B as a CSV or JSON file a spreadsheet or
a notebook reads (``--csv PATH``, ``--json PATH``). Exact values, never the rounded display; a
column's unit is in its name. Written through the store's atomic writer; a path is held to the one
name rule for the parts it makes (:func:`.names.new_path_problem`)."""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Literal

from ..errors import SettingsError
from ..jsonio import write_json, write_text
from .names import name_problem, new_path_problem, path_problem

Kind = Literal["csv", "json"]
Cell = str | int | float | bool | None


def columns(rows: Sequence[Mapping[str, Cell]]) -> list[str]:
    """Every column of ``rows``, in the order they first appear."""
    return list(dict.fromkeys(k for row in rows for k in row))


def csv_text(rows: Sequence[Mapping[str, Cell]]) -> str:
    """``rows`` as CSV with a header line; an empty or non-finite cell is empty, a float is its
    exact ``repr`` (what Python reads back to the same number)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    names = columns(rows)
    writer.writerow(names)
    for row in rows:
        writer.writerow(["" if _blank(row.get(n)) else repr(row.get(n)) if isinstance(row.get(n), float)
                         else row.get(n) for n in names])
    return out.getvalue()


def _blank(value: Cell) -> bool:
    return value is None or (isinstance(value, float) and not math.isfinite(value))


def export_problem(path: str) -> str:
    """Why ``path`` cannot take an export ("" when it can): a new folder on the way that breaks the
    name rule, a file name whose stem does (``rows.csv`` is ``rows``: its suffix is the file's
    own), or a folder where the file would go."""
    if not path:
        return "it is empty"
    if path_problem(path):
        return path_problem(path)
    target = Path(path)
    if target.is_dir() or target.name in ("", ".", ".."):
        return "it is a folder"
    problem = new_path_problem(str(target.parent)) if str(target.parent) not in ("", ".") else ""
    if problem:
        return problem
    if not target.exists():
        stem = name_problem(target.name.split(".", 1)[0], kept=False)
        if stem:
            return f"its file name {target.name!r}: {stem}"
    return ""


def write_rows(path: str, rows: Sequence[Mapping[str, Cell]], kind: Kind) -> Path:
    """Write ``rows`` to ``path`` atomically as ``kind``: CSV with a header, or JSON as a list of
    objects (``pandas.read_json``/``json.load``), non-finite numbers as null."""
    problem = export_problem(path)
    if problem:
        flag = f"--{kind}"
        raise SettingsError(f"{flag} {path!r} refused: {problem}", evidence={"flag": flag, "path": path},
                            hint="name a file whose new folders are plain names (letters, digits, - _ .)")
    target = Path(path)
    if kind == "csv":
        return write_text(target, csv_text(rows))
    return write_json(target, [{k: None if _blank(v) else v for k, v in row.items()} for row in rows])
