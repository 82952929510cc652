"""Slots: one GPU (or a pair whose second GPU stays idle) with its CPU group and its own port.

A campaign holds one slot from its first server start to its last GPU_FREE; two campaigns never
share a slot, a GPU or a CPU. CPU groups follow the ``setup.cpus`` rule (the next
``cores_per_gpu`` cores of the GPU's NUMA node with their SMT siblings); ``shared`` gives every
slot this process's CPU set, for hosts too small for the rule (CI has 2 cores), and says so.

On a target whose servers use no GPU (``TargetFacts.uses_gpu`` false, e.g. ``local``) a slot is
a port and a CPU group only: each id of ``--slots`` names one slot, nvidia-smi is never asked,
and the rule splits this process's CPU set into one disjoint group per slot.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ..errors import GateError, GpuQueryError, OmnibenchError, SettingsError
from ..process.gpu import call_timeout, describe_holders, query_memory_used
from ..process.ports import port_in_use
from ..process.strays import find_strays
from ..records import Slot
from ..registry import manager as plugin_manager
from ..settings import Settings, format_cpu_list
from ..setup.cpus import Topology, assign_groups, read_topology

SlotPer = Literal["pair", "gpu"]
SlotCpus = Literal["rule", "shared"]
SLOT_PER: tuple[str, ...] = ("pair", "gpu")
SLOT_CPUS: tuple[str, ...] = ("rule", "shared")


class SlotBusy(GateError):
    """SLOT_FREE: something listens on the slot's port or uses its GPUs before a campaign starts."""

    gate = "SLOT_FREE"


@dataclass(frozen=True)
class HostSlot:
    """A slot of a host: the run's :class:`~omnibench_core.records.Slot` (port, the GPUs the
    servers use, the CPU group) and where it sits. ``idle_gpus`` stay idle (the pair's second
    GPU); ``shared_cpus``: the CPUs are the process's own set, shared by all slots."""

    index: int
    slot: Slot
    idle_gpus: tuple[str, ...] = ()
    shared_cpus: bool = False
    node: str = ""  # a Ray node id; "" is this host
    note: str = ""  # what the table says about it (e.g. a pair slot with one GPU)

    @property
    def label(self) -> str:
        """``slot 1 (GPU 2, port 8001)``."""
        gpu = f"GPU {','.join(self.slot.gpus)}" if self.slot.gpus else "no GPU"
        return f"slot {self.index} ({gpu}, port {self.slot.port})"

    def settings_on(self, flat: Mapping[str, Any]) -> Settings:
        """The settings of a run on this slot: ``flat`` (a flat settings mapping) with the slot's
        port, CPUs and (when it has any) GPUs, which the run builds its Slot from again."""
        values: dict[str, Any] = {**flat, "port": self.slot.port, "cpus": format_cpu_list(self.slot.cpus)}
        if self.slot.gpus:
            values["gpus"] = ",".join(self.slot.gpus)
        return Settings.from_mapping(values)

    def as_dict(self) -> dict[str, Any]:
        """For manifests, campaign and matrix files (the fields flat, as they always were)."""
        return {"index": self.index, "port": self.slot.port, "gpus": list(self.slot.gpus),
                "idle_gpus": list(self.idle_gpus), "cpus": list(self.slot.cpus), "shared_cpus": self.shared_cpus,
                "node": self.node, "note": self.note, "cpu_mode": "shared" if self.shared_cpus else "rule"}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> HostSlot:
        """Inverse of :meth:`as_dict` (a worker's job file, a Ray task's argument)."""
        slot = Slot(int(data["port"]), tuple(str(g) for g in data.get("gpus", ())),
                    tuple(int(c) for c in data.get("cpus", ())))
        return cls(int(data["index"]), slot, tuple(str(g) for g in data.get("idle_gpus", ())),
                   bool(data.get("shared_cpus", False)), str(data.get("node", "")), str(data.get("note", "")))


def parse_gpu_ids(text: str) -> tuple[str, ...]:
    """``"0,1,2,3"`` -> ``("0", "1", "2", "3")``; refuses repeats."""
    ids = tuple(g.strip() for g in text.split(",") if g.strip())
    if len(set(ids)) != len(ids):
        raise SettingsError(f"--slots names a GPU twice: {text}", hint="list each GPU once, e.g. --slots 0,1,2,3")
    return ids


