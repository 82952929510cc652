"""Which alpha-spending boundary `invoke ab --max-rounds N` uses, and why (docs/verdicts.md,
"Rounds until the answer is known"): false alarms, detection of a planted change and mean rounds
of the rule's stop decision on simulated rounds, for Bonferroni over the old looks, Lan-DeMets
Pocock-type and O'Brien-Fleming-type spending, and several first looks and schedules.

A round is its log-ratio, normal with ``--sd`` (the spread between rounds that pairing leaves);
a look decides as the verdict rule does for one metric: better or worse when the look's interval
excludes 0 and the change is at least the minimum effect, equivalent when the interval lies within
plus or minus it. The decisions are the rule's, vectorised in numpy (the rule itself runs on
simulated per-request rounds in tests/test_ab_sequential.py); the levels are the real ones:
omnibench_core.stats.boundary's t boundaries ("t"), or, for comparison, the normal boundary's
levels used as t levels ("z": Lan-DeMets by numerical integration on a grid, Armitage, McPherson
and Rowe's recursion).

    python benchmarks/bench_boundary.py [--max-rounds 8,12,16] [--sd 0.06,0.12] [--reps 20000]

Against fixed designs (issue 43: "mean rounds of the sequential design at most half the fixed
design's that detects as often"): for each spread, the rule's share of +10 % found and mean rounds,
the fewest fixed rounds (a paired t at alpha, the same minimum effect) that find it as often, and
the ratio of the two; the spreads (unless ``--sd`` names others) run from where 3 or 4 fixed rounds
suffice to where the rule runs out of rounds:

    python benchmarks/bench_boundary.py --versus-fixed --max-rounds 12,24 --reps 20000 [--within 0.01]
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np
from scipy.special import ndtr, ndtri, stdtrit

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from omnibench_core.stats.boundary import nominal_levels, pocock_spent  # noqa: E402
from omnibench_core.stats.looks import Boundary, looks  # noqa: E402


def obf_spent(t: np.ndarray, alpha: float) -> np.ndarray:
    """Lan-DeMets O'Brien-Fleming-type spending, 2 - 2 Phi(z_{alpha/2} / sqrt(t))."""
    return 2 - 2 * ndtr(ndtri(1 - alpha / 2) / np.sqrt(t))


def z_levels(rounds: list[int], n_max: int, alpha: float, spent, grid: int = 801) -> list[float]:
    """The normal (known variance) boundary's two-sided levels at each look: the recursion on a grid."""
    from scipy.optimize import brentq

    ts = np.array(rounds, float) / n_max
    cum = np.array([spent(t, alpha) for t in ts], float)
    cum[-1] = alpha
    b = [float(ndtri(1 - cum[0] / 2))]
    lim = b[0] * math.sqrt(ts[0])
    x = np.linspace(-lim, lim, grid)
    w = np.full(grid, x[1] - x[0])
    w[0] = w[-1] = w[0] / 2
    f = np.exp(-x ** 2 / (2 * ts[0])) / math.sqrt(2 * math.pi * ts[0])
    for k in range(1, len(ts)):
        d, target = ts[k] - ts[k - 1], cum[k] - cum[k - 1]
        bk = brentq(_crossing, 0.5, 40, args=(math.sqrt(ts[k]), math.sqrt(d), x, w * f, target)) \
            if target > 1e-15 else 40.0
        b.append(bk)
        lim = bk * math.sqrt(ts[k])
        y = np.linspace(-lim, lim, grid)
        wy = np.full(grid, y[1] - y[0])
        wy[0] = wy[-1] = wy[0] / 2
        f = (np.exp(-(y[:, None] - x[None, :]) ** 2 / (2 * d)) / math.sqrt(2 * math.pi * d)) @ (w * f)
        x, w = y, wy
    return [float(2 - 2 * ndtr(v)) for v in b]


def _crossing(bk: float, scale: float, sd: float, x: np.ndarray, mass: np.ndarray, target: float) -> float:
    """The chance of first crossing +-bk at this look, less the spending allotted to it."""
    c = bk * scale
    return float(np.sum(mass * (ndtr((-c - x) / sd) + 1 - ndtr((c - x) / sd)))) - target


def decide(d: np.ndarray, rounds: list[int], levels: list[float], min_effect: float) -> tuple[float, float, float]:
    """(share calling a change, share calling it worse, mean rounds) of the experiments ``d``."""
    hi_m, lo_m = math.log1p(min_effect), math.log1p(-min_effect)
    done = np.zeros(len(d), bool)
    called, worse, used = np.zeros(len(d), bool), np.zeros(len(d), bool), np.zeros(len(d))
    for n, level in zip(rounds, levels, strict=True):
        x = d[:, :n]
        mean, se = x.mean(1), x.std(1, ddof=1) / math.sqrt(n)
        q = stdtrit(n - 1, 1 - level / 2)
        low, high = mean - q * se, mean + q * se
        change = ((low > 0) | (high < 0)) & (np.abs(np.expm1(mean)) >= min_effect)
        stop = change | ((low >= lo_m) & (high <= hi_m)) | (n == rounds[-1])
        new = stop & ~done
        used[new], called[new], worse[new] = n, change[new], (change & (mean > 0))[new]
        done |= stop
    return float(called.mean()), float(worse.mean()), float(used.mean())


