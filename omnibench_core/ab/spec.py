"""What the driver and a duet's worker process share: the spec a worker runs, the line it says
before each timed window, and the variable naming its driver. Apart from :mod:`.worker` because
that module is started as ``python -m omnibench_core.ab.worker``: were it imported by this package
(its ``__init__`` imports the driver), runpy would find it in ``sys.modules`` before running it as
``__main__`` and warn in every duet (a RuntimeWarning on the worker's standard error)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

BARRIER = "@@omnibench-barrier "
DONE = "@@omnibench-done"  # the worker's line once its run's report is written
SERVE = "--serve"  # the worker's one argument: run what its input hands it, until end of input
PARENT_VAR = "OMNIBENCH_DUET_PARENT"  # the driver's pid: the worker dies with it
# "FD:SECONDS": the pipe the worker writes a byte to every SECONDS while it lives and is scheduled, so
# the driver can name a worker that stopped answering (SIGSTOP, hung, swapped out): ab/duet.py
HEARTBEAT_VAR = "OMNIBENCH_DUET_HEARTBEAT"


def heartbeat_every(silence_s: float) -> float:
    """How often a worker gives its sign of life when the driver waits ``silence_s`` for one: four
    times in that span (at most every 15 s, at least every 50 ms)."""
    return min(max(silence_s / 4, 0.05), 15.0) if silence_s else 15.0


@dataclass(frozen=True)
class Spec:
    """What one side's run needs, JSON-ready."""

    settings: Mapping[str, Any]  # flat, with the slot's port, GPUs and CPUs
    workloads: tuple[str, ...]
    options: tuple[str, ...]
    client: str | None
    phases: tuple[str, ...]

    def as_dict(self) -> dict[str, Any]:
        """For the spec file."""
        return {"settings": dict(self.settings), "workloads": list(self.workloads), "options": list(self.options),
                "client": self.client, "phases": list(self.phases)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Spec:
        """Inverse of :meth:`as_dict`."""
        return cls(dict(data["settings"]), tuple(data["workloads"]), tuple(data["options"]), data.get("client"),
                   tuple(data["phases"]))
