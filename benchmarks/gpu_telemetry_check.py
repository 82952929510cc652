"""Real-GPU check of the telemetry sampler (not a test): a server-like process loads the GPU in
known phases (idle, bf16 matrix multiplies, idle) while omnibench's sampler records through NVML;
the summary of each phase window must follow the phases. Also the sampler's CPU cost.

Needs a GPU, nvidia-ml-py and PyTorch. ``python benchmarks/gpu_telemetry_check.py --out DIR``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from omnibench_core.telemetry.sampler import Sampler  # noqa: E402
from omnibench_core.telemetry.summary import read_samples, window  # noqa: E402

LOAD = """
import sys, time, torch
idle, busy = float(sys.argv[1]), float(sys.argv[2])
a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16); b = torch.randn_like(a)
torch.cuda.synchronize(); print("phase idle", time.time(), flush=True); time.sleep(idle)
print("phase busy", time.time(), flush=True); t = time.monotonic()
while time.monotonic() - t < busy:
    for _ in range(20): c = a @ b
    torch.cuda.synchronize()
print("phase idle2", time.time(), flush=True); time.sleep(idle); print("phase end", time.time(), flush=True)
"""


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--gpu", default="0")
    p.add_argument("--idle-s", type=float, default=4.0)
    p.add_argument("--busy-s", type=float, default=8.0)
    p.add_argument("--interval-s", type=float, default=0.2)
    a = p.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    sampler = Sampler((a.gpu,), a.out / "telemetry.csv", interval_s=a.interval_s)
    started = sampler.start()
    print("sampler:", started.available, started.reason, "processes at start:", started.processes_at_start)
    done = subprocess.run([sys.executable, "-c", LOAD, str(a.idle_s), str(a.busy_s)], capture_output=True, text=True,
                          env={"CUDA_VISIBLE_DEVICES": a.gpu, "PATH": "/usr/bin:/bin"})
    time.sleep(1.0)
    result = sampler.stop()
    marks = {line.split()[1]: float(line.split()[2]) for line in done.stdout.splitlines() if line.startswith("phase")}
    print(done.stderr[-2000:])
    rows = read_samples(Path(result.csv))
    phases = {"idle": (marks["idle"], marks["busy"]), "busy": (marks["busy"], marks["idle2"]),
              "idle2": (marks["idle2"], marks["end"])}
    summary = {name: window(rows, a.gpu, lo + 0.5, hi - 0.2).as_record() for name, (lo, hi) in phases.items()}
    busy = window(rows, a.gpu, marks["busy"] + 0.5, marks["idle2"] - 0.2)
    powered = [r for r in rows if marks["busy"] + 0.5 <= r["time_unix"] <= marks["idle2"] - 0.2]
    integral = sum((y["time_unix"] - x["time_unix"]) * (x["power_w"] + y["power_w"]) / 2
                   for x, y in zip(powered, powered[1:], strict=False))
    report = {"samples": result.samples, "seconds": round(result.seconds, 2), "cpu_seconds": round(result.cpu_seconds, 4),
              "sampler_cpu_fraction_of_one_core": result.cpu_fraction, "interval_s": a.interval_s,
              "phases": summary, "busy_energy_counter_j": busy.energy_j, "busy_power_integral_j": integral}
    (a.out / "telemetry_check.json").write_text(json.dumps(report, indent=2))
    print(json.dumps(report, indent=2))
    ok = (summary["busy"]["gpu_util_mean"] or 0) > 80 and (summary["idle"]["gpu_util_mean"] or 100) < 10 \
        and (summary["busy"]["power_mean_w"] or 0) > 2 * (summary["idle"]["power_mean_w"] or 1e9)
    print("PHASES_FOLLOWED" if ok else "PHASES_NOT_FOLLOWED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
