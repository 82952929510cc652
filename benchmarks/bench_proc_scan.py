"""What a process-table scan costs, side by side: every environment read (a tree whose start is
unknown, as every scan was before issue 40's cut) against a tree that reads only the environments of
processes that started with or after it; and one bounded git call (``capture``), which ends in that scan.

    python benchmarks/bench_proc_scan.py [--processes 150] [--repeat 50]

``--processes`` sleepers are started first, so the table is as full as a suite's (100 to 250 processes
on a 2-core host with four test workers). CPU-seconds of this process only (the scan is in-process;
git's own CPU is not counted). Prints one line per way and the ratio.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from omnibench_core.process.capture import capture  # noqa: E402
from omnibench_core.process.proctree import Tree, add_token, read_stat, snapshot  # noqa: E402


def cpu_ms(call, repeat: int) -> float:
    """Mean CPU milliseconds of this process per call."""
    start = time.process_time()
    for _ in range(repeat):
        call()
    return (time.process_time() - start) / repeat * 1000


def main(argv: list[str] | None = None) -> int:
    """Start the sleepers, time each way, stop them."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--processes", type=int, default=150, help="sleepers started to fill the process table")
    parser.add_argument("--repeat", type=int, default=50, help="calls timed per way")
    args = parser.parse_args(argv)
    token = "bench-scan"
    sleepers = [subprocess.Popen(["sleep", "600"], env=add_token(dict(os.environ), "not-ours"))
                for _ in range(args.processes)]
    time.sleep(0.05)  # a clock tick or more: the program below is newer than every sleeper
    program = subprocess.Popen(["sleep", "600"], env=add_token(dict(os.environ), token))
    try:
        first = read_stat(program.pid)
        born = first.start if first is not None else 0
        table = len(snapshot())
        every = cpu_ms(lambda: Tree(token=token).members(), args.repeat)
        newer = cpu_ms(lambda: Tree(token=token, born=born).members(), args.repeat)
        git = cpu_ms(lambda: capture(["git", "--version"], 30.0), args.repeat)
    finally:
        for p in [*sleepers, program]:
            p.kill()
            p.wait()
    print(f"{table} live processes; {args.repeat} calls a way; CPU of this process, ms a call")
    print(f"scan, every environment read        {every:7.2f}")
    print(f"scan, only those as new as the tree {newer:7.2f}   ratio {every / newer:.1f}x")
    print(f"capture of `git --version` (now)    {git:7.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
