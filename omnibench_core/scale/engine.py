"""What an engine is: slots to run on, and campaigns started, waited for and cancelled there."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from .jobs import CampaignOutcome
from .slots import HostSlot
from .worker import WorkerSpec


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
