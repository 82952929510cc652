"""A matrix of 4 campaigns (``--commits``) on 2 slots against the same 4 campaigns one after another: wall time ratio.

The campaigns run the selftest workload on the sglang-omni target over a small checkout whose 4
commits each add ``--delay-ms`` of latency per request (its ``sgl-omni`` starts the selftest
server with it), so a campaign's time is mostly that added latency, not CPU: the two slots do not
fight for the same cores even on a 2-core machine (``--slot-cpus shared``). Both arms use the
local engine: 2 slots for the matrix, 1 slot for one-after-another; fresh results for each.

    python benchmarks/bench_matrix.py [--delay-ms 500] [--requests 4] [--runs 2] [--out bench.json]
    python benchmarks/bench_matrix.py --smoke     # 1 commit, no added latency, 1 request: wiring only
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from gpu_helpers import write_fake_nvidia_smi  # noqa: E402
from run_helpers import free_port  # noqa: E402
from scale_helpers import make_revisions_checkout  # noqa: E402

from omnibench_core.scale import front_door as commands  # noqa: E402
from omnibench_core.settings import Settings  # noqa: E402


def arm(root: Path, commits: list[str], slots: str, opts: tuple[str, ...], runs: int) -> float:
    """Wall seconds of one matrix over ``commits`` on ``slots``."""
    fake = write_fake_nvidia_smi(root / "fakebin", [0])
    settings = Settings.of(target="sglang-omni", checkout=str(root.parent / "co"), results=str(root / "results"),
                           port=free_port(), nvidia_smi=str(fake))
    engine = commands.make_engine(settings, slots=slots, slot_per="gpu", slot_cpus="shared", progress=lambda s: None)
    t0 = time.monotonic()
    result = commands.matrix(settings, revisions_spec=",".join(commits), workloads=["selftest"], options=opts,
                             runs=runs, engine=engine, progress=lambda s: None)
    seconds = time.monotonic() - t0
    bad = [k for k, o in result.outcomes.items() if o.status != "complete"]
    if bad:
        raise SystemExit(f"campaigns not complete: {bad}")
    return seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--delay-ms", type=float, default=500.0, help="latency each commit's server adds per request")
    parser.add_argument("--requests", type=int, default=4)
    parser.add_argument("--runs", type=int, default=2, help="measured runs per campaign (after run0)")
    parser.add_argument("--commits", type=int, default=4, help="campaigns: one per commit")
    parser.add_argument("--out", help="write the figures as JSON here")
    parser.add_argument("--smoke", action="store_true", help="1 commit, no added latency, 1 request: the figures mean nothing")
    args = parser.parse_args()
    if args.smoke:
        args.commits, args.delay_ms, args.requests = 1, 0.0, 1
    opts = ("selftest.serve_with_target=true", "selftest.delay=0.05", f"selftest.requests={args.requests}",
            "selftest.children=0")
    with tempfile.TemporaryDirectory(prefix="bench-matrix-") as tmp:
        root = Path(tmp)
        commits = make_revisions_checkout(root / "co", [args.delay_ms] * args.commits)
        serial = arm(root / "serial", commits, "0", opts, args.runs)
        side = arm(root / "matrix", commits, "0,1", opts, args.runs)
    figures = {"campaigns": args.commits, "runs_per_campaign": args.runs + 1, "requests": args.requests,
               "added_latency_ms": args.delay_ms, "one_after_another_s": round(serial, 1),
               "matrix_2_slots_s": round(side, 1), "ratio": round(side / serial, 3)}
    print(json.dumps(figures, indent=2))
    if args.out:
        Path(args.out).write_text(json.dumps(figures, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
