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

Every process, Python or not, killed or not (the recorder above misses what a signal ends, and git,
Ray or Chromium): as root on Linux, the kernel's process accounting (acct(2)) to a file while the
suite runs, each Python process's command line taken from the recorder's start files. Accounting
is one file for the whole host: this takes it over while the suite runs and turns it off at the end,
so not on a host whose own accounting (psacct) must go on; the suite's tests therefore only read
records (tests/test_benchmarks.py), and this is run by hand:

    PYTHONPATH=benchmarks:benchmarks/suite_procs SUITE_CPU_OUT=/tmp/suite-cpu SUITE_PROCS_OUT=/tmp/suite-procs \
        SUITE_PACCT=/tmp/suite.pacct python -m pytest -p suite_cpu
    python benchmarks/suite_cpu.py /tmp/suite-cpu --procs /tmp/suite-procs --pacct /tmp/suite.pacct
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import struct
import sys
import time
from collections import defaultdict
from pathlib import Path

OUT_VAR = "SUITE_CPU_OUT"
PACCT_VAR = "SUITE_PACCT"  # where the kernel's accounting of every process goes (root, Linux)
ROOT_SUFFIX = ".root.json"  # beside it: the pytest process the suite's processes descend from
OWNER_VAR = "SUITE_PACCT_OWNER"  # set by the suite that turned accounting on: a pytest below it leaves it be
AHZ = 100  # acct(2)'s v3 records count CPU and elapsed time in these ticks a second
ACCT_V3 = struct.Struct("<BBHIIIIIIf8H16s")  # struct acct_v3: flag, version, tty, exit code, uid, gid, pid,
# ppid, start (epoch s), elapsed (ticks), user, system, mem, io, rw, minflt, majflt, swaps (comp_t), comm


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


def _acct(path: str | None) -> str:
    """The kernel's process accounting on (to ``path``, which must exist) or off: "" or why not."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    if libc.acct(path.encode() if path else None) != 0:
        return os.strerror(ctypes.get_errno())
    return ""


if pytest is not None:
    def pytest_configure(config):
        """With ``$SUITE_PACCT`` set, in the suite's own process (not an xdist worker): every process
        that ends from now on is accounted to that file; the pytest process is noted beside it.
        Accounting is one file for the whole host: another suite accounted at the same time takes it."""
        target = os.environ.get(PACCT_VAR)
        if not target or os.environ.get("PYTEST_XDIST_WORKER") or os.environ.get(OWNER_VAR):
            return  # a worker, or a pytest a test started: the suite's accounting counts it already
        Path(target).parent.mkdir(parents=True, exist_ok=True)
        Path(target).write_bytes(b"")
        why = _acct(target)
        if why:
            raise pytest.UsageError(f"{PACCT_VAR}={target}: process accounting could not start ({why}; it needs root "
                                    "on Linux): run without it, or as root")
        Path(target + ROOT_SUFFIX).write_text(json.dumps({"pid": os.getpid(), "started": time.time()}))
        os.environ[OWNER_VAR] = str(os.getpid())  # its children inherit it
        config.stash[_ACCOUNTING] = target

    def pytest_unconfigure(config):
        """Accounting off again (the kernel would go on writing every process of the host)."""
        if config.stash.get(_ACCOUNTING, None):
            _acct(None)

    _ACCOUNTING = pytest.StashKey[str]()


def _comp(value: int) -> int:
    """acct(2)'s comp_t: a 13-bit mantissa and a base-8 exponent."""
    return (value & 0x1FFF) << (3 * ((value >> 13) & 7))


def read_pacct(path: Path) -> list[dict]:
    """Every process record of an accounting file (version 3, as Linux writes them), in exit order."""
    data, rows = path.read_bytes(), []
    for offset in range(0, len(data) - ACCT_V3.size + 1, ACCT_V3.size):
        (_, version, _, _, _, _, pid, ppid, start, elapsed, user, system, *_, comm) = ACCT_V3.unpack_from(data, offset)
        if version != 3:
            continue
        rows.append({"pid": pid, "ppid": ppid, "start": start, "end": start + elapsed / AHZ,
                     "cpu": (_comp(user) + _comp(system)) / AHZ, "comm": comm.split(b"\0")[0].decode("latin-1")})
    return rows


