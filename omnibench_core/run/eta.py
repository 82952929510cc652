"""The estimate of what is left of one ``invoke run``, phase by phase (servers' READY counted in
their phase), from the results root's earlier runs of the same workloads; a phase that proves the
estimate wrong by more than :data:`~omnibench_core.defaults.ETA_REVISE_RATIO` says so and the rest
is recomputed at the rate it showed, never a silent jump. A campaign's, an A/B's and a sweep's
estimate is :class:`~omnibench_core.campaign.progress.CampaignProgress`, by the same rule."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from ..defaults import ETA_REVISE_RATIO
from ..heartbeat import QUIET_S, Heartbeat, fmt_seconds
from ..store.durations import PhaseTimes

PAST = "past the estimate"  # work is left but the estimate of it has run out: never "~0s left"


def left_text(seconds: float) -> str:
    """``~Ns left``, or :data:`PAST` when under a second is left of work that is not done."""
    return f"~{fmt_seconds(seconds)} left" if seconds >= 0.5 else PAST


def revision_note(what: str, estimated_s: float | None, took_s: float) -> str | None:
    """``estimate revised: <what> took 2.4x its estimate`` when ``took_s`` is over
    ``ETA_REVISE_RATIO`` times the estimate or under its inverse; None while it holds (or there
    was no estimate to prove wrong)."""
    if not estimated_s or estimated_s <= 0 or took_s <= 0:
        return None
    ratio = took_s / estimated_s
    if 1 / ETA_REVISE_RATIO <= ratio <= ETA_REVISE_RATIO:
        return None
    return f"estimate revised: {what} took {ratio:.1f}x its estimate" if ratio >= 1 else \
        f"estimate revised: {what} took {ratio:.2f}x its estimate"


def with_estimate(line: str, estimate: str) -> str:
    """``line`` with ``estimate`` inside its leading ``[...]`` stamp (``[  12.3s | ~1m left]``),
    or before it when it has none."""
    if line.startswith("[") and "]" in line:
        end = line.index("]")
        return f"{line[:end]} | {estimate}{line[end:]}"
    return f"[{estimate}] {line}"


class RunEta(Heartbeat):
    """``invoke run``'s stream: a heartbeat whose lines carry what is left of the run's phases.

    ``history`` (None: no earlier run to go by) gives each phase's seconds; the runner says when a
    phase begins (:meth:`phase_begins`). Each phase that ends is compared with its estimate: off by
    more than the ratio, a line says so and the phases after it are scaled by what it showed."""

    def __init__(self, emit: Callable[[str], None], history: PhaseTimes | None, phases: Sequence[str], *,
                 quiet_s: float = QUIET_S, clock: Callable[[], float] = time.monotonic):
        super().__init__(emit, quiet_s=quiet_s, clock=clock)
        self.history, self.phases = history, list(phases)
        self.scale = 1.0  # measured / estimated, once a phase proved the history wrong
        self.current: str | None = None
        self.phase_t0 = self.t0

    def _estimated(self, phase: str) -> float:
        return (self.history.seconds.get(phase, 0.0) if self.history else 0.0) * self.scale

    def opening(self) -> str:
        """The first line: the whole run's estimate and what it is made from."""
        if self.history is None:
            return "estimate: none yet (no earlier complete run of these workloads in this revision folder)"
        parts = ", ".join(f"{p} ~{fmt_seconds(self._estimated(p))}" for p in self.phases
                          if self.history.seconds.get(p))
        total = sum(self._estimated(p) for p in self.phases)
        return (f"estimate: ~{fmt_seconds(total)} ({parts}; the mean of {self.history.runs} earlier complete "
                f"run{'s' if self.history.runs != 1 else ''} of these workloads here)")

    def phase_begins(self, phase: str) -> None:
        """The runner begins ``phase``: the phase before it ended, and is held to its estimate."""
        if phase == self.current:
            return
        now, ended = self.clock(), self.current
        if ended is not None and ended in self.phases:
            took, estimated = now - self.phase_t0, self._estimated(ended)
            note = revision_note(f"the {ended} phase", estimated, took)
            if note is not None:
                self.scale *= took / estimated
                self(note + f"; ~{fmt_seconds(self._later(ended))} for the phases after it at that rate")
        self.current, self.phase_t0 = phase, now

    def _later(self, phase: str) -> float:
        after = self.phases[self.phases.index(phase) + 1:] if phase in self.phases else []
        return sum(self._estimated(p) for p in after)

    def estimate(self) -> str | None:
        """What is left (None without a history)."""
        if self.history is None:
            return None
        if self.current is None or self.current not in self.phases:
            return left_text(sum(self._estimated(p) for p in self.phases) - (self.clock() - self.t0))
        now = max(0.0, self._estimated(self.current) - (self.clock() - self.phase_t0))
        later = self._later(self.current)
        if now < 0.5:  # this phase is past its estimate: what follows it is still left
            return f"{self.current} {PAST}" + (f" + ~{fmt_seconds(later)}" if later >= 0.5 else "")
        return left_text(now + later)

    def line(self, message: str) -> str:
        """A runner's line with the estimate in its stamp."""
        estimate = self.estimate()
        # the runner's lines (stamped) carry it; the opening line says it in words
        return with_estimate(message, estimate) if estimate is not None and message.startswith("[") else message

    def still(self, silent: float) -> str:
        """The heartbeat's repeat, with the estimate as it is now."""
        repeat, estimate = super().still(silent), self.estimate()
        return repeat if estimate is None else with_estimate(repeat, estimate)
