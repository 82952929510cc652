"""How fast omnibench notices READY and GPU_FREE, against the runbook's 5-second polling.

Both pollers watch the *same* event in the same round, side by side:

* READY: a test server opens its port after a random delay; omnibench's ``wait_ready`` and the
  runbook's ``until curl -sf .../health; do sleep 5; done`` both poll it. Latency = time each
  noticed minus the time the port opened (written by the server).
* GPU_FREE: a process group "holds" GPU memory; it is stopped; omnibench's ``wait_gpu_free`` and
  the runbook's ``until [ "$(nvidia-smi ...)" -lt 1024 ]; do sleep 5; done`` both poll.
  Latency = time each noticed minus the time the last process of the group was gone.
  ``--gpu-mode fake`` (default, any machine) puts a fake nvidia-smi on PATH that reports memory
  while the holder lives; ``--gpu-mode real`` uses the real nvidia-smi and
  benchmarks/gpu_hold.py (PyTorch) on a GPU host.

    python benchmarks/bench_gates.py --rounds 5 [--gpu-mode real --gpus 0,1] [--out bench.json]
    python benchmarks/bench_gates.py --smoke      # one short round, the runbook's loop sleeping 0.2 s: wiring only
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from pathlib import Path

from bench_ports import free_port  # ports below the ephemeral range (this folder: the script's own)
from tabulate import tabulate

from omnibench_core.process.gpu import query_memory_used
from omnibench_core.process.processes import group_alive, start_group
from omnibench_core.run.gates import wait_gpu_free, wait_ready

HERE = Path(__file__).resolve().parent

RUNBOOK_SLEEP_S = 5  # the runbook's loops sleep 5 s between polls
RUNBOOK_READY = "until curl -sf localhost:{port}/health > /dev/null; do sleep {sleep}; done"
RUNBOOK_GPU = ('until [ "$({smi} -i {gpu} --query-gpu=memory.used --format=csv,noheader,nounits)" -lt 1024 ]; '
               "do sleep {sleep}; done")


def _watch_shell(script: str, env: dict[str, str]) -> tuple[subprocess.Popen, dict[str, float]]:
    """Start the runbook's loop; a thread records the wall time it exits."""
    proc = subprocess.Popen(["bash", "-c", script], env=env)
    seen: dict[str, float] = {}

    def wait() -> None:
        proc.wait()
        seen["t"] = time.time()

    threading.Thread(target=wait, daemon=True).start()
    return proc, seen


def bench_ready(work: Path, delay_s: float, sleep_s: float = RUNBOOK_SLEEP_S) -> tuple[float, float]:
    port = free_port()
    ready_file = work / f"ready-{port}"
    server = start_group([sys.executable, "-m", "omnibench_core.builtin.selftest_programs", "serve", "--port", str(port),
                          "--delay", f"{delay_s:.3f}", "--ready-file", str(ready_file)],
                         log_path=work / f"server-{port}.log", env=dict(os.environ))
    shell, shell_seen = _watch_shell(RUNBOOK_READY.format(port=port, sleep=sleep_s), dict(os.environ))
    try:
        wait_ready(server, f"http://127.0.0.1:{port}/health", timeout_s=120)
        ours = time.time()
        shell.wait(timeout=120)
        while "t" not in shell_seen:
            time.sleep(0.001)
        opened = float(ready_file.read_text())
        return ours - opened, shell_seen["t"] - opened
    finally:
        server.stop(5)
        shell.kill()


def _fake_smi(folder: Path, holder_pid_file: Path) -> Path:
    script = folder / "nvidia-smi"
    script.write_text(textwrap.dedent(f"""\
        #!{sys.executable}
        import os, sys
        try:
            pid = int(open({str(holder_pid_file)!r}).read())
            os.kill(pid, 0)
            used = 80000 if open(f"/proc/{{pid}}/stat").read().rsplit(")", 1)[1].split()[0] != "Z" else 3
        except (OSError, ValueError):
            used = 3
        ids = sys.argv[sys.argv.index("-i") + 1].split(",")
        print("\\n".join(str(used) for _ in ids))
        """))
    script.chmod(0o755)
    return script


