"""What a revision check costs (the commit and status of the tree a run measures: before, at the start
of and after every run, some 7,000 checks a suite run), side by side: one `git status
--porcelain=v2 --branch` (omnibench's way) against `git rev-parse HEAD` then `git status
--porcelain` (the way before, 2026-12-07), each through the bounded call omnibench makes.

    python benchmarks/bench_revision_check.py [--repeat 100] [--tree .]

CPU of this process and its children, milliseconds a check; the two ways alternate, and each check
is held to give the same answer.
"""

from __future__ import annotations

import argparse
import resource
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from omnibench_core.defaults import GIT_OUTPUT_BYTES, GIT_S  # noqa: E402
from omnibench_core.process.capture import capture  # noqa: E402
from omnibench_core.setup.gitinfo import git_revision  # noqa: E402


def two_calls(tree: Path) -> tuple[str, str] | None:
    """The way before: the commit, then the status, two bounded git calls."""
    head = capture(["git", "-C", str(tree), "rev-parse", "HEAD"], GIT_S, max_bytes=GIT_OUTPUT_BYTES)
    status = capture(["git", "-C", str(tree), "status", "--porcelain", "--untracked-files=normal"], GIT_S,
                     max_bytes=GIT_OUTPUT_BYTES)
    return (head.stdout.strip(), status.stdout) if head.ok and status.ok else None


def _cpu() -> float:
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def main(argv: list[str] | None = None) -> int:
    """Time both ways, alternating, and print a line for each and their ratio."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=100, help="checks timed per way")
    parser.add_argument("--tree", type=Path, default=Path(__file__).resolve().parent.parent,
                        help="the git work tree checked (default: this repository)")
    args = parser.parse_args(argv)
    ways = {"one call, status v2 (omnibench's way)": lambda: git_revision(args.tree),
            "rev-parse, then status (before)": lambda: two_calls(args.tree)}
    spent = dict.fromkeys(ways, 0.0)
    for _ in range(args.repeat):
        answers = []
        for name, check in ways.items():
            start = _cpu()
            answers.append(check())
            spent[name] += _cpu() - start
        if answers[0] != answers[1]:
            print(f"the two ways differ: {answers}", file=sys.stderr)
            return 1
    print(f"{args.repeat} checks a way of {args.tree}; CPU of this process and git, ms a check")
    for name, cpu in spent.items():
        print(f"{name:40s} {cpu / args.repeat * 1000:7.1f}")
    one, two = spent.values()
    print(f"ratio, before / one call: {two / one:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
