"""Campaign progress: every line says run k of N, the step, the elapsed time and an estimate of
what is left, deferred scoring included; no step stays silent for more than ``quiet_s`` (the
stream is a :class:`~omnibench_core.heartbeat.Heartbeat`, so the runs inside add none)."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from ..errors import RunFileError
from ..heartbeat import QUIET_S, Heartbeat, fmt_seconds, unstamped
from ..statuses import RunStatus, StepStatus
from ..store import manifest as manifest_file
from ..store.manifest import RunManifest

UNTIMED = "scoring not timed yet"


@dataclass(frozen=True)
class Scoring:
    """What deferred scoring still costs: runs left to score and the seconds one run's scoring
    took before (None: never timed in this revision folder)."""

    runs: int = 0
    per_run_s: float | None = None

    def seconds(self) -> float | None:
        """The scoring left, or None when it was never timed (and there is some left)."""
        if not self.runs:
            return 0.0
        return None if self.per_run_s is None else self.per_run_s * self.runs


PAST = "past the estimate"  # work is left but the estimate of it has run out: never "~0s left"
NO_ESTIMATE = "no estimate for this step"


def _left(seconds: float) -> str:
    """``~Ns left``, or :data:`PAST` when under a second is left of work that is not done."""
    return f"~{fmt_seconds(seconds)} left" if seconds >= 0.5 else PAST


def estimate_left(durations: Sequence[float], runs_left: int, current_s: float, scoring: Scoring = Scoring()) -> str:
    """What is left: the mean of earlier runs' durations times the runs left, less the current
    run's time, plus the deferred scoring still to come. Work that is left never reads "~0s
    left": past its estimate it says so, and without one it says that."""
    if not durations and runs_left:
        return "estimate after the first run"
    gen = max(0.0, statistics.mean(durations) * runs_left - current_s) if durations else 0.0
    score = scoring.seconds()
    if score is None:
        return (f"~{fmt_seconds(gen)} left + {UNTIMED}" if gen >= 0.5 else f"generation {PAST} + {UNTIMED}")
    if not runs_left and not scoring.runs:
        return "done"
    return _left(gen + score) + (f" (scoring ~{fmt_seconds(score)})" if score else "")


def _seconds(start: str, end: str | None) -> float:
    if not start or not end:  # never started, or never ended
        return 0.0
    try:
        return max(0.0, (datetime.fromisoformat(end) - datetime.fromisoformat(start)).total_seconds())
    except ValueError:
        return 0.0


def scoring_seconds(manifest: RunManifest) -> float | None:
    """How long a run's scoring took, from its manifest: its score-phase steps and the start (to
    READY) of the scoring servers it started itself; None when it did no scoring."""
    steps = [s for s in manifest.steps if s.phase == "score" and s.status is StepStatus.OK]
    if not steps:
        return None
    starts = [s for s in manifest.servers if s.phase == "score" and s.started_here]
    return (sum(_seconds(s.started, s.ended) for s in steps)
            + sum(_seconds(s.started, s.ready) for s in starts))


def scoring_history(revision: Path, workloads: Sequence[str]) -> float | None:
    """The mean scoring time of the complete runs of these workloads in a revision folder (an
    earlier ``invoke run`` or campaign); None when there is none."""
    seen = []
    for run_dir in manifest_file.run_dirs(revision):
        try:
            manifest = manifest_file.read(run_dir)
        except RunFileError:
            continue
        if manifest.status is not RunStatus.COMPLETE or list(manifest.workloads) != list(workloads):
            continue
        took = scoring_seconds(manifest)
        if took is not None:
            seen.append(took)
    return statistics.mean(seen) if seen else None


class CampaignProgress(Heartbeat):
    """Wraps the user's progress callback with the campaign's position, the estimate and a heartbeat."""

    def __init__(self, emit: Callable[[str], None], total: int, durations: Sequence[float] = (),
                 quiet_s: float = QUIET_S, *, scoring_per_run_s: float | None = None,
                 clock: Callable[[], float] = time.monotonic):
        super().__init__(emit, quiet_s=quiet_s, clock=clock)
        self.total, self.durations = total, list(durations)
        self.k, self.label, self.run_t0 = 0, "campaign start", self.t0
        self.scoring_per_run_s = scoring_per_run_s
        self.to_score = 0  # runs deferred scoring has still to score (0 with per-run scoring)
        self.finished = False  # the last phase's scoring is done: nothing is left of it

    def start_run(self, k: int, label: str, to_score: int = 0) -> None:
        """Run ``k`` (1-based, of ``total``) begins; ``label`` says which (``run0 warm-up``...);
        ``to_score``: runs left for deferred scoring after the generation."""
        self.k, self.label, self.run_t0, self.to_score = k, label, self.clock(), to_score
        self.finished = False

    def end_run(self, seconds: float) -> None:
        """A run ended; its duration feeds the estimate."""
        self.durations.append(seconds)

    def phase(self, label: str, to_score: int = 0) -> None:
        """A campaign-wide phase (deferred scoring of ``to_score`` runs) instead of one run."""
        self.k, self.label, self.run_t0, self.to_score = 0, label, self.clock(), to_score
        self.finished = False

    def scored(self, seconds: float, runs: int) -> None:
        """Deferred scoring of ``runs`` took ``seconds``: later estimates use it, and the runs
        are no longer left to score."""
        if runs:
            self.scoring_per_run_s = seconds / runs
        self.to_score = max(0, self.to_score - runs)
        self.finished = not self.to_score

    def estimate(self) -> str:
        """The estimate of what is left, as the prefix shows it."""
        now = self.clock()
        if self.k:
            return estimate_left(self.durations, self.total - self.k + 1, now - self.run_t0,
                                 Scoring(self.to_score, self.scoring_per_run_s))
        if self.to_score:  # the scoring phase itself
            left = Scoring(self.to_score, self.scoring_per_run_s).seconds()
            return UNTIMED if left is None else _left(left - (now - self.run_t0))
        if self.finished:
            return "nothing left"
        if self.label != "campaign start":  # a phase of unknown size (its runs are all done)
            return NO_ESTIMATE
        if self.durations:  # a resumed campaign: its earlier runs' durations are known
            return f"~{fmt_seconds(statistics.mean(self.durations))} a run (earlier runs)"
        return "estimate after the first run"

    def prefix(self) -> str:
        """``[run k of N (label) | elapsed | estimate]``."""
        where = f"run {self.k} of {self.total} ({self.label})" if self.k else self.label
        return f"[{where} | {fmt_seconds(self.clock() - self.t0)} elapsed | {self.estimate()}]"

    def line(self, message: str) -> str:
        """A line with the campaign's prefix."""
        return f"{self.prefix()} {message}"

    def still(self, silent: float) -> str:
        """The heartbeat's repeat, with a fresh prefix."""
        return f"{self.prefix()} still busy ({fmt_seconds(silent)} since: {unstamped(self.last)})"

    def say(self, message: str) -> None:
        """A campaign line (not from a run)."""
        self(message)
