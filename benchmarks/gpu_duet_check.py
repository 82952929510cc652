"""`invoke ab` on a GPU host under a real GPU load: false alarms, detections, inconclusive verdicts
and the wall time per verdict of each design, with what the noise guard and the GPU telemetry
recorded in every timed window.

Builds benchmarks/gpu_matrix_check.py's checkout (tests/scale_helpers.make_revisions_checkout,
whose ``sgl-omni`` starts a GPU load in the server's own process group: ``--gib`` GiB held and
bf16 matrix products in a loop for the server's whole life) with three commits whose per-request
latency is ``--base-delay-ms``, +5 % and +10 %. Each experiment is a real `invoke ab` on the
``sglang-omni`` target against that checkout, as docs/ab.md shows it:

* ``aa``: both sides the first commit (``--aa``): any ``better`` or ``worse`` is a false alarm;
* ``ab5`` / ``ab10``: B the +5 % / +10 % commit: latency ``worse`` is a detection.

Designs: ``interleaved`` and ``sequential`` on GPU 0; ``duet`` (``--slots 0,1 --slot-per gpu``,
the slots swapped every round) only where nvidia-smi lists two GPUs or more. Experiments go round
robin over design and kind, so ``--budget-s`` (no new experiment once too little time is left for
one more) leaves the counts even. Per experiment: every metric's verdict, change and interval;
each side's latency mean and coefficient of variation over the compared rounds (the single-GPU
noise: the same side's spread alone); and per timed window the noise guard's record (foreign CPU
share, load average) and the telemetry's (GPU utilisation, power, seconds throttled and why, the
processes that held memory at the server's start, telemetry.json's warnings).

    python benchmarks/gpu_duet_check.py --out DIR [--experiments 3] [--rounds 4] [--budget-s 540]
    python benchmarks/gpu_duet_check.py --out DIR --dry-run [--dry-gpus 2]   # no GPU, no PyTorch
    python benchmarks/gpu_duet_check.py --out DIR --merge A.json B.json ...  # one summary of several calls

``DIR/duet_check.json`` (the host's GPUs and driver, the command, every outcome, the summary) and
``DIR/duet_check.md`` (the summary table) are rewritten after every experiment. ``--dry-run``
checks the wiring anywhere: benchmarks/dry_gpu.py's fake nvidia-smi (``--dry-gpus`` GPUs, 2 for
the duet's path), a GPU load that only sleeps, the tests' scripted NVML (tests/fake_nvml.py);
its figures mean nothing. Results of 2026-12-01 on one H200: benchmarks/results/2026-12-01-h200-duet/.
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
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from omnibench_core.errors import OmnibenchError
from omnibench_core.jsonio import read_json
from omnibench_core.scale.slots import host_slots
from omnibench_core.settings import Settings
from omnibench_core.stats import verdict
from omnibench_core.store import manifest as manifest_file
from omnibench_core.telemetry.run_summary import run_warnings

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
import gpu_matrix_check as gm  # noqa: E402  (the GPU load and its checkout, shared)
from bench_ports import free_port  # noqa: E402  (ports below the ephemeral range)
from dry_gpu import fake_gpu_host, scripted_nvml  # noqa: E402

LATENCY = "selftest.latency_mean_s"
KINDS = {"aa": 0.0, "ab5": 0.05, "ab10": 0.10}  # B's planted extra latency per kind
ONE_GPU_DESIGNS = ("interleaved", "sequential")
OPTIONS = ("selftest.serve_with_target=true", "selftest.delay=0.05", "selftest.children=0")
# The dry run's scripted NVML: busy, with a power-cap throttle (reason bit 0x4) now and then, so
# the per-window throttle records have something to carry.
DRY_PHASES = [{"until_s": 1.0, "util": 95, "power_w": 600, "reasons": 4}, {"until_s": 1e9, "util": 90, "power_w": 500}]


@dataclass
class Outcome:
    """One `invoke ab` experiment, read back from its ab.json and its runs' manifests."""

    design: str
    kind: str  # aa, ab5, ab10
    n: int
    planted: float
    seconds: float
    verdicts: dict[str, dict[str, Any]]  # metric -> verdict, change, low, high
    latency: str  # the latency row's verdict
    any_change: bool  # some metric better or worse
    side_latency: dict[str, dict[str, Any]]  # A/B -> mean, stdev, cv over the compared rounds
    noisy: list[str]
    alone: list[str]
    windows: list[dict[str, Any]] = field(default_factory=list)  # one per timed window of a compared run


