"""The site's sweep pages: each sweep in the results root (``<revision>/sweeps/<sweep>/<points>/
sweep.json``, read by :mod:`..store.sweep_file`) as a page with its curves (:func:`.site_svg.sweep_plot`:
error bars over the runs, the knee, the Pareto front), what the sweep found and its table, each
point named in words (``4 concurrent``) beside its label (``c4``).

Nothing is recomputed: the knees, the Pareto front and the findings are the record's, as
``invoke sweep`` wrote them. A record that cannot be read is named (``invoke publish`` prints it),
never a page with made-up numbers.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from html import escape
from pathlib import Path
from typing import Any

from ..errors import OmnibenchError
from ..store import sweep_file
from ..store.names import SWEEPS
from ..sweep.curve import PointResult, curves
from ..units import display
from .site_svg import sweep_plot

SWEEP_PAGES = "sweeps"  # the site's folder of sweep pages


@dataclass(frozen=True)
class SweepPage:
    """One sweep of the results root: its page (relative to the site root), where it lies, its record."""

    path: str
    revision: str
    name: str
    points: str  # the folder of its set of points (``c1_c4``)
    record: dict[str, Any]

    @property
    def workload(self) -> str:
        """The workload the sweep measured."""
        return str(self.record.get("workload"))

    @property
    def results(self) -> tuple[PointResult, ...]:
        """Its points as the record holds them, in load order."""
        return tuple(PointResult.from_record(p) for p in self.record["points"])


def find_sweeps(results: Path, slug: Callable[[str], str], skipped: list[str]) -> list[SweepPage]:
    """Every sweep record under ``results`` (each revision's ``sweeps/<name>/<points>``), a page
    name each; a record that cannot be read is named in ``skipped`` and left out."""
    found = []
    for base in sorted(results.glob(f"*/{SWEEPS}/*")):
        for folder in sweep_file.point_sets(base):
            try:
                record = sweep_file.load(folder)
            except OmnibenchError as exc:
                skipped.append(f"{sweep_file.record_path(folder)}: {exc.message}; its sweep has no page")
                continue
            revision = base.parent.parent.name
            page = f"{SWEEP_PAGES}/{slug(f'{revision}--{base.name}--{folder.name}')}.html"
            found.append(SweepPage(page, revision, base.name, folder.name, record))
    return found


HEADERS = ("point", "load", "campaign", "runs", "throughput ± sd", "latency mean ± sd", "latency p95", "failed", "")


def _rows(page: SweepPage, knees: Sequence[str], front: Sequence[str]) -> list[list[str]]:
    def sd(metric: str, value: float | None) -> str:
        return f" ± {escape(display(metric, value))}" if value is not None else ""

    out = []
    for r in page.results:
        marks = [w for w, on in (("knee", r.point.label in knees), ("Pareto front", r.point.label in front)) if on]
        out.append([f"<code>{escape(r.point.label)}</code>", escape(r.point.words), escape(r.campaign), str(r.runs),
                    escape(display("throughput_qps", r.throughput_qps)) + sd("throughput_qps", r.throughput_sd),
                    escape(display("latency_mean_s", r.latency_mean_s)) + sd("latency_mean_s", r.latency_sd),
                    escape(display("latency_p95_s", r.latency_p95_s)), escape(display("failed", r.failed)),
                    escape(", ".join(marks))])
    return out


def sweep_page(page: SweepPage, doc: Callable[[str, list[str], str], str],
               table: Callable[[Sequence[str], Sequence[Sequence[str]], str], list[str]]) -> str:
    """The sweep's page (``doc`` and ``table`` are the site's page and table writers)."""
    record = page.record
    knees = [str(k) for k in record.get("knees") or []]
    front = [str(k) for k in record.get("pareto_front") or []]
    slo = record.get("slo")
    target = (f"{slo['metric']} <= {slo['bound_s']:g} s", float(slo["bound_s"])) if isinstance(slo, dict) else None
    results = page.results
    words = {r.point.label: r.point.words for r in results}
    spread = any(r.latency_sd is not None for r in results)
    body = ['<nav><a href="../index.html">index</a></nav>', f"<h1>Sweep {escape(page.name)}</h1>",
            f'<p class="about">workload {escape(page.workload)}, revision {escape(page.revision)}, points '
            f"{escape(page.points)}; {len(results)} load points, {escape(str(record.get('runs_per_point', '?')))} "
            f"measured runs each; options: {escape(', '.join(map(str, record.get('options') or [])) or 'defaults')}. "
            "Numbers are means over the runs"
            + ("" if spread else "; this record holds no spread of the mean latency (written before it did): "
               "the same invoke sweep command writes it again with its error bars") + ".</p>",
            sweep_plot(curves(results), knees=knees, front=front, target=target), "<h2>What the points say</h2>",
            "<ul>" + "".join(f"<li>{escape(str(f))}</li>" for f in record.get("findings") or []) + "</ul>",
            f'<p class="about">knee: {escape(", ".join(f"{words.get(k, k)} ({k})" for k in knees) or "none")}; '
            f'Pareto front: {escape(", ".join(f"{words.get(k, k)} ({k})" for k in front) or "none")}</p>',
            "<h2>Points</h2>", *table(HEADERS, _rows(page, knees, front), "sweep-points")]
    return doc(f"sweep {page.name}", body, "../")
