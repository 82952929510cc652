"""The status words the run files hold, as enums: each is a ``str`` whose value is the word the
JSON has always held, so the files (and sglang-omni's scripts that read them) stay the same."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from pathlib import Path


class Word(str, enum.Enum):
    """A status that prints, formats and serialises as its word (``enum.StrEnum`` needs 3.11; the
    project supports 3.10)."""

    def __str__(self) -> str:
        return str(self.value)

    def __format__(self, spec: str) -> str:
        return format(str(self.value), spec)


class RunStatus(Word):
    """A run's ``status`` in its manifest (and in :class:`~omnibench_core.records.RunResult`)."""

    RUNNING = "running"
    GENERATED = "generated"  # stopped after its generate phase on purpose; scored later
    COMPLETE = "complete"
    INCOMPLETE = "incomplete"  # a coverage rule broke: moved aside
    FAILED = "failed"  # a gate or step failed: moved aside
    INTERRUPTED = "interrupted"  # Ctrl-C or SIGTERM: moved aside
    ABANDONED = "abandoned"  # its owner died while it ran; moved aside by a later run


class GateStatus(Word):
    """A gate's ``status`` in the manifest."""

    PASSED = "passed"
    NOT_APPLICABLE = "not_applicable"
    FAILED = "failed"


class AttemptStatus(Word):
    """One attempt's ``status`` in a campaign file or an A/B record (one try at one run)."""

    RUNNING = "running"
    GENERATED = "generated"  # deferred scoring: generated, not yet scored
    COMPLETE = "complete"
    INCOMPLETE = "incomplete"
    FAILED = "failed"
    INTERRUPTED = "interrupted"
    NOT_READY = "not-ready"  # its port or folder was not ready (RUN_READY): no retry spent, the loop stops
    # A/B only (--noisy-retries): a run that ended, whose timed window the noise guard marked; kept on
    # disk and named in the report, not judged: its round is measured again
    NOISY = "noisy"


class CampaignStatus(Word):
    """A whole campaign's ``status`` in its file."""

    RUNNING = "running"
    COMPLETE = "complete"
    STOPPED = "stopped"  # a slot missed its gates more often than --retries allows
    INTERRUPTED = "interrupted"


class ExperimentStatus(Word):
    """A whole A/B experiment's ``status`` in its record."""

    RUNNING = "running"
    COMPLETE = "complete"
    STOPPED = "stopped"  # a run missed its gates more often than --retries allows, or was not ready
    INTERRUPTED = "interrupted"


class SideStatus(Word):
    """How one side's worker of a duet round ended (its outcome file)."""

    COMPLETE = "complete"
    GENERATED = "generated"
    INCOMPLETE = "incomplete"
    FAILED = "failed"  # a gate or step failed
    INTERRUPTED = "interrupted"
    NOT_READY = "not-ready"  # RUN_READY: its slot's port or folder
    ERROR = "error"  # another omnibench error ended it
    LOST = "lost"  # the worker ended without an outcome (or with a word this omnibench does not know)


def words(kind: type[Word]) -> tuple[str, ...]:
    """Every word of ``kind``, in order (for messages that list the allowed ones)."""
    return tuple(m.value for m in kind)


class StepStatus(Word):
    """A step's ``status`` in the manifest."""

    RUNNING = "running"
    OK = "ok"
    FAILED = "failed"
    INTERRUPTED = "interrupted"
    SKIPPED = "skipped"  # this run wrote its outputs already (sizes and hashes match)


class JobStatus(Word):
    """A matrix or bisect job's campaign outcome (``matrix.json``, the workers' outcome files)."""

    COMPLETE = "complete"
    FAILED = "failed"
    INTERRUPTED = "interrupted"
    LOST = "lost"  # its slot (process, worker or node) went away: it is tried again elsewhere
    # the checkout at this commit lacks an option the campaign passes (its era predates it): no
    # server started; never good or bad (bisect skips it, history draws no point)
    NOT_MEASURABLE = "not-measurable"


@dataclass(frozen=True)
class RunOutcome:
    """How a run ended and where its folder is now: what a campaign or an A/B experiment records
    of an attempt. Here, beside the status words, so that the errors (``OmnibenchError.outcomes``)
    need nothing of :mod:`omnibench_core.records`, which stands on the settings, which stand on the
    errors: no import circle. The runner returns it in a :class:`RunResult` and attaches it to the error
    that ends a run (``OmnibenchError.outcomes``), so no caller parses it from an error's text."""

    run: str  # the runN the run claimed (its name before any move)
    status: RunStatus
    run_dir: Path  # where the run is now
    moved_to: Path | None = None  # set when the run layer moved it aside (``runN-incomplete``)
    why: str = ""  # the error's message, or the broken coverage rules ("rule: detail; ...")
