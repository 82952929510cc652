"""Small statistics helpers with sglang-omni's conventions (linear percentiles, None when empty)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


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
