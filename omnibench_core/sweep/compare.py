"""Two sweeps compared: per common load point the campaign comparison of throughput and latency
(the four verdicts, held together), and one plot with both curves.

A sweep is named as a campaign is: ``NAME`` (this revision folder), ``REVISION/NAME``, or
``REVISION/NAME/POINTS`` where a sweep of that name was written for several sets of points
(without it such a name is refused, naming each set: two sweeps sharing a name are not guessed). The files go to
``<results>/comparisons/<A>__vs__<B>/sweep-compare.{md,json,png}``, each side named
``REVISION.NAME.POINTS``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import api, defaults
from ..campaign import campaign_file
from ..campaign import plots as campaign_plots
from ..campaign.compare import Comparison
from ..campaign.compare import compare as compare_stats
from ..campaign.summary import campaign_stats
from ..campaign.writing import fmt, plot_atomic, write_atomic
from ..errors import OmnibenchError
from ..jsonio import write_json
from ..settings import Settings
from ..store import sweep_file
from ..store.names import COMPARISONS, check_name, under_root
from ..tables import md_code, md_table, md_text, table
from .curve import PointResult
from .plots import Series, curve_plot
from .points import LoadPoint, Slo
from .reading import point_result

JUDGED = ("throughput_qps", "latency_mean_s", "latency_p95_s")  # per point, with the workload's prefix
HEADERS = ("point", "metric", "A mean", "B mean", "change", "interval", "held to", "verdict")


@dataclass(frozen=True)
class SweepOnDisk:
    """A sweep found by its reference: its folder of points and its ``sweep.json``."""

    ref: str
    revision_dir: Path
    folder: Path
    record: dict[str, Any]

    @property
    def title(self) -> str:
        """``REVISION/NAME``."""
        return f"{self.revision_dir.name}/{self.record.get('sweep')}"


@dataclass(frozen=True)
class PointComparison:
    """One common load point: its campaigns' comparison."""

    label: str
    comparison: Comparison


@dataclass(frozen=True)
class SweepComparison:
    """Two sweeps compared, and the files written."""

    a: SweepOnDisk
    b: SweepOnDisk
    points: tuple[PointComparison, ...]
    only_a: tuple[str, ...]
    only_b: tuple[str, ...]
    alpha: float
    folder: Path
    plot: Path | None
    plot_note: str


def is_sweep(settings: Settings, ref: str) -> bool:
    """Whether ``ref`` names a sweep and no campaign: ``invoke compare`` then compares sweeps."""
    try:
        found = _sweep_folder(settings, ref)
    except OmnibenchError:
        return False
    revision, name = found[0], found[1]
    return campaign_file.campaign_path(revision, name).is_file() is False


def find_sweep(settings: Settings, ref: str) -> SweepOnDisk:
    """The sweep ``ref`` names (see the module docstring), or an error listing the sweeps there."""
    revision, name, points = _sweep_folder(settings, ref)
    base = sweep_file.sweeps_dir(revision) / name
    sets = sweep_file.point_sets(base)
    if not points and len(sets) > 1:  # one name swept at several sets of points: which one is not a guess
        prefix = ref.strip("/")
        raise OmnibenchError(f"sweep {ref!r} was written for {len(sets)} sets of points", evidence={
            "point sets there": ", ".join(f"{prefix}/{p.name}" for p in sets)},
            hint=f"name one: {prefix}/POINTS (e.g. {prefix}/{sets[-1].name})")
    folder = base / points if points else (sets[-1] if sets else base)
    if not sweep_file.record_path(folder).is_file():
        raise OmnibenchError(f"no sweep {ref!r} at {base}", evidence={"point sets there": ", ".join(
            p.name for p in sets) or "none"}, hint="name a sweep written by `invoke sweep`: NAME, REVISION/NAME "
                                                   "or REVISION/NAME/POINTS")
    return SweepOnDisk(ref, revision, folder, sweep_file.load(folder))


def _sweep_folder(settings: Settings, ref: str) -> tuple[Path, str, str]:
    parts = ref.strip("/").split("/")
    if len(parts) == 1:
        revision = api.revision_dir(settings)
    elif len(parts) in (2, 3):
        revision = settings.run.results_root / parts[0]
        parts = parts[1:]
    else:
        raise OmnibenchError(f"cannot read the sweep reference {ref!r}", hint="write NAME, REVISION/NAME or "
                                                                              "REVISION/NAME/POINTS")
    name, points = parts[0], (parts[1] if len(parts) > 1 else "")
    for part in (name, points) if points else (name,):
        check_name(part, "sweep name")  # one folder entry each: no "..", "." or control characters
    folder = under_root(settings.run.results_root, sweep_file.sweeps_dir(revision) / name / points, "sweep folder")
    if not folder.is_dir():
        raise OmnibenchError(f"no sweep {ref!r}", evidence={"looked in": str(folder)})
    return revision, name, points


def _points(sweep: SweepOnDisk) -> dict[str, PointResult]:
    """Each point of the sweep read again from its campaign (as the sweep read it)."""
    workload = str(sweep.record.get("workload"))
    slo_doc = sweep.record.get("slo")
    slo = Slo(slo_doc["metric"], float(slo_doc["bound_s"])) if isinstance(slo_doc, dict) else None
    out = {}
    for p in sweep.record["points"]:
        point = LoadPoint(p.get("concurrency"), p.get("request_rate"))
        path = campaign_file.campaign_path(sweep.revision_dir, str(p.get("campaign")))
        out[point.label] = point_result(workload, point, path, slo, upstream=sweep.record.get("upstream") is True)
    return out


