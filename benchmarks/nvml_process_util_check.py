"""What NVML's per-process utilisation says of a GPU tenant that holds memory idle and of one that
computes (a real GPU with PyTorch; not a test): the facts the GPU noise guard weighs tenants by.

Two tenants start on GPU 0: one keeps 708 MiB and computes nothing, the other waits 10 s, runs bf16
8192^3 matrix products for 10 s, then idles. Once a second it prints the GPU's utilisation, the
compute processes with their MiB, ``nvmlDeviceGetProcessUtilization`` read since the last sample's
``timeStamp`` (pid, smUtil, memUtil, seconds old) and since 0, and the accounting stats.

    python benchmarks/nvml_process_util_check.py [--seconds 36]
    python benchmarks/nvml_process_util_check.py --dry-run --seconds 2   # the tests' scripted NVML: the wiring only

On an H100 (driver 580.159.04): benchmarks/results/2026-12-06-nvml-process-util-h100/log.txt.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from dry_gpu import scripted_nvml  # noqa: E402

IDLE = ("import torch, time\nx = torch.empty(708 * 2**20, dtype=torch.uint8, device='cuda')\n"
        "torch.cuda.synchronize()\nprint('idle up', flush=True)\ntime.sleep(40)\n")
BUSY = ("import torch, time\na = torch.randn(8192, 8192, device='cuda', dtype=torch.bfloat16)\n"
        "torch.cuda.synchronize()\nprint('busy up', flush=True)\ntime.sleep(10)\nt = time.time()\n"
        "while time.time() - t < 10:\n    a @ a\ntorch.cuda.synchronize()\nprint('busy stop', flush=True)\n"
        "time.sleep(20)\n")


def _read(n: Any, name: str, *args: Any) -> Any:
    """One NVML reading, or what kept it from being read (a driver or binding without it)."""
    try:
        return getattr(n, name)(*args)
    except Exception as exc:  # NVMLError, or a binding without the function
        return f"ERR {exc!r}"


def _utilisation(n: Any, handle: Any, since: int, now: float) -> tuple[Any, int]:
    try:
        samples = n.nvmlDeviceGetProcessUtilization(handle, since)
    except n.NVMLError as exc:
        return f"ERR {exc!r}", since
    rows = [(s.pid, s.smUtil, s.memUtil, round(now - s.timeStamp / 1e6, 2)) for s in samples]
    return rows, max([since, *(s.timeStamp for s in samples)])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=36.0, help="how long to watch")
    parser.add_argument("--dry-run", action="store_true", help="no GPU: sleeping tenants and the tests' scripted NVML")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        codes = (IDLE, BUSY)
        if args.dry_run:
            codes = ("import time; time.sleep(600)",) * 2
            module = scripted_nvml(Path(tmp), [{"until_s": 1e9, "util": 50, "power_w": 300}])
        tenants = [subprocess.Popen([sys.executable, "-c", code]) for code in codes]
        if args.dry_run:  # the scripted NVML lists them: one holding memory idle, one computing
            Path(os.environ["FAKE_NVML_SCRIPT"]).write_text(json.dumps({
                "phases": [{"until_s": 1e9, "util": 50, "power_w": 300}],
                "processes": [{"pid": tenants[0].pid, "used_mib": 1226},
                              {"pid": tenants[1].pid, "used_mib": 874, "sm": 100}]}))
        try:
            watch(importlib.import_module(module if args.dry_run else "pynvml"), tenants, args.seconds)
        finally:
            for p in tenants:
                p.kill()
                p.wait()
    return 0


def watch(n: Any, tenants: list[subprocess.Popen[bytes]], seconds: float) -> None:
    """Print the readings once a second for ``seconds``."""
    n.nvmlInit()
    handle = n.nvmlDeviceGetHandleByIndex(0)
    print("driver", _read(n, "nvmlSystemGetDriverVersion"), _read(n, "nvmlDeviceGetName", handle))
    print("accounting mode", _read(n, "nvmlDeviceGetAccountingMode", handle))
    print("idle pid", tenants[0].pid, "busy pid", tenants[1].pid, flush=True)
    since, t0 = 0, time.time()
    try:
        while time.time() - t0 < seconds:
            time.sleep(1)
            now = time.time()
            procs = [(p.pid, (p.usedGpuMemory or 0) >> 20) for p in n.nvmlDeviceGetComputeRunningProcesses(handle)]
            recent, since = _utilisation(n, handle, since, now)
            everything, _ = _utilisation(n, handle, 0, now)
            accounting = []
            for pid, _mib in procs:
                stats = _read(n, "nvmlDeviceGetAccountingStats", handle, pid)
                accounting.append((pid, stats) if isinstance(stats, str) else (pid, stats.gpuUtilization, stats.time))
            print(round(now - t0, 1), "dev", n.nvmlDeviceGetUtilizationRates(handle).gpu, "procs", procs,
                  "since", recent, "all", everything, "acct", accounting, flush=True)
    finally:
        n.nvmlShutdown()


if __name__ == "__main__":
    sys.exit(main())
