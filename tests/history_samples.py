"""A realistic :class:`History` for the site and summary tests: the issue's stand-in shape, 8
commits on the first-parent line, 2 runs each, a planted latency from commit 6 on (a `worse`
step), a driver change at commit 4 (an environment step of a context metric), and a campaign file
and report per commit in a results root laid out as campaigns write them (commit 2 without its
report, as a matrix campaign has none)."""

from __future__ import annotations

import base64
from pathlib import Path

from omnibench_core.history.series import ChangePoint, History, Point, Series

# a 1x1 PNG, so a report's plot is a real image file a browser decodes
PNG = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==")
COMMITS = 8
STEP_AT = 6  # 1-based: commit 6 is the first slow one
DRIVER_AT = 4


def revision(i: int) -> str:
    """Commit i's (1-based) full id."""
    return f"{i:02d}" + "ab" * 19


def write_report(results: Path, i: int, *, with_report: bool = True) -> str:
    """A campaign's file, and its report.md (and its plots folder) for commit i, as campaigns lay them out."""
    folder = results / f"local-{revision(i)[:12]}" / "campaigns" / f"selftest_c{i}"
    rel = (folder / "report.md").relative_to(results).as_posix()
    folder.parent.mkdir(parents=True, exist_ok=True)
    (folder.parent / f"selftest_c{i}.json").write_text(f'{{"name": "selftest_c{i}", "status": "complete"}}\n')
    if with_report:
        (folder / "report-plots").mkdir(parents=True, exist_ok=True)
        (folder / "report-plots" / "selftest.latency_mean_s.png").write_bytes(PNG)
        (folder / "report.md").write_text(
            f"# Report: local-{revision(i)[:12]}/selftest_c{i}\n\n- campaign: selftest_c{i}\n\n"
            "| metric | better | mean |\n|---|---|---|\n| selftest.latency_mean_s | lower | 0.1 |\n\n"
            "## Plots\n\n![selftest.latency_mean_s](report-plots/selftest.latency_mean_s.png)\n")
        (folder / "report.json").write_text("{}\n")
    return rel


def points(results: Path, base: float, step: float, *, missing_report: int | None = None) -> tuple[Point, ...]:
    """One point per commit: ``base`` before STEP_AT, ``base * (1 + step)`` from it on, a little noise."""
    out = []
    for i in range(1, COMMITS + 1):
        level = base * (1 + step) if i >= STEP_AT else base
        values = (level * (1 - 0.01 * (i % 3)), level * (1 + 0.012 * (i % 2)))
        mean = sum(values) / 2
        out.append(Point(revision(i), revision(i)[:8], f"2026-11-{10 + i:02d}T12:00:00+00:00", f"commit {i}: change {i}",
                         f"local-{revision(i)[:12]}/campaigns/selftest_c{i}.json",
                         write_report(results, i, with_report=i != missing_report) if results else None,
                         values, mean, mean * 0.97, mean * 1.03,
                         {"gpu_model": "NVIDIA H200", "driver": "550.54" if i < DRIVER_AT else "560.35",
                          "python": "3.11.9"}))
    return tuple(out)


def history(results: Path) -> History:
    """Two series: latency (worse from commit 6) and a context metric that moved with the driver."""
    results.mkdir(parents=True, exist_ok=True)
    latency = points(results, 0.1, 0.4, missing_report=2)
    tokens = tuple(Point(p.revision, p.short, p.commit_time, p.subject, p.campaign, p.report,
                         (100.0 * k, 102.0 * k), 101.0 * k, 99.0 * k, 103.0 * k, p.environment)
                   for i, p in enumerate(latency, 1) for k in [1.08 if i >= DRIVER_AT else 1.0])
    worse = ChangePoint(revision(STEP_AT - 1), revision(STEP_AT), (), latency[STEP_AT - 2].mean,
                        latency[STEP_AT - 1].mean, 0.4, 0.33, 0.47, "worse")
    env = ChangePoint(revision(DRIVER_AT - 1), revision(DRIVER_AT), (), 101.0, 101.0 * 1.08, 0.08, 0.05, 0.11,
                      "changed", {"driver": ("550.54", "560.35")})
    return History((Series("selftest", "selftest.latency_mean_s", "local", "lower", latency, (worse,)),
                    Series("selftest", "selftest.completion_tokens_sum", "local", "context", tokens, (env,))),
                   0.95, "E-Divisive means (signal-processing-algorithms), pvalue 0.01, permutations 100")
