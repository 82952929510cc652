"""Per-call CPU and wall time of each NVML reading the telemetry sampler takes (a real GPU; not a test).

On an H200 (driver 580.159.04): every reading a few microseconds, the total-energy counter about
4 ms of CPU, which is why the sampler reads the counter only at window edges and every 5 s.
"""

import time

import pynvml as n


def main() -> None:
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
        for _ in range(200):
            call()
        print(f"{name:14s} cpu {1000 * (time.thread_time() - c0) / 200:.3f} ms  "
              f"wall {1000 * (time.perf_counter() - w0) / 200:.3f} ms")


if __name__ == "__main__":
    main()
