"""A run's telemetry: the summary the manifest keeps per server and step window, ``telemetry.json``
beside ``metrics.json`` (energy per request and per second of generated audio for each
workload), and the warnings that say a run is not comparable with another.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import soundfile as sf

from ..store import telemetry_file
from ..store.run_entries import ServerEntry
from ..store.telemetry_file import RunTelemetry, WorkloadEnergy
from .nvml import POWER_OR_HEAT
from .sampler import SamplerResult
from .summary import read_samples, window


@dataclass(frozen=True)
class StepWindow:
    """When a step ran on a server (unix times); ``timed``: a generate-phase client window."""

    step: str
    start: float
    end: float
    timed: bool = False


def server_summary(result: SamplerResult, gpus: Sequence[str], start: float, end: float,
                   steps: Sequence[StepWindow]) -> dict[str, Any]:
    """The manifest's telemetry entry of one server: its whole life and each step's window."""
    if not result.available:
        return {"available": False, "reason": result.reason}
    rows = read_samples(Path(result.csv))
    return {
        "available": True, "csv": Path(result.csv).name, "samples": result.samples,
        "sampler_cpu_fraction": round(result.cpu_fraction, 5) if result.cpu_fraction is not None else None,
        "processes_at_start": result.processes_at_start,
        "server": [window(rows, g, start, end).as_record() for g in gpus],
        "steps": {w.step: [window(rows, g, w.start, w.end).as_record() for g in gpus] for w in steps},
        "timed_steps": [w.step for w in steps if w.timed],
    }


def _audio(folder: Path) -> tuple[int, float]:
    files, seconds = 0, 0.0
    for wav in folder.glob("audio/*.wav"):
        try:
            info = sf.info(str(wav))
        except (RuntimeError, OSError):
            continue
        files, seconds = files + 1, seconds + info.frames / max(info.samplerate, 1)
    return files, seconds


def write_run_telemetry(run_dir: Path, servers: Sequence[ServerEntry], *, applies: bool,
                        reason: str = "") -> Path:
    """``telemetry.json``: every server's summary, each workload's energy figures, the warnings.

    A workload's figures come from its timed window (its generate-phase client step on its own
    server, warmup included): energy over the requests that produced speech (one WAV each)
    and over the seconds of speech produced.
    """
    if not applies:
        return telemetry_file.write(run_dir, RunTelemetry(False, reason))
    summaries: list[dict[str, Any]] = []
    workloads: dict[str, WorkloadEnergy] = {}
    for server in servers:
        if not server.started_here:  # a scoring server shared with another run: sampled there
            summaries.append({"label": server.label, "started_in": server.started_in})
            continue
        tele = server.telemetry or {}
        summaries.append({"label": server.label, **tele})
        for step, per_gpu in (tele.get("steps") or {}).items():
            workload = step.partition(".")[0]
            if step not in (tele.get("timed_steps") or []):
                continue
            energy = [g.get("energy_j") for g in per_gpu]
            total = sum(e for e in energy if e is not None) if any(e is not None for e in energy) else None
            files, seconds = _audio(run_dir / workload)
            workloads[workload] = WorkloadEnergy(
                step, total, files, round(seconds, 3), total / files if total is not None and files else None,
                total / seconds if total is not None and seconds else None)
    return telemetry_file.write(run_dir, RunTelemetry(True, reason, tuple(summaries), workloads,
                                                      tuple(warnings(summaries))))


def warnings(servers: Sequence[Mapping[str, Any]]) -> list[str]:
    """Why a run is not comparable, from its servers' summaries: power or heat throttling in a
    timed window, another process holding GPU memory when a server started, a GPU that could not
    be read."""
    out = []
    for server in servers:
        label = server.get("label")
        if server.get("started_in"):  # its telemetry and warnings are in the run that started it
            continue
        if not server.get("available", False):
            out.append(f"{label}: GPU telemetry {server.get('reason') or 'not available'}")
            continue
        for gpu, procs in (server.get("processes_at_start") or {}).items():
            for p in procs:
                out.append(f"{label}: another process held {p.get('used_mib')} MiB on GPU {gpu} when the server "
                           f"started: pid {p.get('pid')} ({p.get('command')})")
        for step, per_gpu in (server.get("steps") or {}).items():
            if step not in (server.get("timed_steps") or []):
                continue
            for g in per_gpu:
                why = {r: s for r, s in (g.get("throttled_s") or {}).items() if r in POWER_OR_HEAT and s > 0}
                if why:
                    out.append(f"{step}: GPU {g.get('gpu')} was throttled during the timed window: "
                               + ", ".join(f"{r} {s:.1f} s" for r, s in sorted(why.items())))
    return out


def run_warnings(run_dir: Path) -> list[str]:
    """The warnings stored in a run's ``telemetry.json`` (none when it has no such file; an
    unreadable, malformed or newer one is the store's RunFileError, naming the file)."""
    return list(telemetry_file.read(run_dir).warnings) if telemetry_file.exists(run_dir) else []