VERSUS_SDS = "0.01,0.02,0.03,0.04,0.05,0.06,0.08,0.1,0.12,0.15,0.2"  # --versus-fixed's spreads


def fewest_fixed(rng: np.random.Generator, sd: float, found: float, alpha: float, min_effect: float,
                 most: int, reps: int, within: float) -> tuple[int, float] | None:
    """The fewest rounds of a fixed design (one look at alpha) that find +10 % worse at least as
    often as ``found`` less ``within``, with that design's own share; None if ``most`` rounds do not."""
    d = rng.normal(math.log(1.1), sd, (reps, most))
    for n in range(2, most + 1):
        share = decide(d, [n], [alpha], min_effect)[1]
        if share >= found - within:
            return n, share
    return None


def versus_fixed(args: argparse.Namespace, rng: np.random.Generator) -> int:
    """One line per spread and --max-rounds: the rule's detection and mean rounds at +10 %, the
    fixed design that detects as often, and the ratio of their rounds."""
    for n_max in map(int, args.max_rounds.split(",")):
        rounds = list(looks(n_max))
        levels = list(nominal_levels(rounds, n_max, args.alpha))
        for sd in map(float, args.sd.split(",")):
            _, found, mean = decide(rng.normal(math.log(1.1), sd, (args.reps, n_max)), rounds, levels, args.min_effect)
            fixed = fewest_fixed(rng, sd, found, args.alpha, args.min_effect, 4 * n_max, args.reps, args.within)
            versus = (f"fixed {fixed[0]:2d} rounds find it {fixed[1]:.3f}  ratio {mean / fixed[0]:.2f}" if fixed
                      else f"no fixed design of at most {4 * n_max} rounds finds it as often")
            print(f"N {n_max:2d}  sd {sd:5.3f}  the rule finds +10% {found:.3f} in {mean:5.2f} rounds  {versus}")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Print one line per cell: false alarms (A/A), +10 % found worse, mean rounds with +10 %; with
    ``--versus-fixed``, the rule against the fixed design that detects as often."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--max-rounds", default="8,12,16")
    ap.add_argument("--sd", default=None, help="spreads of a round's log-ratio (default 0.06,0.12; with "
                    "--versus-fixed 0.01 to 0.2)")
    ap.add_argument("--reps", type=int, default=20000)
    ap.add_argument("--alpha", type=float, default=0.05)
    ap.add_argument("--min-effect", type=float, default=0.05)
    ap.add_argument("--versus-fixed", action="store_true",
                    help="the rule's mean rounds against the fewest fixed rounds that find +10 %% as often")
    ap.add_argument("--within", type=float, default=0.0,
                    help="with --versus-fixed: a fixed design finds it as often when its share is at most this "
                         "much under the rule's (30 experiments cannot tell 0.99 from 1)")
    args = ap.parse_args(argv)
    rng = np.random.default_rng(5)
    if args.sd is None:
        args.sd = VERSUS_SDS if args.versus_fixed else "0.06,0.12"
    if args.versus_fixed:
        return versus_fixed(args, rng)
    for sd in map(float, args.sd.split(",")):
        for n_max in map(int, args.max_rounds.split(",")):
            old = list(looks(n_max, Boundary.BONFERRONI))
            cells = {"bonferroni 3,4,6,...": (old, [args.alpha / len(old)] * len(old))}
            for first in (3, 4):
                every = list(range(first, n_max + 1))
                cells[f"pocock t, every round from {first}"] = (every, list(nominal_levels(every, n_max, args.alpha)))
                cells[f"pocock z, every round from {first}"] = (every, z_levels(every, n_max, args.alpha, pocock_spent))
                cells[f"obf z, every round from {first}"] = (every, z_levels(every, n_max, args.alpha, obf_spent))
            new = list(looks(n_max))
            cells["pocock t, 4,6,8,12,... (the rule)"] = (new, list(nominal_levels(new, n_max, args.alpha)))
            for name, (rounds, levels) in cells.items():
                aa = decide(rng.normal(0, sd, (args.reps, n_max)), rounds, levels, args.min_effect)
                ab = decide(rng.normal(math.log(1.1), sd, (args.reps, n_max)), rounds, levels, args.min_effect)
                print(f"sd {sd:g}  N {n_max:2d}  {name:36s} false alarms {aa[0]:.4f}  +10% worse {ab[1]:.3f}  "
                      f"mean rounds {ab[2]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
