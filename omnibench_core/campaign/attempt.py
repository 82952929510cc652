"""One attempt at one run, and the deferred scoring of generated runs: the steps a campaign's
runs and an A/B experiment's runs share.

The attempt is recorded ``running`` before :func:`omnibench_core.api.run` starts, and again as the
run ended: its status, seconds, the runN it got, where the run layer moved it, why, and the
server starts it made. A run that is not ready (RUN_READY: its port or folder) is recorded
``not-ready`` before the error goes on, so the file read after a port clash says why it stopped.
Each loop keeps its own attempt record; :class:`Ended` and :class:`Scored` carry the fields both
records hold.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from .. import api
from ..errors import (
    GateError,
    OmnibenchError,
    RunInterrupted,
    RunNotReady,
    StepFailed,
    WrongRevision,
    one_line,
    storage_error,
)
from ..records import Phase, RunResult
from ..run import ownership
from ..settings import Settings
from ..statuses import AttemptStatus, RunOutcome, RunStatus
from ..store import manifest as manifest_file
from .progress import CampaignProgress


@dataclass(frozen=True)
class Ended:
    """Where an attempt stands: the fields a campaign's and an A/B experiment's attempts share."""

    status: AttemptStatus
    seconds: float = 0.0
    run: str = ""  # the runN the run claimed ("" when it never got one)
    moved_to: str = ""  # the folder the run layer moved it aside to
    error: str = ""
    server_starts: int = 0

    def changes(self) -> dict[str, Any]:
        """The fields, for ``dataclasses.replace`` of either attempt record."""
        return asdict(self)


def reclaim(revision_dirs: Iterable[Path], say: Callable[[str], None]) -> None:
    """Before a campaign or experiment resumes: runs left running by a dead omnibench (kill -9)
    in ``revision_dirs``. A run whose deferred scoring died goes back to generated, so only its
    scoring is done again; others are moved aside as the run layer does. A results folder that
    cannot be changed is a StorageError."""
    try:
        for folder in revision_dirs:
            for run_dir in ownership.reclaim_abandoned(folder):
                say(f"{run_dir.name}: its omnibench process died while it was running; "
                    + ("moved aside" if "-incomplete" in run_dir.name else "it is generated again and only scored"))
    except OSError as exc:
        raise storage_error("reclaiming runs whose omnibench died", exc) from exc


def server_starts(run_dir: Path) -> int:
    """Server starts a run made itself (a shared scoring start counts once, in the run that made it)."""
    try:
        return manifest_file.read(run_dir).server_starts
    except OmnibenchError:
        return 0


def ended_with(outcome: RunOutcome, seconds: float) -> Ended:
    """The attempt as the run's own outcome left it."""
    return Ended(status=AttemptStatus(outcome.status), seconds=seconds, run=outcome.run,
                 moved_to=str(outcome.moved_to or ""), error=outcome.why, server_starts=server_starts(outcome.run_dir))


def ended_by(exc: OmnibenchError, status: AttemptStatus, seconds: float) -> Ended:
    """The attempt an error ended: the run it got and where the run layer moved it, if it got one
    (its planning or RUN_READY can fail before it has a folder); its server starts happened."""
    outcomes: Sequence[RunOutcome] = exc.outcomes
    if not outcomes:
        return Ended(status, seconds, error=one_line(exc))
    out = outcomes[0]
    return Ended(status, seconds, out.run, str(out.moved_to or ""), one_line(exc), server_starts(out.run_dir))


def run_attempt(settings: Settings, workloads: Sequence[str], *, options: Sequence[str], client: str | None,
                phases: tuple[Phase, ...], progress: CampaignProgress, label: str,
                record: Callable[[Ended], None]) -> RunResult | None:
    """One attempt: ``record`` running, the run, then ``record`` how it ended. Returns the run's
    result, or None when it missed a gate or failed a step (a retry is spent: the caller decides
    whether one is left). Ctrl-C (RunInterrupted) and a run that is not ready (RunNotReady: a
    retry would miss the same way; WrongRevision: a retry would serve the same other code) are
    recorded, then raised."""
    record(Ended(AttemptStatus.RUNNING))
    t0 = time.monotonic()
    try:
        result = api.run(settings, workloads, options=options, client=client, progress=progress, phases=phases)
    except RunInterrupted as exc:
        record(ended_by(exc, AttemptStatus.INTERRUPTED, time.monotonic() - t0))
        raise
    except RunNotReady as exc:
        record(ended_by(exc, AttemptStatus.NOT_READY, time.monotonic() - t0))
        raise
    except WrongRevision as exc:
        record(ended_by(exc, AttemptStatus.FAILED, time.monotonic() - t0))
        raise
    except (GateError, StepFailed) as exc:
        record(ended_by(exc, AttemptStatus.FAILED, time.monotonic() - t0))
        progress.say(f"{label} failed ({one_line(exc)}); it is tried again if retries are left")
        return None
    seconds = time.monotonic() - t0
    record(ended_with(result.outcome, seconds))
    progress.end_run(seconds)
    return result


@dataclass(frozen=True)
class Scored:
    """A generated run's attempt as its deferred scoring left it (its generation's seconds stay)."""

    status: AttemptStatus
    error: str = ""
    moved_to: str = ""
    server_starts: int = 0

    def changes(self) -> dict[str, Any]:
        """The fields, for ``dataclasses.replace`` of either attempt record."""
        return asdict(self)


def scored(run_dir: Path, outcome: RunOutcome | None) -> Scored:
    """The attempt of the run at ``run_dir`` after scoring: the run's outcome, or (a run the
    scoring never reopened) what its manifest says. A run left generated (interrupted scoring)
    keeps no error: it is only scored again."""
    if outcome is None:
        status = manifest_file.run_status(run_dir) or RunStatus.FAILED
        try:
            manifest = manifest_file.read(run_dir)
            why = manifest.error_message if status == RunStatus.FAILED else manifest.broken_rules
        except OmnibenchError:
            why = ""
        outcome = RunOutcome(run_dir.name, status, run_dir, None, why)
    why = outcome.why if outcome.status in (RunStatus.FAILED, RunStatus.INCOMPLETE) else ""
    return Scored(AttemptStatus(outcome.status), why, str(outcome.moved_to or ""), server_starts(outcome.run_dir))


def score_generated(settings: Settings, workloads: Sequence[str], run_dirs: Sequence[Path], *,
                    options: Sequence[str], client: str | None, progress: CampaignProgress,
                    record: Callable[[Path, Scored], None], quality: bool = True) -> int:
    """Deferred scoring: the generated runs at ``run_dirs`` on one start of each scoring server
    (``quality`` False: collected without scoring); ``record`` gets each run's attempt as the
    scoring left it, also after Ctrl-C (the runs it reopened say where they are now). Returns
    how many runs it finished."""
    outcomes: dict[str, RunOutcome] = {}
    try:
        results = api.score_runs(settings, workloads, run_dirs, options=options, client=client, progress=progress,
                                 quality=quality)
        outcomes = {r.outcome.run: r.outcome for r in results}
    except OmnibenchError as exc:
        outcomes = {o.run: o for o in exc.outcomes}
        raise
    finally:
        for run_dir in run_dirs:
            record(run_dir, scored(run_dir, outcomes.get(run_dir.name)))
    return len(results)