def read_starts(folder: Path) -> dict[int, list[dict]]:
    """The recorder's start files (``<pid>.start.json``: a Python process's argv and start time), by pid."""
    starts: dict[int, list[dict]] = defaultdict(list)
    for path in folder.glob("*.start.json"):
        pid = path.name.split(".")[0]
        if not pid.isdigit():  # not one of the recorder's files
            continue
        for line in path.read_text().splitlines():
            try:
                row = json.loads(line)
            except ValueError:  # a line half-written as the suite ended
                continue
            if isinstance(row, dict) and isinstance(row.get("argv"), list) and \
                    isinstance(row.get("started"), (int, float)) and not isinstance(row["started"], bool):
                starts[int(pid)].append(row)
    return starts


def below(rows: list[dict], root_pid: int, root_started: float) -> list[dict]:
    """The records of processes descended from the suite's pytest (its own record is never written:
    accounting stops while it runs). A parent is the record of the child's ppid whose life spans the
    child's start (pids are reused); a process reparented to init is no longer below it."""
    by_pid: dict[int, list[dict]] = defaultdict(list)
    for r in rows:
        by_pid[r["pid"]].append(r)
    inside: dict[int, bool] = {}

    def parent(r: dict) -> dict | None:
        spans = [p for p in by_pid.get(r["ppid"], ()) if p["start"] - 1 <= r["start"] <= p["end"] + 1 and p is not r]
        return max(spans, key=lambda p: p["start"]) if spans else None

    def is_below(r: dict) -> bool:
        path, node = [], r
        while True:
            if id(node) in inside:
                verdict = inside[id(node)]
                break
            path.append(node)
            if node["ppid"] == root_pid and node["start"] >= root_started - 1:
                verdict = True
                break
            up = parent(node)
            if up is None or len(path) > 256:
                verdict = False
                break
            node = up
        for n in path:
            inside[id(n)] = verdict
        return verdict

    return [r for r in rows if r["start"] >= root_started - 1 and is_below(r)]


def pacct_summary(rows: list[dict], starts: dict[int, list[dict]], top: int) -> str:
    """The ``top`` kinds of process by CPU-seconds: a Python process by its command line (its start
    file), any other by its command name."""
    by_kind: dict[str, list[float]] = defaultdict(lambda: [0.0, 0])
    for r in rows:
        near = [s for s in starts.get(r["pid"], ()) if abs(s["started"] - r["start"]) <= 2]
        name = kind(min(near, key=lambda s: abs(s["started"] - r["start"]))["argv"]) if near else r["comm"]
        by_kind[name][0] += r["cpu"]
        by_kind[name][1] += 1
    total = sum(r["cpu"] for r in rows)
    lines = [f"{len(rows)} processes below pytest, {total:.0f} CPU-s (process accounting)", "",
             "CPU-s  count  a process  kind"]
    for name, (cpu, n) in sorted(by_kind.items(), key=lambda kv: -kv[1][0])[:top]:
        lines.append(f"{cpu:6.1f}  {int(n):5d}  {cpu / n:9.3f}  {name}")
    return "\n".join(lines)


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
        if path.name.endswith(".start.json"):  # the start files (--pacct's)
            continue
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
    parser.add_argument("--pacct", type=Path, metavar="FILE",
                        help=f"also every process below pytest by kind, from the accounting file {PACCT_VAR} named "
                             "(Python processes named by --procs's start files)")
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
    accounted = []
    if args.pacct is not None:
        try:
            root = json.loads(Path(str(args.pacct) + ROOT_SUFFIX).read_text())
            accounted = below(read_pacct(args.pacct), int(root["pid"]), float(root["started"]))
        except (OSError, ValueError, KeyError) as exc:
            parser.error(f"--pacct {args.pacct}: {exc}; run the suite with {PACCT_VAR}={args.pacct} (as root) first")
        if not accounted:
            parser.error(f"--pacct {args.pacct}: no process below the suite's pytest in it")
    print(summary(rows, args.top))
    if procs:
        print("\n" + procs_summary(procs, args.top))
    if accounted:
        print("\n" + pacct_summary(accounted, read_starts(args.procs) if args.procs else {}, args.top))
    return 0


if __name__ == "__main__":
    sys.exit(main())
