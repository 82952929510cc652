"""Find the processes a run left behind, by more than the process group, and stop those proven ours.

A stray is found by what it holds or carries: membership of the program's tree (below the
watchdog, its group, its session, its token in the environment), the run's port (the listener),
or the run's GPUs (nvidia-smi's compute processes). Only tree membership proves a process is
ours; a port listener or a GPU user may be someone else's and is reported, not stopped.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from ..errors import GpuQueryError
from .gpu import CALL_TIMEOUT_S, query_compute_apps
from .ports import port_listeners
from .processes import GroupProcess
from .proctree import Tree, alive, cmdline, descendants, environ_has_token, snapshot
from .stopping import StopRecord, stop_members


@dataclass(frozen=True)
class Stray:
    """A live process of (or around) a run, and why it was found.

    ``reasons``: any of ``"descendant"``, ``"group"``, ``"session"``, ``"token"`` (these make it
    ``ours``), ``"port <n> listener"``, ``"GPU compute (<n> MiB)"``. ``visible`` is False for a
    GPU pid that /proc does not show (another pid namespace); ``command`` is then "".
    """

    pid: int
    command: str
    reasons: tuple[str, ...]
    ours: bool
    visible: bool = True


@dataclass(frozen=True)
class StrayScan:
    """The strays found, and what could not be looked at (e.g. nvidia-smi failed)."""

    strays: tuple[Stray, ...]
    notes: tuple[str, ...] = ()

    @property
    def ours(self) -> tuple[Stray, ...]:
        """The strays proven to be the run's own."""
        return tuple(s for s in self.strays if s.ours)

    def as_dict(self) -> dict[str, object]:
        """A JSON-ready form for manifests."""
        return {"strays": [asdict(s) for s in self.strays], "notes": list(self.notes)}


def find_strays(
    program: GroupProcess | Tree | None = None,
    *,
    port: int | None = None,
    gpus: Sequence[str] = (),
    nvidia_smi: str = "nvidia-smi",
    gpu_timeout_s: float = CALL_TIMEOUT_S,
    proc: Path = Path("/proc"),
) -> StrayScan:
    """Live processes of ``program`` (a started program or its :class:`Tree`), the listener of ``port``,
    and the compute processes on ``gpus`` (skipped when ``gpus`` is empty).

    Omnibench itself is never listed. An nvidia-smi failure is a note, not an error: the scan
    is evidence for a message, and the other findings still count. The nvidia-smi call takes at
    most ``gpu_timeout_s`` (pass the configured bound: a hung call must not outlast it).
    """
    tree = program.tree() if isinstance(program, GroupProcess) else program
    reasons: dict[int, list[str]] = {}
    notes: list[str] = []
    snap = snapshot(proc)
    if tree is not None:
        below = descendants(tree.root, snap) if tree.root is not None else set()
        for info in snap.values():
            why = []
            if info.pid in below:
                why.append("descendant")
            if tree.pgid is not None and info.pgid == tree.pgid:
                why.append("group")
            if tree.pgid is not None and info.sid == tree.pgid:
                why.append("session")
            if tree.may_carry_token(info) and environ_has_token(info.pid, tree.token, proc):
                why.append("token")
            if why and info.pid not in tree.exclude:
                reasons.setdefault(info.pid, []).extend(why)
    ours = set(reasons)
    if port is not None:
        for pid in port_listeners(port, proc):
            reasons.setdefault(pid, []).append(f"port {port} listener")
    if gpus:
        try:
            for app in query_compute_apps(gpus, nvidia_smi, gpu_timeout_s):
                used = "?" if app.used_mib is None else str(app.used_mib)
                reasons.setdefault(app.pid, []).append(f"GPU compute ({used} MiB)")
        except GpuQueryError as exc:
            notes.append(f"GPU compute processes unknown: {exc.message}")
    reasons.pop(os.getpid(), None)
    strays = []
    for pid in sorted(reasons):
        visible = pid in snap or alive(pid, proc)
        strays.append(Stray(pid, cmdline(pid, proc) if visible else "", tuple(reasons[pid]), pid in ours, visible))
    return StrayScan(tuple(strays), tuple(notes))


def stop_strays(strays: Iterable[Stray], grace_s: float, *, only_ours: bool = True) -> StopRecord:
    """SIGTERM, grace, SIGKILL for ``strays`` (by default only those proven ours), as a :class:`StopRecord`."""
    pids = {s.pid for s in strays if s.visible and (s.ours or not only_ours)}
    return stop_members(lambda: {p for p in pids if alive(p)}, grace_s, by="owner")
