"""What a sweep's points say together: the knee, the Pareto front and the goodput.

Pure functions over :class:`PointResult` records, so the rules are tested on numbers alone.

- **Knee**: along a curve (points in load order), the last point before the first step where
  latency (the mean over runs of each run's mean latency) grows by a larger fraction than
  throughput does: past it, more load buys less throughput than it costs in latency.
- **Pareto front**: the points no other point beats on both throughput (higher) and latency
  (lower); the others are dominated and never the setting to run at.
- **Goodput** under a target (``--slo latency_p95_s=2.0``): per point, the requests per second
  that completed within the bound; for the sweep, the highest throughput among the points that
  hold the target (their statistic, mean over runs, at most the bound).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .points import LoadPoint, Slo


@dataclass(frozen=True)
class PointResult:
    """One load point's campaign, summarised over its measured runs (means; None where missing)."""

    point: LoadPoint
    campaign: str
    runs: int
    throughput_qps: float | None
    throughput_sd: float | None
    latency_mean_s: float | None
    latency_p95_s: float | None
    stats: dict[str, float | None]  # every latency statistic of the SLO list, by name
    goodput_qps: float | None = None
    failed: int | None = None
    lateness_mean_s: float | None = None  # open loop only: how far sends fell behind the schedule
    lateness_max_s: float | None = None
    arrival_seed: int | str | None = None  # an int, "unseeded", or None (closed loop)
    latency_sd: float | None = None  # the mean latency's standard deviation over the runs: its error bar

    @classmethod
    def from_record(cls, doc: dict[str, Any]) -> PointResult:
        """A point as ``sweep.json`` holds it (:func:`..writing._point`; the file checked by
        ``store.sweep_file.load``): a field the record lacks or holds as no number is None."""
        def number(key: str, within: dict[str, Any] | None = None) -> float | None:
            value = (doc if within is None else within).get(key)
            return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None

        given = doc.get("latency")
        latency: dict[str, Any] = given if isinstance(given, dict) else {}
        runs, failed, seed = doc.get("runs"), doc.get("failed"), doc.get("arrival_seed")
        return cls(point=LoadPoint(doc.get("concurrency"), number("request_rate")), campaign=str(doc.get("campaign")),
                   runs=runs if isinstance(runs, int) else 0, throughput_qps=number("throughput_qps"),
                   throughput_sd=number("throughput_sd"), latency_mean_s=number("latency_mean_s"),
                   latency_p95_s=number("latency_p95_s"), stats={k: number(k, latency) for k in latency},
                   goodput_qps=number("goodput_qps"), failed=failed if isinstance(failed, int) else None,
                   lateness_mean_s=number("dispatch_lateness_mean_s"), lateness_max_s=number("dispatch_lateness_max_s"),
                   arrival_seed=seed if isinstance(seed, (int, str)) else None, latency_sd=number("latency_mean_sd_s"))

    def holds(self, slo: Slo) -> bool | None:
        """Whether this point's statistic is within the target (None: the statistic is missing)."""
        value = self.stats.get(slo.metric)
        return None if value is None else value <= slo.bound


def curves(results: Sequence[PointResult]) -> list[list[PointResult]]:
    """The curves of a sweep, each in load order: one over concurrency per request rate when both
    vary, else one over whichever varies."""
    rates = {r.point.rate for r in results}
    concurrencies = {r.point.concurrency for r in results}
    if len(rates) > 1 and len(concurrencies) > 1:
        groups: dict[float | None, list[PointResult]] = {}
        for r in results:
            groups.setdefault(r.point.rate, []).append(r)
        return [sorted(g, key=lambda r: r.point.concurrency or 0) for g in groups.values()]
    return [list(results)]


def knee(curve: Sequence[PointResult]) -> PointResult | None:
    """The knee of one curve (see the module's docstring); None when latency never outgrows
    throughput within the swept range, or a point lacks a number."""
    for here, there in zip(curve, curve[1:], strict=False):  # each step between neighbours
        t0, t1, l0, l1 = here.throughput_qps, there.throughput_qps, here.latency_mean_s, there.latency_mean_s
        if t0 is None or t1 is None or l0 is None or l1 is None or t0 <= 0 or l0 <= 0:
            return None
        if (l1 / l0 - 1) > (t1 / t0 - 1):
            return here
    return None


def pareto(results: Sequence[PointResult]) -> list[PointResult]:
    """The points on the Pareto front (higher throughput, lower mean latency), in load order."""
    known = [r for r in results if r.throughput_qps is not None and r.latency_mean_s is not None]

    def beaten(r: PointResult) -> bool:
        return any(o is not r and o.throughput_qps >= r.throughput_qps and o.latency_mean_s <= r.latency_mean_s  # type: ignore[operator]
                   and (o.throughput_qps > r.throughput_qps or o.latency_mean_s < r.latency_mean_s)  # type: ignore[operator]
                   for o in known)

    return [r for r in known if not beaten(r)]


def best_within(results: Sequence[PointResult], slo: Slo) -> PointResult | None:
    """The point of highest throughput among those that hold the target; None when none does."""
    held = [r for r in results if r.holds(slo) and r.throughput_qps is not None]
    return max(held, key=lambda r: r.throughput_qps or 0.0) if held else None


def goodput(latencies: Sequence[float | None], wall_s: float | None, bound: float) -> float | None:
    """Requests per second that succeeded within ``bound`` seconds, over a run's timed window;
    ``latencies`` holds None for a failed request."""
    if not wall_s or wall_s <= 0:
        return None
    return sum(1 for v in latencies if v is not None and v <= bound) / wall_s
