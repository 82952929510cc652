"""Per-call CPU and wall time of each NVML reading the telemetry sampler takes (a real GPU; not a test).

On an H200 (driver 580.159.04): every reading a few microseconds, the total-energy counter about
4 ms of CPU, which is why the sampler reads the counter only at window edges and every 5 s.

    python benchmarks/nvml_call_cost.py [--calls 200]
    python benchmarks/nvml_call_cost.py --dry-run     # the tests' scripted NVML: the wiring only
"""

from __future__ import annotations

import argparse
import importlib
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from dry_gpu import scripted_nvml  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200, help="calls timed per reading")
    parser.add_argument("--dry-run", action="store_true", help="no GPU: the tests' scripted NVML")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        idle = [{"until_s": 1e9, "util": 0, "power_w": 80}]
        n = importlib.import_module(scripted_nvml(Path(tmp), idle) if args.dry_run else "pynvml")
        n.nvmlInit()
        h = n.nvmlDeviceGetHandleByIndex(0)
        calls = {
            "util": lambda: n.nvmlDeviceGetUtilizationRates(h), "mem": lambda: n.nvmlDeviceGetMemoryInfo(h),
            "power": lambda: n.nvmlDeviceGetPowerUsage(h), "sm": lambda: n.nvmlDeviceGetClockInfo(h, 1),
            "memclk": lambda: n.nvmlDeviceGetClockInfo(h, 2), "temp": lambda: n.nvmlDeviceGetTemperature(h, 0),
            "reasons": lambda: n.nvmlDeviceGetCurrentClocksEventReasons(h),
            "energy": lambda: n.nvmlDeviceGetTotalEnergyConsumption(h),
            "procs": lambda: n.nvmlDeviceGetComputeRunningProcesses(h),
        }
        for name, call in calls.items():
            call()
            c0, w0 = time.thread_time(), time.perf_counter()
            for _ in range(args.calls):
                call()
            print(f"{name:14s} cpu {1000 * (time.thread_time() - c0) / args.calls:.3f} ms  "
                  f"wall {1000 * (time.perf_counter() - w0) / args.calls:.3f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
