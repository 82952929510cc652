"""Real-GPU check of the watchdog and the stray scan (not a test).

A: a "server" holds GPU memory and its child escapes the group with setsid and holds more. The
   stray scan must list both on the GPU's compute list as ours; the tree stop must end both;
   GPU_FREE must then pass.
B: an owner process starts the same server under the watchdog and is SIGKILLed. Nobody stops the
   server explicitly: the watchdog must, and GPU_FREE must pass.

    python benchmarks/gpu_watchdog_check.py --gpu 0 --gib 8
    python benchmarks/gpu_watchdog_check.py --dry-run     # the wiring, on a machine without a GPU
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from omnibench_core.process.gpu import query_compute_apps, query_memory_used  # noqa: E402
from omnibench_core.process.processes import build_env, start_group  # noqa: E402
from omnibench_core.process.strays import find_strays  # noqa: E402
from omnibench_core.run.gates import wait_gpu_free  # noqa: E402

sys.path.insert(0, str(HERE))
from dry_gpu import fake_gpu_host  # noqa: E402

OWNER = """
import os, sys, time
sys.path.insert(0, sys.argv[1])
from pathlib import Path
from omnibench_core.process.processes import build_env, start_group
p = start_group(sys.argv[3:], log_path=Path(sys.argv[2]), env=build_env(os.environ, {}, ()), orphan_grace_s=5)
print("started", p.pid, p.token, flush=True)
time.sleep(3600)
"""


def _wait_held(log: Path, count: int, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while log.read_text().count("holding") < count if log.exists() else True:
        assert time.monotonic() < deadline, log.read_text() if log.exists() else "no log"
        time.sleep(0.1)


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--gpu", default="0")
    p.add_argument("--gib", type=float, default=8)
    p.add_argument("--out", type=Path)
    p.add_argument("--dry-run", action="store_true", help="fake GPUs (benchmarks/dry_gpu.py): checks the wiring")
    a = p.parse_args()
    gpus = (a.gpu,)
    with tempfile.TemporaryDirectory() as tmp:
        dry: list[str] = []
        if a.dry_run:
            fake_gpu_host(Path(tmp) / "gpus")
            dry = ["--dry-run", str(Path(tmp) / "gpus")]
        hold = [sys.executable, str(HERE / "gpu_hold.py"), "--gpu", a.gpu, "--child-gpu", a.gpu, "--gib", str(a.gib),
                "--setsid-child", *dry]
        report: dict[str, object] = {"before": query_memory_used(gpus), "dry_run": a.dry_run}
        log = Path(tmp) / "a.log"
        proc = start_group(hold, log_path=log, env=build_env(os.environ, {}, ()), orphan_grace_s=5)
        _wait_held(log, 2)
        report["A_held"] = query_memory_used(gpus)
        report["A_compute_apps"] = [vars(c) for c in query_compute_apps(gpus)]
        scan = find_strays(proc, gpus=gpus)
        report["A_scan"] = scan.as_dict()
        t0 = time.monotonic()
        record = proc.stop_tree(30)
        report["A_stop"] = record.as_dict()
        free = wait_gpu_free(gpus, timeout_s=120, interval_s=0.1)
        report["A_gpu_free_s_after_stop"] = round(time.monotonic() - t0, 3)
        report["A_gpu_free"] = free.evidence
        report["A_left"] = [vars(s) for s in find_strays(proc, gpus=gpus).strays]

        log_b = Path(tmp) / "b.log"
        owner = subprocess.Popen([sys.executable, "-c", OWNER, str(HERE.parent), str(log_b), *hold],
                                 stdout=subprocess.PIPE, text=True)
        assert owner.stdout is not None
        started = owner.stdout.readline().split()
        _wait_held(log_b, 2)
        report["B_held"] = query_memory_used(gpus)
        t0 = time.monotonic()
        owner.send_signal(signal.SIGKILL)
        owner.wait()
        free = wait_gpu_free(gpus, timeout_s=120, interval_s=0.1)
        report["B_gpu_free_s_after_owner_killed"] = round(time.monotonic() - t0, 3)
        report["B_compute_apps_after"] = [vars(c) for c in query_compute_apps(gpus)]
        left = subprocess.run(["grep", "-l", f"OMNIBENCH_TREE={started[2]}", "-r", "/proc", "--include=environ", "-s"],
                              capture_output=True, text=True).stdout.split()
        report["B_token_carriers_left"] = [x for x in left if "/self/" not in x and "/thread-self/" not in x]
    text = json.dumps(report, indent=2, default=str)
    print(text)
    if a.out:
        a.out.mkdir(parents=True, exist_ok=True)
        (a.out / "gpu_watchdog_check.json").write_text(text)
    ours_on_gpu = [s for s in report["A_scan"]["strays"] if s["ours"] and any("GPU" in r for r in s["reasons"])]
    ok = len(ours_on_gpu) >= 2 and not report["A_left"] and not report["B_compute_apps_after"]
    print("WATCHDOG_GPU_CHECK", "OK" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
