"""Benchmark (not a test): a run0 + 3 campaign of both workloads on the local target, deferred
scoring against per-run scoring, side by side in one run: wall time and server starts.

    python benchmarks/bench_campaign.py [--max-samples 4] [--runs 3] [--out FILE]
    python benchmarks/bench_campaign.py --smoke   # the selftest workload, 2 runs: wiring only
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from bench_ports import free_port  # ports below the ephemeral range (this folder: the script's own)

from omnibench_core.campaign import execute as campaign
from omnibench_core.settings import Settings


def main() -> None:
    """Both scorings, one after the other; prints (and with --out writes) wall time and server starts."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--max-samples", type=int, default=4, help="seed-tts samples per run")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--out", type=Path, default=None, help="write the figures as JSON here")
    parser.add_argument("--smoke", action="store_true",
                        help="the selftest workload (a second a run), 2 runs: checks the wiring, the figures mean nothing")
    args = parser.parse_args()
    workloads, options = ["videoamme", "seedtts"], [f"seedtts.max_samples={args.max_samples}"]
    if args.smoke:
        workloads, options, args.runs = ["selftest"], [], 2
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for scoring in ("per-run", "deferred"):  # per-run first: it also makes the local data sets
            settings = Settings.of(results=str(Path(tmp) / scoring), port=free_port())
            asked = campaign.asked_from(settings, workloads, options, None, args.runs, 0, scoring)
            t0 = time.monotonic()
            outcome = campaign.measure(settings, asked, progress=lambda m: None)
            rows.append({"scoring": scoring, "wall_s": round(time.monotonic() - t0, 1),
                         "server_starts": outcome.campaign.server_starts,
                         "runs": len(outcome.campaign.measured()) + 1})
            print(json.dumps(rows[-1]), flush=True)
    print(f"{'scoring':<10} {'wall s':>8} {'server starts':>14} {'runs':>5}")
    for r in rows:
        print(f"{r['scoring']:<10} {r['wall_s']:>8} {r['server_starts']:>14} {r['runs']:>5}")
    if args.out:
        args.out.write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    main()
