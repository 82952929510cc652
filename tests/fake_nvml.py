"""A scripted stand-in for ``pynvml`` (the module nvidia-ml-py installs), for telemetry tests.

``FAKE_NVML_SCRIPT`` names a JSON file: ``{"phases": [{"until_s": 1.0, "util": 0, "power_w": 80,
"reasons": 1}, ...], "processes": [{"pid": 1, "used_mib": 500, "sm": 90}], "fail_init": false,
"no_energy": false, "no_process_util": false}`` (a pid ``"self"`` is the calling process; the
processes are read again at each call, the rest at nvmlInit). A process's ``"sm"`` is its
per-process SM utilisation: as the real driver (an H100 on 580.159.04), one with none or 0 has no
sample and a call that finds no sample raises NOT_FOUND (6); ``no_process_util`` makes the call
raise NOT_SUPPORTED (3), as a driver without per-process figures.
Time counts from nvmlInit; the energy counter integrates the power.
"""

from __future__ import annotations

import json
import os
import time
from types import SimpleNamespace

_state: dict = {}


class NVMLError(Exception):
    def __init__(self, message: str, value: int | None = None):
        super().__init__(message)
        self.value = value  # the nvmlReturn_t, as pynvml's NVMLError carries it


def _script() -> dict:
    return json.loads(open(os.environ["FAKE_NVML_SCRIPT"]).read())


def nvmlInit() -> None:
    script = _script()
    if script.get("fail_init"):
        raise NVMLError("Driver Not Loaded")
    _state.update(script=script, t0=time.monotonic(), energy_mj=0.0, last=time.monotonic())


def nvmlShutdown() -> None:
    pass


def nvmlDeviceGetHandleByIndex(index: int):
    if index > 7:
        raise NVMLError("Invalid Argument")
    return SimpleNamespace(index=index)


def _phase() -> dict:
    elapsed = time.monotonic() - _state["t0"]
    phases = _state["script"]["phases"]
    for phase in phases:
        if elapsed < phase["until_s"]:
            return phase
    return phases[-1]


def nvmlDeviceGetUtilizationRates(handle):
    p = _phase()
    return SimpleNamespace(gpu=p["util"], memory=p.get("mem_util", p["util"] // 2))


def nvmlDeviceGetMemoryInfo(handle):
    return SimpleNamespace(used=int(_phase().get("mem_mib", 1000) * 2**20), total=141 * 2**30)


def nvmlDeviceGetPowerUsage(handle):
    return int(_phase()["power_w"] * 1000)


def nvmlDeviceGetClockInfo(handle, kind):
    return 1980 if kind == 1 else 3201


def nvmlDeviceGetTemperature(handle, kind):
    return 40 + _phase()["util"] // 4


def nvmlDeviceGetCurrentClocksEventReasons(handle):
    return _phase().get("reasons", 0)


def nvmlDeviceGetTotalEnergyConsumption(handle):
    if _state["script"].get("no_energy"):
        raise NVMLError("Not Supported")
    now = time.monotonic()
    _state["energy_mj"] += (now - _state["last"]) * _phase()["power_w"] * 1000
    _state["last"] = now
    return int(_state["energy_mj"])


def nvmlDeviceGetComputeRunningProcesses(handle):
    # read again at each call: a test changes the processes between two marks of a window
    return [SimpleNamespace(pid=os.getpid() if p["pid"] == "self" else p["pid"], usedGpuMemory=int(p["used_mib"] * 2**20))
            for p in _script().get("processes", [])]


def nvmlDeviceGetProcessUtilization(handle, last_seen_us):
    script = _script()
    if script.get("no_process_util"):
        raise NVMLError("Not Supported", 3)
    now_us = int(time.time() * 1e6)
    samples = [SimpleNamespace(pid=os.getpid() if p["pid"] == "self" else p["pid"], smUtil=p["sm"], memUtil=p["sm"] // 3,
                               encUtil=0, decUtil=0, timeStamp=now_us)
               for p in script.get("processes", []) if p.get("sm") and now_us > last_seen_us]
    if not samples:
        raise NVMLError("Not Found", 6)
    return samples
