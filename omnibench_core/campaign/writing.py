"""Report and comparison files: Markdown for people, JSON for programs, PNG plots when matplotlib
is installed. A complete report is never overwritten: a later report of the same campaign gets
the next number (``report-2.md``...), and says so; a look that would write what the last report
holds (nothing changed: the same runs, values, notes and settings) writes nothing and names it. Every file is written under a temporary name
and renamed, the JSON last, so an interrupted report never leaves a half file under its final
name, and the next report replaces what it left."""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import functools
import hashlib
import json
import os
import re
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from ..errors import OmnibenchError, storage_error
from ..jsonio import read_json, write_json, write_text
from ..quality.paired import HEADERS as QUALITY_HEADERS
from ..quality.paired import lines as quality_lines
from ..quality.paired import rows as quality_rows
from ..stats.verdict import Verdict, change_text, interval_text
from ..tables import md_table, md_text
from ..units import display
from . import distributions, plots, references, telemetry_view
from .compare import NOT_COMPARABLE, Comparison
from .directions import direction
from .summary import RunSetStats


@contextlib.contextmanager
def report_slot(folder: Path, stem: str) -> Iterator[tuple[str, bool]]:
    """Hold the folder (``flock`` on it, so two reports at once take turns) and give the name to
    write: ``stem`` or ``stem-N``, the first without its ``.json``, and whether a partial one
    under that name is being replaced.

    The ``.json`` is written last, so a name without it was never finished (a report killed while
    it was written, or one whose disk filled): its leftovers are replaced, never kept as a report
    and never a reason to go on to the next number. A complete report is never overwritten.
    """
    folder.mkdir(parents=True, exist_ok=True)
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # dropped by the kernel if this process dies
        n = 1
        while (folder / f"{_numbered(stem, n)}.json").exists():
            n += 1
        name = _numbered(stem, n)
        partial = [p for p in (folder / f"{name}.md", folder / f".{name}.md.partial", folder / f"{name}-plots",
                               *folder.glob(f".{name}.json.*.tmp"))  # jsonio's temporary name
                   if p.exists() or p.is_symlink()]
        for leftover in partial:
            if leftover.is_dir() and not leftover.is_symlink():
                shutil.rmtree(leftover)
            else:
                leftover.unlink()
        yield name, bool(partial)
    finally:
        os.close(fd)


def _numbered(stem: str, n: int) -> str:
    return stem if n == 1 else f"{stem}-{n}"


def write_atomic(path: Path, text: str) -> Path:
    """Write ``text`` to ``path`` whole or not at all (:func:`.jsonio.write_text`; a device or FIFO
    is written to directly, never replaced). The temporary name is fixed (``.<name>.partial``):
    the folder is held while a report is written, and :func:`report_slot` knows its leftovers."""
    return write_text(path, text, temporary=f".{path.name}.partial")


