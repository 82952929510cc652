"""Which change-point library `invoke history` uses, by measuring: precision and recall of each
candidate on series with planted steps and realistic noise.

Each series is one metric over ``n`` commits (8 to 60), 1 to 3 runs a commit, run-to-run noise of
a coefficient of variation of 1, 3 or 5 % (docs/history.md says where from), and either no
step or one step of 3 to 20 % at a random commit in its middle half. Each candidate sees what
`invoke history` has: the per-commit means (and the runs, for the one that uses them).

Candidates (each is skipped, and said so, where its package is not installed in this interpreter;
they do not install side by side, so run the script once in each one's venv):

- ``asv``: asv's step detection (``asv.step_detect.detect_steps``, the Potts fit asv's regressions feed uses);
- ``otava``: Apache Otava's E-Divisive with its t-test significance (``otava.analysis.compute_change_points``);
- ``spa``: MongoDB's E-Divisive, ``signal_processing_algorithms`` (permutation test, p 0.05);
- ``ruptures``: PELT (l2 cost), penalty 2 sigma^2 log n with sigma from the first differences;
- ``omnibench``: what `invoke history` does (omnibench_core.history.changepoints: the chosen
  library's steps, each kept only when its Welch interval excludes no change and it is at least 5 %),
  where omnibench is installed; ``omnibench-no-min``: the same without the 5 % minimum.

A detection is right when it names the planted first-after commit or its neighbour (a step between
two commits may be found one commit off when noise blurs it); every other detection is a false one.

    python benchmarks/bench_changepoints.py [--series 6] [--seed 1] [--out DIR]
    python benchmarks/bench_changepoints.py --smoke     # a few series: the wiring, no figures
"""

from __future__ import annotations

import argparse
import json
import math
import random
import time
from collections.abc import Callable, Sequence
from pathlib import Path

Detector = Callable[[Sequence[Sequence[float]]], list[int]]  # runs per commit -> first-after indices
SIZES = (8, 15, 30, 60)
RUNS = (1, 2, 3)
CVS = (0.01, 0.03, 0.05)
STEPS = (0.0, 0.03, 0.05, 0.10, 0.20)


def _means(runs: Sequence[Sequence[float]]) -> list[float]:
    return [sum(r) / len(r) for r in runs]


def _asv(runs: Sequence[Sequence[float]]) -> list[int]:
    from asv.step_detect import detect_steps

    steps = detect_steps(_means(runs), [float(len(r)) for r in runs])
    return [s[0] for s in steps[1:]]


def _otava(runs: Sequence[Sequence[float]]) -> list[int]:
    from otava.analysis import compute_change_points

    found, _ = compute_change_points(_means(runs), window_len=30, max_pvalue=0.001)
    return [c.index for c in found]


def _spa(runs: Sequence[Sequence[float]]) -> list[int]:
    import numpy as np
    from signal_processing_algorithms.energy_statistics.energy_statistics import e_divisive

    return sorted(int(i) for i in e_divisive(np.array(_means(runs), dtype=float), pvalue=0.05, permutations=100))


def _ruptures(runs: Sequence[Sequence[float]]) -> list[int]:
    import numpy as np
    import ruptures

    y = np.array(_means(runs), dtype=float)
    diffs = np.diff(y)
    sigma = float(np.median(np.abs(diffs - np.median(diffs)))) * 1.4826 / math.sqrt(2) or 1e-12
    bkps = ruptures.Pelt(model="l2", min_size=1, jump=1).fit(y.reshape(-1, 1)).predict(pen=2 * sigma ** 2 * math.log(len(y)))
    return [int(b) for b in bkps[:-1]]


def _omnibench(runs: Sequence[Sequence[float]]) -> list[int]:
    from omnibench_core.history.changepoints import find_steps

    return [s.index for s in find_steps(runs)]


