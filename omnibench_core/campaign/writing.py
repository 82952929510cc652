"""Report and comparison files: Markdown for people, JSON for programs, PNG plots when matplotlib
is installed. A file is never overwritten: a later report of the same campaign gets the next
number (``report-2.md``...), and says so."""

from __future__ import annotations

import dataclasses
import os
import re
from pathlib import Path
from typing import Any

from ..jsonio import write_json
from . import plots, references, telemetry_view
from .compare import Comparison
from .summary import RunSetStats


def fresh_stem(folder: Path, stem: str) -> str:
    """``stem`` or ``stem-N``: the first whose .md, .json and plots folder are all new; the .md is
    created exclusively, so two reports at once never share a name."""
    folder.mkdir(parents=True, exist_ok=True)
    n = 1
    while True:
        name = stem if n == 1 else f"{stem}-{n}"
        if not (folder / f"{name}.json").exists() and not (folder / f"{name}-plots").exists():
            try:
                os.close(os.open(folder / f"{name}.md", os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
                return name
            except FileExistsError:
                pass
        n += 1


def fmt(value: Any) -> str:
    """Numbers to 6 significant digits, the rest as text."""
    if isinstance(value, float):
        return f"{value:.6g}"
    return "-" if value is None else str(value)


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.1%}"


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name)


@dataclasses.dataclass(frozen=True)
class Written:
    """Files a report or comparison wrote."""

    markdown: Path
    json: Path
    plots: tuple[Path, ...]
    plots_note: str  # how to get plots when matplotlib is missing ("" when they were made)
    numbered: bool  # an earlier one exists and was kept


def report_rows(stats: RunSetStats) -> list[list[str]]:
    """The console/Markdown table: metric, direction, mean, sd, rel. spread, values by run, flags."""
    return [[m.name, m.direction, fmt(m.mean), fmt(m.sd), _pct(m.rel_spread),
             ", ".join(f"{r}={fmt(v)}" for r, v in m.values.items()), "FLAG" if m.flags else ""] for m in stats.metrics]


REPORT_HEADERS = ("metric", "better", "mean", "sd", "rel. spread", "values by run", "flags")


def _md_table(headers, rows) -> list[str]:
    out = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    out += ["| " + " | ".join(str(c).replace("|", "/") for c in row) + " |" for row in rows]
    return out


def write_report(folder: Path, stats: RunSetStats, header: dict[str, Any]) -> Written:
    """report.md, report.json and one plot per numeric metric (with the extra)."""
    stem = fresh_stem(folder, "report")
    made: list[Path] = []
    note = ""
    if plots.available():
        for m in stats.metrics:
            if m.mean is not None:
                made.append(plots.metric_plot(folder / f"{stem}-plots" / f"{_safe(m.name)}.png", m.name,
                                              {r: float(v) for r, v in m.values.items()}, m.mean, m.sd, m.direction))
    else:
        note = plots.HOW_TO_GET
    refs = references.for_workloads(list(stats.identity.get("workloads") or []))
    md = [f"# Report: {stats.title}", ""]
    md += [f"- {k}: {v}" for k, v in header.items()]
    md += [f"- runs: {', '.join(stats.runs)} (run0, the warm-up, is never part of a report)", ""]
    md += ["Mean, sample standard deviation (as the runbook's statistics block) and the values by run. "
           "`better` is the runbook's direction; `rel. spread` is sd / |mean|.", ""]
    md += _md_table(REPORT_HEADERS, report_rows(stats))
    flagged = [(m.name, f) for m in stats.metrics for f in m.flags]
    if flagged:
        md += ["", "## Flags (the runbook's notes that apply)", ""] + [f"- **{n}**: {f}" for n, f in flagged]
    if stats.notes:
        md += ["", "## Notes", ""] + [f"- {n}" for n in stats.notes]
    if stats.run_notes:  # what the runs printed about themselves (the local target's substitutes...)
        md += ["", "## Notes from the runs", ""] + [f"- {n}" for n in stats.run_notes]
    if refs:
        md += ["", "## Reference results: OTHER SETUPS", "", references.NOTE, ""]
        md += _md_table(("workload", "source", "setup", "results"), [[r.workload, r.source, r.setup, r.results]
                                                                   for r in refs])
    tele = telemetry_view.view(stats.run_dirs)
    md += telemetry_view.markdown(tele)
    if plots.available():
        made += [plots.telemetry_plot(folder / f"{stem}-plots" / f"telemetry-{csv.stem}.png", csv) for csv in tele.csvs]
    md += ["", "## Plots", ""]
    md += [f"![{p.stem}]({p.parent.name}/{p.name})" for p in made] if made else [note]
    (folder / f"{stem}.md").write_text("\n".join(md) + "\n")
    doc = {**header, "runs": list(stats.runs), "run_dirs": [str(d) for d in stats.run_dirs],
           "identity": stats.identity, "environment": stats.environment, "notes": list(stats.notes),
           "run_notes": list(stats.run_notes),
           "metrics": {m.name: {"mean": m.mean, "sd": m.sd, "values": m.values, "direction": m.direction,
                                "rel_spread": m.rel_spread, "flags": list(m.flags)} for m in stats.metrics},
           "reference_results_other_setups": [dataclasses.asdict(r) for r in refs],
           "telemetry": {"applies": tele.applies, "reason": tele.reason, "warnings": list(tele.warnings),
                         "workloads": {w: {"energy_j": e, "energy_per_request_j": r, "energy_per_speech_second_j": s}
                                       for w, e, r, s in tele.rows}},
           "plots": [str(p) for p in made], "plots_note": note}
    json_path = write_json(folder / f"{stem}.json", doc)
    return Written(folder / f"{stem}.md", json_path, tuple(made), note, stem != "report")


