"""Campaign progress: every line says run k of N, the step, the elapsed time and an estimate of
what is left, deferred scoring included; no step stays silent for more than ``quiet_s`` (the
stream is a :class:`~omnibench_core.heartbeat.Heartbeat`, so the runs inside add none)."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..errors import RunFileError
from ..heartbeat import QUIET_S, Heartbeat, fmt_seconds, unstamped
from ..run.eta import PAST, left_text, revision_note
from ..statuses import RunStatus, StepStatus
from ..store import manifest as manifest_file
from ..store.durations import span_seconds
from ..store.manifest import RunManifest

UNTIMED = "scoring not timed yet"


@dataclass(frozen=True)
class Scoring:
    """What deferred scoring still costs: runs left to score, the seconds one run's scoring
    took before (None: never timed in this revision folder), and ``starts`` starts of the
    scoring servers (one a scoring phase: an A/B has one a side) of ``start_s`` each."""

    runs: int = 0
    per_run_s: float | None = None
    starts: int = 0
    start_s: float = 0.0

    def seconds(self) -> float | None:
        """The scoring left, or None when it was never timed (and there is some left)."""
        if not self.runs:
            return 0.0
        return None if self.per_run_s is None else self.per_run_s * self.runs + self.start_s * self.starts


@dataclass(frozen=True)
class Later:
    """Work after this campaign in the same command (a sweep's later points): ``units`` of it,
    each ``per_unit_s`` (None: as long as this campaign, the only measure before one ended)."""

    units: int = 0
    per_unit_s: float | None = None
    what: str = "point"

    def seconds(self, this_campaign_s: float | None) -> float | None:
        """The later work's seconds (None: nothing to go by yet)."""
        if not self.units:
            return 0.0
        each = self.per_unit_s if self.per_unit_s is not None else this_campaign_s
        return None if each is None else each * self.units

    def text(self, seconds: float | None) -> str:
        """``3 later points ~9m``."""
        name = f"{self.units} later {self.what}{'s' if self.units != 1 else ''}"
        return name if seconds is None else f"{name} ~{fmt_seconds(seconds)}"


NO_LATER = Later()  # a command of one campaign: nothing after it
NO_ESTIMATE = "no estimate for this step"


_left = left_text


def estimate_left(durations: Sequence[float], runs_left: int, current_s: float, scoring: Scoring = Scoring(),
                  later: Later = Later(), total_runs: int = 0) -> str:
    """What is left: the mean of earlier runs' durations times the runs left, less the current
    run's time, plus the deferred scoring still to come, plus ``later`` work (a sweep's later
    points, each as long as this campaign's ``total_runs`` and its scoring until one was timed).
    Work that is left never reads "~0s left": past its estimate it says so, and without one it
    says that."""
    if not durations and runs_left:
        return "estimate after the first run" + (f" (+ {later.text(None)})" if later.units else "")
    mean = statistics.mean(durations) if durations else 0.0
    gen = max(0.0, mean * runs_left - current_s)
    score = scoring.seconds()
    whole = mean * total_runs + (score or 0.0) if durations else None
    after = later.seconds(whole)
    extra = f"{later.text(after)}" if later.units else ""
    if score is None:
        text = (f"~{fmt_seconds(gen)} left + {UNTIMED}" if gen >= 0.5 else f"generation {PAST} + {UNTIMED}")
        return text + (f" + {extra}" if extra else "")
    if not runs_left and not scoring.runs and not later.units:
        return "done"
    notes = [n for n in ((f"scoring ~{fmt_seconds(score)}" if score else ""), extra) if n]
    if after is None:
        return _left(gen + score) + f" + {extra}" + (f" (scoring ~{fmt_seconds(score)})" if score else "")
    return _left(gen + score + after) + (f" ({', '.join(notes)})" if notes else "")


def scoring_seconds(manifest: RunManifest) -> float | None:
    """How long a run's scoring took, from its manifest: its score-phase steps and the start (to
    READY) of the scoring servers it started itself; None when it did no scoring."""
    steps = [s for s in manifest.steps if s.phase == "score" and s.status is StepStatus.OK]
    if not steps:
        return None
    starts = [s for s in manifest.servers if s.phase == "score" and s.started_here]
    return (sum(span_seconds(s.started, s.ended) for s in steps)
            + sum(span_seconds(s.started, s.ready) for s in starts))


def scoring_start_seconds(manifest: RunManifest) -> float:
    """The seconds a run's own scoring servers took to start (to READY); 0 for none."""
    return sum(span_seconds(s.started, s.ready) for s in manifest.servers if s.phase == "score" and s.started_here)


def scoring_history(revision: Path, workloads: Sequence[str], part: Callable[[RunManifest], float | None]
                    = scoring_seconds) -> float | None:
    """The mean scoring time of the complete runs of these workloads in a revision folder (an
    earlier ``invoke run`` or campaign); None when there is none. ``part``: what of a run's
    scoring (:func:`scoring_start_seconds`: its servers' start)."""
    seen = []
    for run_dir in manifest_file.run_dirs(revision):
        try:
            manifest = manifest_file.read(run_dir)
        except RunFileError:
            continue
        if manifest.status is not RunStatus.COMPLETE or list(manifest.workloads) != list(workloads):
            continue
        if scoring_seconds(manifest) is None:  # a run that did no scoring says nothing of it
            continue
        took = part(manifest)
        if took is not None:
            seen.append(took)
    return statistics.mean(seen) if seen else None


class CampaignProgress(Heartbeat):
    """Wraps the user's progress callback with the campaign's position, the estimate and a heartbeat.

    The estimate covers the whole command: the runs left (the mean of this campaign's runs, or
    before one ended ``prior_run_s``, the results root's history), the deferred scoring left
    (``scoring_per_run_s``) and ``later`` work (a sweep's later points). Each run and each
    scoring phase is held to what it was estimated at: off by more than ``ETA_REVISE_RATIO``, a
    line says so and what is left is recomputed from this command's own times."""

    def __init__(self, emit: Callable[[str], None], total: int, durations: Sequence[float] = (),
                 quiet_s: float = QUIET_S, *, scoring_per_run_s: float | None = None,
                 prior_run_s: float | None = None, later: Later = Later(), scoring_start_s: float = 0.0,
                 scoring_phases: int = 1, clock: Callable[[], float] = time.monotonic):
        super().__init__(emit, quiet_s=quiet_s, clock=clock)
        self.total, self.durations = total, list(durations)
        self.k, self.label, self.run_t0 = 0, "campaign start", self.t0
        self.scoring_per_run_s = scoring_per_run_s
        # the scoring servers' start, once a scoring phase (``scoring_phases`` of them left): not
        # a cost per run, so many runs scored on one start are not charged one start each
        self.scoring_start_s, self.starts_left = scoring_start_s, scoring_phases
        self.prior_run_s, self.later = prior_run_s, later
        self.measured: list[float] = []  # this command's own runs' durations
        self.to_score = 0  # runs deferred scoring has still to score (0 with per-run scoring)
        self.phase_runs = 0  # runs the scoring phase now under way scores (0: all of to_score)
        self.unit_estimate: float | None = None  # what the run or phase now under way was estimated at
        self.finished = False  # the last phase's scoring is done: nothing is left of it

    def _run_durations(self) -> list[float]:
        """The durations the estimate goes by: the runs', else the history's one run."""
        if self.durations:
            return self.durations
        return [self.prior_run_s] if self.prior_run_s is not None else []

    def start_run(self, k: int, label: str, to_score: int = 0) -> None:
        """Run ``k`` (1-based, of ``total``) begins; ``label`` says which (``run0 warm-up``...);
        ``to_score``: runs left for deferred scoring after the generation."""
        self.k, self.label, self.run_t0, self.to_score = k, label, self.clock(), to_score
        known = self._run_durations()
        self.unit_estimate = statistics.mean(known) if known else None
        self.finished = False

    def end_run(self, seconds: float) -> None:
        """A run ended; its duration feeds the estimate. Off its estimate by more than the
        ratio, a line says so and the runs left go by this command's runs alone."""
        note = revision_note(self.label, self.unit_estimate, seconds)
        self.durations.append(seconds)
        self.measured.append(seconds)
        if note is not None:
            self.durations = list(self.measured)
            self.say(f"{note}; the runs left are estimated from this command's "
                     f"{len(self.measured)} run{'s' if len(self.measured) != 1 else ''} (~"
                     f"{fmt_seconds(statistics.mean(self.measured))} each)")

    def phase(self, label: str, to_score: int = 0, runs: int = 0) -> None:
        """A campaign-wide phase (deferred scoring of ``runs`` of the ``to_score`` runs left; 0:
        all of them) instead of one run."""
        self.k, self.label, self.run_t0, self.to_score = 0, label, self.clock(), to_score
        self.phase_runs = runs or to_score
        per = self.scoring_per_run_s
        self.unit_estimate = per * self.phase_runs + self.scoring_start_s if per is not None and self.phase_runs \
            else None
        self.finished = False

    def scored(self, seconds: float, runs: int) -> None:
        """Deferred scoring of ``runs`` took ``seconds``: later estimates use it, and the runs
        are no longer left to score. Off its estimate by more than the ratio, a line says so."""
        note = revision_note(self.label, self.unit_estimate, seconds) if runs else None
        if runs:  # the phase's time less its servers' start (as the history had it), a run
            start = self.scoring_start_s if seconds > 2 * self.scoring_start_s else 0.0
            self.scoring_per_run_s = (seconds - start) / runs
        self.starts_left = max(0, self.starts_left - 1)
        self.to_score = max(0, self.to_score - runs)
        self.finished = not self.to_score
        # what is left to score has not begun: its lines before its phase (another side's runs
        # finished unscored) said "past the estimate" when timed from this phase's start
        self.run_t0 = self.clock()
        if note is not None:
            rest = f"; the {self.to_score} runs left to score are estimated at its ~" \
                   f"{fmt_seconds(self.scoring_per_run_s or 0.0)} a run" if self.to_score else ""
            self.say(note + rest)
        self.unit_estimate, self.phase_runs = None, 0

    def _later_text(self) -> str:
        after = self.later.seconds(None)
        return f" + {self.later.text(after)}" if self.later.units else ""

    def estimate(self) -> str:
        """The estimate of what is left, as the prefix shows it."""
        now = self.clock()
        if self.k:
            return estimate_left(self._run_durations(), self.total - self.k + 1, now - self.run_t0,
                                 self._scoring(), self.later, self.total)
        if self.to_score:  # the scoring phase itself
            return self._scoring_left(now - self.run_t0)
        if self.finished:
            return "nothing left" + self._later_text()
        if self.label != "campaign start":  # a phase of unknown size (its runs are all done)
            return NO_ESTIMATE + self._later_text()
        known = self._run_durations()
        if known:  # a resumed campaign (its earlier runs), or the results root's history
            source = "earlier runs" if self.durations else "earlier runs here"
            return f"~{fmt_seconds(statistics.mean(known))} a run ({source})" + self._later_text()
        return "estimate after the first run" + self._later_text()

    def _scoring(self) -> Scoring:
        """The deferred scoring left: its runs, and a start of its servers a phase left."""
        return Scoring(self.to_score, self.scoring_per_run_s, self.starts_left if self.to_score else 0,
                       self.scoring_start_s)

    def _phase_s(self) -> float:
        """The scoring phase now under way, as estimated: its runs and one start."""
        per = self.scoring_per_run_s or 0.0
        return per * (self.phase_runs or self.to_score) + self.scoring_start_s

    def left_s(self) -> float | None:
        """What is left of the whole command in seconds, as :meth:`estimate` words it (None:
        nothing to go by yet); a run or phase past its estimate counts 0 for itself."""
        now, known = self.clock(), self._run_durations()
        per = self.scoring_per_run_s
        if self.to_score and per is None:
            return None
        score = self._scoring().seconds() or 0.0
        if self.k:
            if not known:
                return None
            mean = statistics.mean(known)
            this = max(0.0, mean * (self.total - self.k + 1) - (now - self.run_t0)) + score
            later = self.later.seconds(mean * self.total + score)
            return None if later is None else this + later
        later = self.later.seconds(None) or 0.0
        if self.to_score:
            elapsed = now - self.run_t0
            phase = self._phase_s()
            after = score - phase
            if elapsed > phase > 0:
                after *= elapsed / phase
            return max(0.0, phase - elapsed) + after + later
        return later

    def _scoring_left(self, elapsed: float) -> str:
        """A scoring phase's estimate: the phase's runs less its time, the runs scored after it
        (another side's), and later work; past the phase's estimate, what follows it is scaled
        by how far past it is (so it grows as it goes, never jumps when the next phase begins)."""
        per = self.scoring_per_run_s
        if per is None:
            return UNTIMED + self._later_text()
        this = self._phase_s()
        after = (self._scoring().seconds() or 0.0) - this
        if elapsed > this > 0:
            after *= elapsed / this
        later = self.later.seconds(None) or 0.0
        if elapsed <= this or after + later < 0.5:
            return _left(this - elapsed + after + later)
        return f"this phase {PAST} + ~{fmt_seconds(after + later)} after it at its rate"

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
