"""How a metric measured at a load point is named, for the workloads that write such metrics and
the sweep layer that reads them: ``<workload>@c<level>.<metric>`` (``seedtts@c4.latency_p95_s``).
The whole grammar, rates included, is :mod:`omnibench_core.sweep.points`'s."""

from __future__ import annotations

POINT_MARK = "@"


def at_concurrency(workload: str, level: int) -> str:
    """``seedtts@c4``: the prefix of ``workload``'s metrics measured at concurrency ``level``."""
    return f"{workload}{POINT_MARK}c{level}"
