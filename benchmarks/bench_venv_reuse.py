"""What reusing a venv by dependency hash still saves: a fresh prepare against a relocated copy.

On a stand-in of two commits of one ``omni_ci_deps_hash`` (``make_standin``), each round prepares
both revisions into a fresh results root with ``omnibench_core.scale.revisions.prepare``: the
first builds its venv with the checkout's ``prepare_omni_venv.sh`` (``built``), the second gets a
real copy in its own ``OMNI_CI_HOME``, relocated and proven by REV_OK's probe (``copied``). The
two arms alternate within the run, so the ratio is of one machine state. Also timed: the proof
alone (``prove``: the leftover scan and one probe interpreter), what REV_OK costs a server start.

    python benchmarks/bench_venv_reuse.py [--rounds 5] [--out bench.json]
    python benchmarks/bench_venv_reuse.py --smoke     # 1 round: wiring only
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from omnibench_core.scale import revisions, venv_reuse
from omnibench_core.standin import StandinSpec, make_standin


def one_round(checkout: Path, commits: tuple[str, ...], root: Path) -> dict[str, float]:
    """Seconds to prepare the first revision (a build) and the second (a relocated copy)."""
    out: dict[str, float] = {}
    for commit, arm in zip(commits, ("built", "copied"), strict=True):
        t0 = time.monotonic()
        prepared = revisions.prepare(checkout, commit, root, progress=lambda s: None)
        out[arm] = time.monotonic() - t0
        assert (prepared.venv_from == "built") == (arm == "built"), prepared.venv_from
    t0 = time.monotonic()
    venv_reuse.prove(prepared.venv.resolve(), prepared.worktree, commits[1], [str(root / ".worktrees" / commits[0])])
    out["prove"] = time.monotonic() - t0
    return out


def main(argv: list[str] | None = None) -> int:
    """Run the rounds, print a table and the medians' ratio, optionally write JSON."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=5, help="prepare pairs to time (default 5)")
    p.add_argument("--smoke", action="store_true", help="1 round: check the wiring, not the figures")
    p.add_argument("--out", type=Path, default=None, help="also write the figures here as JSON")
    a = p.parse_args(argv)
    rounds = 1 if a.smoke else a.rounds
    with tempfile.TemporaryDirectory(prefix="bench-venv-reuse-") as tmp:
        made = make_standin(Path(tmp) / "co", StandinSpec(commits=2))
        rows = [one_round(made.root, made.commits, Path(tmp) / f"results{i}" / ".worktrees") for i in range(rounds)]
    medians = {arm: statistics.median(r[arm] for r in rows) for arm in ("built", "copied", "prove")}
    for i, r in enumerate(rows, start=1):
        print(f"round {i}/{rounds}: built {r['built']:.3f} s  copied {r['copied']:.3f} s  prove {r['prove']:.3f} s")
    ratio = medians["copied"] / medians["built"]
    print(f"median: fresh prepare {medians['built']:.3f} s, relocated copy {medians['copied']:.3f} s "
          f"(ratio {ratio:.2f}), proof {medians['prove']:.3f} s")
    if a.out:
        a.out.write_text(json.dumps({"rounds": rounds, "median_s": medians, "copy_to_build": ratio,
                                     "rows": rows}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
