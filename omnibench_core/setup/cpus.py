"""CPUS_OK: the runbook's CPU groups, one per GPU, on the GPU's NUMA node.

The rule: each GPU, in ``nvidia-smi`` order, takes the next ``cores_per_gpu`` free cores of its
NUMA node (cores 0 and 1 skipped) with all their SMT siblings; a NUMA node of -1, or an empty node
column, counts as node 0. ``BENCH_CPUS`` is GPU A's group, ``CI_CPUS`` both groups.
"""

from __future__ import annotations

import subprocess
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import combinations
from pathlib import Path

from ..errors import GateError, OmnibenchError


class CpusNotOk(GateError):
    """CPUS_OK: a GPU of the pair gets no CPU group (the runbook's KeyError)."""

    gate = "CPUS_OK"


@dataclass(frozen=True)
class Topology:
    """What the rule needs from a host."""

    siblings: dict[int, list[int]]  # core -> its CPUs
    core_node: dict[int, int]  # core -> NUMA node
    gpu_nodes: list[tuple[str, int]]  # (index, NUMA node) in nvidia-smi order


@dataclass(frozen=True)
class CpuGroups:
    """Each GPU's CPU group, and the pair's env lines."""

    groups: dict[str, list[int]]
    gpu_a: str
    gpu_b: str

    @property
    def bench_cpus(self) -> list[int]:
        """GPU A's group."""
        return self.groups[self.gpu_a]

    @property
    def ci_cpus(self) -> list[int]:
        """Both groups, sorted."""
        return sorted(self.groups[self.gpu_a] + self.groups[self.gpu_b])

    def env_text(self) -> str:
        """``BENCH_CPUS=...`` and ``CI_CPUS=...`` lines, exactly as the runbook's block prints them."""
        return (f"BENCH_CPUS={','.join(map(str, self.bench_cpus))}\n"
                f"CI_CPUS={','.join(map(str, self.ci_cpus))}\n")


def _run(argv: Sequence[str]) -> str:
    try:
        return subprocess.run(list(argv), capture_output=True, text=True, check=True, timeout=60).stdout
    except FileNotFoundError as exc:
        raise OmnibenchError(f"{argv[0]} was not found", hint=f"install it, or point omnibench at it ({argv[0]})") from exc
    except subprocess.CalledProcessError as exc:
        raise OmnibenchError(f"{' '.join(argv)} exited with {exc.returncode}",
                             evidence={"output": (exc.stdout or "") + (exc.stderr or "")}) from exc


def parse_lscpu(text: str) -> tuple[dict[int, list[int]], dict[int, int]]:
    """``lscpu -p=CPU,CORE,NODE`` into core siblings and core nodes."""
    siblings: dict[int, list[int]] = defaultdict(list)
    core_node: dict[int, int] = {}
    for line in text.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        try:
            cpu, core, node = line.strip().split(",")
            siblings[int(core)].append(int(cpu))
            core_node[int(core)] = max(int(node or 0), 0)
        except ValueError:
            raise OmnibenchError("lscpu -p=CPU,CORE,NODE printed a line that is not 'cpu,core,node'",
                                 evidence={"line": line.strip()}, hint="check which lscpu runs (omnibench.lscpu)") from None
    return dict(siblings), core_node


def read_topology(*, lscpu: str = "lscpu", nvidia_smi: str = "nvidia-smi", sysfs: str | Path = "/sys") -> Topology:
    """Read the host: lscpu, nvidia-smi and each GPU's ``numa_node`` under ``sysfs``."""
    siblings, core_node = parse_lscpu(_run([lscpu, "-p=CPU,CORE,NODE"]))
    gpu_nodes = []
    argv = [nvidia_smi, "--query-gpu=index,pci.bus_id", "--format=csv,noheader"]
    out = _run(argv)
    for line in out.splitlines():
        if not line.strip():
            continue
        cols = [x.strip() for x in line.split(",")]
        if len(cols) != 2 or not cols[0].isdigit() or not cols[1]:
            raise OmnibenchError(f"{nvidia_smi} printed a GPU line that is not 'index, pci.bus_id'",
                                 evidence={"command": " ".join(argv), "line": line.strip(), "output": out.strip()[:400]},
                                 hint=f"check that {nvidia_smi} is NVIDIA's (or a fake that answers --query-gpu=FIELDS "
                                      "field by field, as `invoke standin --fake-gpus DIR` writes)")
        index, bus = cols
        path = Path(sysfs) / "bus" / "pci" / "devices" / bus[-12:].lower() / "numa_node"
        try:
            node = max(int(path.read_text().strip() or 0), 0)
        except (OSError, ValueError) as exc:
            raise OmnibenchError(f"cannot read the NUMA node of GPU {index}", evidence={"file": str(path)},
                                 hint="check the PCI bus id nvidia-smi prints against /sys/bus/pci/devices; a fake "
                                      "nvidia-smi (invoke standin --fake-gpus) names no real device there: setup.cpus "
                                      "reads a real GPU host's topology, so run it on one (or point the sysfs setting "
                                      "at a copy of one host's /sys)") from exc
        gpu_nodes.append((index, node))
    return Topology(siblings, core_node, gpu_nodes)


def assign_groups(topo: Topology, cores_per_gpu: int = 14, skip_cores: Sequence[int] = (0, 1)) -> dict[str, list[int]]:
    """Every GPU that gets a group, with its CPUs (the rule above)."""
    free: dict[int, list[int]] = defaultdict(list)
    for core in sorted(topo.core_node):
        if core not in skip_cores:
            free[topo.core_node[core]].append(core)
    groups = {}
    for index, node in topo.gpu_nodes:
        if len(free[node]) >= cores_per_gpu:
            group, free[node] = free[node][:cores_per_gpu], free[node][cores_per_gpu:]
            groups[index] = sorted(c for core in group for c in topo.siblings[core])
    return groups


def cpu_groups(topo: Topology, gpu_a: str, gpu_b: str, cores_per_gpu: int = 14,
               skip_cores: Sequence[int] = (0, 1)) -> CpuGroups:
    """The pair's groups, or CpusNotOk saying which GPUs got one and which pairs would work."""
    groups = assign_groups(topo, cores_per_gpu, skip_cores)
    missing = [g for g in (gpu_a, gpu_b) if g not in groups]
    if missing:
        pairs = [f"{a},{b}" for a, b in combinations(sorted(groups, key=int), 2)]
        raise CpusNotOk(
            f"GPU {' and '.join(missing)} gets no CPU group of {cores_per_gpu} cores on its NUMA node",
            evidence={"GPUs with a group": ", ".join(sorted(groups, key=int)) or "none",
                      "GPU NUMA nodes": ", ".join(f"{i}:{n}" for i, n in topo.gpu_nodes),
                      "pairs that work": " ".join(pairs) or "none"},
            hint=(f"use one of those pairs, e.g. --gpu-a {pairs[0].split(',')[0]} --gpu-b {pairs[0].split(',')[1]}"
                  if pairs else "lower --cores-per-gpu, or compare lscpu -p=CPU,CORE,NODE with nvidia-smi topo -m"))
    return CpuGroups(groups, gpu_a, gpu_b)
