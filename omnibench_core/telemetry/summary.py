"""Figures from telemetry samples over a time window: utilisation, memory, power, energy,
throttling.

Energy comes from the GPU's total-energy counter where it has one and it was read at both ends
of the window (on an H200 the counter and a 0.1 s power integral differed by 6 % over 8 s of
load), else from integrating the power samples.
"""

from __future__ import annotations

import csv
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .nvml import POWER_OR_HEAT, reason_names


@dataclass(frozen=True)
class GpuWindow:
    """One GPU over one window."""

    gpu: str
    samples: int
    seconds: float
    gpu_util_mean: float | None
    gpu_util_max: float | None
    mem_util_mean: float | None
    mem_used_max_mib: float | None
    power_mean_w: float | None
    energy_j: float | None
    energy_source: str
    temperature_max_c: float | None
    throttled_s: dict[str, float] = field(default_factory=dict)  # reason -> seconds

    @property
    def power_or_heat_s(self) -> float:
        """Seconds held back by power or heat."""
        return sum(s for r, s in self.throttled_s.items() if r in POWER_OR_HEAT)

    def as_record(self) -> dict[str, Any]:
        """For manifests and telemetry.json."""
        return {**asdict(self), "power_or_heat_throttled_s": round(self.power_or_heat_s, 3)}


def read_samples(path: Path) -> list[dict[str, Any]]:
    """The CSV rows with numbers parsed (empty readings are None)."""
    rows = []
    with open(path, newline="") as handle:
        for raw in csv.DictReader(handle):
            row: dict[str, Any] = {"gpu": raw["gpu"]}
            for key, value in raw.items():
                if key not in ("gpu", "time_iso"):
                    row[key] = float(value) if value not in ("", None) else None
            rows.append(row)
    return rows


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _values(rows: Sequence[dict[str, Any]], key: str) -> list[float]:
    return [r[key] for r in rows if r.get(key) is not None]


def window(rows: Sequence[dict[str, Any]], gpu: str, start: float, end: float) -> GpuWindow:
    """Figures of ``gpu`` between unix times ``start`` and ``end``."""
    # Marks and the sampling thread write concurrently, so rows are put in time order here.
    inside = sorted((r for r in rows if r["gpu"] == gpu and start <= r["time_unix"] <= end),
                    key=lambda r: r["time_unix"])
    seconds = inside[-1]["time_unix"] - inside[0]["time_unix"] if len(inside) > 1 else 0.0
    energy, source = None, "none"
    counter = [r for r in inside if r.get("energy_mj") is not None]
    # The counter is read now and then and at window edges (marks): it gives the window's energy
    # only when it was read at both of the window's ends.
    if len(counter) > 1 and counter[0]["time_unix"] == inside[0]["time_unix"] \
            and counter[-1]["time_unix"] == inside[-1]["time_unix"]:
        energy, source = (counter[-1]["energy_mj"] - counter[0]["energy_mj"]) / 1000.0, "counter"
    else:
        powered = [r for r in inside if r.get("power_w") is not None]
        if len(powered) > 1:
            energy = sum((b["time_unix"] - a["time_unix"]) * (a["power_w"] + b["power_w"]) / 2
                         for a, b in zip(powered, powered[1:], strict=False))
            source = "power integral"
    throttled: dict[str, float] = {}
    for a, b in zip(inside, inside[1:], strict=False):  # each interval counts with its first sample's reasons
        if a.get("throttle_reasons") is not None:
            for name in reason_names(int(a["throttle_reasons"])):
                throttled[name] = round(throttled.get(name, 0.0) + b["time_unix"] - a["time_unix"], 3)
    util = _values(inside, "gpu_util_pct")
    temps = _values(inside, "temperature_c")
    mem = _values(inside, "mem_used_mib")
    return GpuWindow(gpu, len(inside), round(seconds, 3), _mean(util), max(util) if util else None,
                     _mean(_values(inside, "mem_util_pct")), max(mem) if mem else None,
                     _mean(_values(inside, "power_w")), energy, source, max(temps) if temps else None, throttled)