def bench_gpu(work: Path, mode: str, gpus: list[str], hold_s: float, round_no: int,
              interval_s: float = 0.1, sleep_s: float = RUNBOOK_SLEEP_S) -> tuple[float, float]:
    env = dict(os.environ)
    log = work / f"hold-{round_no}.log"
    if mode == "fake":
        pid_file = work / "holder.pid"
        smi = str(_fake_smi(work, pid_file))
        holder = start_group([sys.executable, "-c", "import time; time.sleep(3600)"], log_path=log, env=env)
        pid_file.write_text(str(holder.pid))
    else:
        smi = shutil.which("nvidia-smi") or "nvidia-smi"
        argv = [sys.executable, str(HERE / "gpu_hold.py"), "--gpu", gpus[0], "--gib", "8"]
        if len(gpus) > 1:
            argv += ["--child-gpu", gpus[1]]
        holder = start_group(argv, log_path=log, env=env)
        deadline = time.monotonic() + 120
        # Held means nvidia-smi shows it, not only that the holder said so.
        while log.read_text().count("holding") < len(gpus[:2]) or min(query_memory_used(gpus[:2], smi).values()) < 1024:
            if time.monotonic() > deadline or holder.exited() is not None:
                raise RuntimeError("gpu_hold.py did not start: " + log.read_text())
            time.sleep(0.1)
    time.sleep(hold_s)
    shell, shell_seen = _watch_shell(RUNBOOK_GPU.format(smi=smi, gpu=gpus[0], sleep=sleep_s), env)
    ours: dict[str, float] = {}

    def poll() -> None:
        wait_gpu_free(gpus[:1], nvidia_smi=smi, timeout_s=600, interval_s=interval_s)
        ours["t"] = time.time()

    poller = threading.Thread(target=poll, daemon=True)
    poller.start()
    time.sleep(random.uniform(0.1 * sleep_s, 1.1 * sleep_s))  # stop at a random phase of the runbook's sleep
    holder.stop(grace_s=30)
    while group_alive(holder.pgid):
        time.sleep(0.001)
    gone = time.time()
    poller.join(timeout=600)
    shell.wait(timeout=600)
    while "t" not in shell_seen:
        time.sleep(0.001)
    return ours["t"] - gone, shell_seen["t"] - gone


def summarise(name: str, pairs: list[tuple[float, float]]) -> dict[str, float]:
    ours = [p[0] for p in pairs]
    runbook = [p[1] for p in pairs]
    return {"gate": name, "rounds": len(pairs), "omnibench_mean_s": statistics.mean(ours), "omnibench_max_s": max(ours),
            "runbook_mean_s": statistics.mean(runbook), "runbook_max_s": max(runbook),
            "speedup_x": statistics.mean(runbook) / max(statistics.mean(ours), 1e-9)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--gpu-mode", choices=["fake", "real"], default="fake")
    parser.add_argument("--gpus", default="0")
    parser.add_argument("--out", help="write the figures as JSON here")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--gpu-interval", type=float, default=0.1,
                        help="omnibench's GPU poll interval (default: omnibench's own default, 0.1 s)")
    parser.add_argument("--smoke", action="store_true",
                        help="one round, the runbook's loops sleeping 0.2 s: checks the wiring, the figures mean nothing")
    args = parser.parse_args()
    sleep_s = RUNBOOK_SLEEP_S
    if args.smoke:
        args.rounds, sleep_s = 1, 0.2
    if shutil.which("curl") is None:
        print("curl is needed for the runbook's READY loop", file=sys.stderr)
        return 2
    random.seed(args.seed)
    gpus = [g for g in args.gpus.split(",") if g]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        ready = []
        gpu = []
        for i in range(args.rounds):
            ready.append(bench_ready(work, random.uniform(0.1 * sleep_s, 1.1 * sleep_s), sleep_s))
            print(f"round {i + 1}/{args.rounds} READY: omnibench {ready[-1][0]:.3f} s, runbook {ready[-1][1]:.3f} s",
                  flush=True)
            gpu.append(bench_gpu(work, args.gpu_mode, gpus, hold_s=0.1 * sleep_s, round_no=i,
                                 interval_s=args.gpu_interval, sleep_s=sleep_s))
            print(f"round {i + 1}/{args.rounds} GPU_FREE ({args.gpu_mode}): omnibench {gpu[-1][0]:.3f} s, "
                  f"runbook {gpu[-1][1]:.3f} s", flush=True)
        rows = [summarise("READY", ready), summarise(f"GPU_FREE ({args.gpu_mode})", gpu)]
    print(tabulate([[r["gate"], r["rounds"], f"{r['omnibench_mean_s']:.3f}", f"{r['omnibench_max_s']:.3f}",
                     f"{r['runbook_mean_s']:.3f}", f"{r['runbook_max_s']:.3f}", f"{r['speedup_x']:.0f}x"] for r in rows],
                   headers=["gate", "rounds", "omnibench mean s", "max s", "runbook mean s", "max s", "faster"]))
    if args.out:
        Path(args.out).write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