COMPARE_HEADERS = ("metric", "better", "A mean ± sd", "B mean ± sd", "B - A", "change", "p", "verdict")


def compare_rows(c: Comparison) -> list[list[str]]:
    """The console/Markdown table of a comparison."""
    return [[m.name, m.direction, f"{fmt(m.a_mean)} ± {fmt(m.a_sd)}", f"{fmt(m.b_mean)} ± {fmt(m.b_sd)}",
             fmt(m.diff), _pct(m.pct) if m.pct is None else f"{m.pct:+.1%}", "-" if m.p is None else f"{m.p:.3g}",
             m.verdict.upper() if m.verdict in ("better", "worse") else m.verdict] for m in c.metrics]


def write_compare(folder: Path, c: Comparison, values: dict[str, tuple[list[float], list[float]]]) -> Written:
    """compare.md, compare.json and a plot of A against B (with the extra)."""
    stem = fresh_stem(folder, "compare")
    made: tuple[Path, ...] = ()
    note = ""
    rows = [(m.name, *values[m.name], m.verdict) for m in c.metrics if m.direction != "context"]
    if plots.available():
        made = (plots.compare_plot(folder / f"{stem}-plots" / "a_vs_b.png", rows, c.a, c.b),)
    else:
        note = plots.HOW_TO_GET
    zero = plots.constant_zero(rows)
    md = [f"# Compare: A {c.a} (base) vs B {c.b}", "",
          f"- test: {c.test}, alpha {c.alpha:g}, minimum relative effect {c.min_effect:.0%}; a metric is "
          "better or worse only when both hold",
          f"- verdicts: {', '.join(f'{k} {v}' for k, v in c.verdicts().items())}"]
    if c.differences:
        md += ["", "## Setups differ (compared with --force)", ""] + [f"- {d}" for d in c.differences]
    md += [""] + _md_table(COMPARE_HEADERS, compare_rows(c))
    if c.notes:
        md += ["", "## Notes", ""] + [f"- {n}" for n in c.notes]
    md += ["", "## Plot", ""] + ([f"![A vs B]({p.parent.name}/{p.name})" for p in made] or [note])
    if made and zero:
        md += ["", f"Not plotted, 0 in every run of both: {', '.join(zero)}."]
    (folder / f"{stem}.md").write_text("\n".join(md) + "\n")
    doc = {**dataclasses.asdict(c), "values": {k: {"a": a, "b": b} for k, (a, b) in values.items()},
           "plots": [str(p) for p in made], "plots_note": note, "not_plotted_constant_zero": zero}
    json_path = write_json(folder / f"{stem}.json", doc)
    return Written(folder / f"{stem}.md", json_path, made, note, stem != "compare")
