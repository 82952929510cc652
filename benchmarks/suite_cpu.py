"""Where the test suite's CPU goes: each test's CPU-seconds, its own and its children's.

The suite is CPU-bound on two cores (docs/development.md), so its wall time follows the CPU its
tests spend; this finds the tests to make cheaper. Two uses:

    # record: a pytest plugin (the whole suite, xdist workers included), one JSON line a test
    PYTHONPATH=benchmarks SUITE_CPU_OUT=/tmp/suite-cpu python -m pytest -p suite_cpu
    # read: the files and tests that spent most, with their wall time
    python benchmarks/suite_cpu.py /tmp/suite-cpu [--top 25]

A test's children are the processes it waited for, and theirs (getrusage's RUSAGE_CHILDREN): a
server a test started and reaped counts; a process reaped by another (a daemon, an orphan) does
not, so the figures are a floor. Under load a CPU-second costs more wall time, not more CPU-seconds.

By kind of process (servers, watchdogs, `invoke` commands: what a cheaper start would save) with
benchmarks/suite_procs/ on the path too: each Python process writes its own CPU time as it exits.

    PYTHONPATH=benchmarks:benchmarks/suite_procs SUITE_CPU_OUT=/tmp/suite-cpu SUITE_PROCS_OUT=/tmp/suite-procs \
        python -m pytest -p suite_cpu
    python benchmarks/suite_cpu.py /tmp/suite-cpu --procs /tmp/suite-procs
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
from collections import defaultdict
from pathlib import Path

OUT_VAR = "SUITE_CPU_OUT"


def _cpu() -> tuple[float, float]:
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, kids.ru_utime + kids.ru_stime


try:
    import pytest
except ImportError:  # reading a folder needs no pytest
    pytest = None

if pytest is not None:
    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(item, nextitem):
        """Time one test's whole protocol (setup, call, teardown) and append a line to this
        worker's file under ``$SUITE_CPU_OUT``."""
        own0, kids0 = _cpu()
        start = time.monotonic()
        yield
        own1, kids1 = _cpu()
        out = Path(os.environ.get(OUT_VAR, "suite-cpu"))
        out.mkdir(parents=True, exist_ok=True)
        line = {"id": item.nodeid, "self": round(own1 - own0, 3), "children": round(kids1 - kids0, 3),
                "wall": round(time.monotonic() - start, 3)}
        with open(out / f"{os.environ.get('PYTEST_XDIST_WORKER', 'main')}.jsonl", "a") as f:
            f.write(json.dumps(line) + "\n")


def read(folder: Path) -> list[dict]:
    """Every test's line from the files in ``folder``."""
    rows = []
    for path in sorted(folder.glob("*.jsonl")):
        rows += [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return rows


def summary(rows: list[dict], top: int) -> str:
    """The total, then the ``top`` files and tests by CPU-seconds (with their wall seconds)."""
    by_file: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0])
    for r in rows:
        acc = by_file[r["id"].split("::", 1)[0]]
        acc[0] += r["self"] + r["children"]
        acc[1] += r["wall"]
        acc[2] += 1
    total = sum(r["self"] + r["children"] for r in rows)
    lines = [f"{len(rows)} tests, {total:.0f} CPU-s", "", "CPU-s   wall-s  tests  file"]
    for name, (cpu, wall, n) in sorted(by_file.items(), key=lambda kv: -kv[1][0])[:top]:
        lines.append(f"{cpu:6.1f}  {wall:6.1f}  {int(n):5d}  {name}")
    lines += ["", "CPU-s   wall-s  test"]
    for r in sorted(rows, key=lambda r: -(r["self"] + r["children"]))[:top]:
        lines.append(f"{r['self'] + r['children']:6.1f}  {r['wall']:6.1f}  {r['id']}")
    return "\n".join(lines)


def kind(argv: list[str]) -> str:
    """A process's kind from its command line: ``invoke SUBCOMMAND``, the module of ``-m``
    (``--engines`` added for the local server), a script's name, or ``-c`` and its code's start."""
    words = [w for w in argv[1:] if w not in ("-S", "-I", "-E", "-s", "-u", "-B")]
    if "-m" in words[:1]:
        module, rest = words[1] if len(words) > 1 else "?", words[2:]
    elif words and Path(words[0]).name == "invoke":  # the invoke console script
        module, rest = "invoke", words[1:]
    elif "-c" in words[:1]:
        return "-c " + " ".join((words[1] if len(words) > 1 else "").split())[:40]
    else:
        return Path(words[0]).name if words else Path(argv[0]).name
    if module == "invoke":
        command = [w for w in rest if not w.startswith("-")]
        # its first word after the options that take a value (-r ROOT, -c COLLECTION)
        skip = {rest[i + 1] for i, w in enumerate(rest[:-1]) if w in ("-r", "--search-root", "-c", "--collection")}
        command = [w for w in command if w not in skip]
        return f"invoke {command[0] if command else '?'}"
    if "--engines" in rest:
        return f"{module} --engines {rest[rest.index('--engines') + 1] if rest[-1] != '--engines' else '?'}"
    return module


def read_procs(folder: Path) -> list[dict]:
    """Every process's record from ``folder`` (a file half-written as the suite ended, or one that
    is not a record, is skipped)."""
    rows = []
    for path in sorted(folder.glob("*.json")):
        try:
            row = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(row, dict) and isinstance(row.get("argv"), list) and isinstance(row.get("cpu"), (int, float)):
            rows.append(row)
    return rows


def procs_summary(rows: list[dict], top: int) -> str:
    """The ``top`` kinds of process by CPU-seconds, with their count and CPU a process."""
    by_kind: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0])
    for r in rows:
        acc = by_kind[kind(r["argv"])]
        acc[0] += r["cpu"]
        acc[1] += r["system"]
        acc[2] += 1
    total = sum(r["cpu"] for r in rows)
    lines = [f"{len(rows)} Python processes, {total:.0f} CPU-s", "", "CPU-s  system  count  a process  kind"]
    for name, (cpu, system, n) in sorted(by_kind.items(), key=lambda kv: -kv[1][0])[:top]:
        lines.append(f"{cpu:6.1f}  {system:6.1f}  {int(n):5d}  {cpu / n:9.3f}  {name}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Print the summary of a folder the plugin wrote."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", type=Path, help=f"the folder ${OUT_VAR} named while the suite ran")
    parser.add_argument("--top", type=int, default=25, help="how many files and tests to list (default 25)")
    parser.add_argument("--procs", type=Path, metavar="DIR",
                        help="also the kinds of process by CPU, from the folder SUITE_PROCS_OUT named")
    args = parser.parse_args(argv)
    if args.top < 1:
        parser.error(f"--top {args.top}: at least 1")
    rows = read(args.folder)
    if not rows:
        parser.error(f"no test lines in {args.folder}: run the suite with {OUT_VAR}={args.folder} and -p suite_cpu first")
    procs = read_procs(args.procs) if args.procs is not None else []
    if args.procs is not None and not procs:
        parser.error(f"no process records in {args.procs}: run the suite with benchmarks/suite_procs on PYTHONPATH "
                     f"and SUITE_PROCS_OUT={args.procs} first")
    print(summary(rows, args.top))
    if procs:
        print("\n" + procs_summary(procs, args.top))
    return 0


if __name__ == "__main__":
    sys.exit(main())
