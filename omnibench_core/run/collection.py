"""Collection: every workload's metrics and coverage rules, and the run-wide checks, gathered
into ``metrics.json`` (the runbook's ``{"metrics", "rates", "complete"}``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import PluginError, StepFailed
from ..jsonio import write_json
from ..records import Collected, RuleResult, RunCheck, Workload

METRICS_NAME = "metrics.json"


@dataclass(frozen=True)
class Collection:
    """What collection found in a run directory."""

    metrics: Mapping[str, Any]
    rates: tuple[int, ...]
    rules: tuple[RuleResult, ...]
    notes: tuple[str, ...]

    @property
    def broken(self) -> tuple[RuleResult, ...]:
        """The rules that did not hold."""
        return tuple(r for r in self.rules if not r.ok)

    @property
    def complete(self) -> bool:
        """RUN_COMPLETE: every rule held."""
        return not self.broken


def _call(what: str, collect: Any, *args: Any) -> Collected:
    try:
        collected = collect(*args)
    except Exception as exc:
        raise StepFailed(f"collecting {what} failed: {type(exc).__name__}: {exc}",
                         hint="a result file is missing or malformed; see the step logs") from exc
    if not isinstance(collected, Collected):
        raise PluginError(f"{what} collect returned {type(collected).__name__}, not Collected")
    return collected


def collect_run(run_dir: Path, workloads: Sequence[Workload], options: Mapping[str, Mapping[str, Any]],
                checks: Sequence[RunCheck]) -> Collection:
    """Each workload's ``collect``, then each run-wide check once; metric names must not clash."""
    metrics: dict[str, Any] = {}
    rates: set[int] = set()
    rules: list[RuleResult] = []
    notes: list[str] = []
    parts = [(f"workload {w.name!r}", _call(f"workload {w.name!r}", w.collect, run_dir, options.get(w.name, {})))
             for w in workloads if w.collect is not None]
    parts += [(f"check {c.name!r}", _call(f"check {c.name!r}", c.collect, run_dir)) for c in checks]
    for what, collected in parts:
        clash = set(metrics) & set(collected.metrics)
        if clash:
            raise PluginError(f"{what} reports metrics that were reported already",
                              evidence={"metrics": ", ".join(sorted(clash))})
        metrics.update(collected.metrics)
        rates |= set(collected.rates)
        rules += collected.rules
        notes += collected.notes
    return Collection(metrics, tuple(sorted(rates)), tuple(rules), tuple(notes))


def write_metrics(run_dir: Path, collection: Collection, target: str) -> Path:
    """``metrics.json``: the runbook's three keys, plus the target, broken rules and notes."""
    return write_json(run_dir / METRICS_NAME, {
        "metrics": dict(collection.metrics), "rates": list(collection.rates), "complete": collection.complete,
        "target": target,
        "broken_rules": [{"rule": r.name, "detail": r.detail} for r in collection.broken],
        "notes": list(collection.notes),
    })
