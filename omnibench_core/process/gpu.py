"""GPU facts from ``nvidia-smi``: used memory per GPU, the compute processes, and a description for manifests.

Every call runs nvidia-smi in its own process group with a timeout; a hung call is killed with
everything it started (see :func:`omnibench_core.process.processes.run_bounded`).
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass

from ..errors import GpuQueryError, GpuQueryTimeout
from .processes import run_bounded

CALL_TIMEOUT_S = 30.0  # the longest one nvidia-smi call may take, when nothing shorter is configured
# The least one call is given, even at a deadline: nvidia-smi on a busy host answers in seconds, and
# a bound below that would call a slow answer a hung driver. A deadline may be passed by this much.
MIN_CALL_S = 5.0


def call_timeout(configured_s: float) -> float:
    """The bound of one nvidia-smi call under a configured time (``gpu_free_timeout_s``): never
    longer than it (but at least :data:`MIN_CALL_S`), so a hung nvidia-smi cannot hold a run
    much past what the user allowed."""
    return min(CALL_TIMEOUT_S, max(configured_s, MIN_CALL_S))


def _run(argv: list[str], nvidia_smi: str, timeout_s: float) -> subprocess.CompletedProcess[str]:
    try:
        done = run_bounded(argv, timeout_s)
    except FileNotFoundError as exc:
        raise GpuQueryError(
            f"{nvidia_smi} was not found",
            evidence={"command": " ".join(argv)},
            hint="install the NVIDIA driver tools, or set omnibench.nvidia_smi to its path",
        ) from exc
    except subprocess.TimeoutExpired as exc:
        raise GpuQueryTimeout(
            f"{nvidia_smi} did not answer in {timeout_s:.3g} s and was killed",
            evidence={"command": " ".join(argv), "timeout s": f"{timeout_s:.3g}"},
            hint="nvidia-smi hangs when the driver is stuck: check `nvidia-smi` by hand and dmesg",
        ) from exc
    if done.returncode != 0:
        raise GpuQueryError(
            f"{nvidia_smi} exited with {done.returncode}",
            evidence={"command": " ".join(argv), "output": (done.stdout + done.stderr).strip()},
            hint="check that the GPU ids in omnibench.gpus exist on this host (nvidia-smi -L)",
        )
    return done


def query_memory_used(gpus: Sequence[str], nvidia_smi: str = "nvidia-smi", timeout_s: float = CALL_TIMEOUT_S) -> dict[str, int]:
    """Used memory in MiB for each GPU, as the runbook's GPU_FREE check reads it.

    Runs ``nvidia-smi -i <ids> --query-gpu=memory.used --format=csv,noheader,nounits``; raises
    :class:`GpuQueryTimeout` when it does not answer within ``timeout_s``.
    """
    argv = [nvidia_smi, "-i", ",".join(gpus), "--query-gpu=memory.used", "--format=csv,noheader,nounits"]
    done = _run(argv, nvidia_smi, timeout_s)
    values = [line.strip() for line in done.stdout.splitlines() if line.strip()]
    if len(values) != len(gpus):
        raise GpuQueryError(
            f"{nvidia_smi} printed {len(values)} value(s) for {len(gpus)} GPU(s)",
            evidence={"command": " ".join(argv), "output": done.stdout.strip()},
        )
    try:
        return {gpu: int(float(v)) for gpu, v in zip(gpus, values, strict=True)}
    except ValueError as exc:
        raise GpuQueryError(
            f"{nvidia_smi} printed a value that is not a number",
            evidence={"command": " ".join(argv), "output": done.stdout.strip()},
        ) from exc


@dataclass(frozen=True)
class ComputeApp:
    """A process nvidia-smi lists as using a GPU (``used_mib`` None when it prints ``[N/A]``)."""

    pid: int
    used_mib: int | None


def query_compute_apps(gpus: Sequence[str] = (), nvidia_smi: str = "nvidia-smi", timeout_s: float = CALL_TIMEOUT_S) -> list[ComputeApp]:
    """The compute processes on ``gpus`` (all GPUs when empty).

    Runs ``nvidia-smi [-i <ids>] --query-compute-apps=pid,used_memory --format=csv,noheader,nounits``.
    The pids are the host's: in a container some may not be visible in /proc.
    """
    argv = [nvidia_smi, *(["-i", ",".join(gpus)] if gpus else []),
            "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"]
    done = _run(argv, nvidia_smi, timeout_s)
    apps = []
    for line in done.stdout.splitlines():
        cols = [c.strip() for c in line.split(",")]
        if not cols[0]:
            continue
        if not cols[0].isdigit():
            raise GpuQueryError(f"{nvidia_smi} printed a compute process line that has no pid",
                                evidence={"command": " ".join(argv), "output": done.stdout.strip()})
        used = cols[1] if len(cols) > 1 else ""
        apps.append(ComputeApp(int(cols[0]), int(float(used)) if used.replace(".", "", 1).isdigit() else None))
    return apps


def process_command(pid: int, proc: str = "/proc") -> str:
    """A process's command line (200 characters at most), or "not visible here" (another container's)."""
    try:
        with open(f"{proc}/{pid}/cmdline", "rb") as handle:
            return handle.read().replace(b"\0", b" ").decode(errors="replace").strip()[:200] or "unknown"
    except OSError:
        return "not visible here"


def describe_holders(gpus: Sequence[str], nvidia_smi: str = "nvidia-smi", timeout_s: float = CALL_TIMEOUT_S) -> str:
    """Who holds memory on ``gpus``, in a line: ``pid 4242 (python train.py) 2048 MiB``, ``;``
    between them; "no compute process listed" when nvidia-smi lists none, or why it could not tell."""
    try:
        apps = query_compute_apps(gpus, nvidia_smi, timeout_s)
    except (GpuQueryError, GpuQueryTimeout) as exc:
        return f"unknown ({exc.message})"
    if not apps:
        return "no compute process listed"
    return "; ".join(f"pid {a.pid} ({process_command(a.pid)})" + (f" {a.used_mib} MiB" if a.used_mib is not None else "")
                     for a in apps)


def describe_gpus(nvidia_smi: str = "nvidia-smi", timeout_s: float = CALL_TIMEOUT_S) -> list[dict[str, str]]:
    """Index, name, driver and total memory of every GPU; ``[]`` where there is no nvidia-smi."""
    if shutil.which(nvidia_smi) is None:
        return []
    fields = ["index", "name", "driver_version", "memory.total", "pci.bus_id"]
    try:
        done = run_bounded([nvidia_smi, f"--query-gpu={','.join(fields)}", "--format=csv,noheader"], timeout_s)
    except (OSError, subprocess.TimeoutExpired):
        return []
    if done.returncode != 0:
        return []
    return [dict(zip(fields, (c.strip() for c in line.split(",")), strict=False)) for line in done.stdout.splitlines() if line.strip()]