def compare_sweeps(settings: Settings, a: str, b: str, *, alpha: float = defaults.ALPHA,
                   min_effect: float = defaults.MIN_EFFECT, force: bool = False) -> SweepComparison:
    """Compare sweep B with base A, point by point (see the module docstring). The whole table is
    one family: each point's three metrics are held to ``alpha`` / the number of common points."""
    sa, sb = find_sweep(settings, a), find_sweep(settings, b)
    if sa.record.get("workload") != sb.record.get("workload"):
        raise OmnibenchError("the two sweeps measured different workloads", evidence={
            "A": str(sa.record.get("workload")), "B": str(sb.record.get("workload"))},
            hint="compare sweeps of one workload")
    pa, pb = _points(sa), _points(sb)
    common = [label for label in pa if label in pb]
    if not common:
        raise OmnibenchError("the two sweeps share no load point", evidence={"A": ", ".join(pa), "B": ", ".join(pb)},
                             hint="sweep B at A's points (the same --concurrency/--request-rate)")
    workload = str(sa.record["workload"])
    judged = [f"{workload}.{m}" for m in JUDGED]
    level = alpha / len(common)
    rows = []
    for label in common:
        _, stats_a = campaign_stats(campaign_file.campaign_path(sa.revision_dir, pa[label].campaign))
        _, stats_b = campaign_stats(campaign_file.campaign_path(sb.revision_dir, pb[label].campaign))
        rows.append(PointComparison(label, compare_stats(stats_a, stats_b, alpha=level, min_effect=min_effect,
                                                         force=force, metrics=judged)))
    folder = under_root(settings.run.results_root, settings.run.results_root / COMPARISONS /
                        f"{_key(sa)}__vs__{_key(sb)}"[:200], "comparison folder")
    folder.mkdir(parents=True, exist_ok=True)
    plot: Path | None = None
    note = ""
    if campaign_plots.available():
        series = [Series(f"A {sa.title}", tuple(pa.values())), Series(f"B {sb.title}", tuple(pb.values()))]
        plot = plot_atomic(folder / "sweep-compare.png", lambda tmp: curve_plot(
            tmp, f"{workload}: latency against throughput, A (base) and B", series))
    else:
        note = campaign_plots.HOW_TO_GET
    made = SweepComparison(sa, sb, tuple(rows), tuple(x for x in pa if x not in pb), tuple(x for x in pb if x not in pa),
                           alpha, folder, plot, note)
    write_json(folder / "sweep-compare.json", as_record(made))
    write_atomic(folder / "sweep-compare.md", markdown(made))
    return made


def _key(sweep: SweepOnDisk) -> str:
    """``REVISION.NAME.POINTS``: a comparison folder's half (a folder entry, no ``/``)."""
    return f"{sweep.revision_dir.name}.{sweep.record.get('sweep')}.{sweep.folder.name}"


def rows(made: SweepComparison) -> list[list[str]]:
    """One row per point and judged metric."""
    out = []
    for point in made.points:
        for m in point.comparison.metrics:
            interval = "-" if m.low is None or m.high is None else (
                f"[{m.low:+.1%}, {m.high:+.1%}]" if m.relative else f"[{fmt(m.low)}, {fmt(m.high)}]")
            out.append([point.label, m.name, fmt(m.a_mean), fmt(m.b_mean),
                        "-" if m.pct is None else f"{m.pct:+.1%}", interval, f"{m.level:g}", str(m.verdict)])
    return out


def as_record(made: SweepComparison) -> dict[str, Any]:
    """``sweep-compare.json``."""
    return {"a": made.a.title, "b": made.b.title, "alpha": made.alpha, "only_in_a": list(made.only_a),
            "only_in_b": list(made.only_b),
            "points": [{"label": p.label, "verdicts": {m.name: str(m.verdict) for m in p.comparison.metrics},
                        "changes": {m.name: m.pct for m in p.comparison.metrics}} for p in made.points]}


def _lines(made: SweepComparison) -> list[str]:
    out = [f"A (base) {made.a.title} vs B {made.b.title}: {_count(len(made.points), 'common load point')}; each point's "
           f"{len(JUDGED)} metrics held to alpha {made.alpha:g} / {len(made.points)} (Holm within the point)"]
    out += [f"only in A (not compared): {', '.join(made.only_a)}"] if made.only_a else []
    out += [f"only in B (not compared): {', '.join(made.only_b)}"] if made.only_b else []
    for p in made.points:
        out += [f"{p.label}: {m.verdict} {m.name}: {m.why}" for m in p.comparison.metrics
                if str(m.verdict) == "inconclusive"]
        out += [f"{p.label}: SETUP DIFFERS (--force): {d}" for d in p.comparison.differences]
    return out


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def markdown(made: SweepComparison) -> str:
    """``sweep-compare.md``."""
    lines = [f"# Sweep {md_text(made.b.title)} against {md_text(made.a.title)}", "",
             *[f"- {md_text(x)}" for x in _lines(made)], "", *md_table(HEADERS, rows(made)), "",
             f"![both curves]({made.plot.name})" if made.plot else f"(no plot: {md_text(made.plot_note)})", "",
             f"Each point's own comparison: {md_code('invoke compare REVISION/CAMPAIGN REVISION/CAMPAIGN')}.", ""]
    return "\n".join(lines)


def compare_text(made: SweepComparison) -> str:
    """What ``invoke compare`` prints for two sweeps."""
    counts: dict[str, int] = {}
    for p in made.points:
        for m in p.comparison.metrics:
            counts[str(m.verdict)] = counts.get(str(m.verdict), 0) + 1
    return "\n".join([_lines(made)[0], table(rows(made), HEADERS), *_lines(made)[1:],
                      "verdicts: " + ", ".join(f"{k} {v}" for k, v in counts.items()),
                      f"comparison: {made.folder / 'sweep-compare.md'}",
                      f"plot: {made.plot}" if made.plot else made.plot_note])
