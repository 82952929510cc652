"""How often `invoke ab`'s verdicts are right, and how many rounds they cost: false alarms,
detections, inconclusive verdicts and rounds to a verdict, for fixed rounds (``--rounds R``) and
rounds until decided (``--max-rounds N``), on a quiet host and under two kinds of drift (#30).

Each experiment is a real `invoke ab` on the local target. Workloads:

- ``selftest``: every request waits ``--base-delay-ms`` (the server's ``local_delay_ms``) and does
  a little CPU work, so a run's latency is mostly a planted wait (a side's spread under 1 %);
- ``seedtts``: the local synthesizer (CPU-bound, a run-to-run spread of about 10 %) on
  ``--seedtts-samples`` samples; B's planted delay is the effect times the latency a pilot run
  measured first, on the lane's CPUs.

A/A experiments give both sides the same server (``--aa``); A/B experiments give B ``--effects``
more latency (0.05,0.10: +5 % and +10 %). Conditions: ``quiet``; ``drift`` (a CPU hog on every
core, about ``--hog-on`` s on and ``--hog-off`` s off, each period drawn); ``slot-drift`` (the same schedule, a hog on each
CPU of slot 0 of every lane's duet: one side's slot gets busy, then quiet, and the slots swap every
round). Experiments run in ``--lanes`` parallel lanes of ``--lane-cpus`` CPUs each (every process
of an experiment pinned to its lane; each lane its own results and ports), cells taken
round-robin so a ``--budget-s`` cut leaves every cell about equally filled; each outcome is
appended to ``--out`` (JSON lines) as it ends, so calls add up.

    python benchmarks/bench_verdicts.py [--workloads selftest] [--modes fixed,sequential] [--designs duet]
        [--conditions quiet,slot-drift] [--aa 30] [--ab 10] [--effects 0.05,0.10] [--rounds 4] [--max-rounds 12]
        [--lanes 4] [--lane-cpus 4] [--opt seedtts.max_concurrency=1] [--decide seedtts.latency_mean_s]
        [--noisy-retries 2] [--budget-s 540] [--out verdicts.jsonl]
    python benchmarks/bench_verdicts.py --summary verdicts.jsonl [more.jsonl ...]   # the tables of earlier calls
    python benchmarks/bench_verdicts.py --smoke --out smoke.jsonl   # two tiny experiments, A/A and A/B: the wiring

Per workload, design, mode and condition it prints: A/A experiments and false alarms (any metric
`better` or `worse`) with a one-sided 95 % upper bound on the rate (Clopper-Pearson), detection
(latency `worse`) and inconclusive rates per effect, mean rounds to a verdict, seconds per
verdict, the A/A estimates' spread (their standard deviation: the noise a verdict fights) and the
host's CPU steal share over the experiments (a VM's host busy elsewhere); then the issue's goals,
met or not: false alarms at most 5 %, +10 % detected at least 90 % of the time (where not, about
how many fixed rounds would be, at the A/A spread), and the sequential mode reaching its verdict in
at most half the rounds of the fixed mode that detects as often. It warns when two lanes' CPUs are
threads of one core: such lanes slow each other, and their spread is partly each other's.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import queue
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
LATENCY = {"selftest": "selftest.latency_mean_s", "seedtts": "seedtts.latency_mean_s"}
# Runs an argv with this process's CPU set replaced (the bench is threaded: no preexec_fn)
PIN = "import os, sys; os.sched_setaffinity(0, {int(c) for c in sys.argv[1].split(',')}); os.execv(sys.argv[2], sys.argv[2:])"
# A hog dies with the thread that started it (PR_SET_PDEATHSIG, Linux): a bench killed by SIGTERM or
# SIGKILL runs no __exit__, and its hogs once kept burning a CPU (2026-12-07: the next call's pilot
# read 143 ms where 69 was the quiet figure). argv: its CPU, its parent's pid (gone already: exit).
HOG = ("import ctypes, os, signal, sys\nctypes.CDLL(None).prctl(1, signal.SIGKILL)\n"
       "if os.getppid() != int(sys.argv[2]): sys.exit()\n"
       "os.sched_setaffinity(0, {int(sys.argv[1])})\nwhile True: pass")
GOAL_FALSE_ALARMS, GOAL_DETECTION, GOAL_ROUNDS = 0.05, 0.90, 0.5
Z_975, Z_90 = 1.959964, 1.281552  # the normal quantiles of a two-sided 5 % test and of 90 % power


@dataclass(frozen=True)
class Cell:
    """What one experiment measures."""

    workload: str
    design: str  # invoke ab --design
    mode: str  # fixed-R (--rounds R) or sequential-N (--max-rounds N)
    condition: str  # quiet, drift, slot-drift
    effect: float  # B's planted extra latency, relative; 0 for an A/A experiment
    min_effect: float  # invoke ab --min-effect, percent
    noisy_retries: int = 0  # invoke ab --noisy-retries

    @property
    def kind(self) -> str:
        """aa, or ab+5% and the like."""
        return "aa" if not self.effect else f"ab+{self.effect * 100:g}%"


@dataclass(frozen=True)
class Outcome:
    """One experiment: one verdict."""

    workload: str
    design: str
    mode: str
    condition: str
    effect: float
    n: int
    lane: int
    seconds: float
    rounds: int  # the rounds the verdicts rest on
    stop: str  # fixed, decided or max-rounds
    latency: str  # the latency row's verdict
    change: float | None  # its change, relative
    any_change: bool  # some metric better or worse
    noisy_runs: int
    load_1min: float
    error: str = ""  # the experiment failed: its output's tail
    min_effect: float = 5.0  # invoke ab --min-effect, percent (ab's default, as outcome files before it say)
    changed: tuple[str, ...] = ()  # "metric verdict change" of each metric called better or worse
    steal: float | None = None  # the host's CPU steal share while it ran (a VM's host busy elsewhere); None: unread
    noisy_retries: int = 0  # invoke ab --noisy-retries (outcome files before it: 0)
    redone_runs: int = 0  # runs set aside as noisy and measured again

    @property
    def key(self) -> tuple[str, str, str, str, float, int]:
        """The summary's row: everything of the cell but the effect."""
        return self.workload, self.design, self.mode, self.condition, self.min_effect, self.noisy_retries


