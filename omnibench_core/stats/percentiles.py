"""Small statistics helpers with sglang-omni's conventions (linear percentiles, None when empty),
and the percentiles a run reports beside the runbook's mean and p95.

A percentile ``q`` (in percent) counts as measured only from ``n >= TAIL / (1 - q/100)`` samples
(:func:`samples_needed`): with fewer, the expected number of samples beyond the true q-quantile is
under ``TAIL``, and the chance that none lies there (``(q/100)**n``, at most ``e**-TAIL``) is large,
so the number printed would be the largest sample or an interpolation towards it, not the tail.
With the default tail of 3: p50 needs 6 samples, p90 30, p99 300, p99.9 3000.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from ..defaults import PERCENTILE_TAIL


def mean(values: Sequence[float]) -> float | None:
    """Arithmetic mean, None for no values."""
    return float(np.mean(values)) if len(values) else None


def percentile(values: Sequence[float], q: float) -> float | None:
    """The q-th percentile (linear interpolation), None for no values."""
    return float(np.percentile(values, q)) if len(values) else None


def median(values: Sequence[float]) -> float | None:
    """The median, None for no values."""
    return percentile(values, 50)


def std(values: Sequence[float]) -> float | None:
    """Population standard deviation, None for no values."""
    return float(np.std(values)) if len(values) else None


def label(q: float) -> str:
    """The name part of percentile ``q``: ``p50``, ``p99_9`` (a dot would split a metric's name)."""
    return "p" + f"{q:g}".replace(".", "_")


def samples_needed(q: float, tail: int = PERCENTILE_TAIL) -> int:
    """The fewest samples that support percentile ``q``: ``ceil(tail / (1 - q/100))``, exactly
    (p99 of the default tail is 300, not 300.00000000000006 rounded up)."""
    return math.ceil(Fraction(tail) / (1 - Fraction(str(q)) / 100))


@dataclass(frozen=True)
class Percentile:
    """One percentile of a run's metric: its value, from ``n`` samples, and the ``needed`` count."""

    metric: str
    q: float
    value: float
    n: int
    needed: int
    # the value is the workload's own (an upstream summary's p99), kept in ``metrics`` unchanged
    kept: bool = False

    @property
    def supported(self) -> bool:
        """Enough samples for this percentile to be read as measured."""
        return self.n >= self.needed

    def as_record(self) -> dict[str, object]:
        """Its ``metrics.json`` entry under ``thin_percentiles`` (docs/usage.md, "Percentiles")."""
        record: dict[str, object] = {"value": self.value, "n": self.n, "needed": self.needed}
        return {**record, "kept": True} if self.kept else record


def percentile_name(base: str, q: float) -> str:
    """``selftest.latency`` and 99 -> ``selftest.latency_p99_s`` (the runbook's pattern, seconds)."""
    return f"{base}_{label(q)}_s"


def percentiles_of(base: str, values: Sequence[float], qs: Sequence[float]) -> list[Percentile]:
    """Each percentile ``q`` of ``values`` as :class:`Percentile` (none for no values)."""
    if not len(values):
        return []
    return [Percentile(percentile_name(base, q), q, float(np.percentile(values, q)), len(values), samples_needed(q))
            for q in qs]