def own_cpus() -> tuple[int, ...]:
    """This process's CPU set."""
    return tuple(sorted(os.sched_getaffinity(0)))


def _split_cpus(n: int) -> list[tuple[int, ...]]:
    """This process's CPU set in ``n`` disjoint contiguous groups (the larger ones first), or a
    SettingsError when it has fewer CPUs than slots."""
    mine = own_cpus()
    if len(mine) < n:
        raise SettingsError(f"{n} slots need {n} CPUs for a group each; this process may use {len(mine)}",
                            evidence={"CPU set": format_cpu_list(mine)},
                            hint="pass --slot-cpus shared (the table then says the slots shared CPUs), or fewer --slots")
    size, extra = divmod(len(mine), n)
    groups, at = [], 0
    for k in range(n):
        take = size + (k < extra)
        groups.append(mine[at:at + take])
        at += take
    return groups


def _cpu_groups(topology: Callable[[], Topology], cores_per_gpu: int, skip_cores: Sequence[int]) -> dict[str, list[int]]:
    try:
        return assign_groups(topology(), cores_per_gpu, skip_cores)
    except OmnibenchError as exc:  # the rule reads nvidia-smi and sysfs: say which flag avoids it
        raise SettingsError(f"--slot-cpus rule cannot read this host's GPU and CPU topology: {exc.message}",
                            evidence=exc.evidence, hint="pass --slot-cpus shared (every slot gets this process's CPUs, "
                            "and the table says so), or fix what the message names") from exc


def plan_slots(gpu_ids: Sequence[str], base_port: int, *, per: str = "pair", cpus: str = "rule",
               topology: Callable[[], Topology] | None = None, cores_per_gpu: int = 14,
               skip_cores: Sequence[int] = (0, 1), uses_gpu: bool = True) -> list[HostSlot]:
    """The slots of ``gpu_ids`` on this host: slot k serves on ``base_port + k``.

    ``per="pair"`` (the runbook's default: nothing else on the pair) makes GPUs 2k and 2k+1 one
    slot whose second GPU stays idle; a single GPU is one slot alone (it has no partner to keep
    idle; its note says so); ``per="gpu"`` makes every GPU a slot. ``cpus="rule"`` gives each
    slot its GPU's CPU group (``topology`` reads the host; a GPU without a group, or a topology
    that cannot be read, is a SettingsError naming ``--slot-cpus shared``); ``"shared"`` gives
    each the process's CPU set. ``uses_gpu=False`` (the target's servers use no GPU): every id is
    a slot without GPUs, ``per`` does not apply, and the rule splits the process's CPU set.
    """
    if per not in SLOT_PER:
        raise SettingsError(f"unknown --slot-per {per!r}", hint="use pair or gpu")
    if cpus not in SLOT_CPUS:
        raise SettingsError(f"unknown --slot-cpus {cpus!r}", hint="use rule or shared")
    if not gpu_ids:
        raise SettingsError("no slot: --slots lists no GPU", hint="e.g. --slots 0,1")
    count = len(gpu_ids) if per == "gpu" or not uses_gpu else (len(gpu_ids) + 1) // 2
    if base_port + count - 1 > 65535:  # slot k serves on base_port + k: the last one must be a port
        raise SettingsError(f"--port {base_port} with {count} slots puts the last slot on port {base_port + count - 1}, "
                            "past 65535", evidence={"slots": ",".join(gpu_ids)},
                            hint=f"pass --port {65536 - count} or lower")
    if not uses_gpu:
        groups = _split_cpus(len(gpu_ids)) if cpus == "rule" else [own_cpus()] * len(gpu_ids)
        return [HostSlot(k, Slot(base_port + k, cpus=group), shared_cpus=cpus == "shared")
                for k, group in enumerate(groups)]
    if per == "pair" and len(gpu_ids) % 2 and len(gpu_ids) > 1:
        raise SettingsError(f"--slot-per pair needs GPUs in pairs, got {len(gpu_ids)}: {','.join(gpu_ids)}",
                            hint="list an even number of GPUs, or pass --slot-per gpu (and say so in the report)")
    by_gpu: dict[str, list[int]] = {}
    if cpus == "rule":
        by_gpu = _cpu_groups(topology or read_topology, cores_per_gpu, skip_cores)
    step = 2 if per == "pair" else 1
    slots = []
    for k, i in enumerate(range(0, len(gpu_ids), step)):
        gpu, idle = gpu_ids[i], tuple(gpu_ids[i + 1:i + step])
        if cpus == "rule":
            if gpu not in by_gpu:
                raise SettingsError(f"GPU {gpu} gets no CPU group of {cores_per_gpu} cores on its NUMA node",
                                    evidence={"GPUs with a group": ", ".join(sorted(by_gpu)) or "none"},
                                    hint="pass --slot-cpus shared on a host too small for the rule "
                                         "(the report then says the slots shared CPUs)")
            slot_cpus = tuple(by_gpu[gpu])
        else:
            slot_cpus = own_cpus()
        note = f"GPU {gpu} alone: --slot-per pair got one GPU, no partner to keep idle" if per == "pair" and not idle else ""
        slots.append(HostSlot(k, Slot(base_port + k, (gpu,), slot_cpus), idle, cpus == "shared", note=note))
    return slots


