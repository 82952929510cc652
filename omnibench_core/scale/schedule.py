"""Jobs onto free slots through an engine: one campaign per slot at a time, a lost slot's campaign
started again on another slot (it resumes there), Ctrl-C cancels every campaign first."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

from ..errors import OmnibenchError, RunInterrupted, Terminated
from ..statuses import JobStatus
from .engine import Engine
from .jobs import CampaignJob, CampaignOutcome
from .slots import HostSlot
from .worker import WorkerSpec

Progress = Callable[[str], None]


class ScaleInterrupted(RunInterrupted):
    """Campaigns were interrupted (Ctrl-C, SIGTERM, or inside a campaign); ``campaigns`` holds
    what every campaign started or finished got, the interrupted ones included, so the matrix
    file can say which to resume."""

    def __init__(self, message: str, outcomes: dict[str, CampaignOutcome], **kwargs: Any):
        super().__init__(message, **kwargs)
        self.campaigns = outcomes  # not ``outcomes``: OmnibenchError's are the runs' (RunOutcome)


def run_jobs(jobs: Sequence[CampaignJob], engine: Engine, spec_for: Callable[[CampaignJob, HostSlot], WorkerSpec], *,
             progress: Progress = print, max_lost: int = 3, cancel_grace_s: float = 60.0) -> dict[str, CampaignOutcome]:
    """Run ``jobs`` on the engine's slots; returns each job's outcome by key.

    A ``lost`` outcome puts the job back at the front of the queue (up to ``max_lost`` times).
    KeyboardInterrupt or Terminated (SIGTERM) cancels every running campaign, waits for their
    servers to stop, and raises :class:`ScaleInterrupted` with every outcome (the cancelled
    campaigns ``interrupted``); complete campaigns and runs stay, so the same command resumes.
    """
    pending = deque(jobs)
    busy: dict[object, tuple[CampaignJob, HostSlot]] = {}
    lost: dict[str, int] = {}
    results: dict[str, CampaignOutcome] = {}
    try:
        while pending or busy:
            held = {slot.index for _, slot in busy.values()}
            free = [s for s in engine.slots() if s.index not in held]
            while pending and free:
                job, slot = pending.popleft(), free.pop(0)
                progress(f"start {job.key} on {slot.label}" + (f" (node {slot.node[:8]})" if slot.node else ""))
                busy[engine.start(spec_for(job, slot))] = (job, slot)
            if pending and not busy and not engine.slots():
                raise OmnibenchError("every slot is gone; campaigns are left", evidence={"left": ", ".join(j.key for j in pending)},
                                     hint="bring the nodes back and repeat the command with --resume")
            for handle, outcome in engine.wait(1.0):
                job, slot = busy.pop(handle)
                if outcome.status is JobStatus.LOST:
                    lost[job.key] = lost.get(job.key, 0) + 1
                    if lost[job.key] <= max_lost:
                        progress(f"{job.key}: its slot was lost ({outcome.error}); it starts again on another slot")
                        pending.appendleft(job)
                        continue
                progress(f"{job.key}: {outcome.status} on {slot.label} in {outcome.seconds:.0f} s"
                         + (f": {outcome.error}" if outcome.error else ""))
                results[job.key] = outcome
    except (KeyboardInterrupt, Terminated) as exc:  # SIGTERM too (the task turns it into Terminated)
        why = "SIGTERM" if isinstance(exc, Terminated) else "Ctrl-C (SIGINT)"
        progress(f"interrupted by {why}: cancelling every campaign so that its servers stop")
        engine.cancel_all(cancel_grace_s)
        for handle, outcome in engine.wait(0.0):  # what the cancelled campaigns said as they ended
            if handle in busy:
                results[busy.pop(handle)[0].key] = outcome
        for job, slot in busy.values():  # ended without a word (forced): interrupted all the same
            results[job.key] = CampaignOutcome(job.key, JobStatus.INTERRUPTED, slot=slot.as_dict(), error=why)
        cut = sorted(k for k, o in results.items() if o.status is JobStatus.INTERRUPTED)
        raise ScaleInterrupted(f"interrupted by {why}; every campaign was cancelled and its servers stopped", results,
                               evidence={"campaigns interrupted": ", ".join(cut) or "none",
                                         "not started": ", ".join(j.key for j in pending) or "none"},
                               hint="the same command continues it (complete campaigns and runs are kept)") from None
    interrupted = [k for k, o in results.items() if o.status is JobStatus.INTERRUPTED]
    if interrupted:
        raise ScaleInterrupted(f"{len(interrupted)} campaign(s) were interrupted", results,
                               evidence={"campaigns interrupted": ", ".join(interrupted)},
                               hint="the same command continues them (complete campaigns and runs are kept)")
    return results