class Hog:
    """One CPU hog per given CPU, each pinned there, on about ``on_s`` and off about ``off_s`` in turn.

    Each period is drawn from half to one and a half times its mean (``seed``: the same draws
    again). A fixed cycle fell into step with the cells' round-robin: on one lane a fixed A/A and a
    sequential one took 40 s together, the hog's 20 s on and 20 s off, and every sequential A/A of a
    call ran in the off-windows (2026-12-07, benchmarks/results/2026-12-07-verdicts-seedtts-one-lane)."""

    JITTER = 0.5  # each period uniform in mean * (1 - JITTER, 1 + JITTER)

    def __init__(self, cpus: Sequence[int], on_s: float, off_s: float, seed: int = 0):
        self.cpus, self.on_s, self.off_s = list(cpus), on_s, off_s
        self._draw = random.Random(seed)
        self._stop = threading.Event()
        self._procs: list[subprocess.Popen[bytes]] = []
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> Hog:
        if self.cpus:
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        self._kill()

    def _kill(self) -> None:
        for p in self._procs:
            p.kill()
            p.wait()
        self._procs = []

    def _loop(self) -> None:
        while not self._stop.is_set():
            self._procs = [subprocess.Popen([sys.executable, "-c", HOG, str(c), str(os.getpid())]) for c in self.cpus]
            if self._stop.wait(self.period(self.on_s)):
                return
            self._kill()
            self._stop.wait(self.period(self.off_s))

    def period(self, mean: float) -> float:
        """One on or off period of about ``mean`` seconds."""
        return mean * self._draw.uniform(1 - self.JITTER, 1 + self.JITTER)


