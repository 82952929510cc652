"""Samples the GPUs a server was given, at a fixed interval, into a CSV file, in a thread.

On an H200 every reading costs microseconds except the total-energy counter (about 4 ms of CPU
each), so the counter is read every ``energy_every_s`` and at each :meth:`Sampler.mark` (the
runner marks every step's start and end), which is where window energies are taken from. The
thread measures its own CPU time, so the cost is recorded with the samples.
"""

from __future__ import annotations

import csv
import datetime as dt
import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..defaults import GPU_TENANT_COMPUTING_SM_PCT
from .hostload import default_root, tree_pids
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


@dataclass(frozen=True)
class GpuTenant:
    """A compute process outside the run's tree seen on one of the sampler's GPUs, and how hard it
    computed there: ``sm_pct`` is its highest per-process SM utilisation (%) in the window (0 when
    NVML had no sample of it: idle), None where the driver gives no per-process figures."""

    time_unix: float
    gpu: str
    pid: int
    used_mib: float | None
    command: str
    sm_pct: float | None = None

    @property
    def computing(self) -> bool:
        """Whether it computed on the GPU (SM at or above ``GPU_TENANT_COMPUTING_SM_PCT``): the
        window is noisy. One of unknown use counts as computing: nothing says it was idle."""
        return self.sm_pct is None or self.sm_pct >= GPU_TENANT_COMPUTING_SM_PCT

    def describe(self) -> str:
        """``pid 4242 (python train.py) 2048 MiB on GPU 0, SM 97 %``."""
        mib = f" {self.used_mib:g} MiB" if self.used_mib is not None else ""
        use = (f"SM {self.sm_pct:g} %" if self.sm_pct is not None
               else "SM use unknown (no per-process utilisation from NVML)")
        return f"pid {self.pid} ({self.command or 'unknown'}){mib} on GPU {self.gpu}, {use}"


class Sampler:
    """``start()`` opens NVML and samples every ``interval_s`` until ``stop()``."""

    def __init__(self, gpus: tuple[str, ...], csv_path: Path, *, interval_s: float = 0.2,
                 nvml_module: str = "pynvml", energy_every_s: float = 5.0, tenant_every_s: float = 1.0,
                 own_root: int | None = None):
        self.gpus, self.csv_path, self.interval_s, self.nvml_module = gpus, csv_path, interval_s, nvml_module
        self.energy_every_s, self.tenant_every_s = energy_every_s, tenant_every_s
        self.own_root = default_root() if own_root is None else own_root
        self.tenants: list[GpuTenant] = []
        # (look time, GPU, pid, SM %) of each foreign process NVML had samples of since the look
        # before; a GPU with no per-process figures is kept in no_process_use
        self.uses: list[tuple[float, str, int, float]] = []
        self.no_process_use: set[str] = set()
        self._cursor_us: dict[str, int] = {}
        self._stop = threading.Event()
        self._lock = threading.Lock()  # the CSV writer is shared by the thread and mark()
        self._writer: Any = None
        self._handle: Any = None
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
        # per-process utilisation from now on (a cursor of 0 reads the driver's whole buffer, an
        # average over many seconds before the server started)
        self._cursor_us = {g: int(time.time() * 1e6) for g in self.gpus}
        self.result = SamplerResult(True, csv=str(self.csv_path),
                                    processes_at_start={g: nvml.processes(g) for g in self.gpus})
        self.csv_path.parent.mkdir(parents=True, exist_ok=True)
        self._handle = open(self.csv_path, "w", newline="")
        self._writer = csv.DictWriter(self._handle, fieldnames=COLUMNS)
        self._writer.writeheader()
        self.mark()
        self._thread = threading.Thread(target=self._loop, name=f"telemetry-{self.csv_path.stem}", daemon=True)
        self._thread.start()
        return self.result

    def mark(self) -> float:
        """Take a full sample now, energy counter and GPU tenants included; returns its unix time
        (a window edge). Without NVML (telemetry not available) it only returns the time.
        """
        if self._nvml is None:
            return time.time()
        now = self._sample(energy=True)
        self._look_for_tenants(now)
        return now

    def tenants_between(self, start: float, end: float) -> list[GpuTenant]:
        """The foreign GPU processes seen from ``start`` to ``end`` (unix times, marks included),
        one per GPU and pid, with the most memory seen and the highest SM utilisation NVML gave
        for it in the window: from the looks after ``start`` up to ``end`` (the look at ``start``
        reads the time before the window); None on a GPU without per-process figures."""
        with self._lock:
            seen = [t for t in self.tenants if start <= t.time_unix <= end]
            uses = [(gpu, pid, sm) for when, gpu, pid, sm in self.uses if start < when <= end]
            blind = set(self.no_process_use)
        most: dict[tuple[str, int], GpuTenant] = {}
        for t in seen:
            key = (t.gpu, t.pid)
            if key not in most or (t.used_mib or 0) > (most[key].used_mib or 0):
                most[key] = t
        out = []
        for (gpu, pid), t in most.items():
            sm = None if gpu in blind else max((u for g, p, u in uses if (g, p) == (gpu, pid)), default=0.0)
            out.append(replace(t, sm_pct=sm))
        return out

    def _look_for_tenants(self, now: float) -> None:
        assert self._nvml is not None
        own = tree_pids(self.own_root)
        found = [GpuTenant(now, gpu, int(p["pid"]), p["used_mib"], str(p["command"]))
                 for gpu in self.gpus for p in self._nvml.processes(gpu) if int(p["pid"]) not in own]
        uses: list[tuple[float, str, int, float]] = []
        blind: set[str] = set()
        for gpu in self.gpus:
            if gpu in self.no_process_use:
                continue
            use = self._nvml.process_use(gpu, self._cursor_us.get(gpu, 0))
            if not use.supported:
                blind.add(gpu)
                continue
            self._cursor_us[gpu] = use.cursor_us
            uses += [(now, gpu, pid, sm) for pid, sm in use.sm_pct.items() if pid not in own]
        if found or uses or blind:
            with self._lock:
                self.tenants.extend(found)
                self.uses.extend(uses)
                self.no_process_use |= blind

    def stop(self) -> SamplerResult:
        """Stop sampling (a last full sample first) and close NVML; returns the result."""
        if self._nvml is None:
            return self.result
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        self.mark()
        self._handle.close()
        self._nvml.close()
        self._nvml = None
        return self.result

    def _sample(self, *, energy: bool) -> float:
        assert self._nvml is not None
        now = round(time.time(), 3)  # as the CSV writes it, so a mark is inside the window it opens
        stamp = dt.datetime.fromtimestamp(now, dt.timezone.utc).isoformat(timespec="milliseconds")
        rows = [{"time_unix": f"{now:.3f}", "time_iso": stamp, "gpu": gpu, **self._nvml.sample(gpu, energy=energy)}
                for gpu in self.gpus]
        with self._lock:
            self._writer.writerows(rows)
            self._handle.flush()
            self.result.samples += len(rows)
        return now

    def _loop(self) -> None:
        cpu0, wall0 = time.thread_time(), time.monotonic()
        last_energy = last_tenants = time.monotonic()
        while not self._stop.wait(self.interval_s):
            energy = time.monotonic() - last_energy >= self.energy_every_s
            if energy:
                last_energy = time.monotonic()
            now = self._sample(energy=energy)
            if time.monotonic() - last_tenants >= self.tenant_every_s:
                last_tenants = time.monotonic()
                self._look_for_tenants(now)
        self.result.seconds = time.monotonic() - wall0
        self.result.cpu_seconds = time.thread_time() - cpu0
