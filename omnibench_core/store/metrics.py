"""The metrics file, ``<run>/metrics.json``: the runbook's ``{"metrics", "rates", "complete"}``
(sglang-omni's scripts write and read the same three keys), plus the target, the broken coverage
rules and the workloads' notes.

Its JSON stays the runbook's, so it carries no ``format`` field: a file without one is format 1,
and one that says a higher number is refused.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import RunFileError
from ..jsonio import read_json, write_json
from . import versions
from .names import metrics_path, request_values_path, samples_path

FORMAT = 1
MIGRATIONS: dict[int, versions.Migration] = {}


@dataclass(frozen=True)
class BrokenRule:
    """A coverage rule that did not hold, as the metrics file names it."""

    rule: str
    detail: str


@dataclass(frozen=True)
class RunMetrics:
    """A run's metrics file as read (two are equal when their contents are, wherever they lie)."""

    path: Path = field(compare=False)
    metrics: Mapping[str, Any]
    complete: bool
    rates: tuple[int, ...] = ()
    target: str = ""
    broken_rules: tuple[BrokenRule, ...] = ()
    notes: tuple[str, ...] = field(default_factory=tuple)
    # percentiles too few samples support: {metric: {"value", "n", "needed"}}, never in ``metrics``
    # but for a workload's own value (``"kept": true``: upstream's summary keys are never replaced)
    thin_percentiles: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    @property
    def measured(self) -> dict[str, Any]:
        """The metrics a verdict may judge: ``metrics`` less a workload's own percentile its
        requests could not support (kept in ``metrics`` as upstream wrote it, marked thin)."""
        return {k: v for k, v in self.metrics.items() if k not in self.thin_percentiles}


def write(run_dir: Path, metrics: Mapping[str, Any], rates: Sequence[int], complete: bool, target: str,
          broken: Sequence[BrokenRule], notes: Sequence[str],
          thin_percentiles: Mapping[str, Mapping[str, Any]] | None = None) -> Path:
    """Write ``metrics.json`` atomically: the runbook's three keys first; a percentile too few
    samples support goes under ``thin_percentiles`` with its sample count, not among the metrics."""
    doc = {"metrics": dict(metrics), "rates": list(rates), "complete": complete, "target": target,
           "broken_rules": [{"rule": r.rule, "detail": r.detail} for r in broken], "notes": list(notes)}
    if thin_percentiles:
        doc["thin_percentiles"] = {k: dict(v) for k, v in thin_percentiles.items()}
    return write_json(metrics_path(run_dir), doc)


def write_samples(run_dir: Path, samples: Mapping[str, Sequence[float]]) -> Path:
    """Write the run's per-request values (``{name: [value, ...]}``) atomically."""
    return write_json(samples_path(run_dir), {k: list(v) for k, v in samples.items()})


def read_samples(run_dir: Path) -> dict[str, list[float]]:
    """The run's per-request values by name, finite numbers only; a run without the file (no
    workload gave any) or with an unreadable one has none."""
    try:
        doc = read_json(samples_path(run_dir))
    except (OSError, ValueError):
        return {}
    out: dict[str, list[float]] = {}
    for name, values in (doc.items() if isinstance(doc, dict) else ()):
        numbers = [float(v) for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)
                   and math.isfinite(v)] if isinstance(values, list) else []
        if numbers:
            out[str(name)] = numbers
    return out


def write_request_values(run_dir: Path, values: Mapping[str, Mapping[str, float]]) -> Path:
    """Write the run's per-request values by request id (``{metric: {id: value}}``) atomically."""
    return write_json(request_values_path(run_dir), {k: dict(v) for k, v in values.items()})


def read_request_values(run_dir: Path) -> dict[str, dict[str, float]]:
    """The run's per-request values by metric and request id, positive finite numbers only (they
    are matched as ratios); a run without the file (made before it existed, or no workload gave
    any) or with an unreadable one has none, and its metrics are compared by their round values."""
    try:
        doc = read_json(request_values_path(run_dir))
    except (OSError, ValueError):
        return {}
    out: dict[str, dict[str, float]] = {}
    for name, by_id in (doc.items() if isinstance(doc, dict) else ()):
        numbers = {str(i): float(v) for i, v in by_id.items() if isinstance(v, (int, float))
                   and not isinstance(v, bool) and math.isfinite(v) and v > 0} if isinstance(by_id, dict) else {}
        if numbers:
            out[str(name)] = numbers
    return out


def read(run_dir: Path) -> RunMetrics:
    """The metrics of ``run_dir``; a missing, unreadable or malformed file is a RunFileError."""
    path = metrics_path(run_dir)
    data = versions.read_object(path, "metrics file", reads=FORMAT, migrations=MIGRATIONS,
                                hint="name complete runs (a run that never finished has no metrics)")
    metrics = data.get("metrics")
    if not isinstance(metrics, dict):
        raise _fail(path, "metrics", "must be an object (the run's metrics by name)")
    broken = data.get("broken_rules") or []
    if not isinstance(broken, list) or not all(isinstance(b, dict) for b in broken):
        raise _fail(path, "broken_rules", "must be a list of objects")
    return RunMetrics(path, metrics, data.get("complete") is True,
                      tuple(r for r in data.get("rates") or () if isinstance(r, int)), str(data.get("target") or ""),
                      tuple(BrokenRule(str(b.get("rule", "")), str(b.get("detail", ""))) for b in broken),
                      tuple(str(n) for n in data.get("notes") or ()), _thin(data.get("thin_percentiles")))


def _thin(value: object) -> dict[str, dict[str, Any]]:
    """``thin_percentiles`` as written, entries that are objects only (an older file has none)."""
    return {str(k): dict(v) for k, v in value.items() if isinstance(v, dict)} if isinstance(value, dict) else {}


def _fail(path: Path, key: str, problem: str) -> RunFileError:
    return RunFileError(f"{path} has no valid {key}: it {problem}", evidence={"file": str(path), "field": key},
                        hint="repeat that run")
