"""The Ray engine: each campaign a Ray task on an existing cluster that asks for one GPU (two
with ``--slot-per pair``, the second kept idle); Ray sets ``CUDA_VISIBLE_DEVICES``.

The driver makes the slots from the cluster's live nodes (slot k serves on port + k, so two
nodes on one host never collide) and pins each task to its slot's node; a task whose worker or
node died comes back as ``lost`` and the scheduler starts it again on another slot, where the
campaign resumes. Ray is an optional extra (``pip install -e '.[ray]'``). Results are written
straight into the results root, which every node must see at the same path (a shared
filesystem; checked by a token file the driver writes, so a node that cannot see it fails with
a clear message instead of writing results nobody collects).

Ctrl-C: SIGINT to the driver would skip the tasks' ``finally`` blocks, so :meth:`cancel_all`
cancels every task first (a KeyboardInterrupt inside the task: the run layer stops its servers),
and only then does the driver exit. A SIGKILLed worker's servers die with their watchdogs.
"""

from __future__ import annotations

import os
import secrets
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..errors import SettingsError
from ..records import Slot
from .engine import LOST
from .jobs import CampaignOutcome
from .slots import HostSlot, own_cpus
from .worker import WorkerSpec, execute

SHARED_TOKEN = ".omnibench-ray-{}"


def import_ray() -> Any:
    """The ``ray`` module, or a SettingsError saying how to install it."""
    try:
        import ray
    except ImportError as exc:
        raise SettingsError("--engine ray needs Ray", hint="pip install -e '.[ray]' (Ray 2.60)") from exc
    return ray


def task_slot(planned: Mapping[str, Any], gpu_ids: Sequence[str], cpu_mode: str, topology_cpus: Callable[[str], tuple[int, ...]]
              ) -> HostSlot:
    """The slot a task holds: the driver's index, port and node, the GPUs Ray gave it, their CPU group."""
    gpus = tuple(str(g) for g in gpu_ids)
    cpus = own_cpus() if cpu_mode == "shared" or not gpus else topology_cpus(gpus[0])
    return HostSlot(int(planned["index"]), Slot(int(planned["port"]), gpus[:1], cpus), gpus[1:],
                    cpu_mode == "shared" or not gpus, str(planned.get("node", "")))


def _rule_cpus(settings: Mapping[str, Any]) -> Callable[[str], tuple[int, ...]]:
    def cpus(gpu: str) -> tuple[int, ...]:
        from ..setup.cpus import assign_groups, read_topology
        topo = read_topology(lscpu=str(settings.get("lscpu", "lscpu")), nvidia_smi=str(settings.get("nvidia_smi", "nvidia-smi")),
                             sysfs=str(settings.get("sysfs", "/sys")))
        groups = assign_groups(topo, int(settings.get("cores_per_gpu", 14)))
        if gpu not in groups:
            raise SettingsError(f"GPU {gpu} of this node gets no CPU group", hint="pass --slot-cpus shared")
        return tuple(groups[gpu])
    return cpus


def run_task(spec_data: Mapping[str, Any], cpu_mode: str, token_file: str) -> dict[str, Any]:
    """The body of a campaign's Ray task (also callable without Ray, for tests)."""
    spec = WorkerSpec.from_dict(spec_data)
    if not Path(token_file).exists():
        return CampaignOutcome(spec.job.key, "failed", slot=spec.slot.as_dict(),
                               error=f"this node does not see the results root ({token_file} is missing): mount it "
                                     "at the same path on every node").as_dict()
    import ray
    try:
        gpu_ids = [str(g) for g in ray.get_gpu_ids()]
    except Exception:  # not inside a Ray task
        gpu_ids = [g for g in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if g]
    try:
        slot = task_slot(spec_data["slot"], gpu_ids, cpu_mode, _rule_cpus(spec.settings))
    except SettingsError as exc:
        return CampaignOutcome(spec.job.key, "failed", slot=spec.slot.as_dict(), error=str(exc)).as_dict()
    spec = WorkerSpec(spec.job, slot, spec.settings, spec.worktrees, spec.slot_timeout_s)
    return execute(spec, progress=lambda line: print(f"[slot {slot.index} {spec.job.key}] {line}", flush=True)).as_dict()


