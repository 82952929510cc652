"""How long each phase of earlier runs took, read from their manifests: the history an estimate
starts from before this command has timed anything of its own."""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from ..errors import RunFileError
from ..statuses import RunStatus, StepStatus
from . import manifest as manifest_file
from .manifest import RunManifest


@dataclass(frozen=True)
class PhaseTimes:
    """The mean seconds of each phase (``generate``, ``score``, ``collect``; a server's start to
    READY counts in its phase) over ``runs`` earlier complete runs."""

    seconds: Mapping[str, float]
    runs: int

    def total(self, phases: Sequence[str] | None = None) -> float:
        """The seconds of ``phases`` (all recorded ones for None)."""
        return sum(s for p, s in self.seconds.items() if phases is None or p in phases)


def span_seconds(start: str, end: str | None) -> float:
    """Seconds between two ISO times of a manifest; 0 when either is missing or unreadable."""
    if not start or not end:
        return 0.0
    try:
        return max(0.0, (datetime.fromisoformat(end) - datetime.fromisoformat(start)).total_seconds())
    except ValueError:
        return 0.0


def phase_seconds(manifest: RunManifest) -> dict[str, float]:
    """Each phase's wall time in one run: from the first start of its OK steps and of the servers
    it started itself (a shared scoring start is the run's that made it) to the last end of them,
    a server's stop included (what the user waits for, not only the steps' own time)."""
    spans: dict[str, list[tuple[datetime, datetime]]] = {}
    for step in manifest.steps:
        if step.status is StepStatus.OK:
            _add(spans, step.phase, step.started, step.ended)
    for server in manifest.servers:
        if server.started_here:
            _add(spans, server.phase, server.started, server.stopped or server.ready)
    return {phase: max(0.0, (max(e for _, e in ts) - min(b for b, _ in ts)).total_seconds())
            for phase, ts in spans.items()}


def _add(spans: dict[str, list[tuple[datetime, datetime]]], phase: str, start: str, end: str | None) -> None:
    if not start or not end:
        return
    try:
        spans.setdefault(phase, []).append((datetime.fromisoformat(start), datetime.fromisoformat(end)))
    except ValueError:  # a hand-written manifest's time: that part is not timed
        return


def phase_history(revision: Path, workloads: Sequence[str]) -> PhaseTimes | None:
    """The mean phase times of the complete runs of exactly these workloads in a revision folder
    (earlier ``invoke run``s, campaigns, A/B sides); None when there is none."""
    seen: list[dict[str, float]] = []
    for run_dir in manifest_file.run_dirs(revision) if revision.is_dir() else []:
        try:
            manifest = manifest_file.read(run_dir)
        except RunFileError:
            continue
        if manifest.status is RunStatus.COMPLETE and list(manifest.workloads) == list(workloads):
            seen.append(phase_seconds(manifest))
    if not seen:
        return None
    phases = sorted({p for s in seen for p in s})
    return PhaseTimes({p: statistics.mean(s.get(p, 0.0) for s in seen) for p in phases}, len(seen))
