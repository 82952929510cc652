"""One campaign on one slot: what every engine runs (in a subprocess, or in a Ray task).

The revision's worktree and venv are prepared on the host that runs the campaign, the slot is
checked free, the settings handed to the campaign take their port, GPUs and CPUs from the slot
and their checkout from the revision; servers get their own ``OMP_NUM_THREADS`` (Ray sets 1).

``python -m omnibench_core.scale.worker JOB.json OUT.json`` runs one job from a file and writes
its outcome (the local engine's subprocesses).
"""

from __future__ import annotations

import os
import signal
import sys
import time

if __name__ == "__main__":
    # Stopped by its driver (SIGINT) while still importing the library: end as interrupted (130)
    # without a traceback in the matrix's output; main() puts Ctrl-C's usual handling back.
    signal.signal(signal.SIGINT, lambda *_: sys.exit(130))
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ..errors import OmnibenchError, RunInterrupted, Terminated, UnsupportedOption
from ..jsonio import read_json, write_json
from ..settings import Settings
from ..statuses import JobStatus
from . import campaigns, revisions
from .jobs import CampaignJob, CampaignOutcome
from .slots import HostSlot, check_free


def worker_argv(job_file: Path, out_file: Path, python: str = sys.executable) -> list[str]:
    """The command that runs the job in ``job_file`` (a :meth:`WorkerSpec.as_dict`, as JSON) and
    writes its :class:`CampaignOutcome` to ``out_file``: what an engine starts on a slot."""
    return [python, "-m", "omnibench_core.scale.worker", str(job_file), str(out_file)]


@dataclass(frozen=True)
class WorkerSpec:
    """Everything a worker needs, JSON-ready: the job, the slot, the settings (flat) and where
    worktrees go."""

    job: CampaignJob
    slot: HostSlot
    settings: Mapping[str, Any]
    worktrees: str
    slot_timeout_s: float = 30.0

    def as_dict(self) -> dict[str, Any]:
        """For a subprocess's job file or a Ray task's argument."""
        return {"job": self.job.as_dict(), "slot": self.slot.as_dict(), "settings": dict(self.settings),
                "worktrees": self.worktrees, "slot_timeout_s": self.slot_timeout_s}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> WorkerSpec:
        """Inverse of :meth:`as_dict`."""
        return cls(CampaignJob.from_dict(data["job"]), HostSlot.from_dict(data["slot"]), dict(data["settings"]),
                   str(data["worktrees"]), float(data.get("slot_timeout_s", 30.0)))


def settings_for(spec: WorkerSpec, checkout: str | None) -> Settings:
    """The campaign's settings: the slot's port, GPUs and CPUs, the revision's checkout."""
    return spec.slot.settings_on({**spec.settings, "checkout": checkout} if checkout else spec.settings)


def execute(spec: WorkerSpec, progress: Callable[[str], None] = print) -> CampaignOutcome:
    """Prepare the revision, check the slot free, run the campaign; returns its outcome.

    An interrupt or SIGTERM ends the campaign with every server stopped (the run layer's
    ``finally`` blocks) and an ``interrupted`` outcome; other typed errors give ``failed``.
    """
    job, t0 = spec.job, time.monotonic()
    base = Settings.from_mapping(spec.settings)
    try:
        checkout = None
        if job.revision and base.run.target != "local":
            prepared = revisions.prepare(Path(base.run.checkout).expanduser(), job.revision, Path(spec.worktrees),
                                         venv_name=base.run.venv, git=base.tools.git, bash=base.tools.bash,
                                         progress=progress)
            checkout = str(prepared.worktree)
        settings = settings_for(spec, checkout)
        # Ray sets OMP_NUM_THREADS=1 for its tasks; a server inherits it unless told otherwise.
        os.environ["OMP_NUM_THREADS"] = str(len(spec.slot.slot.cpus) or os.cpu_count() or 1)
        check_free(spec.slot, nvidia_smi=base.tools.nvidia_smi, free_mib=base.run.gpu_free_mib,
                   timeout_s=spec.slot_timeout_s)
        outcome = campaigns.run_campaign(job, settings, spec.slot.as_dict(), progress)
        return replace(outcome, seconds=time.monotonic() - t0)
    except (RunInterrupted, KeyboardInterrupt, Terminated) as exc:
        return CampaignOutcome(job.key, JobStatus.INTERRUPTED, slot=spec.slot.as_dict(), seconds=time.monotonic() - t0,
                               error=str(exc) or type(exc).__name__)
    except UnsupportedOption as exc:  # its era lacks an option: no server started, neither good nor bad
        return CampaignOutcome(job.key, JobStatus.NOT_MEASURABLE, slot=spec.slot.as_dict(),
                               seconds=time.monotonic() - t0, error=str(exc))
    except OmnibenchError as exc:
        return CampaignOutcome(job.key, JobStatus.FAILED, slot=spec.slot.as_dict(), seconds=time.monotonic() - t0,
                               error=str(exc))


def main(argv: list[str] | None = None) -> int:
    """``python -m omnibench_core.scale.worker JOB.json OUT.json``."""
    # KeyboardInterrupt again (not the import-time exit), also when the worker was started with SIGINT
    # ignored: the driver stops a campaign with SIGINT (what obey_ctrl_c does for the other workers)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 2:
        print("usage: python -m omnibench_core.scale.worker JOB.json OUT.json", file=sys.stderr)
        return 2
    spec = WorkerSpec.from_dict(read_json(Path(args[0])))
    outcome = execute(spec, progress=lambda line: print(line, flush=True))
    write_json(Path(args[1]), outcome.as_dict())
    return 0 if outcome.status is JobStatus.COMPLETE else 1


if __name__ == "__main__":
    sys.exit(main())
