"""Open-loop arrivals: when each request of a run at a request rate is due, and how late it went.

As sglang-omni's ``BenchmarkRunner._dispatch`` (stevejake007/sglang-omni,
``benchmarks/benchmarker/runner.py`` at 1e1301bd0c6a1f52bfa3fd3793dafea3be9d3bbe): gaps drawn
from ``numpy.random.default_rng(seed).exponential(1 / rate, n)``, summed into offsets from the
start of dispatch, so one late send does not push every later arrival back; a request's
``dispatch_lateness_s`` is when it was sent (a concurrency slot taken) less when it was due. With
the same seed, omnibench and upstream's runner plan the same schedule.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..stats.percentiles import mean, percentile

# The seed the native client uses when none is given: a run's arrivals are the same run to run,
# so two campaigns at one rate differ by the code, not by the luck of the draw.
DEFAULT_ARRIVAL_SEED = 0


def planned_offsets(rate: float | None, count: int, seed: int | None) -> list[float] | None:
    """Seconds from the start of dispatch at which each of ``count`` requests is due, at ``rate``
    requests per second (a Poisson process); None for no rate (every request at once, closed loop).
    ``seed`` None draws a fresh schedule, as upstream's client does without one."""
    if rate is None:
        return None
    if not rate > 0:
        raise ValueError(f"a request rate must be above 0, not {rate!r}")
    gaps = np.random.default_rng(seed).exponential(1.0 / rate, count)
    return [float(v) for v in np.cumsum(gaps)]


def lateness_summary(lateness: Sequence[float]) -> dict[str, float | None]:
    """Mean, p95 and max of the requests' dispatch lateness in seconds: how far the client fell
    behind the schedule (requests waiting for a concurrency slot, or a busy client)."""
    values = list(lateness)
    return {"dispatch_lateness_mean_s": mean(values), "dispatch_lateness_p95_s": percentile(values, 95),
            "dispatch_lateness_max_s": max(values) if values else None}
