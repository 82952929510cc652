"""One telemetry sample of a GPU through NVML, and the throttle-reason names.

The NVML module is imported by name (default ``pynvml``, which ``nvidia-ml-py`` installs), so
tests can put a scripted module in its place. A reading the GPU does not support is left empty;
an NVML that cannot start makes the sampler record "not available", never a failed run.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from ..process.gpu import process_command

# NVML's clocks-throttle (clocks-event) reason bits.
THROTTLE_REASONS = {
    0x1: "gpu_idle",
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}
# Reasons that make a timed window's numbers incomparable: the GPU was held back by power or heat.
POWER_OR_HEAT = frozenset({"sw_power_cap", "hw_slowdown", "sw_thermal_slowdown", "hw_thermal_slowdown",
                           "hw_power_brake_slowdown"})
NVML_CLOCK_SM, NVML_CLOCK_MEM, NVML_TEMPERATURE_GPU = 1, 2, 0
# nvmlDeviceGetProcessUtilization's answer when no process has a sample newer than the cursor
# (nvmlReturn_t NVML_ERROR_NOT_FOUND): every process idle, not an error.
NVML_ERROR_NOT_FOUND = 6
FIELDS = ("gpu_util_pct", "mem_util_pct", "mem_used_mib", "power_w", "sm_clock_mhz", "mem_clock_mhz",
          "temperature_c", "throttle_reasons", "energy_mj")


@dataclass(frozen=True)
class ProcessUse:
    """Per-process SM utilisation on one GPU since a cursor, from ``nvmlDeviceGetProcessUtilization``.

    ``supported`` False: the driver gives no per-process figures (the call failed otherwise than
    "no sample"), so nothing can be said of any process. ``sm_pct``: pid -> the highest ``smUtil``
    (%) among its samples; a process with no sample since the cursor was idle. ``cursor_us``: the
    newest sample's ``timeStamp`` (CPU time in microseconds), the next call's cursor.
    """

    supported: bool
    sm_pct: dict[int, float]
    cursor_us: int


class NvmlUnavailable(RuntimeError):
    """NVML could not be loaded or started, or a GPU could not be opened."""


def reason_names(mask: int) -> list[str]:
    """The names of the bits set in a throttle-reason mask."""
    return [name for bit, name in THROTTLE_REASONS.items() if mask & bit]


@dataclass
class Nvml:
    """An initialised NVML and the handles of the GPUs it watches."""

    module: ModuleType
    handles: dict[str, Any]

    @classmethod
    def open(cls, gpus: tuple[str, ...], module_name: str = "pynvml") -> Nvml:
        """Import and initialise NVML and open each GPU (by its index, as CUDA_VISIBLE_DEVICES names it)."""
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            raise NvmlUnavailable(f"{module_name} is not installed (pip install -e '.[telemetry]')") from exc
        try:
            module.nvmlInit()
            handles = {gpu: module.nvmlDeviceGetHandleByIndex(int(gpu)) for gpu in gpus}
        except Exception as exc:  # NVMLError and its many subclasses; a non-numeric id
            raise NvmlUnavailable(f"NVML could not open GPUs {','.join(gpus)}: {exc}") from exc
        return cls(module, handles)

    def close(self) -> None:
        """Shut NVML down."""
        try:
            self.module.nvmlShutdown()
        except Exception:
            pass

    def _read(self, fn: str, *args: Any) -> Any:
        try:
            return getattr(self.module, fn)(*args)
        except Exception:  # not supported on this GPU, or a passing error: leave the field empty
            return None

    def energy_mj(self, gpu: str) -> Any:
        """The GPU's total-energy counter (mJ since the driver loaded), or None."""
        return self._read("nvmlDeviceGetTotalEnergyConsumption", self.handles[gpu])

    def sample(self, gpu: str, *, energy: bool = True) -> dict[str, Any]:
        """Every reading of one GPU now; a reading it cannot give is None.

        ``energy=False`` leaves the energy counter out: on an H200 it costs about 4 ms of CPU per
        read, a thousand times any other reading, so the sampler reads it only now and then.
        """
        h = self.handles[gpu]
        util = self._read("nvmlDeviceGetUtilizationRates", h)
        memory = self._read("nvmlDeviceGetMemoryInfo", h)
        power = self._read("nvmlDeviceGetPowerUsage", h)
        reasons = self._read("nvmlDeviceGetCurrentClocksEventReasons", h)
        if reasons is None:  # older drivers name it "throttle reasons"
            reasons = self._read("nvmlDeviceGetCurrentClocksThrottleReasons", h)
        return {
            "gpu_util_pct": getattr(util, "gpu", None),
            "mem_util_pct": getattr(util, "memory", None),
            "mem_used_mib": round(memory.used / 2**20, 1) if memory is not None else None,
            "power_w": power / 1000.0 if power is not None else None,
            "sm_clock_mhz": self._read("nvmlDeviceGetClockInfo", h, NVML_CLOCK_SM),
            "mem_clock_mhz": self._read("nvmlDeviceGetClockInfo", h, NVML_CLOCK_MEM),
            "temperature_c": self._read("nvmlDeviceGetTemperature", h, NVML_TEMPERATURE_GPU),
            "throttle_reasons": reasons,
            "energy_mj": self.energy_mj(gpu) if energy else None,
        }

    def processes(self, gpu: str) -> list[dict[str, Any]]:
        """The compute processes holding memory on ``gpu``: pid, MiB and command line."""
        running = self._read("nvmlDeviceGetComputeRunningProcesses", self.handles[gpu]) or []
        out = []
        for p in running:
            used = getattr(p, "usedGpuMemory", None)
            out.append({"pid": p.pid, "used_mib": round(used / 2**20, 1) if used else None,
                        "command": process_command(p.pid)})
        return out

    def process_use(self, gpu: str, since_us: int) -> ProcessUse:
        """Each process's SM utilisation on ``gpu`` from samples newer than ``since_us`` (a
        ``timeStamp``, microseconds of CPU time). The driver answers only processes with a sample
        since then (an idle one has none, or ``smUtil`` 0) and NOT_FOUND when none has."""
        try:
            samples = self.module.nvmlDeviceGetProcessUtilization(self.handles[gpu], since_us)
        except Exception as exc:  # NVMLError: NOT_FOUND is "all idle"; anything else, no figures here
            found_none = getattr(exc, "value", None) == NVML_ERROR_NOT_FOUND
            return ProcessUse(found_none, {}, since_us)
        use: dict[int, float] = {}
        cursor = since_us
        for sample in samples or []:
            pid, sm, stamp = int(sample.pid), float(sample.smUtil), int(sample.timeStamp)
            use[pid] = max(use.get(pid, 0.0), sm)
            cursor = max(cursor, stamp)
        return ProcessUse(True, use, cursor)
