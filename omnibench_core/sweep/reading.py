"""One sweep point summarised from its campaign: the campaign's statistics (means over its
measured runs) and, from each run's own speed file, the goodput under the target, the dispatch
lateness and the arrival seed.

The speed file is sglang-omni's ``<workload>/speed_results.json`` (``summary`` with
``wall_time_s``, ``per_request`` with ``latency_s`` and ``is_success``), which both seed-tts
clients write; a workload without one has no goodput or lateness (None), never an error.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..campaign.summary import RunSetStats, campaign_stats
from ..jsonio import read_json
from ..stats.percentiles import mean
from ..toolkit.point_names import at_concurrency
from .curve import PointResult, goodput
from .points import SLO_METRICS, LoadPoint, Slo

SPEED_FILE = "speed_results.json"


def point_result(workload: str, point: LoadPoint, path: Path, slo: Slo | None, *,
                 upstream: bool = False) -> PointResult:
    """The point's summary from its campaign file at ``path`` (``workload``'s metrics and files).
    ``upstream``: the campaign's runs each swept every level with sglang-omni's client, so the
    point's metrics are ``<workload>@c<level>.*`` and its speed files those of each repeat,
    ``<workload>/c<level>_r<repeat>/``."""
    _, stats = campaign_stats(path)
    w = at_concurrency(workload, point.concurrency or 0) if upstream else workload
    speed = [_speed(file) for run in stats.run_dirs for file in
             (sorted((run / workload).glob(f"c{point.concurrency}_r*/{SPEED_FILE}")) if upstream
              else [run / workload / SPEED_FILE])]
    rates = [_goodput(doc, slo.bound) for doc in speed] if slo else []
    lateness = [_summary(doc, "dispatch_lateness_mean_s") for doc in speed]
    late_max = [_summary(doc, "dispatch_lateness_max_s") for doc in speed]
    throughput = stats.metric(f"{w}.throughput_qps")
    latency = stats.metric(f"{w}.latency_mean_s")
    failed = _number(stats, f"{w}.failed")
    return PointResult(
        point=point, campaign=path.stem, runs=len(stats.runs),
        throughput_qps=throughput.mean if throughput else None, throughput_sd=throughput.sd if throughput else None,
        latency_mean_s=_number(stats, f"{w}.latency_mean_s"), latency_p95_s=_number(stats, f"{w}.latency_p95_s"),
        stats={k: _stat(stats, speed, w, k) for k in SLO_METRICS},
        goodput_qps=_mean(rates), failed=None if failed is None else round(failed * len(stats.runs)),
        lateness_mean_s=_mean(lateness), lateness_max_s=max((v for v in late_max if v is not None), default=None),
        arrival_seed=_seed(speed) if point.rate is not None else None, latency_sd=latency.sd if latency else None)


def _speed(path: Path) -> dict[str, Any] | None:
    try:
        doc = read_json(path)
    except (OSError, ValueError):  # missing, unreadable, not JSON or too deep: no extras
        return None
    return doc if isinstance(doc, dict) else None


def _summary(doc: dict[str, Any] | None, key: str) -> float | None:
    summary = (doc or {}).get("summary")
    value = summary.get(key) if isinstance(summary, dict) else None
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _goodput(doc: dict[str, Any] | None, bound: float) -> float | None:
    rows = (doc or {}).get("per_request")
    if not isinstance(rows, list):
        return None
    latencies = [r.get("latency_s") if isinstance(r, dict) and r.get("is_success") is True
                 and isinstance(r.get("latency_s"), (int, float)) else None for r in rows]
    return goodput(latencies, _summary(doc, "wall_time_s"), bound)


def _seed(speed: list[dict[str, Any] | None]) -> int | str | None:
    """The arrival seed the client recorded; "unseeded" when it ran at a rate without one
    (sglang-omni's client); None when no run says."""
    for doc in speed:
        config = (doc or {}).get("config")
        if isinstance(config, dict) and "request_rate" in config:
            seed = config.get("arrival_seed")
            return seed if isinstance(seed, int) and not isinstance(seed, bool) else "unseeded"
    return None


def _number(stats: RunSetStats, name: str) -> float | None:
    metric = stats.metric(name)
    return metric.mean if metric is not None else None


def _stat(stats: RunSetStats, speed: list[dict[str, Any] | None], workload: str, key: str) -> float | None:
    """A latency statistic's mean over runs: the run's metric when the workload reports it, else
    the speed file's own summary field."""
    found = _number(stats, f"{workload}.{key}")
    return found if found is not None else _mean([_summary(doc, key) for doc in speed])


def _mean(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return mean(present) if present else None