def plot_atomic(path: Path, draw: Callable[[Path], Path]) -> Path:
    """A plot drawn to a temporary PNG beside ``path`` (``draw(tmp)``), then renamed onto it."""
    tmp = path.with_name(f".{path.stem}.partial.png")  # .png: matplotlib picks the format from it
    try:
        os.replace(draw(tmp), path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


def fmt(value: Any, metric: str = "") -> str:
    """A value as a report shows it: a ``metric``'s time or rate in its unit, to three significant
    digits (:func:`omnibench_core.units.display`); other numbers to six, the rest as text."""
    return display(metric, value)


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
    replaced_partial: bool = False  # an unfinished one under this name (interrupted, disk full) was replaced
    summary: Path | None = None  # the pull-request summary (comparisons)
    step_summary: Path | None = None  # the $GITHUB_STEP_SUMMARY it was appended to
    unchanged: bool = False  # nothing changed since this report: it was named, not written again


def report_rows(stats: RunSetStats) -> list[list[str]]:
    """The console/Markdown table: metric, direction, mean, sd, rel. spread, values by run, flags."""
    return [[m.name, m.direction, fmt(m.mean, m.name), fmt(m.sd, m.name), _pct(m.rel_spread),
             ", ".join(f"{r}={fmt(v, m.name)}" for r, v in m.values.items()), "FLAG" if m.flags else ""] for m in stats.metrics]


REPORT_HEADERS = ("metric", "better", "mean", "sd", "rel. spread", "values by run", "flags")


def write_report(folder: Path, stats: RunSetStats, header: dict[str, Any]) -> Written:
    """report.md, report.json and one plot per numeric metric (with the extra); a disk that refuses
    is a StorageError, and nothing half-written stays under a final name."""
    try:
        with report_slot(folder, "report") as (stem, replaced):
            tele = telemetry_view.view(stats.run_dirs)
            doc = _report_doc(stats, header, tele)
            return _unchanged(folder, stem, doc) or _write_report(folder, stem, replaced, stats, header, tele, doc)
    except OSError as exc:
        raise storage_error(f"writing the report in {folder}", exc) from exc


INPUTS_DIGEST = "inputs_digest"  # report.json's digest of what the report says (plots aside)


def _report_doc(stats: RunSetStats, header: dict[str, Any], tele: telemetry_view.TelemetryView) -> dict[str, Any]:
    """report.json's content but its plots, with :data:`INPUTS_DIGEST`: a digest of it and of
    whether plots can be drawn, so a later look knows whether anything changed."""
    refs = references.for_workloads(list(stats.identity.get("workloads") or []))
    doc = {**header, "runs": list(stats.runs), "run_dirs": [str(d) for d in stats.run_dirs],
           "identity": stats.identity, "environment": stats.environment, "notes": list(stats.notes),
           "run_notes": list(stats.run_notes),
           "metrics": {m.name: {"mean": m.mean, "sd": m.sd, "values": m.values, "direction": m.direction,
                                "rel_spread": m.rel_spread, "flags": list(m.flags)} for m in stats.metrics},
           "reference_results_other_setups": [dataclasses.asdict(r) for r in refs],
           "telemetry": {"applies": tele.applies, "reason": tele.reason, "warnings": list(tele.warnings),
                         "workloads": {w: {"energy_j": e, "energy_per_request_j": r, "energy_per_speech_second_j": s}
                                       for w, e, r, s in tele.rows}}}
    said = json.dumps({**doc, "plots available": plots.available()}, sort_keys=True, default=str)
    return {**doc, INPUTS_DIGEST: hashlib.sha256(said.encode()).hexdigest()}


def _unchanged(folder: Path, stem: str, doc: dict[str, Any]) -> Written | None:
    """The last complete report before ``stem`` when it says what ``doc`` says and its files are
    all there; else None (the report is written)."""
    n = int(stem.rpartition("-")[2]) if stem != "report" else 1
    if n == 1:
        return None
    last = _numbered("report", n - 1)
    try:
        before = read_json(folder / f"{last}.json")
    except (OSError, ValueError, OmnibenchError):
        return None  # unreadable: written again, under the next number
    made = tuple(Path(p) for p in before.get("plots") or [] if isinstance(p, str)) if isinstance(before, dict) else ()
    if not isinstance(before, dict) or before.get(INPUTS_DIGEST) != doc[INPUTS_DIGEST] or \
            not (folder / f"{last}.md").is_file() or not all(p.is_file() for p in made):
        return None
    return Written(folder / f"{last}.md", folder / f"{last}.json", made, str(before.get("plots_note") or ""),
                   last != "report", unchanged=True)


def _write_report(folder: Path, stem: str, replaced: bool, stats: RunSetStats, header: dict[str, Any],
                  tele: telemetry_view.TelemetryView, doc: dict[str, Any]) -> Written:
    made: list[Path] = []
    note = ""
    constant = [m.name for m in stats.metrics if m.mean is not None and plots.constant(m.numbers)]
    if plots.available():
        for m in stats.metrics:
            if m.mean is not None and m.name not in constant:
                made.append(plot_atomic(folder / f"{stem}-plots" / f"{_safe(m.name)}.png", functools.partial(
                    plots.metric_plot, name=m.name, values={r: float(v) for r, v in m.values.items()}, mean=m.mean,
                    sd=m.sd, direction=m.direction)))
    else:
        note = plots.HOW_TO_GET
    refs = references.for_workloads(list(stats.identity.get("workloads") or []))
    t = md_text  # every name a user gave (campaign, metric, revision, option): inert text
    md = [f"# Report: {t(stats.title)}", ""]
    md += [f"- {t(k)}: {t(v)}" for k, v in header.items()]
    md += [f"- runs: {t(', '.join(stats.runs))} (run0, the warm-up, is never part of a report)", ""]
    md += ["Mean, sample standard deviation (as the runbook's statistics block) and the values by run. "
           "`better` is the runbook's direction; `rel. spread` is sd / |mean|.", ""]
    md += md_table(REPORT_HEADERS, report_rows(stats))
    flagged = [(m.name, f) for m in stats.metrics for f in m.flags]
    if flagged:
        md += ["", "## Flags (the runbook's notes that apply)", ""] + [f"- **{t(n)}**: {t(f)}" for n, f in flagged]
    if stats.notes:
        md += ["", "## Notes", ""] + [f"- {t(n)}" for n in stats.notes]
    if stats.run_notes:  # what the runs printed about themselves (the local target's substitutes...)
        md += ["", "## Notes from the runs", ""] + [f"- {t(n)}" for n in stats.run_notes]
    if refs:  # omnibench's own reference table: its links stay links
        md += ["", "## Reference results: OTHER SETUPS", "", references.NOTE, ""]
        md += md_table(("workload", "source", "setup", "results"), [[r.workload, r.source, r.setup, r.results]
                                                                  for r in refs], escape=False)
    md += telemetry_view.markdown(tele)
    if plots.available():
        made += [plot_atomic(folder / f"{stem}-plots" / f"telemetry-{csv.stem}.png",
                             functools.partial(plots.telemetry_plot, csv_path=csv)) for csv in tele.csvs]
        made += [plot_atomic(folder / f"{stem}-plots" / f"distribution-{_safe(name)}.png",
                             functools.partial(plots.distribution_plot, name=name, per_run=runs,
                                               direction=direction(name)))
                 for name, runs in distributions.per_run(stats.run_dirs).items()]
    md += ["", "## Plots", ""]
    md += [f"![{p.stem}]({p.parent.name}/{p.name})" for p in made] if made else [note]
    if made and constant:
        md += ["", f"Not plotted, one value in every run: {t(', '.join(constant))}."]
    write_atomic(folder / f"{stem}.md", "\n".join(md) + "\n")
    doc = {**doc, "plots": [str(p) for p in made], "plots_note": note, "not_plotted_constant": constant}
    json_path = write_json(folder / f"{stem}.json", doc)  # last: it marks the report complete
    return Written(folder / f"{stem}.md", json_path, tuple(made), note, stem != "report", replaced)


COMPARE_HEADERS = ("metric", "better", "A mean ± sd", "B mean ± sd", "B - A", "change", "interval", "held to",
                   "verdict")


def compare_rows(c: Comparison) -> list[list[str]]:
    """The console/Markdown table of a comparison: each row's change, its interval at 1 - the
    level it was held to (Holm), and the verdict."""
    return [[m.name, m.direction, f"{fmt(m.a_mean, m.name)} ± {fmt(m.a_sd, m.name)}",
             f"{fmt(m.b_mean, m.name)} ± {fmt(m.b_sd, m.name)}",
             fmt(m.diff, m.name), change_text(m.pct if m.relative else m.diff, m.relative),
             interval_text(m.low, m.high, m.relative, m.method), f"{m.level:.3g}",
             str(m.verdict).upper() if m.verdict in (Verdict.BETTER, Verdict.WORSE) else str(m.verdict)]
            for m in c.metrics]


@dataclasses.dataclass(frozen=True)
class PullRequestSummary:
    """How a comparison's pull-request summary is made: passed in by the layer above (the history's
    summaries, ``history.front_door.COMPARISON_SUMMARY``), so this layer imports nothing of it."""

    text: Callable[[Comparison, Path], str]  # the summary's Markdown, from the comparison and its compare.md
    stem: Callable[[str], str]  # its file's stem, from compare.md's
    publish: Callable[[str], Path | None]  # appends it to $GITHUB_STEP_SUMMARY when set; where it went


def write_compare(folder: Path, c: Comparison, values: dict[str, tuple[list[float], list[float]]],
                  summary: PullRequestSummary | None = None) -> Written:
    """compare.md, compare.json, a plot of A against B (with the extra) and, given ``summary``, the
    pull-request summary beside them; written as reports are (:func:`write_report`)."""
    try:
        with report_slot(folder, "compare") as (stem, replaced):
            return _write_compare(folder, stem, replaced, c, values, summary)
    except OSError as exc:
        raise storage_error(f"writing the comparison in {folder}", exc) from exc


def _write_compare(folder: Path, stem: str, replaced: bool, c: Comparison,
                   values: dict[str, tuple[list[float], list[float]]], pr: PullRequestSummary | None) -> Written:
    made: tuple[Path, ...] = ()
    note = ""
    rows = [(m.name, *values[m.name], m.verdict) for m in c.metrics
            if m.direction != "context" and m.verdict != NOT_COMPARABLE]
    if plots.available():
        made = (plot_atomic(folder / f"{stem}-plots" / "a_vs_b.png",
                            functools.partial(plots.compare_plot, rows=rows, a=c.a, b=c.b)),)
    else:
        note = plots.HOW_TO_GET
    same = plots.constant_rows(rows)
    t = md_text  # every name a user gave (campaign, metric, revision): inert text
    md = [f"# Compare: A {t(c.a)} (base) vs B {t(c.b)}", "",
          f"- test: {c.test}; the family ({t(', '.join(m.name for m in c.metrics if m.in_family) or 'none')}) held "
          f"to alpha {c.alpha:g} with {c.correction}'s correction (each row's interval is at 1 - the level it "
          f"was held to; a row that could never reach alpha stays out); minimum effect {c.min_effect:.0%}",
          "- better / worse: the interval excludes 0 and the change is at least the minimum effect; equivalent: "
          "the whole interval lies within plus or minus the minimum effect; inconclusive: neither (measure more "
          "runs: the row says about how many). See docs/verdicts.md.",
          f"- verdicts: {', '.join(f'{k} {v}' for k, v in c.verdicts().items())}"]
    if c.differences:
        md += ["", "## Setups differ (compared with --force)", ""] + [f"- {t(d)}" for d in c.differences]
    md += [""] + md_table(COMPARE_HEADERS, compare_rows(c))
    if c.quality is not None and (c.quality.changed or c.quality.verdicts):  # issue 44: outputs by sample
        md += ["", "## Outputs and quality, sample by sample", ""] + [f"- {t(x)}" for x in quality_lines(c.quality)]
        md += ([""] + md_table(QUALITY_HEADERS, quality_rows(c.quality))) if c.quality.verdicts else []
    md += ["", "## Why", ""] + [f"- {t(m.name)}: {m.verdict} ({m.method or 'no interval'}): {t(m.why)}" for m in c.metrics]
    if c.notes:
        md += ["", "## Notes", ""] + [f"- {t(n)}" for n in c.notes]
    md += ["", "## Plot", ""] + ([f"![A vs B]({p.parent.name}/{p.name})" for p in made] or [note])
    if made and same:
        md += ["", f"Not plotted, one value in every run of both: {t(', '.join(same))}."]
    write_atomic(folder / f"{stem}.md", "\n".join(md) + "\n")
    summary = pr.text(c, folder / f"{stem}.md") if pr else ""
    summary_md = write_atomic(folder / f"{pr.stem(stem)}.md", summary) if pr else None
    doc = {**dataclasses.asdict(c), "values": {k: {"a": a, "b": b} for k, (a, b) in values.items()},
           "plots": [str(p) for p in made], "plots_note": note, "not_plotted_constant": same}
    json_path = write_json(folder / f"{stem}.json", doc)  # last: it marks the comparison complete
    step_summary = pr.publish(summary) if pr else None  # once the comparison is complete
    return Written(folder / f"{stem}.md", json_path, made, note, stem != "compare", replaced, summary_md, step_summary)
