"""Samples the GPUs a server was given, at a fixed interval, into a CSV file, in a thread.

The thread sleeps between samples (one sample of nine readings took about 3.5 ms of wall time
on an H200), so its CPU cost is small; it measures its own CPU time so the cost is recorded.
"""

from __future__ import annotations

import csv
import datetime as dt
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .nvml import FIELDS, Nvml, NvmlUnavailable

COLUMNS = ("time_unix", "time_iso", "gpu", *FIELDS)


@dataclass
class SamplerResult:
    """What a sampler left: its CSV, how many samples, its CPU time, or why there is none."""

    available: bool
    csv: str = ""
    samples: int = 0
    seconds: float = 0.0
    cpu_seconds: float = 0.0
    reason: str = ""
    processes_at_start: dict[str, list[dict[str, Any]]] = field(default_factory=dict)

    @property
    def cpu_fraction(self) -> float | None:
        """The sampler's share of one core while it ran."""
        return self.cpu_seconds / self.seconds if self.seconds > 0 else None


class Sampler:
    """``start()`` opens NVML and samples every ``interval_s`` until ``stop()``."""

    def __init__(self, gpus: tuple[str, ...], csv_path: Path, *, interval_s: float = 0.2,
                 nvml_module: str = "pynvml"):
        self.gpus, self.csv_path, self.interval_s, self.nvml_module = gpus, csv_path, interval_s, nvml_module
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._nvml: Nvml | None = None
        self.result = SamplerResult(False, reason="not started")

    def start(self) -> SamplerResult:
        """Open NVML, note the processes already on the GPUs, and begin sampling."""
        try:
            self._nvml = Nvml.open(self.gpus, self.nvml_module)
        except NvmlUnavailable as exc:
            self.result = SamplerResult(False, reason=f"not available: {exc}")
            return self.result
        nvml = self._nvml
        self.result = SamplerResult(True, csv=str(self.csv_path),
                                    processes_at_start={g: nvml.processes(g) for g in self.gpus})
        self.csv_path.parent.mkdir(parents=True, exist_ok=True)
        self._thread = threading.Thread(target=self._loop, name=f"telemetry-{self.csv_path.stem}", daemon=True)
        self._thread.start()
        return self.result

    def stop(self) -> SamplerResult:
        """Stop sampling and close NVML; returns the result."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        if self._nvml is not None:
            self._nvml.close()
        return self.result

    def _loop(self) -> None:
        assert self._nvml is not None
        cpu0, wall0 = time.thread_time(), time.monotonic()
        with open(self.csv_path, "w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=COLUMNS)
            writer.writeheader()
            while True:
                now = time.time()
                stamp = dt.datetime.fromtimestamp(now, dt.timezone.utc).isoformat(timespec="milliseconds")
                for gpu in self.gpus:
                    writer.writerow({"time_unix": f"{now:.3f}", "time_iso": stamp, "gpu": gpu,
                                     **self._nvml.sample(gpu)})
                    self.result.samples += 1
                handle.flush()
                if self._stop.wait(self.interval_s):
                    break
        self.result.seconds = time.monotonic() - wall0
        self.result.cpu_seconds = time.thread_time() - cpu0
