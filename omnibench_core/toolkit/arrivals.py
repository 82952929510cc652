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
# The longest schedule a run may plan: ``count / rate`` seconds, the expected time from the first
# request due to the last. No step of a run has a deadline of its own (a request has its timeout_s),
# so a rate typed a thousand times too low (``request_rate=1e-9``: a request due in 30 years) would
# hold the run, its server and its GPU for the schedule's length; a day is past any measurement.
MAX_SCHEDULE_S = 24 * 3600.0


def schedule_problem(rate: float | None, count: int) -> str:
    """Why ``count`` requests at ``rate`` per second cannot be planned ("" when they can): the
    schedule's expected length, ``count / rate`` seconds, is over :data:`MAX_SCHEDULE_S`."""
    if rate is None or count <= 0:
        return ""
    span = count / rate
    if span <= MAX_SCHEDULE_S:
        return ""
    return (f"{count} requests at {rate:g} per second are due over {span:,.0f} s, longer than the "
            f"{MAX_SCHEDULE_S:,.0f} s a run's schedule may last (the run would wait for them with its server up)")


def slowest_rate(count: int) -> float:
    """The lowest rate at which ``count`` requests fit in :data:`MAX_SCHEDULE_S` (for a hint)."""
    return max(count, 1) / MAX_SCHEDULE_S


def planned_offsets(rate: float | None, count: int, seed: int | None) -> list[float] | None:
    """Seconds from the start of dispatch at which each of ``count`` requests is due, at ``rate``
    requests per second (a Poisson process); None for no rate (every request at once, closed loop).
    ``seed`` None draws a fresh schedule, as upstream's client does without one. A schedule over
    :data:`MAX_SCHEDULE_S` (:func:`schedule_problem`) raises ValueError."""
    if rate is None:
        return None
    if not rate > 0:
        raise ValueError(f"a request rate must be above 0, not {rate!r}")
    if problem := schedule_problem(rate, count):
        raise ValueError(problem)
    gaps = np.random.default_rng(seed).exponential(1.0 / rate, count)
    return [float(v) for v in np.cumsum(gaps)]


def lateness_summary(lateness: Sequence[float]) -> dict[str, float | None]:
    """Mean, p95 and max of the requests' dispatch lateness in seconds: how far the client fell
    behind the schedule (requests waiting for a concurrency slot, or a busy client)."""
    values = list(lateness)
    return {"dispatch_lateness_mean_s": mean(values), "dispatch_lateness_p95_s": percentile(values, 95),
            "dispatch_lateness_max_s": max(values) if values else None}