def check_free(slot: HostSlot, *, nvidia_smi: str = "nvidia-smi", free_mib: int = 1024,
               timeout_s: float = 30.0, interval_s: float = 0.2) -> None:
    """SLOT_FREE: the port has no listener and the slot's GPUs (idle ones too) no compute process
    and less than ``free_mib`` used. Waits up to ``timeout_s`` (a server of a killed campaign may
    still be dying), then raises :class:`SlotBusy` with what holds it: the GPUs' holders under
    ``held by`` as GPU_FREE names them (``pid P (command) M MiB``), so every command's error reads alike."""
    gpus = (*slot.slot.gpus, *slot.idle_gpus)
    port = slot.slot.port
    deadline = time.monotonic() + timeout_s
    call_s = call_timeout(timeout_s)  # a hung nvidia-smi is bounded by the wait allowed
    while True:
        held: dict[str, str] = {}
        if port_in_use(port):
            scan = find_strays(port=port)
            held["port"] = f"{port} in use" + "".join(f"; pid {s.pid} {s.command[:80]}" for s in scan.strays)
        if gpus:
            scan = find_strays(gpus=gpus, nvidia_smi=nvidia_smi, gpu_timeout_s=call_s)
            if scan.strays:
                held["held by"] = describe_holders(gpus, nvidia_smi, timeout_s=min(call_s, 10.0))
            try:
                busy = {g: m for g, m in query_memory_used(gpus, nvidia_smi, call_s).items() if m >= free_mib}
            except GpuQueryError as exc:
                busy, held["GPU memory"] = {}, f"unknown: {exc.message}"
            if busy:
                held["GPU memory"] = ", ".join(f"GPU {g}: {m} MiB" for g, m in busy.items())
                held.setdefault("held by", describe_holders(gpus, nvidia_smi, timeout_s=min(call_s, 10.0)))
        if not held:
            return
        if time.monotonic() >= deadline:
            raise SlotBusy(f"{slot.label} is not free", evidence=held,
                           hint="stop what holds it (omnibench never stops what it did not start), or leave that "
                                "GPU out of --slots")
        time.sleep(interval_s)


def uses_gpu(settings: Settings) -> bool:
    """Whether the configured target's servers use GPUs (its ``TargetFacts``): slots get GPUs and
    SLOT_FREE asks nvidia-smi only then."""
    _, registry = plugin_manager.load()
    return registry.get("target", settings.run.target).facts.uses_gpu


def host_slots(settings: Settings, slots: str, slot_per: str, slot_cpus: str,
               progress: Callable[[str], None] = print
               ) -> list[HostSlot]:
    """This host's slots from ``--slots`` (GPU ids; default the ``gpus`` setting; on a target whose
    servers use no GPU each id names a slot of a port and CPUs only); each slot's note is said once."""
    ids = parse_gpu_ids(slots or settings.run.gpus)
    h = settings.host

    def topo() -> Topology:
        return read_topology(lscpu=settings.tools.lscpu, nvidia_smi=settings.tools.nvidia_smi, sysfs=h.sysfs)

    skip = tuple(int(c) for c in h.skip_cores.split(",") if c.strip())
    planned = plan_slots(ids, settings.run.port, per=slot_per, cpus=slot_cpus, topology=topo,
                         cores_per_gpu=h.cores_per_gpu, skip_cores=skip, uses_gpu=uses_gpu(settings))
    for slot in planned:
        if slot.note:
            progress(f"note: {slot.label}: {slot.note}")
    return planned
