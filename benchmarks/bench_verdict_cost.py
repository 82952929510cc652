"""The cost of one `invoke ab` verdict on a GPU host, simulated: wall seconds and server starts per
design, when every server start loads for minutes (issue #30, item 3).

On a GPU host a warm `sgl-omni serve` loads weights for minutes, so an A/B experiment's time is
mostly its server starts; on the local target a server starts in well under a second and the
designs barely differ (benchmarks/bench_verdicts.py). This makes one stand-in sglang-omni checkout
(`invoke standin`) whose every server loads ``--startup-s`` seconds with its fake GPU held and its
port closed, with two commits, the second ``--delay-ms`` slower per request (a regression large
enough that every design decides), then runs one real `invoke ab` between the two commits per
design (duet on two fake GPUs, interleaved, sequential), one after another in this run, and
reports per design: wall seconds per verdict, server starts (from the experiment's record, as the
run manifests count them), the latency verdict, and the ratio to sequential. The issue's goal: a
duet in at most 0.55 of sequential's time. With ``--max-rounds M`` it also runs one experiment per
design with ``--max-rounds M`` instead of ``--rounds`` (rounds until decided) and reports the
rounds used; sequential is not run that way, since `invoke ab` refuses it (no pairs until the end).

    python benchmarks/bench_verdict_cost.py [--startup-s 20] [--rounds 3] [--max-rounds 6]
                                            [--designs duet,interleaved,sequential] [--out verdict_cost.json]
    python benchmarks/bench_verdict_cost.py --smoke   # 0.3 s starts, 2 rounds, 1 request, --score none,
                                                      # the duet alone: the wiring

The revisions' worktrees and venvs are prepared before the clock starts, so no design pays for
them (the first would otherwise pay for all).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))  # its helpers, however it is loaded
from bench_ports import free_port  # noqa: E402  (ports below the ephemeral range)

from omnibench_core.scale import revisions  # noqa: E402  (the repo root must be importable first)
from omnibench_core.store import manifest as manifest_file  # noqa: E402

LATENCY = "selftest.latency_mean_s"
GOAL = 0.55  # the aim: a duet in at most this fraction of sequential's time


@dataclass(frozen=True)
class Outcome:
    """One `invoke ab` experiment: one verdict."""

    design: str
    mode: str  # "rounds" (fixed --rounds) or "max-rounds" (until decided)
    seconds: float  # wall time of the whole `invoke ab`, as its user waits for it
    server_starts: int  # summed over the record's attempts (each run's manifest count): scoring's too
    model_starts: int  # the target's `sgl-omni serve` starts (phase generate): each loads --startup-s
    load_s: float  # their mean seconds from start to READY
    waited_s: float  # seconds the experiment waited for loading: a duet's round waits for its slower side only
    runs: int  # complete runs, warm-ups included
    rounds_run: int  # rounds a side the verdict rests on
    latency: str  # the latency row's verdict
    change: float | None  # the latency's measured relative change
    load_1min: float  # the host's load average when it ended: this host is shared


def invoke(*args: str, env: dict[str, str], timeout: float) -> subprocess.CompletedProcess[str]:
    """`python -m invoke ARGS` from the repository root, as a user runs it."""
    return subprocess.run([sys.executable, "-m", "invoke", *args], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=timeout)


def make_standin(root: Path, args: argparse.Namespace, env: dict[str, str]) -> tuple[Path, list[str]]:
    """The stand-in checkout (commit 2 the planted regression) and its commits, oldest first."""
    checkout = root / "standin"
    done = invoke("standin", "--out", str(checkout), "--commits", "2", "--regress-at", "2",
                  "--base-delay-ms", f"{args.base_delay_ms:g}", "--delay-ms", f"{args.delay_ms:g}",
                  "--startup-s", f"{args.startup_s:g}", "--fake-gpus", str(root / "fakegpu"), "--fake-gpu-count", "2",
                  env=env, timeout=600)
    if done.returncode != 0:
        raise SystemExit(f"invoke standin failed ({done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    commits = subprocess.run(["git", "-C", str(checkout), "rev-list", "--reverse", "HEAD"], capture_output=True,
                             text=True, check=True).stdout.split()
    return checkout, commits


def experiment(root: Path, checkout: Path, commits: list[str], design: str, mode: str, args: argparse.Namespace,
               env: dict[str, str]) -> Outcome:
    """One `invoke ab` between the two commits; its verdict from ab.json, its starts from the record."""
    name = f"{design}-{mode}"
    # a duet needs two slots: one fake GPU each, the CPUs shared (this host is too small for the rule)
    slots = ["--slots", "0,1", "--slot-per", "gpu", "--slot-cpus", "shared"] if design == "duet" else []
    length = ["--rounds", str(args.rounds)] if mode == "rounds" else ["--max-rounds", str(args.max_rounds)]
    argv = ["ab", "--target", "sglang-omni", "--checkout", str(checkout), "--a-rev", commits[0], "--b-rev", commits[1],
            "--workload", "selftest", "--opt", "selftest.serve_with_target=true",
            # the selftest server's own loading time comes on top of startup_s: kept small so startup_s dominates
            "--opt", "selftest.delay=0.05", "--opt", f"selftest.requests={args.requests}",
            "--design", design, *length, *slots, "--port", str(free_port(span=2)), "--name", name,
            *(["--score", args.score] if args.score else [])]
    t0 = time.monotonic()
    done = invoke(*argv, env=env, timeout=7200)
    seconds = time.monotonic() - t0
    if done.returncode != 0:
        raise SystemExit(f"invoke ab ({name}) failed ({done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    results = Path(env["INVOKE_OMNIBENCH_RESULTS"]) / "ab"
    record = json.loads((results / f"{name}.json").read_text())
    result = json.loads(next((results / name).glob("ab*.json")).read_text())
    row = next((v for v in result["analysis"]["verdicts"] if v["metric"] == LATENCY), {})
    attempts = record["attempts"]
    loads = model_loads(results.parent, attempts)
    flat = [s for per_round in loads.values() for s in per_round]
    # a duet loads both sides of a round at once; the one-slot designs load one after another
    waited = sum(max(v) for v in loads.values()) if design == "duet" else sum(flat)
    looks = record.get("sequential") or {}
    return Outcome(design, mode, seconds, sum(a.get("server_starts", 0) for a in attempts), len(flat),
                   sum(flat) / len(flat) if flat else 0.0, waited, sum(a["status"] == "complete" for a in attempts),
                   looks.get("rounds_run") or args.rounds, row.get("verdict", "missing"), row.get("change"),
                   os.getloadavg()[0])


def model_loads(results: Path, attempts: list[dict[str, object]]) -> dict[int, list[float]]:
    """Seconds from start to READY of every model server (phase generate) the attempts' runs
    started, by round.

    Read from each attempt's own run manifest, not from every run under the results root: the
    designs share that root (and its prepared worktrees), so their runs sit side by side there."""
    loads: dict[int, list[float]] = {}
    for a in attempts:
        moved = str(a.get("moved_to") or "")
        run_dir = results / str(a["revision"]) / (moved or str(a["run"]))  # a missed run was moved aside
        if not (run_dir / "manifest.json").is_file():
            continue  # an attempt stopped before its run was made
        for server in manifest_file.read(run_dir).servers:
            if server.phase == "generate" and server.started_here and server.ready:
                seconds = (_when(server.ready) - _when(server.started)).total_seconds()
                loads.setdefault(int(str(a["round"])), []).append(seconds)
    return loads


def _when(stamp: str) -> datetime.datetime:
    return datetime.datetime.fromisoformat(stamp)


def prepare_worktrees(checkout: Path, commits: list[str], results: Path) -> None:
    """Both revisions' worktrees and venvs, as `invoke ab` prepares them, so no design's clock pays for them."""
    for commit in commits:
        revisions.prepare(checkout, commit, results / revisions.WORKTREES, progress=lambda line: None)


def ratios(outcomes: list[Outcome], mode: str) -> dict[str, float]:
    """Each design's wall time over sequential's for one mode. With --max-rounds there is no
    sequential (`invoke ab` refuses it): over interleaved's when that ran, else over the fixed
    sequential experiment's (``/sequential (fixed)``: the same work when it stopped at its first
    look, but another moment of the host)."""
    by = {o.design: o.seconds for o in outcomes if o.mode == mode}
    fixed = {o.design: o.seconds for o in outcomes if o.mode == "rounds"}
    if "sequential" not in by and "interleaved" not in by and "sequential" in fixed:
        return {f"{d}/sequential (fixed)": s / fixed["sequential"] for d, s in by.items()}
    base = "sequential" if "sequential" in by else "interleaved"
    return {f"{d}/{base}": s / by[base] for d, s in by.items() if base in by and d != base}


def save(path: Path, about: dict[str, object], args: argparse.Namespace, outcomes: list[Outcome]) -> None:
    """The JSON results, rewritten after every experiment so a later failure loses none of them."""
    modes = dict.fromkeys(o.mode for o in outcomes)
    found = {mode: ratios(outcomes, mode) for mode in modes}
    given = {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"host": about, "command": sys.argv, "args": given,
                                "outcomes": [asdict(o) for o in outcomes], "ratios": found,
                                "goal": {"duet/sequential at most": GOAL,
                                         "measured": found.get("rounds", {}).get("duet/sequential")}},
                               indent=2) + "\n")


def host() -> dict[str, object]:
    """Where it ran: the figures depend on the cores and on what else the host did."""
    commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    return {"commit": commit, "cores": os.cpu_count(), "python": platform.python_version(),
            "load_average_at_start": os.getloadavg(), "date": datetime.date.today().isoformat()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--startup-s", type=float, default=20.0, help="seconds every server start loads")
    parser.add_argument("--rounds", type=int, default=3, help="fixed rounds a side (after the warm-ups)")
    parser.add_argument("--max-rounds", type=int, help="also one run per design with --max-rounds M (rounds until decided)")
    parser.add_argument("--designs", default="duet,interleaved,sequential")
    parser.add_argument("--base-delay-ms", type=float, default=100.0, help="every commit's latency per request")
    parser.add_argument("--delay-ms", type=float, default=40.0, help="commit 2's planted extra latency (+40 %% of 100)")
    parser.add_argument("--requests", type=int, default=4, help="requests a run")
    parser.add_argument("--score", default="", help="invoke ab --score (default: ab's own); none: no scoring server starts")
    parser.add_argument("--out", type=Path, help="write the host, the arguments, the outcomes and the ratios as JSON")
    parser.add_argument("--smoke", action="store_true", help="0.3 s starts, 2 rounds, 1 request, --score none, the duet alone: the wiring, no figures")
    parser.add_argument("--keep", type=Path, help="work in this new folder and keep it (the stand-in, every run)")
    args = parser.parse_args()
    if args.smoke:  # the wiring: the two-slot design, fixed rounds (add --max-rounds 3 for that mode); a one-slot
        # design is the same experiment without --slots (issue 40: one design's run shows the wiring, a second
        # nothing more; --designs duet,sequential gives the ratio). One request, no scoring (quality is not the
        # point; its server starts are counted all the same)
        args.startup_s, args.rounds, args.requests, args.score = 0.3, 2, 1, "none"
        args.designs = "duet"
    from tabulate import tabulate

    about = host()
    outcomes: list[Outcome] = []
    modes = ["rounds"] + (["max-rounds"] if args.max_rounds else [])
    with tempfile.TemporaryDirectory(prefix="omnibench-bench-verdict-cost-") as tmp:
        root = args.keep.resolve() if args.keep else Path(tmp)
        fake = root / "fakegpu"
        # the fake nvidia-smi first on PATH: the duet's two slots are its two GPUs, GPU_FREE reads it
        env = {**os.environ, "PATH": f"{fake}{os.pathsep}{os.environ.get('PATH', '')}",
               "INVOKE_OMNIBENCH_RESULTS": str(root / "results")}
        checkout, commits = make_standin(root, args, env)
        prepare_worktrees(checkout, commits, root / "results")
        for mode in modes:
            for design in args.designs.split(","):
                if mode == "max-rounds" and design == "sequential":
                    continue  # refused by `invoke ab`: A's rounds before B's leave nothing to look at until the end
                o = experiment(root, checkout, commits, design, mode, args, env)
                outcomes.append(o)
                print(f"{design} ({mode}): {o.seconds:.1f} s, {o.server_starts} server starts "
                      f"({o.model_starts} model servers, {o.load_s:.1f} s to READY each, {o.waited_s:.1f} s "
                      f"waited for them), {o.runs} runs, "
                      f"{o.rounds_run} rounds, latency {o.latency}", flush=True)
                if args.out:
                    save(args.out, about, args, outcomes)
    rows = [[o.design, o.mode, f"{o.seconds:.1f}", o.server_starts, o.model_starts, f"{o.load_s:.1f}",
             f"{o.waited_s:.1f}", f"{o.seconds - o.waited_s:.1f}", o.runs, o.rounds_run, o.latency,
             "" if o.change is None else f"{o.change:+.1%}"] for o in outcomes]
    print(tabulate(rows, headers=["design", "mode", "s per verdict", "server starts", "model servers",
                                  "s to READY", "s loading", "s other", "runs", "rounds", "latency", "change"]))
    found = {mode: ratios(outcomes, mode) for mode in modes}
    for mode, r in found.items():
        print(f"{mode}: " + ", ".join(f"{k} {v:.2f}" for k, v in r.items()))
    duet = found["rounds"].get("duet/sequential")
    if duet is not None:
        print(f"goal (duet at most {GOAL} of sequential): {'met' if duet <= GOAL else 'NOT met'} ({duet:.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
