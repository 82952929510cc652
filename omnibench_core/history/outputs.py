"""Where a quality series' outputs changed between consecutive measured commits, sample by sample
(issue 44): a commit can change answers while its aggregate (accuracy, WER) stays where it was, and
a serving engineer must see that first. Read from the campaigns' own run folders."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ..quality.paired import compare_runs
from . import store as st

# the series a flag goes with: one a workload, its headline quality metric
QUALITY_SERIES = {"videoamme": "videoamme.accuracy", "seedtts": "seedtts.wer"}


def run_dirs(results: Path, c: st.IndexedCampaign) -> list[Path]:
    """The campaign's measured run folders (run0, the warm-up, is not among its runs)."""
    return [results / c.folder / run for run in sorted(c.runs)]


def changed_lines(results: Path, metric: str, ordered: Sequence[st.IndexedCampaign]) -> tuple[str, ...]:
    """For a quality series, one line per consecutive pair of measured commits whose outputs
    differ: ``e4f5a6b (after a1b2c3d): videoamme: 11 of 40 answers changed ...``; none for others."""
    workload = metric.split(".", 1)[0]
    if QUALITY_SERIES.get(workload) != metric:
        return ()
    lines = []
    for before, after in zip(ordered, ordered[1:], strict=False):
        report = compare_runs(run_dirs(results, before), run_dirs(results, after), metrics=())
        lines += [f"{after.revision[:7]} (after {before.revision[:7]}): {c.describe()}"
                  for c in report.changed if c.workload == workload and c.changed]
    return tuple(lines)
