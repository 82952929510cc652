"""A run's telemetry summary, ``<run>/telemetry.json``, read and written: whether GPU telemetry
applied, each server's sampler summary, each workload's energy in its timed window, and the
warnings that make the run not comparable. The run layer's telemetry package makes the figures;
this module is the only one that writes the file or parses it (the reports read it through
:func:`read`).

Format 1 is every telemetry file so far: one written before the ``format`` field existed has none
and is read as format 1; a newer one is refused, naming the file.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import RunFileError
from ..jsonio import write_json
from . import versions
from .names import telemetry_path

FORMAT = 1
MIGRATIONS: dict[int, versions.Migration] = {}  # none yet: format 1 is the only one


@dataclass(frozen=True)
class WorkloadEnergy:
    """One workload's energy in its timed window (its generate-phase client step on its own
    server): in all, per request that produced speech, per second of speech (None: not measured)."""

    window: str
    energy_j: float | None
    requests_with_speech: int
    speech_seconds: float
    energy_per_request_j: float | None
    energy_per_speech_second_j: float | None

    def as_record(self) -> dict[str, Any]:
        """The file's JSON of the workload."""
        return {"window": self.window, "energy_j": self.energy_j, "requests_with_speech": self.requests_with_speech,
                "speech_seconds": self.speech_seconds, "energy_per_request_j": self.energy_per_request_j,
                "energy_per_speech_second_j": self.energy_per_speech_second_j}


@dataclass(frozen=True)
class RunTelemetry:
    """A run's ``telemetry.json``. ``servers`` are the sampler's summaries as the manifest's server
    entries hold them (the telemetry layer's records), or ``{"label", "started_in"}`` for a scoring
    server another run started and sampled."""

    applies: bool
    reason: str = ""  # why it did not apply
    servers: tuple[Mapping[str, Any], ...] = ()
    workloads: Mapping[str, WorkloadEnergy] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()
    path: Path | None = field(default=None, compare=False)  # where it was read from

    def as_record(self) -> dict[str, Any]:
        """The file's JSON: its format first, then the fields it has always had."""
        return {"format": FORMAT, "applies": self.applies, "reason": self.reason,
                "servers": [dict(s) for s in self.servers],
                "workloads": {w: e.as_record() for w, e in self.workloads.items()}, "warnings": list(self.warnings)}


def write(run_dir: Path, telemetry: RunTelemetry) -> Path:
    """Write ``telemetry.json`` atomically."""
    return write_json(telemetry_path(run_dir), telemetry.as_record())


def exists(run_dir: Path) -> bool:
    """Whether the run has a telemetry file (runs made before telemetry existed have none)."""
    return telemetry_path(run_dir).is_file()


def read(run_dir: Path) -> RunTelemetry:
    """The telemetry of ``run_dir``; a missing, unreadable, malformed or newer file is a
    :class:`RunFileError` naming the file (and the field)."""
    path = telemetry_path(run_dir)
    data = versions.read_object(path, "telemetry file", reads=FORMAT, migrations=MIGRATIONS,
                                hint="repeat the run to measure its telemetry again, or move the file aside")
    applies = data.get("applies")
    if not isinstance(applies, bool):
        raise _fail(path, "applies", f"must be true or false, not {applies!r}")
    reason = data.get("reason") or ""
    if not isinstance(reason, str):
        raise _fail(path, "reason", f"must be a string, not {reason!r}")
    servers = data.get("servers") or []
    if not isinstance(servers, list) or not all(isinstance(s, dict) for s in servers):
        raise _fail(path, "servers", "must be a list of objects")
    warnings = data.get("warnings") or []
    if not isinstance(warnings, list) or not all(isinstance(w, str) for w in warnings):
        raise _fail(path, "warnings", "must be a list of strings")
    workloads = data.get("workloads") or {}
    if not isinstance(workloads, dict):
        raise _fail(path, "workloads", f"must be an object, not {type(workloads).__name__}")
    return RunTelemetry(applies, reason, tuple(servers), {w: _energy(path, w, e) for w, e in workloads.items()},
                        tuple(warnings), path)


def _energy(path: Path, workload: str, data: Any) -> WorkloadEnergy:
    where = f"workloads.{workload}"
    if not isinstance(data, dict):
        raise _fail(path, where, f"must be an object, not {type(data).__name__}")

    def number(key: str, *, optional: bool = True) -> float | None:
        value = data.get(key)
        if value is None and optional:
            return None
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
            raise _fail(path, f"{where}.{key}", f"must be a finite number{' or null' if optional else ''}, not {value!r}")
        return float(value)

    requests = data.get("requests_with_speech", 0)
    if not isinstance(requests, int) or isinstance(requests, bool) or requests < 0:
        raise _fail(path, f"{where}.requests_with_speech", f"must be a whole number >= 0, not {requests!r}")
    window = data.get("window", "")
    if not isinstance(window, str):
        raise _fail(path, f"{where}.window", f"must be a string, not {window!r}")
    return WorkloadEnergy(window, number("energy_j"), requests, number("speech_seconds", optional=False) or 0.0,
                          number("energy_per_request_j"), number("energy_per_speech_second_j"))


def _fail(path: Path, key: str, problem: str) -> RunFileError:
    return RunFileError(f"the telemetry file {path} is not valid: {key} {problem}",
                        evidence={"file": str(path), "field": key},
                        hint="the file was edited or cut short: repeat the run, or move the file aside")