def free_pairs(count: int, port_range: Path = Path("/proc/sys/net/ipv4/ip_local_port_range")) -> list[int]:
    """``count`` ports p, each with p + 1 free too (a duet's second slot), none shared: two
    benchmarks (or a test beside one) on one host do not meet on a fixed port. Below the kernel's
    ephemeral range: a port it picks is one any client's connection may take as its own before the
    server binds it (a duet's side B once failed so on the device, 2026-12-07)."""
    import random
    import socket

    try:
        low = int(port_range.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768
    found: list[int] = []
    # from 20000 (clear of the well-known services), or from 1024 where the range starts lower: never in it
    candidates = list(range(20000 if low > 20000 + 2 * count else 1024, low - 1, 2))
    random.shuffle(candidates)  # two benchmarks started at once start from different ports
    for p in candidates:
        if len(found) == count:
            break
        with socket.socket() as a, socket.socket() as b:
            try:
                a.bind(("127.0.0.1", p))
                b.bind(("127.0.0.1", p + 1))
            except OSError:
                continue
        found.append(p)
    if len(found) < count:
        raise SystemExit(f"found {len(found)} free port pairs under {low}, the ephemeral range's start; "
                         f"{count} are needed: pass --base-port")
    return found


def lanes_of(count: int, size: int) -> list[list[int]]:
    """``count`` disjoint CPU sets of ``size`` from this process's own, by number. Not by core: a
    duet's slots are its lane's halves by number (`--slot-cpus rule`), so a lane of one core's two
    threads would put A and B on one core and a slot-drift hog on both; shared_cores warns instead."""
    mine = sorted(os.sched_getaffinity(0))
    if count * size > len(mine):
        raise SystemExit(f"--lanes {count} x --lane-cpus {size} needs {count * size} CPUs; this process may use {len(mine)}")
    return [mine[k * size:(k + 1) * size] for k in range(count)]


def _siblings(cpu: int, cpu_dir: Path) -> set[int]:
    """``cpu``'s core's hardware threads, itself included (the kernel's thread_siblings_list); only
    itself where that is not readable."""
    try:
        return _cpu_list((cpu_dir / f"cpu{cpu}" / "topology" / "thread_siblings_list").read_text().strip()) | {cpu}
    except (OSError, ValueError):
        return {cpu}


def cpu_times(stat: Path = Path("/proc/stat")) -> tuple[int, int] | None:
    """The host's (steal, total) CPU ticks so far from /proc/stat's first line; None where it is not Linux's."""
    try:
        words = stat.read_text().split("\n", 1)[0].split()
        ticks = [int(w) for w in words[1:9]]  # user nice system idle iowait irq softirq steal (guest is in user)
    except (OSError, ValueError):
        return None
    return (ticks[7], sum(ticks)) if words[:1] == ["cpu"] and len(ticks) == 8 else None


def steal_share(before: tuple[int, int] | None, after: tuple[int, int] | None) -> float | None:
    """The share of CPU time the hypervisor gave elsewhere between two ``cpu_times()`` reads."""
    if before is None or after is None or after[1] <= before[1]:
        return None
    return round((after[0] - before[0]) / (after[1] - before[1]), 4)


def shared_cores(lanes: Sequence[Sequence[int]], cpu_dir: Path = Path("/sys/devices/system/cpu")) -> list[str]:
    """Pairs of lanes whose CPUs are hardware threads of one core: such lanes slow each other down, so
    their A/As measure each other, not the verdict rule. Empty where the topology is not readable."""
    lane_of = {c: k for k, cpus in enumerate(lanes) for c in cpus}
    found = []
    for cpu, k in sorted(lane_of.items()):
        for sibling in sorted(_siblings(cpu, cpu_dir)):
            other = lane_of.get(sibling)
            if other is not None and other > k:
                found.append(f"lane {k} (CPU {cpu}) and lane {other} (CPU {sibling})")
    return found


def _cpu_list(text: str) -> set[int]:
    """A kernel CPU list ("0,8" or "0-1") as a set."""
    out: set[int] = set()
    for part in filter(None, text.split(",")):
        low, _, high = part.partition("-")
        out |= set(range(int(low), int(high or low) + 1))
    return out


def slot0(cpus: Sequence[int]) -> list[int]:
    """A duet's slot 0 on these CPUs (`--slot-cpus rule` on the local target: the larger half first)."""
    return list(cpus[:(len(cpus) + 1) // 2])


def pinned(cpus: Sequence[int], argv: Sequence[str]) -> list[str]:
    return [sys.executable, "-c", PIN, ",".join(map(str, cpus)), *argv]


def opt_flags(args: argparse.Namespace) -> list[str]:
    """``--opt`` as the runs get it: each of the bench's ``--opt`` values, in order."""
    return [word for value in args.opt for word in ("--opt", value)]


def pilot_latency_ms(lane: Path, cpus: Sequence[int], args: argparse.Namespace) -> float:
    """The seed-tts latency one plain run measures on ``cpus``: B's planted delay is a fraction of it."""
    root = lane / "pilot"
    done = subprocess.run(pinned(cpus, [sys.executable, "-m", "invoke", "run", "--workload", "seedtts",
                                        "--opt", f"seedtts.max_samples={args.seedtts_samples}",
                                        *opt_flags(args), "--port", str(args.ports[0])]),
                          cwd=REPO, env={**os.environ, "INVOKE_OMNIBENCH_RESULTS": str(root)}, capture_output=True,
                          text=True, timeout=3600)
    if done.returncode != 0:
        raise SystemExit(f"the seed-tts pilot run failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    (metrics,) = root.glob("local-*/run*/metrics.json")
    return float(json.loads(metrics.read_text())["metrics"][LATENCY["seedtts"]]) * 1000


def argv_of(cell: Cell, n: int, port: int, args: argparse.Namespace, seedtts_ms: float) -> list[str]:
    """The experiment's `invoke ab` command."""
    if cell.workload == "selftest":
        base = args.base_delay_ms
        opts = ["--opt", f"selftest.requests={args.requests}", "--opt", "selftest.delay=0.05"]
        sides = ["--a-set", f"local_delay_ms={base:g}", "--b-set", f"local_delay_ms={base * (1 + cell.effect):g}"]
    else:
        opts = ["--opt", f"seedtts.max_samples={args.seedtts_samples}"]
        sides = ["--b-set", f"local_delay_ms={seedtts_ms * cell.effect:.3f}"] if cell.effect else []
    kind, _, count = cell.mode.partition("-")
    # --decide: every cell's decisive metrics, judged first (and what the sequential cells' looks wait for)
    rounds = ["--rounds" if kind == "fixed" else "--max-rounds", count, *(["--decide", args.decide] if args.decide else [])]
    slots = ["--slots", "0,1", "--slot-cpus", "rule"] if cell.design == "duet" else []
    return [sys.executable, "-m", "invoke", "ab", "--workload", cell.workload, "--design", cell.design, *rounds,
            "--min-effect", f"{cell.min_effect:g}", "--port", str(port), "--name", f"{cell.workload}-{cell.design}-{cell.mode}-{cell.condition}-{cell.kind.replace('%', 'pct')}-{n}"
            + (f"-redo{cell.noisy_retries}" if cell.noisy_retries else ""),
            "--seed", str(n), *slots, *opts, *(["--aa"] if not cell.effect else []), *sides,
            *opt_flags(args), *(["--score", args.score] if args.score else []),
            *(["--noisy-retries", str(cell.noisy_retries)] if cell.noisy_retries else [])]


def experiment(cell: Cell, n: int, lane: int, cpus: Sequence[int], root: Path, args: argparse.Namespace,
               seedtts_ms: float) -> Outcome:
    """One `invoke ab` on the lane's CPUs; its verdicts from ab.json."""
    port = args.ports[lane]
    argv = argv_of(cell, n, port, args, seedtts_ms)
    t0, ticks = time.monotonic(), cpu_times()
    done = subprocess.run(pinned(cpus, argv), cwd=REPO, env={**os.environ, "INVOKE_OMNIBENCH_RESULTS": str(root)},
                          capture_output=True, text=True, timeout=3600)
    seconds = time.monotonic() - t0
    base: dict[str, Any] = dict(
        workload=cell.workload, design=cell.design, mode=cell.mode, condition=cell.condition, effect=cell.effect,
        min_effect=cell.min_effect, noisy_retries=cell.noisy_retries, n=n, lane=lane, seconds=round(seconds, 2),
        load_1min=os.getloadavg()[0],
        steal=steal_share(ticks, cpu_times()))
    if done.returncode not in (0, 1):  # 1: a verdict that --fail-on would fail (none is asked) or a refusal
        return Outcome(**base, rounds=0, stop="", latency="error", change=None, any_change=False, noisy_runs=0,
                       error=(done.stdout[-1500:] + done.stderr[-1500:]))
    name = argv[argv.index("--name") + 1]
    found = sorted((root / "ab" / name).glob("ab*.json"))
    if not found:
        return Outcome(**base, rounds=0, stop="", latency="error", change=None, any_change=False, noisy_runs=0,
                       error=f"exit {done.returncode}, no ab.json: " + (done.stdout[-1500:] + done.stderr[-1500:]))
    result = json.loads(found[-1].read_text())
    rows = {v["metric"]: v for v in result["analysis"]["verdicts"]}
    latency = rows.get(LATENCY[cell.workload], {})
    state = result["experiment"].get("sequential") or {}
    return Outcome(**base, rounds=len(result["analysis"]["rounds"]), stop=str(state.get("stop") or "fixed"),
                   latency=str(latency.get("verdict", "missing")), change=latency.get("change"),
                   any_change=any(v["verdict"] in ("better", "worse") for v in rows.values()),
                   changed=tuple(f"{m} {v['verdict']} " + ("" if v["change"] is None else f"{v['change'] * 100:+.1f}%")
                                 for m, v in rows.items()
                                 if v["verdict"] in ("better", "worse")),
                   noisy_runs=len(result["analysis"]["noisy"]),
                   redone_runs=len(result["analysis"].get("redone", ())))


def schedule(args: argparse.Namespace, condition: str) -> list[tuple[Cell, int]]:
    """The condition's experiments, cells round-robin: every cell's n-th before any cell's (n+1)-th."""
    out = []
    for i in range(max(args.aa, args.ab)):
        n = args.first + i  # the experiment's number, its --seed: distinct across calls with --first
        kinds = ([0.0] if i < args.aa else []) + (list(args.effects) if i < args.ab else [])
        for workload in args.workloads:
            for design in args.designs:
                for mode in [f"fixed-{r}" for r in args.rounds] * ("fixed" in args.modes) + \
                        [f"sequential-{args.max_rounds}"] * ("sequential" in args.modes):
                    out += [(Cell(workload, design, mode, condition, e, args.min_effect, args.noisy_retries), n)
                            for e in kinds
                            if not args.smoke or (e == 0.0) == mode.startswith("fixed")]
    return out


def run_condition(condition: str, lanes: list[list[int]], tmp: Path, args: argparse.Namespace,
                  seedtts_ms: dict[int, float], budget_s: float, sink: Path | None) -> list[Outcome]:
    """The condition's schedule over the lanes, its hog running, until done or ``budget_s`` is spent."""
    todo: queue.Queue[tuple[Cell, int]] = queue.Queue()
    for item in schedule(args, condition):
        todo.put(item)
    hog_cpus = {"quiet": [], "drift": sorted(os.sched_getaffinity(0)),
                "slot-drift": [c for cpus in lanes for c in slot0(cpus)]}[condition]
    outcomes: list[Outcome] = []
    lock = threading.Lock()
    deadline = time.monotonic() + budget_s

    def lane_loop(k: int) -> None:
        while time.monotonic() < deadline:
            try:
                cell, n = todo.get_nowait()
            except queue.Empty:
                return
            o = experiment(cell, n, k, lanes[k], tmp / f"lane{k}", args, seedtts_ms.get(k, 0.0))
            with lock:
                outcomes.append(o)
                if sink is not None:
                    with sink.open("a") as handle:
                        handle.write(json.dumps(asdict(o)) + "\n")
                print(f"{o.condition} {o.workload} {o.design} {o.mode} {cell.kind} #{n} (lane {k}): latency "
                      f"{o.latency}{'' if o.change is None else f' {o.change * 100:+.1f}%'}, {o.rounds} rounds "
                      f"({o.stop}), changed: {', '.join(o.changed) or 'none'}, {o.seconds:.1f} s, {o.noisy_runs} noisy runs"
                      + (f"\n  ERROR: {o.error[-600:]}" if o.error else ""), flush=True)

    with Hog(hog_cpus, args.hog_on, args.hog_off, seed=args.first):
        threads = [threading.Thread(target=lane_loop, args=(k,)) for k in range(len(lanes))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    left = todo.qsize()
    if left:
        print(f"{condition}: --budget-s spent, {left} experiments not started", flush=True)
    return outcomes


def upper_95(k: int, n: int) -> float:
    """One-sided 95 % Clopper-Pearson upper bound of a rate seen k times in n."""
    from scipy.special import betaincinv

    return 1.0 if k >= n else float(betaincinv(k + 1, n - k, 0.95))


@dataclass(frozen=True)
class EffectRates:
    """One planted effect of a summary row: how often it was called worse or left inconclusive."""

    n: int
    detected: float
    inconclusive: float
    rounds: float | None


@dataclass(frozen=True)
class Row:
    """A summary row: per workload, design, mode and condition, the rates, the rounds, the seconds."""

    workload: str
    design: str
    mode: str
    condition: str
    min_effect: float
    noisy_retries: int
    aa: int
    false_alarms: int
    alarm_bound: float | None  # one-sided 95 % upper bound of the false-alarm rate
    aa_rounds: float | None
    effects: dict[float, EffectRates]
    seconds: float | None
    errors: int
    aa_spread: float | None = None  # the A/A latency changes' standard deviation, percent: the noise an estimate carries
    steal: float | None = None  # the mean CPU steal share over the row's experiments, percent; None: unread
    redone: float | None = None  # runs set aside as noisy and measured again, per experiment

    def rounds_for(self, effect: float) -> int | None:
        """About the fixed rounds that find ``effect`` 90 % of the time at two-sided 5 %, at this row's A/A
        spread (normal approximation: a round's spread is the R-round estimate's times sqrt(R)); None
        without a spread or for a sequential row."""
        kind, _, count = self.mode.partition("-")
        if kind != "fixed" or not self.aa_spread or not count.isdigit():
            return None
        per_round = self.aa_spread / 100 * math.sqrt(int(count))
        return math.ceil(((Z_975 + Z_90) * per_round / effect) ** 2)

    def same_cell_as(self, other: Row) -> bool:
        """Same everything but the mode: the rows goals() sets side by side."""
        return (self.workload, self.design, self.condition, self.min_effect, self.noisy_retries) == \
            (other.workload, other.design, other.condition, other.min_effect, other.noisy_retries)

    def table(self) -> dict[str, object]:
        """The row as the printed table's columns."""
        out: dict[str, object] = {"workload": self.workload, "design": self.design, "mode": self.mode,
                                  "condition": self.condition, "min effect %": self.min_effect,
                                  "noisy retries": self.noisy_retries, "A/A": self.aa,
                                  "false alarms": self.false_alarms, "rate ≤ (95 %)": self.alarm_bound,
                                  "A/A rounds": self.aa_rounds, "A/A spread %": self.aa_spread}
        for effect, rates in sorted(self.effects.items()):
            tag = f"+{effect * 100:g}%"
            out |= {f"{tag} n": rates.n, f"{tag} detected": rates.detected,
                    f"{tag} inconclusive": rates.inconclusive, f"{tag} rounds": rates.rounds}
        return out | {"redone runs": self.redone, "s per verdict": self.seconds, "steal %": self.steal,
                      "errors": self.errors}


def summary(outcomes: Sequence[Outcome]) -> list[Row]:
    """Per workload, design, mode and condition: the rates, the rounds, the seconds."""
    rows = []
    ok = [o for o in outcomes if not o.error]
    for key in dict.fromkeys(o.key for o in ok):
        mine = [o for o in ok if o.key == key]
        aa = [o for o in mine if not o.effect]
        alarms = sum(o.any_change for o in aa)
        effects = {}
        for effect in sorted({o.effect for o in mine if o.effect}):
            ab = [o for o in mine if o.effect == effect]
            effects[effect] = EffectRates(len(ab), round(sum(o.latency == "worse" for o in ab) / len(ab), 3),
                                          round(sum(o.latency == "inconclusive" for o in ab) / len(ab), 3),
                                          _mean(o.rounds for o in ab))
        changes = [o.change for o in aa if o.change is not None]
        steals = [o.steal for o in mine if o.steal is not None]
        rows.append(Row(*key, aa=len(aa), false_alarms=alarms,
                        alarm_bound=round(upper_95(alarms, len(aa)), 3) if aa else None,
                        aa_rounds=_mean(o.rounds for o in aa), effects=effects,
                        seconds=_mean(o.seconds for o in mine),
                        errors=sum(1 for o in outcomes if o.error and o.key == key),
                        aa_spread=round(statistics.stdev(changes) * 100, 2) if len(changes) > 1 else None,
                        steal=round(statistics.fmean(steals) * 100, 2) if steals else None,
                        redone=_mean(o.redone_runs for o in mine)))
    return rows


def _mean(values: Iterable[float]) -> float | None:
    got = list(values)
    return round(sum(got) / len(got), 2) if got else None


GOAL_EFFECT = 0.10  # the effect the detection and rounds goals are about


def goals(rows: Sequence[Row]) -> list[str]:
    """The issue's goals per workload, design and condition, met or not, with the figures."""
    lines = []
    for row in rows:
        where = f"{row.workload} {row.design} {row.mode} {row.condition} (min effect {row.min_effect:g} %" + \
            (f", --noisy-retries {row.noisy_retries})" if row.noisy_retries else ")")
        if row.aa:
            met = row.false_alarms / row.aa <= GOAL_FALSE_ALARMS and row.aa >= 30
            lines.append(f"{where}: false alarms {row.false_alarms} of {row.aa} "
                         f"({'met' if met else 'NOT met'}: at most 5 % of at least 30)")
        if (ten := row.effects.get(GOAL_EFFECT)) is not None:
            lines.append(f"{where}: +10 % detected {ten.detected:.0%} of {ten.n} "
                         f"({'met' if ten.detected >= GOAL_DETECTION else 'NOT met'}: at least 90 %)")
            if ten.detected < GOAL_DETECTION and (need := row.rounds_for(GOAL_EFFECT)) is not None:
                lines.append(f"{where}: at its A/A spread of {row.aa_spread:g} %, at least about {need} fixed rounds "
                             "would find +10 % 90 % of the time (normal approximation: the t interval's few degrees "
                             "of freedom and --min-effect ask more); less spread a round is the cheaper cure")
    for row in rows:  # sequential against the fewest fixed rounds that detect as often, same everything else
        seq = row.effects.get(GOAL_EFFECT)
        if not row.mode.startswith("sequential") or seq is None or seq.rounds is None:
            continue
        same = [(r, r.effects[GOAL_EFFECT]) for r in rows if r.mode.startswith("fixed") and r.same_cell_as(row)
                and GOAL_EFFECT in r.effects and r.effects[GOAL_EFFECT].rounds is not None]
        if not same:
            continue
        as_good = [pair for pair in same if pair[1].detected >= seq.detected]
        fixed_row, fixed = min(as_good or same, key=lambda pair: pair[1].rounds or 0.0)
        ratio = seq.rounds / (fixed.rounds or 1.0)
        lines.append(f"{row.workload} {row.design} {row.condition} (min effect {row.min_effect:g} %): at +10 % sequential ran "
                     f"{seq.rounds} rounds on average (to its verdict, or to --max-rounds), fixed {fixed.rounds}: {ratio:.2f} "
                     f"({'met' if ratio <= GOAL_ROUNDS and as_good else 'NOT met'}: at most half, against the fewest "
                     f"fixed rounds that detect as often{'' if as_good else ' (none measured did)'}; {fixed_row.mode} "
                     f"detected {fixed.detected:.0%}, sequential {seq.detected:.0%})")
    return lines


def report(outcomes: Sequence[Outcome]) -> list[Row]:
    """Print the summary table and the goals' lines; return the rows."""
    from tabulate import tabulate

    rows = summary(outcomes)
    if rows:
        tables = [r.table() for r in rows]
        heads = list(dict.fromkeys(k for t in tables for k in t))
        print(tabulate([[t.get(k, "") for k in heads] for t in tables], headers=heads))
        print("\n".join(goals(rows)))
    return rows


def read_outcomes(paths: Sequence[Path]) -> list[Outcome]:
    names = {f.name for f in fields(Outcome)}
    out = []
    for path in paths:
        for line in path.read_text().splitlines():
            if line.strip():
                data = json.loads(line)
                if "host" not in data:
                    data["changed"] = tuple(data.get("changed", ()))
                    # files before fixed-R/sequential-N: the defaults they all ran with
                    data["mode"] = {"fixed": "fixed-4", "sequential": "sequential-12"}.get(data["mode"], data["mode"])
                    out.append(Outcome(**{k: v for k, v in data.items() if k in names}))
    return out


def listed(kind: type, low: float, *, choices: Sequence[str] = ()) -> Callable[[str], list]:
    """An argparse type: a comma-separated list of ``kind`` values, each at least ``low`` (or one of
    ``choices``), so a typo is a usage error before any experiment starts, not a traceback an hour in."""
    def parse(text: str) -> list:
        items = [t.strip() for t in text.split(",") if t.strip()]
        if not items:
            raise argparse.ArgumentTypeError("give at least one value")
        if choices:
            wrong = [t for t in items if t not in choices]
            if wrong:
                raise argparse.ArgumentTypeError(f"{', '.join(wrong)}: not one of {', '.join(choices)}")
            return items
        try:
            values = [kind(t) for t in items]
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r}: not a list of {kind.__name__} values") from None
        if any(v < low for v in values):
            raise argparse.ArgumentTypeError(f"{text!r}: every value must be at least {low:g}")
        return values
    return parse


def at_least(low: int) -> Callable[[str], int]:
    """An argparse type: one whole number, at least ``low``."""
    def parse(text: str) -> int:
        values = listed(int, low)(text)
        if len(values) != 1:
            raise argparse.ArgumentTypeError(f"{text!r}: one number, not a list")
        return int(values[0])
    return parse


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workloads", default="selftest", type=listed(str, 0, choices=tuple(LATENCY)), help="selftest, seedtts or both")
    parser.add_argument("--modes", default="fixed,sequential", type=listed(str, 0, choices=("fixed", "sequential")), help="fixed (--rounds) and sequential (--max-rounds)")
    parser.add_argument("--designs", default="duet", type=listed(str, 0, choices=("duet", "interleaved", "sequential")), help="invoke ab --design: duet, interleaved, sequential")
    parser.add_argument("--conditions", default="quiet,slot-drift", type=listed(str, 0, choices=("quiet", "drift", "slot-drift")), help="quiet, drift (all cores), slot-drift (slot 0's CPUs)")
    parser.add_argument("--aa", type=at_least(0), default=30, help="A/A experiments per cell")
    parser.add_argument("--ab", type=at_least(0), default=10, help="A/B experiments per cell and effect")
    parser.add_argument("--first", type=at_least(0), default=0, help="number the experiments (and seed them) from this, so calls differ")
    parser.add_argument("--effects", default="0.05,0.10", type=listed(float, 0.001), help="B's planted extra latency, relative")
    parser.add_argument("--min-effect", type=float, default=5.0, help="invoke ab --min-effect, percent (a +5 %% effect "
                        "needs less than 5 to be called worse)")
    parser.add_argument("--rounds", default="4", type=listed(int, 2), help="the fixed mode's rounds; several (4,8) are several fixed modes")
    parser.add_argument("--max-rounds", type=at_least(3), default=12, help="the sequential mode's --max-rounds")
    parser.add_argument("--base-delay-ms", type=float, default=40.0, help="selftest's planted wait per request")
    parser.add_argument("--requests", type=at_least(1), default=8, help="selftest's requests a run")
    parser.add_argument("--seedtts-samples", type=at_least(1), default=6, help="seed-tts samples a run")
    parser.add_argument("--opt", action="append", default=[], metavar="WORKLOAD.KEY=VALUE",
                        help="more workload options for every run, the pilot's too (repeatable), e.g. "
                             "seedtts.max_concurrency=1: one request in flight, as docs/ab.md's seed-tts A/B")
    cpus = len(os.sched_getaffinity(0))
    parser.add_argument("--lane-cpus", type=at_least(2), default=min(4, cpus), help="CPUs per lane (a duet's two slots split them)")
    parser.add_argument("--lanes", type=at_least(1), help="parallel lanes (default: as many as the CPUs hold)")
    parser.add_argument("--base-port", type=int, help="lane k serves on this + 10k (and + 1 for a duet); default: "
                        "free ports found at the start")
    parser.add_argument("--hog-on", type=float, default=20.0, help="seconds a drift hog runs before it pauses, on average "
                        "(each period half to one and a half times it, drawn from --first)")
    parser.add_argument("--hog-off", type=float, default=20.0, help="seconds a drift hog pauses before it runs again, on average")
    parser.add_argument("--budget-s", type=float, default=float("inf"), help="start no experiment after this many seconds (shared by the conditions)")
    parser.add_argument("--noisy-retries", type=at_least(0), default=0, help="invoke ab --noisy-retries: a round the "
                        "noise guard marked measured again at most this often (default 0: judged as measured)")
    parser.add_argument("--score", default="", help="invoke ab --score (default: ab's own); none: no scoring server")
    parser.add_argument("--decide", default="", metavar="METRIC,...",
                        help="invoke ab --decide for every cell (default: ab's own, every latency and throughput "
                             "metric); its metrics are judged first, the other rows once they are called, and the "
                             "sequential cells' looks wait for them")
    parser.add_argument("--out", type=Path, help="append each outcome as a JSON line (and the host first)")
    parser.add_argument("--summary", type=Path, nargs="+", help="print the tables of these outcome files and stop")
    parser.add_argument("--smoke", action="store_true", help="two tiny experiments (A/A fixed, A/B sequential), --score none: the wiring, no figures")
    args = parser.parse_args()
    if args.summary:
        report(read_outcomes(args.summary))
        return 0
    if args.smoke:  # every code path (both modes, A/A and A/B, a pinned hog, lanes) in two experiments: A/A in the
        # fixed mode, A/B in the sequential one (schedule()); the hog runs 0.2 s in 2.2, its wiring, not a load
        args.aa, args.ab, args.effects, args.rounds, args.max_rounds = 1, 1, [0.5], [2], 3
        args.requests, args.base_delay_ms, args.conditions, args.hog_on, args.hog_off = 2, 5.0, ["slot-drift"], 0.2, 2.0
        args.score = "none"  # the verdicts are on latency: no scoring server
    lanes = lanes_of(args.lanes or max(1, cpus // args.lane_cpus), args.lane_cpus)
    args.ports = [args.base_port + 10 * k for k in range(len(lanes))] if args.base_port else free_pairs(len(lanes))
    shared = shared_cores(lanes)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        host = {"host": platform.node(), "cpus": cpus, "python": platform.python_version(), "lanes": lanes,
                "shared_cores": shared,
                "started": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                "commit": subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True,
                                         text=True).stdout.strip(), "args": {k: str(v) for k, v in vars(args).items()}}
        with args.out.open("a") as handle:
            handle.write(json.dumps(host) + "\n")
    for pair in shared:
        print(f"warning: {pair} are threads of one core: they slow each other, so their spread is partly the "
              "other lane's; fewer --lanes leave each core's other thread idle", flush=True)
    outcomes: list[Outcome] = []
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="omnibench-bench-verdicts-") as tmp:
        seedtts_ms: dict[int, float] = {}
        if "seedtts" in args.workloads:
            for k, cpus_k in enumerate(lanes):
                # a duet's side has one slot's half of the lane: the pilot measures the latency it will have
                seedtts_ms[k] = pilot_latency_ms(Path(tmp) / f"lane{k}", slot0(cpus_k) if "duet" in args.designs
                                                 else cpus_k, args)
                print(f"lane {k}: seed-tts pilot latency {seedtts_ms[k]:.1f} ms", flush=True)
        for i, condition in enumerate(args.conditions):
            left = args.budget_s - (time.monotonic() - t0)
            share = left / (len(args.conditions) - i)  # each condition its share of what is left
            outcomes += run_condition(condition, lanes, Path(tmp), args, seedtts_ms, share, args.out)
    report(outcomes)
    return 0


if __name__ == "__main__":
    sys.exit(main())
