"""Real-GPU check of the telemetry sampler (not a test): a server-like process loads the GPU in
known phases (idle, bf16 matrix multiplies, idle) while omnibench's sampler records through NVML;
the summary of each phase window must follow the phases. Also the sampler's CPU cost.

Needs a GPU, nvidia-ml-py and PyTorch. ``python benchmarks/gpu_telemetry_check.py --out DIR``.
``--dry-run`` checks the wiring on any machine: the load only sleeps through its phases and the
sampler reads the tests' scripted NVML (tests/fake_nvml.py) with the same phases; its verdict is
printed, not required (a busy machine shifts the phase edges).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from omnibench_core.telemetry.sampler import Sampler  # noqa: E402
from omnibench_core.telemetry.summary import read_samples, window  # noqa: E402

sys.path.insert(0, str(ROOT / "benchmarks"))
from dry_gpu import scripted_nvml  # noqa: E402

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
DRY_LOAD = """
import sys, time
idle, busy = float(sys.argv[1]), float(sys.argv[2])
for name, seconds in (("idle", idle), ("busy", busy), ("idle2", idle), ("end", 0)):
    print("phase", name, time.time(), flush=True); time.sleep(seconds)
"""


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--gpu", default="0")
    p.add_argument("--idle-s", type=float, default=4.0)
    p.add_argument("--busy-s", type=float, default=8.0)
    p.add_argument("--interval-s", type=float, default=0.2)
    p.add_argument("--dry-run", action="store_true", help="no GPU: a sleeping load and the tests' scripted NVML")
    a = p.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    phases = [{"until_s": a.idle_s, "util": 0, "power_w": 80}, {"until_s": a.idle_s + a.busy_s, "util": 99, "power_w": 600},
              {"until_s": 1e9, "util": 0, "power_w": 80}]  # the load's phases, for a dry run
    module = scripted_nvml(a.out, phases) if a.dry_run else "pynvml"
    sampler = Sampler((a.gpu,), a.out / "telemetry.csv", interval_s=a.interval_s, nvml_module=module)
    started = sampler.start()
    print("sampler:", started.available, started.reason, "processes at start:", started.processes_at_start)
    load = subprocess.Popen([sys.executable, "-c", DRY_LOAD if a.dry_run else LOAD, str(a.idle_s), str(a.busy_s)],
                            stdout=subprocess.PIPE,
                            text=True, env={"CUDA_VISIBLE_DEVICES": a.gpu, "PATH": "/usr/bin:/bin"})
    assert load.stdout is not None
    marks = {}
    for line in load.stdout:  # each phase edge is a sampler mark, as the runner marks step edges
        if line.startswith("phase"):
            marks[line.split()[1]] = sampler.mark()
    load.wait()
    time.sleep(1.0)
    result = sampler.stop()
    rows = read_samples(Path(result.csv))
    phases = {"idle": (marks["idle"], marks["busy"]), "busy": (marks["busy"], marks["idle2"]),
              "idle2": (marks["idle2"], marks["end"])}
    summary = {name: window(rows, a.gpu, lo, hi).as_record() for name, (lo, hi) in phases.items()}
    busy = window(rows, a.gpu, marks["busy"], marks["idle2"])
    powered = [r for r in rows if marks["busy"] <= r["time_unix"] <= marks["idle2"]]
    integral = sum((y["time_unix"] - x["time_unix"]) * (x["power_w"] + y["power_w"]) / 2
                   for x, y in zip(powered, powered[1:], strict=False))
    report = {"samples": result.samples, "seconds": round(result.seconds, 2), "cpu_seconds": round(result.cpu_seconds, 4),
              "sampler_cpu_fraction_of_one_core": result.cpu_fraction, "interval_s": a.interval_s,
              "phases": summary, "busy_energy_counter_j": busy.energy_j, "busy_power_integral_j": integral}
    (a.out / "telemetry_check.json").write_text(json.dumps(report, indent=2))
    print(json.dumps(report, indent=2))
    busy_s, idle_s = summary["busy"], summary["idle"]
    ok = None not in (busy_s["gpu_util_mean"], idle_s["gpu_util_mean"], busy_s["power_mean_w"], idle_s["power_mean_w"]) \
        and busy_s["gpu_util_mean"] > 80 and idle_s["gpu_util_mean"] < 10 \
        and busy_s["power_mean_w"] > 2 * idle_s["power_mean_w"]
    print("PHASES_FOLLOWED" if ok else "PHASES_NOT_FOLLOWED")
    if a.dry_run:
        print("dry run: the wiring ran; the verdict above is not required")
        return 0
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