def _omnibench_no_min(runs: Sequence[Sequence[float]]) -> list[int]:
    from omnibench_core.history.changepoints import find_steps

    return [s.index for s in find_steps(runs, min_effect=0.0)]


CANDIDATES: dict[str, tuple[str, Detector]] = {
    "asv": ("asv", _asv), "otava": ("otava", _otava), "spa": ("signal_processing_algorithms", _spa),
    "ruptures": ("ruptures", _ruptures), "omnibench": ("omnibench_core", _omnibench),
    "omnibench-no-min": ("omnibench_core", _omnibench_no_min)}


def make_series(rng: random.Random, n: int, runs: int, cv: float, step: float) -> tuple[list[list[float]], int | None]:
    """``n`` commits of ``runs`` values around 1.0 (latency-like), noise ``cv``; a step of ``step`` at
    a commit of the middle half (None when ``step`` is 0)."""
    at = rng.randint(max(1, n // 4), max(1, (3 * n) // 4)) if step else None
    series = [[(1.0 + (step if at is not None and i >= at else 0.0)) * (1.0 + rng.gauss(0.0, cv)) for _ in range(runs)]
              for i in range(n)]
    return series, at


def score(found: Sequence[int], at: int | None) -> tuple[int, int]:
    """(right, false) detections: right when one names ``at`` or a neighbour (counted once)."""
    right = 1 if at is not None and any(abs(i - at) <= 1 for i in found) else 0
    return right, len(found) - right


def main() -> None:
    """Run every installed candidate over the same series; print and (with --out) save per-library figures."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--series", type=int, default=6, help="series per (size, runs, noise, step) cell (default 6)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--out", type=Path, help="folder for <library>.json (one file per candidate run here)")
    p.add_argument("--only", default="", help="comma-separated candidates (default: every installed one)")
    p.add_argument("--smoke", action="store_true", help="one series of a few cells: the wiring, no figures")
    args = p.parse_args()
    import importlib.util

    cells = [(n, r, cv, s) for n in SIZES for r in RUNS for cv in CVS for s in STEPS]
    if args.smoke:
        cells, args.series = [(8, 2, 0.03, 0.2), (8, 2, 0.03, 0.0)], 1
    wanted = [c.strip() for c in args.only.split(",") if c.strip()] or list(CANDIDATES)
    for name in wanted:
        module, detect = CANDIDATES[name]
        if importlib.util.find_spec(module) is None:
            print(f"{name}: not installed here ({module}); skipped")
            continue
        rng = random.Random(args.seed)  # the same series for every candidate
        planted = right = false = quiet_series = quiet_alarms = 0
        by_step: dict[str, list[int]] = {}
        t0 = time.perf_counter()
        for n, runs, cv, step in cells:
            for _ in range(args.series):
                series, at = make_series(rng, n, runs, cv, step)
                ok, bad = score(detect(series), at)
                planted += at is not None
                right, false = right + ok, false + bad
                if at is None:
                    quiet_series, quiet_alarms = quiet_series + 1, quiet_alarms + (bad > 0)
                else:
                    cell = by_step.setdefault(f"{step:.0%}", [0, 0])
                    cell[0], cell[1] = cell[0] + ok, cell[1] + 1
        seconds = time.perf_counter() - t0
        figures = {"library": name, "series": planted + quiet_series, "planted": planted,
                   "precision": right / (right + false) if right + false else None,
                   "recall": right / planted if planted else None,
                   "false_alarm_series": quiet_alarms / quiet_series if quiet_series else None,
                   "recall_by_step": {k: v[0] / v[1] for k, v in by_step.items()},
                   "seconds": round(seconds, 3), "seed": args.seed, "per_cell": args.series}
        print(json.dumps(figures))
        if args.out:
            args.out.mkdir(parents=True, exist_ok=True)
            (args.out / f"{name}.json").write_text(json.dumps(figures, indent=1) + "\n")


if __name__ == "__main__":
    main()
