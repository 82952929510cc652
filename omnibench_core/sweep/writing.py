"""A sweep's files, in ``<revision>/sweeps/<sweep>/<points>/`` (:func:`sweep_folder`):
``sweep.json`` (every point's numbers and what the sweep says), ``sweep.md`` (the table, the
knee, the Pareto front, the goodput) and ``sweep.png`` (:mod:`.plots`). They are a view of the points' campaigns, rebuilt whole by every
``invoke sweep`` of it (each written whole or not at all); the campaigns hold the data.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..campaign import plots as campaign_plots
from ..campaign.writing import fmt, plot_atomic, write_atomic
from ..store import sweep_file
from ..store.names import under_root
from ..tables import md_code, md_table, md_text, table
from .curve import PointResult, best_within, curves, knee, pareto
from .execute import SweepResult
from .plots import Series, curve_plot

# each cell carries its unit (omnibench_core/units.py): ms, s or req/s, three significant digits
BASE_HEADERS = ("point", "campaign", "runs", "throughput", "± sd", "latency mean", "latency p95", "failed")
SLO_HEADERS = ("goodput", "holds target")  # with --slo
OPEN_LOOP_HEADERS = ("lateness mean", "lateness max", "arrival seed")  # with a request rate


QPS, SECONDS = "throughput_qps", "latency_s"  # the names whose unit a cell is shown in


@dataclass(frozen=True)
class SweepWritten:
    """The files a sweep wrote (``plot`` None without matplotlib, ``plot_note`` says why)."""

    folder: Path
    json: Path
    markdown: Path
    plot: Path | None
    plot_note: str = ""


def sweep_folder(result: SweepResult, root: Path) -> Path:
    """``<revision>/sweeps/<sweep name>/<points>``, checked to lie under the results root. The
    points are in the path because sweeps of one name share their points' campaigns (``1,4`` then
    ``1,4,8`` measures only c8) but not their views: each set of points keeps its own files."""
    labels = "_".join(r.point.label for r in result.results)
    key = labels if len(labels) <= 80 else hashlib.sha256(labels.encode()).hexdigest()[:12]
    return under_root(root, sweep_file.sweeps_dir(result.revision_dir) / result.spec.sweep_name() / key,
                      "sweep folder")


def findings(result: SweepResult) -> list[str]:
    """What the points say together, one sentence each: the knee of each curve, the Pareto front,
    the goodput under the target."""
    out = []
    for curve in curves(result.results):
        k = knee(curve)
        where = f" (request rate {curve[0].point.label.split('-')[-1]})" if len(curves(result.results)) > 1 else ""
        if k is None:
            out.append(f"knee{where}: none within the swept range (latency never grew faster than throughput)")
        else:
            out.append(f"knee{where}: {k.point.label}, the last point before latency grows faster than throughput "
                       f"({fmt(k.throughput_qps, QPS)} at {fmt(k.latency_mean_s, SECONDS)} mean latency)")
    front = pareto(result.results)
    out.append("Pareto front (no other point has more throughput at less latency): "
               + (", ".join(r.point.label for r in front) or "none (points lack numbers)"))
    slo = result.spec.slo
    if slo is not None:
        best = best_within(result.results, slo)
        out.append(f"goodput under {slo.text()}: " + (
            f"{fmt(best.throughput_qps, QPS)} at {best.point.label}, the highest throughput that holds the target"
            if best else "no point holds the target"))
    return out


def headers(result: SweepResult) -> tuple[str, ...]:
    """The table's columns: the target's only with one, the schedule's only with a request rate."""
    slo = SLO_HEADERS if result.spec.slo else ()
    open_loop = OPEN_LOOP_HEADERS if any(r.point.rate is not None for r in result.results) else ()
    return (*BASE_HEADERS, *slo, *open_loop, "knee")


def rows(result: SweepResult) -> list[list[str]]:
    """The table's rows in load order, under :func:`headers`; the knee marked."""
    knees = {id(k) for k in (knee(c) for c in curves(result.results)) if k is not None}
    slo = result.spec.slo
    open_loop = any(r.point.rate is not None for r in result.results)
    out = []
    for r in result.results:
        row = [r.point.label, r.campaign, str(r.runs), fmt(r.throughput_qps, QPS), fmt(r.throughput_sd, QPS),
               fmt(r.latency_mean_s, SECONDS), fmt(r.latency_p95_s, SECONDS), fmt(r.failed)]
        if slo:
            holds = r.holds(slo)
            row += [fmt(r.goodput_qps, QPS), "-" if holds is None else ("yes" if holds else "no")]
        if open_loop:
            row += [fmt(r.lateness_mean_s, SECONDS), fmt(r.lateness_max_s, SECONDS), fmt(r.arrival_seed)]
        out.append([*row, "knee" if id(r) in knees else ""])
    return out


