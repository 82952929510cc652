"""Paired quality verdicts on the local target (issue 44, docs/verdicts.md "Quality from paired
samples"): how often an A/A calls Video-AMME accuracy better or worse (false alarms), and how often a
planted flip of a share P of the answers (0.05, 0.10) is called worse, at each sample count.

The answers are the local target's own: ``--runs`` names run folders of a real Video-AMME run on
the local target (``invoke run -w videoamme -o videoamme.max_samples=N``); their per-sample
correctness is the pool. Each experiment draws ``n`` questions from it (with replacement when ``n``
is larger than the pool) and judges them with omnibench's own McNemar test, margin and Holm
family (omnibench_core.stats.paired_quality, omnibench_core.quality.paired.MARGINS):

- A/A: each side changes a share ``--noise`` of its answers independently (a nondeterministic
  server; 0 is the deterministic local target, where nothing changes and nothing can be called);
- flip P: B changes the answers of the share P chosen by the local target's own hash
  (omnibench_core.local.flip), salted per experiment; a changed right answer is wrong, a changed
  wrong answer is right with probability 1/3 (one of the three other letters is the truth).

    python benchmarks/bench_quality.py --runs RUN [RUN ...] [--samples 200,400] [--experiments 100]
    python benchmarks/bench_quality.py --smoke   # wiring only: a planted pool, a few experiments
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from omnibench_core.local import flip  # noqa: E402
from omnibench_core.quality.outputs import VIDEOAMME, read_outputs  # noqa: E402
from omnibench_core.quality.paired import MARGINS  # noqa: E402
from omnibench_core.stats.paired_quality import QualityTest, judge, mcnemar  # noqa: E402

METRIC = "videoamme.accuracy"


def pool_of(runs: list[Path]) -> list[bool]:
    """Per-question correctness of the local target, from the first run folder that has it (the
    others must agree: the local target is deterministic)."""
    found = [read_outputs(r).get(VIDEOAMME, {}) for r in runs]
    if not found or not found[0]:
        raise SystemExit(f"no Video-AMME per_sample rows in {runs[0] if runs else 'no run'}: name run folders of "
                         "invoke run -w videoamme")
    ids = sorted(found[0])
    return [bool(found[0][i].correct) for i in ids]


def _changed(keys: list[str], share: float, salt: str) -> list[bool]:
    return [flip.chosen(f"{salt}:{k}", share) for k in keys]


def _after_change(right: bool, changed: bool, rng: np.random.Generator) -> bool:
    if not changed:
        return right
    return False if right else bool(rng.random() < 1 / 3)


def experiment(pool: list[bool], n: int, *, flip_share: float, noise: float, salt: str,
               rng: np.random.Generator) -> str:
    """One A/B of ``n`` questions: the verdict word of accuracy."""
    picks = rng.choice(len(pool), size=n, replace=n > len(pool))
    keys = [f"q{j}:{i}" for j, i in enumerate(picks)]
    truth = [pool[i] for i in picks]
    a_noise, b_noise = _changed(keys, noise, f"{salt}:a"), _changed(keys, noise, f"{salt}:b")
    b_flip = _changed(keys, flip_share, f"{salt}:flip")
    a = [_after_change(t, c, rng) for t, c in zip(truth, a_noise, strict=True)]
    b = [_after_change(t, c or f, rng) for t, c, f in zip(truth, b_noise, b_flip, strict=True)]
    test = QualityTest(METRIC, "higher", MARGINS[METRIC], mcnemar(a, b))
    return judge([test])[0].verdict.value


def main(argv: list[str] | None = None) -> int:
    """Run the experiments and print one line per arm; ``--out`` also writes them as JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", nargs="*", type=Path, default=[], help="run folders of the local target's Video-AMME")
    parser.add_argument("--samples", default="200,400", help="sample counts, comma-separated")
    parser.add_argument("--experiments", type=int, default=100, help="experiments per arm (at least 30 for A/A)")
    parser.add_argument("--noise", type=float, default=0.05, help="each side's own share of changed answers in A/A")
    parser.add_argument("--flips", default="0.05,0.10", help="planted shares P, comma-separated")
    parser.add_argument("--seed", type=int, default=44)
    parser.add_argument("--out", type=Path, help="also write the results here as JSON")
    parser.add_argument("--smoke", action="store_true", help="wiring only: a planted pool, 5 experiments, 20 samples")
    args = parser.parse_args(argv)
    if args.smoke:
        pool, samples, experiments = [i % 5 != 0 for i in range(40)], [20], 5  # planted: 80 % right, as local
    else:
        pool, samples, experiments = pool_of(args.runs), [int(x) for x in args.samples.split(",")], args.experiments
    if not args.smoke and experiments < 30:
        parser.error("--experiments must be at least 30 (issue 44: false alarms over at least 30 A/As)")
    rng = np.random.default_rng(args.seed)
    arms = [("A/A", 0.0, args.noise), ("A/A deterministic", 0.0, 0.0)] + \
        [(f"flip {float(p):g}", float(p), 0.0) for p in args.flips.split(",")]
    rows = []
    print(f"pool: {len(pool)} questions of the local target, {sum(pool) / len(pool):.1%} right; "
          f"{experiments} experiments per arm; alpha 0.05")
    for n in samples:
        for name, share, noise in arms:
            words = [experiment(pool, n, flip_share=share, noise=noise, salt=f"{args.seed}:{name}:{n}:{e}", rng=rng)
                     for e in range(experiments)]
            row = {"arm": name, "samples": n, "experiments": experiments, "flip": share, "noise": noise,
                   **{w: words.count(w) for w in ("better", "worse", "equivalent", "inconclusive")}}
            rows.append(row)
            called = row["better"] + row["worse"]
            label = "false alarms" if share == 0 else "called worse"
            count = called if share == 0 else row["worse"]
            print(f"{name:18} n={n:<5} {label}: {count} of {experiments} ({count / experiments:.0%}); "
                  f"equivalent {row['equivalent']}, inconclusive {row['inconclusive']}")
    if args.out:
        args.out.write_text(json.dumps({"pool": len(pool), "rows": rows}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
