"""Mean and spread over repeated runs, as the runbook's "Measuring accurately" reports them:
for each metric the mean, the sample standard deviation and the values."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from .errors import OmnibenchError
from .jsonio import read_json, write_json


@dataclass(frozen=True)
class MetricSpread:
    """One metric over the runs."""

    name: str
    mean: float | None
    stdev: float | None
    values: tuple[object, ...]


def summarize_runs(run_dirs: Sequence[Path]) -> list[MetricSpread]:
    """Every metric of the runs' ``metrics.json``; all runs must be complete (as the runbook asserts)."""
    if len(run_dirs) < 2:
        raise OmnibenchError("mean and spread need at least two runs", evidence={"runs": ", ".join(map(str, run_dirs))},
                             hint="measure more runs: invoke measure --runs 3")
    docs = []
    for run in run_dirs:
        try:
            docs.append(read_json(run / "metrics.json"))
        except (OSError, ValueError) as exc:
            raise OmnibenchError(f"cannot read {run / 'metrics.json'}: {exc}", hint="pick complete runs") from exc
    incomplete = [str(r) for r, d in zip(run_dirs, docs, strict=True) if not d.get("complete")]
    if incomplete:
        raise OmnibenchError("a run is incomplete", evidence={"runs": ", ".join(incomplete)},
                             hint="repeat those runs; incomplete runs are moved aside as runN-incomplete")
    names = list(docs[0]["metrics"])
    out = []
    for name in names:
        values = tuple(d["metrics"].get(name) for d in docs)
        numbers = [v for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
        numeric = len(numbers) == len(values)
        out.append(MetricSpread(name, round(statistics.mean(numbers), 6) if numeric else None,
                                round(statistics.stdev(numbers), 6) if numeric else None, values))
    return out


def write_report(path: Path, run_dirs: Sequence[Path], spreads: Sequence[MetricSpread]) -> Path:
    """``report.json``: the runs and each metric's mean, sample standard deviation and values."""
    return write_json(path, {"runs": [str(r) for r in run_dirs],
                             "metrics": {s.name: {"mean": s.mean, "stdev": s.stdev, "values": list(s.values)}
                                         for s in spreads}})
