"""A metric's unit from its name, and its value as people read it in tables and reports: times in
ms (in s from 10 s on) to three significant digits, rates with their unit. ``metrics.json`` and
the exports keep the exact numbers; only what is printed goes through :func:`display`."""

from __future__ import annotations

import math

# A metric's unit from its name, first match wins: the runbook's and sglang-omni's suffixes.
UNITS: tuple[tuple[str, str], ...] = (
    ("_s_per_s", "seconds of audio per second"), ("tok_per_req_s", "tokens/s per request"),
    ("output_throughput", "tokens/s"), ("_qps", "requests/s"), ("_ms", "milliseconds"), ("_s", "seconds"),
    ("_j", "joules"), ("_w", "watts"), ("_pct", "%"), ("rtf", "real-time factor (compute s per audio s)"),
    ("wer", "word error rate (fraction)"), ("utmos", "MOS (1 to 5)"), ("sim", "cosine similarity"),
    ("accuracy", "fraction correct"), ("tokens", "tokens"), ("c100", "fraction"),
    ("failed", "count"), ("skipped", "count"), ("n_above", "count"), ("files", "count"), ("stalls", "count"),
    ("requests", "count"), ("empty_or_nan", "count"),
)
# the short unit a printed rate carries
_RATE_SUFFIX = {"requests/s": "req/s", "tokens/s": "tok/s", "tokens/s per request": "tok/s",
                "seconds of audio per second": "s/s", "joules": "J", "watts": "W", "%": "%"}
SECONDS_FROM = 10.0  # a time this long or longer is printed in seconds, a shorter one in ms


def unit_of(name: str) -> str:
    """The unit of metric ``name`` (``seconds``, ``requests/s``...), or ``value`` when its name
    says none."""
    leaf = name.rsplit(".", 1)[-1]
    for key, unit in UNITS:
        if leaf.endswith(key) if key.startswith("_") else key in leaf:
            return unit
    return "value"


def sig3(value: float) -> str:
    """``value`` to three significant digits, never in exponent form (9990, 13.0, 0.500)."""
    if value == 0 or not math.isfinite(value):
        return f"{value:g}"
    places = max(0, 2 - math.floor(math.log10(abs(value))))
    text = f"{value:.{places}f}"
    # rounding up may add a digit (9.996 -> 10.00): one place fewer then
    return f"{value:.{places - 1}f}" if places and len(text.lstrip("-").replace(".", "").lstrip("0")) > 3 else text


def display(metric: str, value: object) -> str:
    """``value`` of ``metric`` as a table shows it: a time in ms or s and a rate with its unit,
    to three significant digits; another number to six; None as ``-``; the rest as text."""
    if value is None:
        return "-"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    unit = unit_of(metric)
    if unit in ("seconds", "milliseconds"):
        seconds = float(value) / (1000.0 if unit == "milliseconds" else 1.0)
        return f"{sig3(seconds)} s" if abs(seconds) >= SECONDS_FROM else f"{sig3(seconds * 1000)} ms"
    if unit in _RATE_SUFFIX:
        return f"{sig3(float(value))} {_RATE_SUFFIX[unit]}"
    if isinstance(value, int) or unit == "count":
        return str(value)
    return f"{value:.6g}"
