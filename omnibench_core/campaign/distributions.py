"""Per-request distributions of a set of runs, from each run's ``samples.json`` (written by
collection when a workload gives per-request values, e.g. seed-tts streaming's first-audio
latencies and chunk gaps), for the report's distribution plots."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

from ..jsonio import read_json
from ..run.collection import SAMPLES_NAME


def per_run(run_dirs: Sequence[Path]) -> dict[str, dict[str, list[float]]]:
    """``{sample name: {run: values}}`` over the runs that have that sample with values; a missing
    or unreadable ``samples.json`` (a run without streaming) adds nothing."""
    out: dict[str, dict[str, list[float]]] = {}
    for run_dir in run_dirs:
        try:
            doc = read_json(run_dir / SAMPLES_NAME)
        except (OSError, ValueError):
            continue
        for name, values in (doc.items() if isinstance(doc, dict) else ()):
            numbers = [float(v) for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)
                       and math.isfinite(v)] if isinstance(values, list) else []
            if numbers:
                out.setdefault(name, {})[run_dir.name] = numbers
    return out
