"""A sweep's record, ``<revision>/sweeps/<sweep>/<points>/sweep.json``, written and read: which
campaign measured each load point, the points' numbers and what they say together. The sweep
layer makes the content; this module is the only one that names the file or parses it
(``invoke compare`` of two sweeps finds their campaigns through it).

Format 1 is every sweep file so far; a newer one is refused, naming the file.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from ..errors import RunFileError
from ..jsonio import write_json
from . import versions
from .names import SWEEPS, name_problem

FORMAT = 1
MIGRATIONS: dict[int, versions.Migration] = {}  # none yet: format 1 is the only one
SWEEP_NAME = "sweep.json"
HINT = "write it again: the same invoke sweep command rebuilds it from its campaigns"


def sweeps_dir(revision_dir: Path) -> Path:
    """``<revision>/sweeps``."""
    return revision_dir / SWEEPS


def record_path(folder: Path) -> Path:
    """``<folder>/sweep.json``."""
    return folder / SWEEP_NAME


def save(folder: Path, record: dict[str, Any]) -> Path:
    """Write ``record`` (with this module's format) as the folder's ``sweep.json``, whole or not at all."""
    return write_json(record_path(folder), {"format": FORMAT, **record})


def load(folder: Path) -> dict[str, Any]:
    """The folder's sweep record, checked: its ``workload`` a name; its ``points`` a list of
    objects each naming its ``campaign``, with a ``concurrency`` (a whole number of at least 1, or
    null) and a ``request_rate`` (a finite number above 0, or null); its ``slo`` null or a metric
    with a bound above 0; ``upstream`` a boolean where present. Else a RunFileError naming the file
    and field."""
    path = record_path(folder)
    data = versions.read_object(path, "sweep record", reads=FORMAT, migrations=MIGRATIONS, hint=HINT)
    points = data.get("points")
    if not isinstance(points, list) or not all(
            isinstance(p, dict) and isinstance(p.get("campaign"), str) and not name_problem(p["campaign"], given=False)
            for p in points):
        raise RunFileError(f"the sweep record {path} is not valid: its points must each name their campaign "
                           "(a plain name in the revision folder)", evidence={"file": str(path), "field": "points"},
                           hint=HINT)
    for i, point in enumerate(points):
        for key, ok in (("concurrency", _whole), ("request_rate", _rate)):
            if point.get(key) is not None and not ok(point[key]):
                raise RunFileError(f"the sweep record {path} is not valid: point {i}'s {key} is {point[key]!r}",
                                   evidence={"file": str(path), "field": f"points[{i}].{key}"}, hint=HINT)
    slo = data.get("slo")
    bad = {"workload": not isinstance(data.get("workload"), str),
           "slo": slo is not None and not (isinstance(slo, dict) and isinstance(slo.get("metric"), str)
                                           and _rate(slo.get("bound_s"))),
           "upstream": not isinstance(data.get("upstream", False), bool)}  # absent in sweeps before it
    if any(bad.values()):
        field = next(k for k, v in bad.items() if v)
        raise RunFileError(f"the sweep record {path} is not valid: its {field} is {data.get(field)!r}",
                           evidence={"file": str(path), "field": field}, hint=HINT)
    return data


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def _rate(value: Any) -> bool:
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return False
    try:
        return math.isfinite(value) and value > 0
    except OverflowError:  # an int beyond a float (10**400): no rate a client could send
        return False


def point_sets(base: Path) -> list[Path]:
    """The folders under a sweep's name that hold a record, oldest written first."""
    if not base.is_dir():
        return []
    return sorted((p for p in base.iterdir() if record_path(p).is_file()), key=lambda p: record_path(p).stat().st_mtime)
