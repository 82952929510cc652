"""Check GPU_FREE on a real GPU host: a process group holds memory on two GPUs (leader and child).

1. While the group holds memory, ``wait_gpu_free`` must fail with GpuNotFree and its evidence.
2. omnibench stops the group (SIGTERM to the group, grace, SIGKILL); no process may be left.
3. ``wait_gpu_free`` must then pass; the time from the group's end to GPU_FREE is printed.

    python benchmarks/gpu_gate_check.py --gpus 0,1
    python benchmarks/gpu_gate_check.py --dry-run     # the wiring, on a machine without a GPU
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

from omnibench_core.errors import GpuNotFree
from omnibench_core.process.gpu import describe_gpus, query_memory_used
from omnibench_core.process.processes import build_env, group_alive, group_members, start_group
from omnibench_core.run.gates import wait_gpu_free

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from dry_gpu import fake_gpu_host  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--gpus", default="0,1")
    parser.add_argument("--gib", type=float, default=16)
    parser.add_argument("--dry-run", action="store_true", help="fake GPUs (benchmarks/dry_gpu.py): checks the wiring")
    args = parser.parse_args()
    gpus = args.gpus.split(",")
    with tempfile.TemporaryDirectory() as tmp:
        dry: list[str] = []
        if args.dry_run:
            fake_gpu_host(Path(tmp) / "gpus")
            dry = ["--dry-run", str(Path(tmp) / "gpus")]
        report: dict[str, object] = {"gpus": describe_gpus(), "before": query_memory_used(gpus), "dry_run": args.dry_run}
        log = Path(tmp) / "hold.log"
        argv = [sys.executable, str(HERE / "gpu_hold.py"), "--gpu", gpus[0], "--gib", str(args.gib), *dry]
        if len(gpus) > 1:
            argv += ["--child-gpu", gpus[1]]
        holder = start_group(argv, log_path=log, env=build_env(os.environ, {}, ()))
        while log.read_text().count("holding") < len(gpus[:2]):
            if holder.exited() is not None:
                print(log.read_text())
                return 1
            time.sleep(0.1)
        report["group"] = {"pgid": holder.pgid, "members": group_members(holder.pgid)}
        report["held"] = query_memory_used(gpus)
        try:
            wait_gpu_free(gpus, timeout_s=2, interval_s=0.1)
            report["while_held"] = "UNEXPECTED: GPU_FREE passed while memory was held"
        except GpuNotFree as exc:
            report["while_held"] = exc.as_record()
        t0 = time.time()
        report["stop"] = holder.stop(grace_s=30)
        report["group_left"] = group_members(holder.pgid) if group_alive(holder.pgid) else []
        gone = time.time()
        record = wait_gpu_free(gpus, timeout_s=600, interval_s=0.1)
        report["gpu_free"] = {"status": record.status, "evidence": record.evidence,
                              "stop_s": round(gone - t0, 3), "exit_to_gpu_free_s": round(time.time() - gone, 3)}
    print(json.dumps(report, indent=2))
    ok = report["gpu_free"]["status"] == "passed" and not report["group_left"] and isinstance(report["while_held"], dict)
    print("GPU gate check:", "OK" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