def gpus_of_host() -> list[dict[str, str]]:
    """Each GPU nvidia-smi lists: index, name, driver, memory."""
    fields = ("index", "name", "driver_version", "memory.total")
    out = subprocess.run([gm.NVIDIA_SMI, f"--query-gpu={','.join(fields)}", "--format=csv,noheader"],
                         capture_output=True, text=True, timeout=30)
    return [dict(zip(fields, (c.strip() for c in line.split(",")), strict=False))
            for line in out.stdout.splitlines() if line.strip()]


def slot_cpus_for(slots: str, wanted: str) -> tuple[str, str]:
    """The slots' ``--slot-cpus``: ``wanted`` (the runbook's CPU groups by default) if this host's
    topology allows it, else ``shared`` (a fake GPU has no NUMA node to read), with the reason."""
    try:
        host_slots(Settings.of(target="sglang-omni"), slots, "gpu", wanted, progress=lambda _line: None)
    except OmnibenchError as exc:
        return "shared", str(exc)
    return wanted, ""


def ab_argv(design: str, kind: str, n: int, checkout: Path, commits: dict[str, str], args: argparse.Namespace,
            port: int) -> list[str]:
    """The `invoke ab` command of one experiment, as a user types it (docs/ab.md)."""
    sides = ["--aa"] if kind == "aa" else []  # commits["aa"] is the base commit itself
    sides += ["--a-rev", commits["aa"], "--b-rev", commits[kind]]
    # One GPU: slot 0 all the same, so the runs are pinned to its CPU group as the duet's are.
    slots = ["--slots", "0,1" if design == "duet" else "0", "--slot-per", "gpu", "--slot-cpus", args.slot_cpus]
    opts = [x for o in (*OPTIONS, f"selftest.requests={args.requests}") for x in ("--opt", o)]
    return [sys.executable, "-m", "invoke", "ab", "--workload", "selftest", "--target", "sglang-omni",
            "--checkout", str(checkout), *sides, "--design", design, "--rounds", str(args.rounds),
            "--seed", str(n), "--min-effect", f"{args.min_effect:g}", "--port", str(port),
            "--name", f"{design}-{kind}-{n}", *opts, *slots, *(["--score", args.score] if args.score else [])]


def run_windows(run_dir: Path) -> list[dict[str, Any]]:
    """Each timed window of one run: the noise guard's record and the telemetry's of its GPUs."""
    manifest = manifest_file.read(run_dir)
    warnings = run_warnings(run_dir)
    out = []
    for step in manifest.steps:
        load = step.host_load
        if load is None:
            continue  # not a timed window
        name = load.get("window", "")
        gpu = []
        for server in manifest.servers:
            tele = server.telemetry or {}
            for window_name, per_gpu in (tele.get("steps") or {}).items():
                if window_name == name and window_name in (tele.get("timed_steps") or []):
                    gpu += [{k: g.get(k) for k in ("gpu", "gpu_util_mean", "power_mean_w", "mem_used_max_mib",
                                                   "throttled_s", "power_or_heat_throttled_s")} for g in per_gpu]
        out.append({"window": name, "seconds": load.get("seconds"),
                    "foreign_fraction": load.get("foreign_fraction"), "noisy": load.get("noisy"),
                    "load": [load.get("load_start"), load.get("load_end")], "available": load.get("available", True),
                    "slot_gpus": manifest.slot.get("gpus"), "gpu": gpu,
                    "processes_at_start": [(s.telemetry or {}).get("processes_at_start") for s in manifest.servers
                                           if s.label != "echo-scorer"],
                    "telemetry_warnings": warnings})
    return out


def spread(xs: list[float]) -> dict[str, Any]:
    """Mean, stdev and coefficient of variation (stdev over mean) of a side's values."""
    out = gm.spread(xs)
    return {k: out[k] for k in ("n", "mean", "stdev", "cv") if k in out}


