"""The rows ``invoke sweep`` exports (``--csv``/``--json``): one a load point, exact values, each
column's unit in its name."""

from __future__ import annotations

from ..store.exports import Cell
from .curve import curves, knee
from .execute import SweepResult


def sweep_rows(result: SweepResult) -> list[dict[str, Cell]]:
    """Each point in load order: its load, throughput and latency (mean, p95 and every statistic of
    the target list), failures, goodput and whether it holds ``--slo``, open-loop lateness, the knee."""
    knees = {id(k) for k in (knee(c) for c in curves(result.results)) if k is not None}
    slo = result.spec.slo
    rows: list[dict[str, Cell]] = []
    for r in result.results:
        rate = r.point.rate
        row: dict[str, Cell] = {
            "point": r.point.label, "campaign": r.campaign, "runs": r.runs, "concurrency": r.point.concurrency,
            "request_rate_req_per_s": rate,  # empty: every request at once
            "throughput_req_per_s": r.throughput_qps, "throughput_sd_req_per_s": r.throughput_sd,
            "latency_mean_s": r.latency_mean_s, "latency_p95_s": r.latency_p95_s,
            **{name: value for name, value in sorted(r.stats.items()) if name not in ("latency_mean_s", "latency_p95_s")},
            "failed_requests": r.failed}
        if slo is not None:
            row |= {"goodput_req_per_s": r.goodput_qps, "holds_target": r.holds(slo)}
        if rate is not None:
            row |= {"lateness_mean_s": r.lateness_mean_s, "lateness_max_s": r.lateness_max_s,
                    "arrival_seed": r.arrival_seed}
        rows.append({**row, "knee": id(r) in knees})
    return rows
