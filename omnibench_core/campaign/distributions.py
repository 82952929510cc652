"""Per-request distributions of a set of runs, from each run's per-request samples (written by
collection when a workload gives per-request values, e.g. seed-tts streaming's first-audio
latencies and chunk gaps), for the report's distribution plots."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ..store import metrics as metrics_file


def per_run(run_dirs: Sequence[Path]) -> dict[str, dict[str, list[float]]]:
    """``{sample name: {run: values}}`` over the runs that have that sample with values; a run
    without samples (no streaming) adds nothing."""
    out: dict[str, dict[str, list[float]]] = {}
    for run_dir in run_dirs:
        for name, numbers in metrics_file.read_samples(run_dir).items():
            out.setdefault(name, {})[run_dir.name] = numbers
    return out