def as_record(result: SweepResult) -> dict[str, Any]:
    """``sweep.json``: what was asked, each point's numbers, and the findings."""
    spec = result.spec
    return {"sweep": spec.sweep_name(), "options_digest": spec.options_digest(), "workload": spec.workload,
            "runs_per_point": spec.runs,
            "options": list(spec.options), "client": spec.client, "upstream": spec.upstream,
            "slo": {"metric": spec.slo.metric, "bound_s": spec.slo.bound} if spec.slo else None,
            "points": [_point(r) for r in result.results],
            "knees": [k.point.label for k in (knee(c) for c in curves(result.results)) if k is not None],
            "pareto_front": [r.point.label for r in pareto(result.results)],
            "findings": findings(result)}


def _point(r: PointResult) -> dict[str, Any]:
    return {"label": r.point.label, "concurrency": r.point.concurrency, "request_rate": r.point.rate,
            "campaign": r.campaign, "runs": r.runs, "throughput_qps": r.throughput_qps,
            "throughput_sd": r.throughput_sd, "latency_mean_s": r.latency_mean_s, "latency_p95_s": r.latency_p95_s,
            "latency_mean_sd_s": r.latency_sd, "latency": r.stats, "goodput_qps": r.goodput_qps, "failed": r.failed,
            "dispatch_lateness_mean_s": r.lateness_mean_s, "dispatch_lateness_max_s": r.lateness_max_s,
            "arrival_seed": r.arrival_seed}


def write_sweep(result: SweepResult, root: Path) -> SweepWritten:
    """Write the sweep's three files (see the module docstring)."""
    folder = sweep_folder(result, root)
    folder.mkdir(parents=True, exist_ok=True)
    json_path = sweep_file.save(folder, as_record(result))
    plot: Path | None = None
    note = ""
    if campaign_plots.available():
        plot = plot_atomic(folder / "sweep.png", lambda tmp: curve_plot(
            tmp, title(result), [Series(result.spec.sweep_name(), result.results)], result.spec.slo))
    else:
        note = campaign_plots.HOW_TO_GET
    md = write_atomic(folder / "sweep.md", markdown(result, plot, note))
    return SweepWritten(folder, json_path, md, plot, note)


def title(result: SweepResult) -> str:
    """The plot's title: the workload, the points, and the knee(s)."""
    knees = [k.point.words for k in (knee(c) for c in curves(result.results)) if k is not None]
    return (f"{result.spec.workload}: latency against throughput, {len(result.results)} load points x "
            f"{result.spec.runs} runs; " + (f"knee at {', '.join(knees)}" if knees else "no knee in the swept range"))


# --upstream: what differs from a campaign per point, said wherever the sweep's numbers are shown
DESIGN_NOTE = "; sglang-omni's own sweep: every level of a run measured on that run's one server"


def markdown(result: SweepResult, plot: Path | None, plot_note: str) -> str:
    """``sweep.md``."""
    spec = result.spec
    lines = [f"# Sweep {md_text(spec.sweep_name())}", "",
             f"Workload {md_code(spec.workload)}, {len(result.results)} load points, {spec.runs} measured runs each "
             f"(after a warm-up run0; a fresh server per run{DESIGN_NOTE if spec.upstream else ''}). Options: "
             f"{', '.join(md_code(o) for o in spec.options) or 'defaults'}. Numbers are means over the runs.", ""]
    lines += [f"- {md_text(f)}" for f in findings(result)]
    lines += ["", *md_table(headers(result), rows(result)), ""]
    lines.append(f"![latency against throughput]({plot.name})" if plot else f"(no plot: {md_text(plot_note)})")
    lines += ["", "goodput: requests per second that succeeded within the target's bound; lateness: how far sends "
              "fell behind the arrival schedule (open loop only); each point's own report: "
              f"{md_code('invoke report --name CAMPAIGN')}.", ""]
    return "\n".join(lines)


def sweep_text(result: SweepResult, written: SweepWritten) -> str:
    """What ``invoke sweep`` prints."""
    lines = [f"sweep {result.spec.sweep_name()}: {result.spec.workload}, {len(result.results)} load points x "
             f"{result.spec.runs} runs{DESIGN_NOTE if result.spec.upstream else ''}", table(rows(result), headers(result)), *findings(result),
             f"sweep: {written.markdown}", f"sweep data: {written.json}",
             f"plot: {written.plot}" if written.plot else written.plot_note]
    return "\n".join(lines)
