"""GPU facts from ``nvidia-smi``: used memory per GPU, and a description for manifests."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Sequence

from .errors import GpuQueryError


def query_memory_used(gpus: Sequence[str], nvidia_smi: str = "nvidia-smi", timeout_s: float = 30) -> dict[str, int]:
    """Used memory in MiB for each GPU, as the runbook's GPU_FREE check reads it.

    Runs ``nvidia-smi -i <ids> --query-gpu=memory.used --format=csv,noheader,nounits``.
    """
    argv = [nvidia_smi, "-i", ",".join(gpus), "--query-gpu=memory.used", "--format=csv,noheader,nounits"]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, check=False)
    except FileNotFoundError as exc:
        raise GpuQueryError(
            f"{nvidia_smi} was not found",
            evidence={"command": " ".join(argv)},
            hint="install the NVIDIA driver tools, or set omnibench.nvidia_smi to its path",
        ) from exc
    except subprocess.TimeoutExpired as exc:
        raise GpuQueryError(f"{nvidia_smi} did not answer in {timeout_s} s", evidence={"command": " ".join(argv)}) from exc
    if done.returncode != 0:
        raise GpuQueryError(
            f"{nvidia_smi} exited with {done.returncode}",
            evidence={"command": " ".join(argv), "output": (done.stdout + done.stderr).strip()},
            hint="check that the GPU ids in omnibench.gpus exist on this host (nvidia-smi -L)",
        )
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


def describe_gpus(nvidia_smi: str = "nvidia-smi") -> list[dict[str, str]]:
    """Index, name, driver and total memory of every GPU; ``[]`` where there is no nvidia-smi."""
    if shutil.which(nvidia_smi) is None:
        return []
    fields = ["index", "name", "driver_version", "memory.total", "pci.bus_id"]
    try:
        done = subprocess.run(
            [nvidia_smi, f"--query-gpu={','.join(fields)}", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=30, check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return []
    if done.returncode != 0:
        return []
    return [dict(zip(fields, (c.strip() for c in line.split(",")), strict=False)) for line in done.stdout.splitlines() if line.strip()]
