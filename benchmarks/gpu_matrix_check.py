"""`invoke matrix` on a real host with two GPUs: the GPU gates under a real GPU load.

Builds the tests' small checkout (tests/scale_helpers.make_revisions_checkout) whose commits set the
latency each request gets; its ``sgl-omni`` first starts a GPU load in the server's own process
group (a child that holds ``--gib`` GiB on CUDA_VISIBLE_DEVICES's GPU and runs bf16 matrix
products in a loop for the server's whole life), waits until the memory is held, then becomes the
selftest server. So every server of every run holds real GPU memory and keeps the GPU busy, and
GPU_FREE after each stop waits on the real ``nvidia-smi``.

Two modes (both by default):

* ``matrix``: 3 commits (20/20/80 ms; ``--delays-ms``) on slots 0,1 with ``--slot-per gpu`` and ``--slot-cpus rule``
  (``shared`` when the host is too small for the rule; the JSON says which); per campaign its
  slot, GPU_FREE seconds after each server stop, verdicts against the first commit, wall time,
  and the GPU compute processes left afterwards (``nvidia-smi --query-compute-apps``).
* ``noise``: the same campaign (one commit) on GPU 0 alone, then on GPU 0 while GPU 1 runs a
  matrix-product loop (a busy neighbour, as ``--slot-per gpu`` allows): ratio of the means and
  the spread of the campaign's latency, and of the load's own TFLOP/s on GPU 0.

    python benchmarks/gpu_matrix_check.py --out result.json [--mode matrix|noise|both]

Only the run's own server goes through ``sgl-omni`` (``selftest.serve_with_target=true``); the
selftest scoring server (``echo-scorer``) is the plain selftest server and holds no GPU load.
Needs PyTorch with CUDA and two GPUs; ``GPU_LOAD_DEVICE=cpu`` and ``NVIDIA_SMI=<fake>`` make a dry
run of the plumbing on a host without one, and ``--dry-run`` one without PyTorch either (a load
that only sleeps, benchmarks/dry_gpu.py's fake ``nvidia-smi``). Results of 2026-11-30 on 2 H200s:
benchmarks/results/2026-11-30-h200x2-matrix/.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

from omnibench_core.errors import OmnibenchError
from omnibench_core.jsonio import read_json
from omnibench_core.scale import front_door as commands
from omnibench_core.scale.matrix import matrix_text
from omnibench_core.settings import Settings
from omnibench_core.store import manifest as manifest_file
from omnibench_core.store import names

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from scale_helpers import SERVE_HELP, make_revisions_checkout  # noqa: E402  (the tests' checkout, shared)

sys.path.insert(0, str(Path(__file__).resolve().parent))
from dry_gpu import fake_gpu_host  # noqa: E402

# The GPU load: holds GIB GiB, writes READY once held, then bf16 matmuls until killed, writing
# its TFLOP/s per ~1 s window to LOG (one JSON line each). Dies with its parent.
GPU_LOAD = textwrap.dedent("""\
    import ctypes, json, os, signal, sys, time
    ctypes.CDLL(None).prctl(1, signal.SIGTERM, 0, 0, 0)  # PR_SET_PDEATHSIG: die with the server
    ready, log, gib, tag = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4]
    dev = os.environ.get("GPU_LOAD_DEVICE", "cuda")  # "cpu" or "none" (no torch): a dry run without a GPU
    if dev == "none":
        open(ready, "w").write(str(os.getpid()))
        while True:
            time.sleep(1)
    import torch
    sync = torch.cuda.synchronize if dev == "cuda" else (lambda: None)
    block = torch.ones(int(gib * 2**30), dtype=torch.uint8, device=dev)
    n = 8192 if dev == "cuda" else 256
    a = torch.randn(n, n, device=dev, dtype=torch.bfloat16)
    b = torch.randn(n, n, device=dev, dtype=torch.bfloat16)
    sync()
    open(ready, "w").write(str(os.getpid()))
    gpu = os.environ.get("CUDA_VISIBLE_DEVICES", "")
    with open(log, "a") as out:
        while True:
            t0, k = time.perf_counter(), 0
            while time.perf_counter() - t0 < 1.0:
                for _ in range(20):
                    c = a @ b
                sync()
                k += 20
            dt = time.perf_counter() - t0
            out.write(json.dumps({"tag": tag, "pid": os.getpid(), "gpu": gpu, "t": time.time(),
                                  "tflops": 2 * n**3 * k / dt / 1e12}) + "\\n")
            out.flush()
    """)

SGL_OMNI = textwrap.dedent("""\
    #!{python}
    import json, os, subprocess, sys, time
    from pathlib import Path
    checkout = Path(sys.argv[0]).parent.parent.parent  # <checkout>/omni/bin/sgl-omni
    args = sys.argv[1:]
    {serve_help}
    port = args[args.index("--port") + 1]
    delay = args[args.index("--delay") + 1] if "--delay" in args else "0.05"
    ms = json.loads((checkout / "standin.json").read_text()).get("delay_ms", 0)
    ready = Path({logdir!r}) / f"ready-{{os.getpid()}}"
    load = subprocess.Popen([sys.executable, str(checkout / ".github" / "scripts" / "gpu_load.py"), str(ready),
                             str(Path({logdir!r}) / "load.jsonl"), "{gib}", "server"], stdin=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while not ready.exists():
        if load.poll() is not None or time.monotonic() > deadline:
            sys.exit(f"the GPU load did not start (exit {{load.poll()}})")
        time.sleep(0.05)
    os.execv(sys.executable, [sys.executable, "-m", "omnibench_core.builtin.selftest_programs", "serve", "--port", port,
                              "--delay", delay, "--delay-ms", str(ms)])
    """)

NVIDIA_SMI = os.environ.get("NVIDIA_SMI", "nvidia-smi")  # a fake one for a dry run without a GPU


def make_checkout(root: Path, delays_ms: list[float], logdir: Path, gib: float) -> list[str]:
    """The tests' revisions checkout, its sgl-omni starting a GPU load with the server."""
    return make_revisions_checkout(root, delays_ms, sgl_omni=SGL_OMNI.format(python=sys.executable, serve_help=SERVE_HELP,
                                   logdir=str(logdir), gib=gib), scripts_extra={"gpu_load.py": GPU_LOAD})


def compute_apps() -> list[str]:
    """GPU compute processes now, as nvidia-smi lists them."""
    out = subprocess.run([NVIDIA_SMI, "--query-compute-apps=pid,gpu_uuid,used_memory", "--format=csv,noheader"],
                         capture_output=True, text=True, timeout=30)
    return [line.strip() for line in out.stdout.splitlines() if line.strip()]


def memory_used() -> list[str]:
    out = subprocess.run([NVIDIA_SMI, "--query-gpu=index,memory.used", "--format=csv,noheader"],
                         capture_output=True, text=True, timeout=30)
    return [line.strip() for line in out.stdout.splitlines() if line.strip()]


def run_matrix(root: Path, commits: list[str], slots: str, opts: tuple[str, ...], runs: int, port: int,
               log: list[str]) -> dict:
    """One matrix over ``commits`` on ``slots``; the CPU rule if it fits, else shared."""
    settings = Settings.of(target="sglang-omni", checkout=str(root / "co"), results=str(root / "results"),
                           port=port, nvidia_smi=NVIDIA_SMI)
    cpu_mode, why = "rule", ""
    try:
        engine = commands.make_engine(settings, slots=slots, slot_per="gpu", slot_cpus="rule", progress=log.append)
    except OmnibenchError as exc:  # too few cores for the rule (SettingsError), or the topology unreadable
        log.append(f"--slot-cpus rule does not fit: {exc}")
        cpu_mode, why = "shared", str(exc)
        engine = commands.make_engine(settings, slots=slots, slot_per="gpu", slot_cpus="shared", progress=log.append)
    t0 = time.monotonic()
    result = commands.matrix(settings, revisions_spec=",".join(commits), workloads=["selftest"], options=opts,
                             runs=runs, engine=engine, threshold=0.3, progress=log.append)
    wall = time.monotonic() - t0
    log.append(matrix_text(result))
    campaigns = []
    for job in result.jobs:
        o = result.outcomes[job.key]
        folder = root / "results" / job.revision[:7]
        per_run = {}
        for run_dir in sorted(manifest_file.run_dirs(folder)):
            m = manifest_file.read(run_dir)
            per_run[run_dir.name] = {
                "gpu_free_s": [g.get("seconds") for g in m.gates if g["gate"] == "GPU_FREE"],
                "gpu_free_status": [g["status"] for g in m.gates if g["gate"] == "GPU_FREE"],
                "server_telemetry": [{"label": s.label, "available": (s.telemetry or {}).get("available"),
                                      "server": (s.telemetry or {}).get("server"),
                                      "processes_at_start": (s.telemetry or {}).get("processes_at_start")}
                                     for s in m.servers],
            }
            if names.metrics_path(run_dir).exists():  # the whole file, as the runbook reads it
                per_run[run_dir.name]["metrics"] = read_json(names.metrics_path(run_dir))
        campaigns.append({"revision": job.revision[:7], "status": o.status, "slot": o.slot, "seconds": o.seconds,
                          "measured_runs": list(o.runs), "error": o.error, "runs": per_run,
                          "verdicts": [v.__dict__ for v in result.verdicts.get(job.key, ())]})
    slots_used = [dict(s.as_dict()) for s in engine.slots()] if hasattr(engine, "slots") else []
    return {"cpu_mode": cpu_mode, "why_not_rule": why, "slots": slots_used, "wall_s": round(wall, 1), "matrix_file": str(result.file), "campaigns": campaigns}


def latencies(block: dict) -> list[float]:
    """The measured runs' selftest.latency_mean_s of the (single) campaign."""
    out = []
    c = block["campaigns"][0]
    for name in c["measured_runs"]:
        m = c["runs"].get(name, {}).get("metrics", {}).get("metrics", {})
        if m.get("selftest.latency_mean_s") is not None:
            out.append(float(m["selftest.latency_mean_s"]))
    return out


def spread(xs: list[float]) -> dict:
    if not xs:
        return {"n": 0}
    mean = statistics.fmean(xs)
    sd = statistics.stdev(xs) if len(xs) > 1 else 0.0
    return {"n": len(xs), "mean": mean, "stdev": sd, "cv": sd / mean if mean else None, "min": min(xs),
            "max": max(xs)}


def load_rates(logdir: Path, tag: str, gpu: str, t0: float, t1: float) -> list[float]:
    out = []
    path = logdir / "load.jsonl"
    if path.exists():
        for line in path.read_text().splitlines():
            try:
                r = json.loads(line)
            except ValueError:
                continue
            if r["tag"] == tag and r["gpu"] == gpu and t0 <= r["t"] <= t1:
                out.append(r["tflops"])
    return out


def start_neighbour(root: Path, logdir: Path, gib: float, gpu: str) -> subprocess.Popen:
    """A matmul loop on ``gpu`` (the busy neighbour), dying with this process."""
    ready = root / "neighbour.ready"
    script = root / "co" / ".github" / "scripts" / "gpu_load.py"
    proc = subprocess.Popen([sys.executable, str(script), str(ready), str(logdir / "load.jsonl"), str(gib),
                             "neighbour"], env={**os.environ, "CUDA_VISIBLE_DEVICES": gpu},
                            stdin=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while not ready.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit("the neighbour load did not start")
        time.sleep(0.05)
    return proc


def delays_ms(text: str) -> list[float]:
    """``--delays-ms``: two or more request latencies in ms, each a finite number from 0 to 60,000."""
    try:
        values = [float(part) for part in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: comma-separated numbers of ms, e.g. 20,20,80") from None
    if len(values) < 2 or not all(0 <= v <= 60_000 for v in values):  # also refuses nan and inf
        raise argparse.ArgumentTypeError(f"{text!r}: at least two commits, each 0 to 60000 ms")
    return values


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", choices=("matrix", "noise", "both"), default="both")
    parser.add_argument("--runs", type=int, default=2, help="measured runs per matrix campaign (after run0)")
    parser.add_argument("--noise-runs", type=int, default=3, help="measured runs per noise campaign")
    parser.add_argument("--requests", type=int, default=20)
    parser.add_argument("--delays-ms", type=delays_ms, default="20,20,80",
                        help="the matrix's commits, each request's latency in ms (the third: a slot used twice)")
    parser.add_argument("--gib", type=float, default=4.0, help="GPU memory each load holds")
    parser.add_argument("--port", type=int, default=18400)
    parser.add_argument("--out", required=True)
    parser.add_argument("--log", help="progress lines here")
    parser.add_argument("--dry-run", action="store_true", help="no GPU, no PyTorch: checks the wiring")
    args = parser.parse_args()
    global NVIDIA_SMI
    dry_dir = tempfile.TemporaryDirectory(prefix="gpu-matrix-dry-")
    if args.dry_run:
        NVIDIA_SMI = str(fake_gpu_host(Path(dry_dir.name)))
        os.environ["GPU_LOAD_DEVICE"] = "none"
    ctypes.CDLL(None).prctl(1, signal.SIGTERM, 0, 0, 0)
    log: list[str] = []
    report: dict = {"host": {"nproc": os.cpu_count(), "memory_before": memory_used(), "apps_before": compute_apps()}}
    opts = ("selftest.serve_with_target=true", "selftest.delay=0.05", f"selftest.requests={args.requests}",
            "selftest.children=0")

    def save() -> None:
        Path(args.out).write_text(json.dumps(report, indent=2, default=str) + "\n")
        if args.log:
            Path(args.log).write_text("\n".join(log) + "\n")

    with tempfile.TemporaryDirectory(prefix="gpu-matrix-") as tmp:
        try:
            if args.mode in ("matrix", "both"):
                root = Path(tmp) / "matrix"
                logdir = root / "load"
                logdir.mkdir(parents=True)
                commits = make_checkout(root / "co", args.delays_ms, logdir, args.gib)
                m = run_matrix(root, commits, "0,1", opts, args.runs, args.port, log)
                m["apps_after"] = compute_apps()
                m["memory_after"] = memory_used()
                m["load_tflops_mean"] = spread(load_rates(logdir, "server", "0", 0, 1e12)).get("mean")
                report["matrix"] = m
                save()
            if args.mode in ("noise", "both"):
                root = Path(tmp) / "noise"
                logdir = root / "load"
                logdir.mkdir(parents=True)
                commits = make_checkout(root / "co", [20], logdir, args.gib)
                arms = {}
                for name in ("alone", "busy_neighbour"):
                    arm_root = root / name
                    arm_root.mkdir()
                    (arm_root / "co").symlink_to(root / "co")
                    neighbour = start_neighbour(root, logdir, args.gib, "1") if name == "busy_neighbour" else None
                    t0 = time.time()
                    try:
                        block = run_matrix(arm_root, commits, "0", opts, args.noise_runs, args.port + 10, log)
                    finally:
                        if neighbour is not None:
                            neighbour.terminate()
                            neighbour.wait(30)
                    t1 = time.time()
                    block["latency_mean_s"] = spread(latencies(block))
                    block["gpu0_load_tflops"] = spread(load_rates(logdir, "server", "0", t0, t1))
                    block["gpu1_neighbour_tflops"] = spread(load_rates(logdir, "neighbour", "1", t0, t1))
                    arms[name] = block
                    save()
                a, b = arms["alone"], arms["busy_neighbour"]
                arms["ratio_latency_busy_over_alone"] = (b["latency_mean_s"].get("mean", 0) /
                                                         a["latency_mean_s"]["mean"]) if a["latency_mean_s"].get("mean") else None
                arms["ratio_gpu0_tflops_busy_over_alone"] = (b["gpu0_load_tflops"].get("mean", 0) /
                                                             a["gpu0_load_tflops"]["mean"]) if a["gpu0_load_tflops"].get("mean") else None
                arms["apps_after"] = compute_apps()
                report["noise"] = arms
        finally:
            report["apps_at_end"] = compute_apps()
            report["memory_at_end"] = memory_used()
            save()
    print(json.dumps({k: v for k, v in report.items() if k != "matrix"}, indent=1, default=str)[:4000])
    dry_dir.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
