"""How busy the host was during a timed window, from ``/proc``: the noise guard.

A verdict that compares two measurements assumes that only the code differed. On a shared host
(a CI runner, a GPU box with other tenants) another process can take the slot's CPUs during one
side's timed window and move its numbers. The guard records, for each timed window, the CPU time
spent on the slot's CPUs (``/proc/stat``), the CPU time of omnibench's own process tree
(``/proc/<pid>/stat``, reaped children included), and the load average; the difference is the
time that went to processes outside the run. A window whose foreign share of the slot's capacity
is above the ``noise_max_foreign`` setting marks the run noisy.

The runner's own CPU time counts as the run's wherever it ran, so the foreign share is a lower
bound when the runner is not pinned to the slot's CPUs. In a duet on two disjoint slots each side's
own is its worker's tree only (the foreign share of a slot is its busy time less that side's tree);
the driver and the partner's worker are not pinned, and their own small CPU time (the barrier loop,
the sampler) counts as foreign on whichever slot it ran.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ..store.run_entries import StepEntry

PROC = Path("/proc")
# /proc/stat's per-CPU columns: user nice system idle iowait irq softirq steal (guest is in user).
_BUSY_COLUMNS = (0, 1, 2, 5, 6, 7)


def clock_ticks() -> int:
    """Kernel clock ticks per second (the unit of /proc's CPU times)."""
    return int(os.sysconf("SC_CLK_TCK"))


def _busy(cpus: Sequence[int], proc: Path) -> tuple[int, int]:
    """(busy ticks since boot, how many of the CPUs' lines were found) from ``/proc/stat``."""
    wanted = {f"cpu{c}" for c in cpus}
    total = found = 0
    for line in (proc / "stat").read_text().splitlines():
        name, _, rest = line.partition(" ")
        if not name.startswith("cpu") or name == "cpu" or (wanted and name not in wanted):
            continue
        columns = [int(x) for x in rest.split()]
        total += sum(columns[i] for i in _BUSY_COLUMNS if i < len(columns))
        found += 1
    return total, found


def busy_ticks(cpus: Sequence[int], proc: Path = PROC) -> int:
    """Ticks the CPUs ``cpus`` spent busy since boot (every CPU's when ``cpus`` is empty)."""
    return _busy(cpus, proc)[0]


def _stat_fields(pid: int, proc: Path) -> list[str] | None:
    try:
        stat = (proc / str(pid) / "stat").read_text()
    except OSError:
        return None
    return stat[stat.rindex(")") + 2:].split()  # field 3 (state) onwards; the name may hold spaces


def _process_table(proc: Path) -> tuple[dict[int, int], dict[int, int]]:
    """(pid -> parent pid, pid -> CPU ticks with its reaped children) of every live process."""
    parents: dict[int, int] = {}
    own: dict[int, int] = {}
    try:
        entries = [e.name for e in os.scandir(proc) if e.name.isdigit()]
    except OSError:
        entries = []
    for name in entries:
        fields = _stat_fields(int(name), proc)
        if fields is None or fields[0] in ("Z", "X"):
            continue
        pid = int(name)
        parents[pid] = int(fields[1])
        own[pid] = sum(int(fields[i]) for i in (11, 12, 13, 14))  # utime stime cutime cstime
    return parents, own


def _tree(root: int, parents: dict[int, int]) -> set[int]:
    children: dict[int, list[int]] = {}
    for pid, ppid in parents.items():
        children.setdefault(ppid, []).append(pid)
    todo, seen = [root], set()
    while todo:
        pid = todo.pop()
        if pid not in seen:
            seen.add(pid)
            todo.extend(children.get(pid, ()))
    return seen


def tree_pids(root: int, proc: Path = PROC) -> set[int]:
    """``root`` and every live descendant: the run's own processes (the GPU guard's "not foreign")."""
    return _tree(root, _process_table(proc)[0])


def tree_ticks(root: int, proc: Path = PROC) -> int:
    """CPU ticks used by ``root`` and every live descendant, each with its reaped children.

    A process that exited and was reaped has its time in its parent's ``cutime``/``cstime``
    (Linux adds it on wait), so a short-lived client still counts as the run's."""
    parents, own = _process_table(proc)
    return sum(own.get(pid, 0) for pid in _tree(root, parents))


def load_average(proc: Path = PROC) -> float | None:
    """The 1-minute load average, or None where /proc/loadavg cannot be read."""
    try:
        return float((proc / "loadavg").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


@dataclass(frozen=True)
class HostLoad:
    """One timed window's host load: the slot's CPU time, the run's share, the rest, the load."""

    window: str
    seconds: float
    cpus: tuple[int, ...]  # the slot's CPUs (all of the process's when it is not pinned)
    busy_cpu_s: float  # CPU time the slot's CPUs were busy
    own_cpu_s: float  # CPU time of omnibench's process tree
    foreign_cpu_s: float  # busy minus own, never below 0
    foreign_fraction: float  # foreign CPU time over the slot's capacity (seconds x CPUs)
    load_start: float | None
    load_end: float | None
    threshold: float
    noisy: bool
    # processes outside the run's tree that computed on the slot's GPUs in the window ("pid P
    # (command) M MiB on GPU G, SM U %"): any one makes the window noisy, whatever the CPU share
    gpu_tenants: tuple[str, ...] = ()
    # processes outside the run's tree that only held memory on the slot's GPUs in the window (SM
    # below GPU_TENANT_COMPUTING_SM_PCT): named, the window not noisy for them
    gpu_present: tuple[str, ...] = ()

    def as_record(self) -> dict[str, Any]:
        """The manifest's form (rounded)."""
        out = asdict(self)
        out["cpus"] = list(self.cpus)
        out["gpu_tenants"] = list(self.gpu_tenants)
        out["gpu_present"] = list(self.gpu_present)
        for key in ("seconds", "busy_cpu_s", "own_cpu_s", "foreign_cpu_s"):
            out[key] = round(out[key], 3)
        out["foreign_fraction"] = round(self.foreign_fraction, 4)
        return out

    def describe_present(self) -> str:
        """One line for a report: the processes that held memory idle on the slot's GPUs (not noise)."""
        return f"{self.window}: present on the slot's GPUs, holding memory idle (not noise): {'; '.join(self.gpu_present)}"

    def describe(self) -> str:
        """One line for a report: what the other processes took, against the threshold."""
        load = f", load {self.load_start:.1f} -> {self.load_end:.1f}" if self.load_start is not None \
            and self.load_end is not None else ""
        gpu = f"; on the slot's GPUs another process computed: {'; '.join(self.gpu_tenants)}" \
            if self.gpu_tenants else ""
        gpu += f"; present on the slot's GPUs, holding memory idle (not noise): {'; '.join(self.gpu_present)}" \
            if self.gpu_present else ""
        return (f"{self.window}: {self.foreign_fraction:.0%} of the slot's CPU time went to other processes "
                f"({self.foreign_cpu_s:.1f} CPU-s in {self.seconds:.1f} s on {len(self.cpus)} CPUs{load}; "
                f"threshold {self.threshold:.0%}){gpu}")


# Set by a duet's driver for its two workers only when the two slots share CPUs: then the whole
# experiment's tree (both sides) is the run's own, the partner running on this slot's CPUs by
# design. On disjoint slots it is unset and each side's own CPU time is its worker's tree alone
# (ab/duet.py's worker_env): the partner's time is spent on the other slot's CPUs, and counting it
# as this side's own once hid a hog on this slot (the foreign share clipped to 0).
ROOT_VAR = "OMNIBENCH_LOAD_ROOT"


def default_root() -> int:
    """Whose process tree is the run's own: ``OMNIBENCH_LOAD_ROOT``'s (a duet on shared CPUs:
    its driver's), else this process's (a run, or one side of a duet on disjoint slots)."""
    try:
        return int(os.environ.get(ROOT_VAR, ""))
    except ValueError:
        return os.getpid()


class LoadWindow:
    """A timed window being watched: made at its start, :meth:`close` at its end. A ``/proc``
    that cannot be read makes the window unavailable (``unavailable`` says why), never an error."""

    def __init__(self, window: str, cpus: Sequence[int], threshold: float, *, root: int | None = None,
                 proc: Path = PROC, clock: Callable[[], float] = time.monotonic):
        self.window, self.threshold, self.proc, self.clock = window, threshold, proc, clock
        self.cpus = tuple(cpus) or tuple(sorted(os.sched_getaffinity(0)))
        self.root = default_root() if root is None else root
        self.unavailable = ""
        self._t0 = clock()
        try:
            self._busy0, found = _busy(self.cpus, proc)
            self._own0 = tree_ticks(self.root, proc)
        except (OSError, ValueError) as exc:
            self.unavailable = f"{proc}/stat could not be read: {exc}"
        else:
            if not found:
                self.unavailable = f"{proc}/stat has no line for CPUs {list(self.cpus)} (a renumbered /proc?)"
        self._load0 = load_average(proc)

    def close(self, gpu_tenants: Sequence[str] = (), gpu_present: Sequence[str] = ()) -> HostLoad | None:
        """The window's record, from the counters now against those at its start (None: unavailable);
        ``gpu_tenants``: the foreign processes the GPU sampler saw computing on the slot's GPUs
        meanwhile (the window is noisy); ``gpu_present``: those it saw only holding memory."""
        if self.unavailable:
            return None
        seconds = max(self.clock() - self._t0, 1e-9)
        hz = clock_ticks()
        try:
            busy = max(busy_ticks(self.cpus, self.proc) - self._busy0, 0) / hz
            own = max(tree_ticks(self.root, self.proc) - self._own0, 0) / hz
        except (OSError, ValueError) as exc:
            self.unavailable = f"{self.proc}/stat could not be read: {exc}"
            return None
        foreign = max(busy - own, 0.0)
        fraction = foreign / (seconds * len(self.cpus))
        return HostLoad(self.window, seconds, self.cpus, busy, own, foreign, fraction, self._load0,
                        load_average(self.proc), self.threshold, fraction > self.threshold or bool(gpu_tenants),
                        tuple(gpu_tenants), tuple(gpu_present))


def noisy_windows(steps: Sequence[StepEntry]) -> list[HostLoad]:
    """The noisy timed windows of a run's manifest steps (none for a run made before the guard)."""
    return _windows(steps, noisy=True)


def present_windows(steps: Sequence[StepEntry]) -> list[HostLoad]:
    """The timed windows not marked noisy in which another process only held GPU memory (present,
    not computing): named in reports as present, never as noise (issue 43)."""
    return [w for w in _windows(steps, noisy=False) if w.gpu_present]


def _windows(steps: Sequence[StepEntry], *, noisy: bool) -> list[HostLoad]:
    out = []
    for step in steps:
        record = step.host_load
        if record is not None and record.get("noisy") is noisy:
            try:
                out.append(HostLoad(**{**record, "cpus": tuple(record.get("cpus") or ()),
                                        "gpu_tenants": tuple(record.get("gpu_tenants") or ()),
                                        "gpu_present": tuple(record.get("gpu_present") or ())}))
            except TypeError:
                continue  # a record of another shape: not ours to judge
    return out