class RayEngine:
    """Campaigns as Ray tasks on the cluster at ``address`` (``auto``: the local ``ray start``)."""

    name = "ray"

    def __init__(self, address: str, base_port: int, results_root: Path, *, per: str = "pair", cpu_mode: str = "rule",
                 progress: Callable[[str], None] = print, ray_module: Any = None, init: bool = True):
        self.ray = ray_module or import_ray()
        if init and not self.ray.is_initialized():
            self.ray.init(address=address, log_to_driver=True)
        self.per, self.cpu_mode, self.progress = per, cpu_mode, progress
        results_root.mkdir(parents=True, exist_ok=True)
        self.token_file = results_root / SHARED_TOKEN.format(secrets.token_hex(4))
        self.token_file.write_text("omnibench ray driver: every node must see this file at this path\n")
        self.gpus_per_task = 2 if per == "pair" else 1
        self._slots: list[HostSlot] = []
        for node in sorted(self.ray.nodes(), key=lambda n: n["NodeID"]):
            gpus = int(node.get("Resources", {}).get("GPU", 0)) if node.get("Alive") else 0
            for _ in range(gpus // self.gpus_per_task):
                k = len(self._slots)
                self._slots.append(HostSlot(k, Slot(base_port + k), node=node["NodeID"]))
        if not self._slots:
            raise SettingsError("the Ray cluster has no free GPU slot",
                                evidence={"nodes": str([(n["NodeID"][:8], n.get("Resources", {})) for n in self.ray.nodes()])},
                                hint=f"start nodes with GPUs (ray start --num-gpus N); --slot-per {per} takes "
                                     f"{self.gpus_per_task} a slot")
        self._remote = self.ray.remote(run_task)
        self.running: dict[Any, WorkerSpec] = {}

    def _alive_nodes(self) -> set[str]:
        return {n["NodeID"] for n in self.ray.nodes() if n.get("Alive")}

    def slots(self) -> Sequence[HostSlot]:
        """The slots on nodes still alive."""
        alive = self._alive_nodes()
        return [s for s in self._slots if s.node in alive]

    def start(self, spec: WorkerSpec) -> object:
        """A task pinned to the slot's node, with its GPUs; Ray does not retry it (the scheduler does)."""
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
        ref = self._remote.options(
            num_gpus=self.gpus_per_task, num_cpus=0, max_retries=0, retry_exceptions=False,
            scheduling_strategy=NodeAffinitySchedulingStrategy(spec.slot.node, soft=False),
        ).remote(spec.as_dict(), self.cpu_mode, str(self.token_file))
        self.running[ref] = spec
        return ref

    def wait(self, timeout_s: float) -> list[tuple[object, CampaignOutcome]]:
        """Tasks that ended; a dead worker or node gives ``lost``."""
        if not self.running:
            return []
        ready, _ = self.ray.wait(list(self.running), num_returns=len(self.running), timeout=timeout_s)
        done = []
        for ref in ready:
            spec = self.running.pop(ref)
            try:
                outcome = CampaignOutcome.from_dict(self.ray.get(ref))
            except self.ray.exceptions.TaskCancelledError:
                outcome = CampaignOutcome(spec.job.key, "interrupted", slot=spec.slot.as_dict(), error="cancelled")
            except self.ray.exceptions.RayTaskError as exc:  # the task raised: a bug, not a lost node
                outcome = CampaignOutcome(spec.job.key, "failed", slot=spec.slot.as_dict(), error=str(exc)[-2000:])
            except self.ray.exceptions.RayError as exc:  # worker crashed, node died, object lost
                outcome = CampaignOutcome(spec.job.key, LOST, slot=spec.slot.as_dict(),
                                          error=f"{type(exc).__name__}: {str(exc)[:300]}")
            done.append((ref, outcome))
        return done

    def cancel_all(self, grace_s: float) -> None:
        """Cancel every task (KeyboardInterrupt inside it: servers stop), wait, then force."""
        for ref in self.running:
            self.ray.cancel(ref, force=False)
        deadline = time.monotonic() + grace_s
        while self.running and time.monotonic() < deadline:
            self.wait(0.5)
        for ref in list(self.running):
            self.ray.cancel(ref, force=True)

    def close(self) -> None:
        """Remove the token file (the cluster stays up: it is not ours)."""
        self.token_file.unlink(missing_ok=True)
