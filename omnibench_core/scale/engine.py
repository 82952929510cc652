"""What an engine is, and the engine author's surface (docs/engines.md): slots to run on, and
campaigns started, waited for and cancelled there.

A plugin's engine (``omnibench_engines``) imports what it needs from here: the protocol, the
records it is handed and returns (:class:`WorkerSpec`, :class:`HostSlot`, :class:`CampaignOutcome`,
:class:`JobStatus`), this host's slots from the flags (:func:`host_slots`) and the command that
runs one campaign (:func:`worker_argv`), as the built-in local engine does.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from ..records import EngineRequest
from ..statuses import JobStatus
from . import slots as _slots
from .jobs import CampaignOutcome
from .slots import HostSlot
from .worker import WorkerSpec, worker_argv

__all__ = ["ENGINE_METHODS", "CampaignOutcome", "Engine", "HostSlot", "JobStatus", "WorkerSpec", "host_slots",
           "worker_argv"]

ENGINE_METHODS = ("slots", "start", "wait", "cancel_all", "close")


class Engine(Protocol):
    """Runs :class:`~.worker.WorkerSpec` s on slots. ``slots()`` are the slots usable now (a lost
    node's slots disappear); ``wait`` returns the campaigns that ended, each with its outcome
    (status ``lost`` when its worker or node died, so the scheduler tries it elsewhere)."""

    name: str

    def slots(self) -> Sequence[HostSlot]:
        """The slots usable now."""
        ...

    def start(self, spec: WorkerSpec) -> object:
        """Start one campaign; returns a handle."""
        ...

    def wait(self, timeout_s: float) -> list[tuple[object, CampaignOutcome]]:
        """The campaigns that ended within ``timeout_s`` (maybe none)."""
        ...

    def cancel_all(self, grace_s: float) -> None:
        """Interrupt every running campaign so that its servers stop, and wait up to ``grace_s``."""
        ...

    def close(self) -> None:
        """Give back what the engine holds."""
        ...


def host_slots(request: EngineRequest) -> list[HostSlot]:
    """This host's slots from the request's flags (``--slots``, ``--slot-per``, ``--slot-cpus``),
    planned as the local engine plans them; each slot's note is said once."""
    return _slots.host_slots(request.settings, request.slots, request.slot_per, request.slot_cpus, request.progress)
