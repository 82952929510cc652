"""What a watchdog's start costs (one starts per program omnibench runs: about 1,500 in a suite run),
side by side: with ``-S`` as omnibench starts it, and with site as under coverage.py; a bare
interpreter for scale.

    python benchmarks/bench_watchdog_start.py [--repeat 40]

Each start imports the watchdog and stops at its usage line (no program: the start is the part
that differs). CPU-seconds of the children, mean milliseconds a start.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from omnibench_core.process.processes import watchdog_env  # noqa: E402


def children_cpu_ms(argv: list[str], env: dict[str, str], repeat: int) -> float:
    """Mean CPU milliseconds of ``argv`` run ``repeat`` times, from "/" as the watchdog runs."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    for _ in range(repeat):
        subprocess.run(argv, env=env, cwd="/", stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ((after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)) / repeat * 1000


def main(argv: list[str] | None = None) -> int:
    """Time each way and print one line for each."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=40, help="starts timed per way")
    args = parser.parse_args(argv)
    env = watchdog_env({k: v for k, v in os.environ.items() if not k.startswith("COVERAGE_")})
    module = ["-m", "omnibench_core.process.watchdog"]
    ways = {"python -S -c pass (a bare start)": [sys.executable, "-S", "-c", "pass"],
            "watchdog with -S (omnibench's way)": [sys.executable, "-S", *module],
            "watchdog with site (under coverage.py)": [sys.executable, *module]}
    print(f"{args.repeat} starts a way; CPU of the children, ms a start")
    took = {name: children_cpu_ms(way, env, args.repeat) for name, way in ways.items()}
    for name, ms in took.items():
        print(f"{name:40s} {ms:7.1f}")
    with_s, with_site = took["watchdog with -S (omnibench's way)"], took["watchdog with site (under coverage.py)"]
    print(f"ratio, site / -S: {with_site / with_s:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
