"""How often `invoke ab`'s verdicts are right, per design: false alarms, detections, inconclusive
verdicts and the wall time per verdict, on a quiet host and under a planted drift.

Each experiment is a real `invoke ab` on the local target with the selftest workload, whose every
request waits ``--base-delay-ms`` (the server's ``local_delay_ms``) and then does a little CPU
work, so a run's latency is mostly that planted wait plus the host's noise. A/A experiments give
both sides the base delay; A/B experiments give B ``--effect`` more (10 %: a +10 % latency
regression). "drift" starts a CPU hog on every core of this host on a schedule (``--hog-on`` s
on, ``--hog-off`` s off), so the host gets busier and quieter during an experiment, as a shared CI
runner or GPU box does.

    python benchmarks/bench_verdicts.py [--experiments 10] [--rounds 4] [--designs duet,interleaved,sequential]
                                        [--conditions quiet,drift] [--out verdicts.json]
    python benchmarks/bench_verdicts.py --smoke      # one tiny experiment of each kind: the wiring, no figures

Per design and condition it prints: the false-alarm rate (A/A experiments with any metric
`better` or `worse`), the detection rate (A/B experiments that call latency `worse`), the
inconclusive rate (of A/B latency verdicts), and the mean wall time per verdict.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
LATENCY = "selftest.latency_mean_s"


@dataclass(frozen=True)
class Outcome:
    """One experiment."""

    design: str
    condition: str
    kind: str  # aa or ab
    seconds: float
    latency: str  # the latency row's verdict
    any_change: bool  # some metric better or worse
    noisy_runs: int


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Hog:
    """A CPU hog on every core, on and off on a schedule, while the drift condition runs."""

    def __init__(self, on_s: float, off_s: float):
        self.on_s, self.off_s = on_s, off_s
        self._stop = threading.Event()
        self._procs: list[subprocess.Popen[bytes]] = []
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> Hog:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._kill()

    def _kill(self) -> None:
        for p in self._procs:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
        self._procs = []

    def _loop(self) -> None:
        while not self._stop.is_set():
            self._procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"], start_new_session=True)
                           for _ in range(os.cpu_count() or 2)]
            if self._stop.wait(self.on_s):
                return
            self._kill()
            self._stop.wait(self.off_s)


def experiment(root: Path, design: str, condition: str, kind: str, args: argparse.Namespace, n: int) -> Outcome:
    """One `invoke ab`; its verdicts from ab.json."""
    base = args.base_delay_ms
    sides = ["--aa", "--a-set", f"local_delay_ms={base}", "--b-set", f"local_delay_ms={base}"] if kind == "aa" else \
        ["--a-set", f"local_delay_ms={base}", "--b-set", f"local_delay_ms={base * (1 + args.effect):g}"]
    slots = ["--slots", "0,1", "--slot-cpus", args.slot_cpus] if design == "duet" else []
    argv = [sys.executable, "-m", "invoke", "ab", "--workload", "selftest", "--design", design, "--rounds",
            str(args.rounds), "--port", str(free_port()), "--name", f"{design}-{condition}-{kind}-{n}",
            "--opt", f"selftest.requests={args.requests}", "--opt", "selftest.delay=0.05", "--seed", str(n),
            *slots, *sides]
    env = {**os.environ, "INVOKE_OMNIBENCH_RESULTS": str(root / "results")}
    t0 = time.monotonic()
    done = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=3600)
    seconds = time.monotonic() - t0
    if done.returncode != 0:
        raise SystemExit(f"invoke ab failed ({done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    result = json.loads(next((root / "results" / "ab" / f"{design}-{condition}-{kind}-{n}").glob("ab*.json"))
                        .read_text())
    verdicts = {v["metric"]: v["verdict"] for v in result["analysis"]["verdicts"]}
    return Outcome(design, condition, kind, seconds, verdicts.get(LATENCY, "missing"),
                   any(v in ("better", "worse") for v in verdicts.values()), len(result["analysis"]["noisy"]))


def summary(outcomes: list[Outcome]) -> list[dict[str, object]]:
    """Rates per design and condition."""
    rows = []
    for design in dict.fromkeys(o.design for o in outcomes):
        for condition in dict.fromkeys(o.condition for o in outcomes):
            aa = [o for o in outcomes if (o.design, o.condition, o.kind) == (design, condition, "aa")]
            ab = [o for o in outcomes if (o.design, o.condition, o.kind) == (design, condition, "ab")]
            both = aa + ab
            rows.append({
                "design": design, "condition": condition, "A/A": len(aa), "A/B": len(ab),
                "false alarms": sum(o.any_change for o in aa) / len(aa) if aa else None,
                "detected": sum(o.latency == "worse" for o in ab) / len(ab) if ab else None,
                "inconclusive": sum(o.latency == "inconclusive" for o in ab) / len(ab) if ab else None,
                "s per verdict": sum(o.seconds for o in both) / len(both) if both else None,
                "noisy runs per experiment": sum(o.noisy_runs for o in both) / len(both) if both else None,
            })
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--experiments", type=int, default=10, help="A/A and A/B experiments each, per design and condition")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--designs", default="duet,interleaved,sequential")
    parser.add_argument("--conditions", default="quiet,drift")
    parser.add_argument("--base-delay-ms", type=float, default=40.0)
    parser.add_argument("--effect", type=float, default=0.10, help="B's planted extra latency, relative")
    parser.add_argument("--requests", type=int, default=8)
    parser.add_argument("--slot-cpus", default="rule", help="the duet's slots: rule (a CPU each) or shared")
    parser.add_argument("--hog-on", type=float, default=20.0)
    parser.add_argument("--hog-off", type=float, default=20.0)
    parser.add_argument("--out", type=Path, help="write the outcomes and the summary as JSON")
    parser.add_argument("--smoke", action="store_true", help="one tiny experiment of each kind: the wiring, no figures")
    args = parser.parse_args()
    if args.smoke:  # every code path (a duet and a one-slot design, A/A and A/B, the hog), in about a minute
        args.experiments, args.rounds, args.requests, args.base_delay_ms = 1, 2, 2, 5.0
        args.designs, args.conditions, args.hog_on, args.hog_off = "duet,sequential", "drift", 1.0, 1.0
    outcomes: list[Outcome] = []
    from contextlib import nullcontext

    from tabulate import tabulate
    with tempfile.TemporaryDirectory(prefix="omnibench-bench-verdicts-") as tmp:
        for condition in args.conditions.split(","):
            with Hog(args.hog_on, args.hog_off) if condition == "drift" else nullcontext():
                for n in range(args.experiments):
                    for design in args.designs.split(","):
                        for kind in ("aa", "ab"):
                            o = experiment(Path(tmp), design, condition, kind, args, n)
                            outcomes.append(o)
                            print(f"{condition} {design} {kind} #{n}: latency {o.latency}, any change {o.any_change}, "
                                  f"{o.seconds:.1f} s, {o.noisy_runs} noisy runs", flush=True)
    rows = summary(outcomes)
    print(tabulate([[r[k] if not isinstance(r[k], float) else f"{r[k]:.2f}" for k in r] for r in rows],
                   headers=list(rows[0])))
    if args.out:
        args.out.write_text(json.dumps({"args": vars(args) | {"out": str(args.out)},
                                        "outcomes": [asdict(o) for o in outcomes], "summary": rows}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