def read_outcome(results: Path, design: str, kind: str, n: int, seconds: float) -> Outcome:
    """The experiment's verdicts (ab.json) and its compared runs' windows (their manifests)."""
    name = f"{design}-{kind}-{n}"
    doc = read_json(next((results / "ab" / name).glob("ab*.json")))
    analysis = doc["analysis"]
    verdicts = {v["metric"]: {k: v[k] for k in ("verdict", "change", "low", "high", "relative")}
                for v in analysis["verdicts"]}
    values = {v["metric"]: v for v in analysis["values"]}
    side_latency = {s: spread([float(x) for x in values.get(LATENCY, {}).get(s.lower(), [])]) for s in ("A", "B")}
    windows = []
    for side, refs in analysis["runs"].items():
        for round_, ref in zip(analysis["rounds"], refs, strict=True):
            windows += [{"side": side, "round": round_, "run": ref, **w} for w in run_windows(results / ref)]
    return Outcome(design, kind, n, KINDS[kind], round(seconds, 1), verdicts,
                   verdicts.get(LATENCY, {}).get("verdict", "missing"),
                   any(v["verdict"] in ("better", "worse") for v in verdicts.values()), side_latency,
                   list(analysis["noisy"]), list(analysis["alone"]), windows)


def experiment(root: Path, design: str, kind: str, n: int, commits: dict[str, str], args: argparse.Namespace,
               env: dict[str, str], log: list[str]) -> Outcome:
    """One `invoke ab` (the checkout in ``root/co``), run from the repository root as docs/ab.md shows it."""
    argv = ab_argv(design, kind, n, root / "co", commits, args, free_port(span=2))
    t0 = time.monotonic()
    done = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=3600)
    seconds = time.monotonic() - t0
    log.append(f"$ {' '.join(argv[1:])}\n{done.stdout[-4000:]}{done.stderr[-2000:]}")
    if done.returncode != 0:
        raise SystemExit(f"invoke ab failed ({done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return read_outcome(root / "results", design, kind, n, seconds)


def _rate(hits: int, total: int) -> str:
    return f"{hits} / {total}" if total else "-"


def summary(outcomes: list[Outcome]) -> list[dict[str, Any]]:
    """Per design and kind: how many experiments gave each latency verdict, false alarms, the wall
    time per verdict, each side's latency CV, the noisy and throttled windows."""
    rows = []
    for design in dict.fromkeys(o.design for o in outcomes):
        for kind in KINDS:
            group = [o for o in outcomes if (o.design, o.kind) == (design, kind)]
            if not group:
                continue
            windows = [w for o in group for w in o.windows]
            cvs = [s["cv"] for o in group for s in o.side_latency.values() if s.get("cv") is not None]
            rows.append({
                "design": design, "kind": kind, "planted": KINDS[kind], "experiments": len(group),
                "false alarms": sum(o.any_change for o in group) if kind == "aa" else None,
                "detected": sum(o.latency == "worse" for o in group) if kind != "aa" else None,
                "inconclusive": sum(o.latency == "inconclusive" for o in group),
                "equivalent": sum(o.latency == "equivalent" for o in group),
                "s per verdict": statistics.fmean(o.seconds for o in group),
                "side latency cv mean": statistics.fmean(cvs) if cvs else None,
                "windows": len(windows), "noisy windows": sum(bool(w["noisy"]) for w in windows),
                "throttled windows": sum(any((g.get("power_or_heat_throttled_s") or 0) > 0 for g in w["gpu"])
                                         for w in windows),
                "windows with foreign GPU processes": sum(any(any(v for v in (p or {}).values())
                                                              for p in w["processes_at_start"]) for w in windows),
            })
    return rows


def side_noise(outcomes: list[Outcome]) -> dict[str, Any]:
    """The same side's spread alone (A/A experiments' A side) per design, and where a duet ran,
    what the busy neighbour GPU costs it: the A side's mean latency in duet over interleaved,
    with its unpaired interval (omnibench's verdict code), beside each design's CV."""
    per: dict[str, list[float]] = {}
    cvs: dict[str, list[float]] = {}
    for o in outcomes:
        if o.kind == "aa" and o.side_latency["A"].get("n"):
            per.setdefault(o.design, []).append(o.side_latency["A"]["mean"])
            if o.side_latency["A"].get("cv") is not None:
                cvs.setdefault(o.design, []).append(o.side_latency["A"]["cv"])
    out: dict[str, Any] = {d: {"experiments": len(xs), "cv_within_experiment_mean": statistics.fmean(cvs[d])
                               if cvs.get(d) else None, "between_experiments": spread(xs)} for d, xs in per.items()}
    if len(per.get("duet", [])) >= 2 and len(per.get("interleaved", [])) >= 2:
        (row,) = verdict.judge([verdict.Samples(LATENCY, "lower", tuple(per["interleaved"]), tuple(per["duet"]))],
                               verdict.Design.UNPAIRED)
        out["duet_over_alone"] = {"change": row.change, "low": row.low, "high": row.high, "verdict": row.verdict.value}
    return out


def markdown(report: dict[str, Any]) -> str:
    """The short table: one row per design and kind."""
    head = ["design", "kind", "experiments", "false alarms (A/A)", "detected", "inconclusive", "s per verdict",
            "side CV", "noisy / throttled windows"]
    lines = [f"# gpu_duet_check: {report['host'].get('gpus')}", "", f"command: `{report['command']}`", "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in report["summary"]:
        n = r["experiments"]
        cv = f"{r['side latency cv mean']:.2%}" if r["side latency cv mean"] is not None else "-"
        lines.append(f"| {r['design']} | {r['kind']} | {n} | {_rate(r['false alarms'], n) if r['kind'] == 'aa' else '-'} | "
                     f"{_rate(r['detected'], n) if r['kind'] != 'aa' else '-'} | {_rate(r['inconclusive'], n)} | "
                     f"{r['s per verdict']:.1f} | {cv} | {r['noisy windows']} / {r['throttled windows']} of "
                     f"{r['windows']} |")
    return "\n".join(lines) + "\n"


def merge(files: list[Path], out: Path) -> dict[str, Any]:
    """One summary (``out/summary.json``, ``out/summary.md``) of several calls' duet_check.json: a
    device lends a machine for minutes at a time, so the experiments come in several calls."""
    docs = [read_json(f) for f in files]
    outcomes = [Outcome(**o) for d in docs for o in d["outcomes"]]
    report = {"command": " ; ".join(d["command"] for d in docs), "host": docs[0]["host"], "calls": [str(f) for f in files],
              "outcomes_from": [len(d["outcomes"]) for d in docs], "summary": summary(outcomes),
              "side_noise": side_noise(outcomes), "load_tflops": [d.get("load_tflops") for d in docs]}
    out.mkdir(parents=True, exist_ok=True)
    (out / "summary.json").write_text(json.dumps(report, indent=1, default=str) + "\n")
    (out / "summary.md").write_text(markdown(report))
    return report


def plan(designs: list[str], kinds: list[str], experiments: int, first: int) -> list[tuple[str, str, int]]:
    """Round robin over experiment number, design and kind, so a budget cut leaves even counts."""
    return [(d, k, n) for n in range(first, first + experiments) for d in designs for k in kinds]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="folder for duet_check.json and duet_check.md")
    parser.add_argument("--experiments", type=int, default=3, help="experiments per design and kind")
    parser.add_argument("--first", type=int, default=0, help="number (and seed) of the first experiment")
    parser.add_argument("--designs", default="auto", help="auto: interleaved,sequential, plus duet on 2+ GPUs")
    parser.add_argument("--kinds", default="aa,ab5,ab10")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--requests", type=int, default=20)
    parser.add_argument("--base-delay-ms", type=float, default=20.0)
    parser.add_argument("--min-effect", type=float, default=2.0,
                        help="invoke ab's --min-effect in percent: below the planted +5 %% so it can be called")
    parser.add_argument("--gib", type=float, default=4.0, help="GPU memory each server's load holds")
    parser.add_argument("--slot-cpus", default="rule", help="the slots' CPUs: rule (the runbook's groups) or shared")
    parser.add_argument("--budget-s", type=float, default=0, help="start no experiment past this (0: no limit)")
    parser.add_argument("--score", default="", help="invoke ab --score (default: ab's own); none: no scoring server")
    parser.add_argument("--dry-run", action="store_true", help="no GPU, no PyTorch: checks the wiring")
    parser.add_argument("--dry-gpus", type=int, default=1, help="the dry run's fake GPUs (2: the duet's path)")
    parser.add_argument("--merge", type=Path, nargs="+", help="summarise these duet_check.json files into --out")
    args = parser.parse_args()
    if args.merge:
        print(markdown(merge(args.merge, args.out)))
        return 0
    started = time.monotonic()
    dry_dir = tempfile.TemporaryDirectory(prefix="gpu-duet-dry-")
    env = dict(os.environ)
    if args.dry_run:
        gm.NVIDIA_SMI = str(fake_gpu_host(Path(dry_dir.name), gpus=args.dry_gpus))
        os.environ["GPU_LOAD_DEVICE"] = "none"
        nvml = scripted_nvml(Path(dry_dir.name), DRY_PHASES)  # sets FAKE_NVML_SCRIPT: before the copy below
        env = {**os.environ, "INVOKE_OMNIBENCH_NVML_MODULE": nvml,
               "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO / "tests"), os.environ.get("PYTHONPATH")]))}
    ctypes.CDLL(None).prctl(1, signal.SIGTERM, 0, 0, 0)  # PR_SET_PDEATHSIG: never outlive the caller
    gpus = gpus_of_host()
    designs = [*ONE_GPU_DESIGNS, *(["duet"] if len(gpus) >= 2 else [])] if args.designs == "auto" \
        else args.designs.split(",")
    kinds = args.kinds.split(",")
    args.slot_cpus, why = slot_cpus_for("0,1" if "duet" in designs else "0", args.slot_cpus)
    args.out.mkdir(parents=True, exist_ok=True)
    report: dict[str, Any] = {
        "command": " ".join(["python", "benchmarks/gpu_duet_check.py", *sys.argv[1:]]),
        "host": {"gpus": gpus, "nproc": os.cpu_count(), "dry_run": args.dry_run,
                 "apps_before": gm.compute_apps()},
        "settings": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "designs": designs, "slot_cpus": args.slot_cpus, "why_not_slot_cpus": why, "outcomes": [], "summary": [], "not_run": []}
    log: list[str] = []
    outcomes: list[Outcome] = []

    def save() -> None:
        report["outcomes"] = [asdict(o) for o in outcomes]
        report["summary"] = summary(outcomes)
        report["side_noise"] = side_noise(outcomes)
        report["wall_s"] = round(time.monotonic() - started, 1)
        (args.out / "duet_check.json").write_text(json.dumps(report, indent=1, default=str) + "\n")
        (args.out / "duet_check.md").write_text(markdown(report))
        (args.out / "duet_check.log").write_text("\n".join(log) + "\n")

    with tempfile.TemporaryDirectory(prefix="gpu-duet-") as tmp:
        root = Path(tmp)
        logdir = root / "load"
        logdir.mkdir()
        base = args.base_delay_ms
        made = gm.make_checkout(root / "co", [base, base * (1 + KINDS["ab5"]), base * (1 + KINDS["ab10"])],
                                logdir, args.gib)
        commits = dict(zip(("aa", "ab5", "ab10"), made, strict=True))
        env["INVOKE_OMNIBENCH_RESULTS"] = str(root / "results")
        longest = 0.0
        try:
            for design, kind, n in plan(designs, kinds, args.experiments, args.first):
                left = args.budget_s - (time.monotonic() - started)
                if args.budget_s and left < longest * 1.2:
                    report["not_run"].append(f"{design}-{kind}-{n}")
                    continue
                o = experiment(root, design, kind, n, commits, args, env, log)
                longest = max(longest, o.seconds)
                outcomes.append(o)
                print(f"{design} {kind} #{n}: latency {o.latency}, any change {o.any_change}, {o.seconds:.1f} s, "
                      f"A cv {o.side_latency['A'].get('cv')}, {len(o.noisy)} noisy", flush=True)
                save()
        finally:
            report["load_tflops"] = gm.spread(gm.load_rates(logdir, "server", "0", 0, 1e12))
            report["apps_at_end"] = gm.compute_apps()
            save()
    print(markdown(report))
    dry_dir.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
