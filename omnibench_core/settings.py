"""Settings of a run, with the runbook's values as defaults.

Users set them through Invoke's configuration (``invoke.yaml``, ``INVOKE_OMNIBENCH_*``
environment variables, task flags); :meth:`Settings.from_mapping` turns that mapping into a
checked record.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from .errors import SettingsError


@dataclass(frozen=True)
class Settings:
    """Everything a run needs to know about this host. Defaults follow the runbook."""

    results: str = "results"  # the runbook's /results inside the container
    target: str = "local"
    port: int = 8000
    checkout: str = "/sglang-omni"
    venv: str = "omni"  # relative to the checkout, as `. omni/bin/activate`
    gpus: str = "0"  # CUDA_VISIBLE_DEVICES for single-GPU measurement
    cpus: str = ""  # BENCH_CPUS, e.g. "2-15,66-79"; empty: not pinned
    ready_timeout_s: float = 1800.0
    gpu_free_timeout_s: float = 600.0
    gpu_free_mib: int = 1024
    stop_grace_s: float = 30.0
    health_interval_s: float = 0.05
    gpu_poll_interval_s: float = 0.1
    nvidia_smi: str = "nvidia-smi"
    git: str = "git"
    local_delay_ms: float = 0.0  # local target: added latency per chat/transcription request (a planted regression)
    # The model-CI stages (`nox -s ci_stages`): the GPU pair, CI's home, attempts and limits.
    ci_gpus: str = "0,1"
    omni_ci_home: str = "/root/omni_ci"
    ci_attempts: int = 1  # the runbook's local block; CI's flaky wrapper uses 3
    ci_retry_delay_s: float = 10.0
    ci_stage_timeout_s: float = 7200.0
    # GPU-host set-up (`invoke setup`, `invoke doctor`), as in the runbook's Setup section.
    bench_dir: str = "/data/omni-bench"
    gpu_a: str = "0"
    gpu_b: str = "1"
    cores_per_gpu: int = 14
    skip_cores: str = "0,1"
    image: str = "hongccc/sglang-omni@sha256:ebe4239e29a764ee3a2806385c061c5fd438a26f01458e503d3822dcba5790df"
    container_name: str = "omni-bench"
    repo_url: str = "https://github.com/sgl-project/sglang-omni.git"
    commit: str = "origin/main"
    hf_cache: str = ""  # default: huggingface_hub's (HF_HOME / HF_HUB_CACHE)
    pins_file: str = ""  # default: the runbook's pins, shipped in omnibench_core/setup/pins.json
    lscpu: str = "lscpu"
    docker: str = "docker"
    bash: str = "bash"
    sysfs: str = "/sys"

    @classmethod
    def defaults(cls) -> dict[str, Any]:
        """The defaults as a plain mapping, for Invoke's configuration tree."""
        return dataclasses.asdict(cls())

    @classmethod
    def from_mapping(cls, mapping: Mapping[str, Any]) -> Settings:
        """Build settings from a config mapping; unknown keys and bad values raise SettingsError."""
        known = {f.name: f for f in fields(cls)}
        unknown = sorted(set(mapping) - set(known))
        if unknown:
            raise SettingsError(
                f"unknown omnibench setting(s): {', '.join(unknown)}",
                hint=f"known settings: {', '.join(sorted(known))}",
            )
        values: dict[str, Any] = {}
        for name, value in mapping.items():
            kind = type(getattr(cls(), name))
            try:
                values[name] = kind(value) if value is not None else getattr(cls(), name)
            except (TypeError, ValueError) as exc:
                raise SettingsError(
                    f"setting {name!r} must be a {kind.__name__}, got {value!r}",
                    hint=f"fix omnibench.{name} in invoke.yaml or INVOKE_OMNIBENCH_{name.upper()}",
                ) from exc
        settings = cls(**values)
        settings.cpu_list()  # validate early
        if not 0 < settings.port < 65536:
            raise SettingsError(f"port {settings.port} is out of range", hint="use 1..65535")
        return settings

    @property
    def results_root(self) -> Path:
        """The results root as an absolute path."""
        return Path(self.results).expanduser().resolve()

    def gpu_list(self) -> tuple[str, ...]:
        """The configured GPUs, e.g. ``("0",)``."""
        return tuple(g.strip() for g in self.gpus.split(",") if g.strip())

    def cpu_list(self) -> tuple[int, ...]:
        """The CPU set as numbers; accepts taskset's list format ``2-15,66-79``."""
        return parse_cpu_list(self.cpus)


def parse_cpu_list(text: str) -> tuple[int, ...]:
    """Parse ``"2-4,8"`` into ``(2, 3, 4, 8)``; an empty string gives ``()``."""
    cpus: set[int] = set()
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        try:
            if "-" in part:
                lo, hi = (int(x) for x in part.split("-", 1))
                if hi < lo:
                    raise ValueError(part)
                cpus.update(range(lo, hi + 1))
            else:
                cpus.add(int(part))
        except ValueError as exc:
            raise SettingsError(
                f"cannot read CPU list {text!r} at {part!r}",
                hint="write CPUs as taskset does, e.g. 2-15,66-79",
            ) from exc
    return tuple(sorted(cpus))


def format_cpu_list(cpus: tuple[int, ...] | list[int]) -> str:
    """Inverse of :func:`parse_cpu_list`, compressing runs: ``(2, 3, 4, 8)`` -> ``"2-4,8"``."""
    out: list[str] = []
    ordered = sorted(set(cpus))
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        out.append(str(ordered[i]) if i == j else f"{ordered[i]}-{ordered[j]}")
        i = j + 1
    return ",".join(out)
