"""``invoke publish``: a static site of a :class:`~.series.History` that works offline from disk
(``file://``): an index with the regressions newest first, then per workload its sweeps, A/B
experiments and metric series grouped by kind (with a filter in plain JavaScript,
:data:`FILTER_JS`); per series a page with its plot (drawn server-side as SVG: :mod:`.site_svg`),
its change points, and each commit's numbers, report and environment; per sweep and per A/B
experiment of the results root a page read from its record (:mod:`.site_sweeps`, :mod:`.site_ab`).

The reports are copied into the site (:mod:`.site_reports`), so the links keep working when the
folder is opened alone. The site is built in a temporary folder beside ``out`` and renamed onto
it, so there is never half a site under the final name; a folder that is not a site made here
(no :data:`MARK` in it) is never overwritten.
"""

from __future__ import annotations

import contextlib
import fcntl
import glob
import json
import os
import re
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from html import escape
from pathlib import Path

from ..errors import OmnibenchError, storage_error
from ..jsonio import strict
from .series import ORDER_UNKNOWN, ChangePoint, History, Point, Series
from .site_ab import AbPage, ab_page, copy_result, find_experiments
from .site_ab import counts as ab_counts
from .site_reports import CopiedReport, copy_report
from .site_svg import num, plot, varying_facts
from .site_sweeps import SweepPage, find_sweeps, sweep_page

MARK = ".omnibench-site"  # in every site's root: a folder with it may be replaced by a new site
SERIES = "series"  # the folder of the per-series pages


class SiteError(OmnibenchError):
    """The site cannot be written where asked (a folder that is not a site, a file)."""


@dataclass(frozen=True)
class Page:
    """One series' page: its file (relative to the site root) and the series."""

    path: str
    series: Series


def render(history: History, results: Path, out: Path, skipped: list[str] | None = None) -> Path:
    """Write the site of ``history`` to ``out`` (reports copied from ``results``) and return
    ``out``. Refuses an ``out`` that exists and is neither empty nor a site made here. What was
    not copied (a link in a report's plots) is appended to ``skipped``."""
    out = Path(os.path.abspath(out))
    refuse_unless_replaceable(out)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        with _held(out):
            refuse_unless_replaceable(out)  # again, holding it: another publish may have written there
            _remove_leftovers(out)
            tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".partial", dir=out.parent))
            tmp.chmod(0o755)  # mkdtemp's 0700 would keep a web server (or another user) out
            try:
                write_site(history, results, tmp, skipped)
                swap_in(tmp, out)
            finally:
                shutil.rmtree(tmp, ignore_errors=True)  # gone already when it was renamed onto ``out``
    except OSError as exc:
        raise storage_error(f"writing the site {out}", exc) from exc
    return out


@contextlib.contextmanager
def _held(out: Path) -> Iterator[None]:
    """Hold ``.NAME.lock`` beside ``out`` (``flock``, dropped by the kernel if this process dies):
    two publishes to one folder take turns, and what a killed one left is known to be stale."""
    fd = os.open(out.parent / f".{out.name}.lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _remove_leftovers(out: Path) -> None:
    """The temporary folders of a publish that was killed (``.NAME.*.partial``, ``.NAME.*.old``)."""
    for left in out.parent.glob(f".{glob.escape(out.name)}.*"):
        if left.is_dir() and not left.is_symlink() and left.name.endswith((".partial", ".old")):
            shutil.rmtree(left, ignore_errors=True)


def refuse_unless_replaceable(out: Path) -> None:
    """A SiteError unless ``out`` is absent, an empty folder, or a site made here."""
    if out.is_symlink() or (out.exists() and not out.is_dir()):
        raise SiteError(f"{out} exists and is not a folder", evidence={"out": str(out)},
                        hint="name a new folder for --out (or the folder of an earlier site)")
    if out.is_dir() and any(out.iterdir()) and not (out / MARK).is_file():
        shown = sorted(p.name for p in out.iterdir())[:5]
        raise SiteError(f"{out} is a folder that is not a site made by invoke publish; it is not overwritten",
                        evidence={"out": str(out), "holds": ", ".join(shown), "missing": MARK},
                        hint="name a new or empty folder for --out, or remove that folder yourself")


def swap_in(tmp: Path, out: Path) -> None:
    """Rename the finished site ``tmp`` onto ``out``; an earlier site there is renamed aside
    first and removed after, so ``out`` is always a whole site (old or new) or absent."""
    old = None
    if out.exists():
        old = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".old", dir=out.parent))
        os.replace(out, old / "site")
    try:
        os.replace(tmp, out)
    except BaseException:
        if old is not None:
            os.replace(old / "site", out)  # put the earlier site back
        raise
    finally:
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)


def slug(text: str) -> str:
    """A file name made of ``text``."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("._") or "series"


def pages_of(history: History) -> list[Page]:
    """A page per series, named by target, workload and metric (numbered if two collide)."""
    taken: set[str] = set()
    pages = []
    for s in history.series:
        base = slug(f"{s.target}--{s.workload}--{s.metric}")
        name, n = base, 1
        while name.lower() in taken:
            n += 1
            name = f"{base}-{n}"
        taken.add(name.lower())
        pages.append(Page(f"{SERIES}/{name}.html", s))
    return pages


@dataclass(frozen=True)
class Studies:
    """The sweeps and A/B experiments of the results root, each with its page."""

    sweeps: tuple[SweepPage, ...] = ()
    experiments: tuple[AbPage, ...] = ()


def studies_of(results: Path, skipped: list[str] | None = None) -> Studies:
    """The sweeps and experiments under ``results``; what cannot be read appended to ``skipped``."""
    unread: list[str] = []
    found = Studies(tuple(find_sweeps(results, slug, unread)), tuple(find_experiments(results, slug, unread)))
    if skipped is not None:
        skipped.extend(unread)
    return found


def write_site(history: History, results: Path, site: Path, skipped: list[str] | None = None) -> None:
    """Every file of the site into the folder ``site``; what was not copied appended to ``skipped``."""
    pages = pages_of(history)
    copied: dict[str, CopiedReport] = {}
    (site / SERIES).mkdir(parents=True, exist_ok=True)
    (site / "style.css").write_text(STYLE, encoding="utf-8")
    (site / "filter.js").write_text(FILTER_JS, encoding="utf-8")
    for page in pages:
        reports = {p.revision: copy_report(results, p, site, copied) for p in page.series.points}
        (site / page.path).write_text(series_page(page.series, history, reports), encoding="utf-8")
    if skipped is not None:
        skipped.extend(line for made in copied.values() for line in made.skipped)
    studies = studies_of(results, skipped)
    for sweep in studies.sweeps:
        (site / sweep.path).parent.mkdir(parents=True, exist_ok=True)
        (site / sweep.path).write_text(sweep_page(sweep, _doc, _table), encoding="utf-8")
    for experiment in studies.experiments:
        (site / experiment.path).parent.mkdir(parents=True, exist_ok=True)
        (site / experiment.path).write_text(ab_page(experiment, copy_result(experiment, site), _doc), encoding="utf-8")
    (site / "index.html").write_text(index_page(history, pages, studies), encoding="utf-8")
    (site / "history.json").write_text(json.dumps(strict(history.to_json()), indent=1, allow_nan=False) + "\n",
                                       encoding="utf-8")
    (site / MARK).write_text(json.dumps({"made_by": "invoke publish", "results": str(results)}) + "\n",
                             encoding="utf-8")


def _doc(title: str, body: list[str], to_root: str) -> str:
    return (f'<!doctype html>\n<html lang="en"><head><meta charset="utf-8"><title>{escape(title)}</title>'
            f'<link rel="stylesheet" href="{to_root}style.css"></head><body>\n' + "\n".join(body) + "\n</body></html>\n")


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]], cls: str) -> list[str]:
    """An HTML table; the cells are HTML already (escaped by the caller)."""
    return ([f'<table class="{cls}"><thead><tr>' + "".join(f"<th>{escape(h)}</th>" for h in headers) + "</tr></thead><tbody>"]
            + ["<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows] + ["</tbody></table>"])


def regressions(history: History, pages: Sequence[Page]) -> list[tuple[Point, ChangePoint, Page]]:
    """Every ``worse`` change point with its first commit after the step, newest first."""
    found = []
    for page in pages:
        by_rev = {p.revision: p for p in page.series.points}
        found += [(by_rev[c.first_after], c, page) for c in page.series.change_points
                  if c.kind == "worse" and c.first_after in by_rev]
    return sorted(found, key=lambda t: _when(t[0].commit_time), reverse=True)


def _when(text: str) -> float:
    """A commit time for ordering: ISO 8601 with any offset (``Z`` too); an unreadable one sorts last."""
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return float("-inf")
    return (when if when.tzinfo else when.replace(tzinfo=timezone.utc)).timestamp()


def _range(c: ChangePoint, by_rev: dict[str, Point]) -> str:
    def short(rev: str) -> str:
        return by_rev[rev].short if rev in by_rev else rev[:10]

    text = f"{short(c.last_before)}..{short(c.first_after)}"
    return text + (f" ({len(c.untested)} untested between)" if c.untested else "")


def _env_change(c: ChangePoint) -> str:
    return "; ".join(f"{k}: {a} → {b}" for k, (a, b) in c.environment_changed.items()) or "-"


def index_page(history: History, pages: Sequence[Page], studies: Studies = Studies()) -> str:
    """The index: the regressions; then each workload's sweeps, A/B experiments and metric series
    grouped by kind (speed, quality, resources); a filter (:data:`FILTER_JS`: by words and kind, in
    the page, no server) narrows every list."""
    body = ["<h1>omnibench history</h1>",
            f'<p class="about">{len(pages)} series, {len(studies.sweeps)} sweeps, {len(studies.experiments)} A/B '
            f"experiments; intervals at {history.confidence:.0%}; change points: "
            f"{escape(history.detector or 'not given')}</p>", "<h2>Regressions, newest first</h2>"]
    found = regressions(history, pages)
    if found:
        rows = [[escape(p.commit_time), f'<a href="{escape(page.path)}">{escape(page.series.metric)}</a>',
                 escape(page.series.workload), escape(page.series.target),
                 escape(_range(c, {q.revision: q for q in page.series.points})),
                 f"{c.step:+.1%} [{c.step_low:+.1%}, {c.step_high:+.1%}]", escape(_env_change(c)),
                 escape(c.bisected or "-")] for p, c, page in found]
        body += _table(("first after", "metric", "workload", "target", "commits", "step", "environment changed",
                        "bisected"), rows, "regressions")
    else:
        body.append('<p class="none">No regression found.</p>')
    body.append(_filter_form())
    workloads = sorted({p.series.workload for p in pages} | {s.workload for s in studies.sweeps}
                       | {w for e in studies.experiments for w in e.experiment.identity.workloads})
    for workload in workloads:
        body.append(f'<section class="workload" data-workload="{escape(workload)}"><h2>Workload {escape(workload)}</h2>')
        sweeps = [s for s in studies.sweeps if s.workload == workload]
        if sweeps:
            body += [f'<h3 data-kind="{SWEEP_KIND}">Sweeps</h3>', *_filtered(
                ("sweep", "revision", "points", "knee", "Pareto front"),
                [(SWEEP_KIND, f"{s.name} {s.revision} {s.points}",
                  [f'<a href="{escape(s.path)}">{escape(s.name)}</a>', escape(s.revision), escape(s.points),
                   escape(", ".join(map(str, s.record.get("knees") or [])) or "none"),
                   escape(", ".join(map(str, s.record.get("pareto_front") or [])))]) for s in sweeps], "sweeps")]
        experiments = [e for e in studies.experiments if workload in e.experiment.identity.workloads]
        if experiments:
            body += [f'<h3 data-kind="{AB_KIND}">A/B experiments</h3>', *_filtered(
                ("experiment", "design", "status", "verdicts"),
                [(AB_KIND, e.experiment.name, [f'<a href="{escape(e.path)}">{escape(e.experiment.name)}</a>',
                                               escape(e.experiment.identity.design.value),
                                               escape(e.experiment.status.value), escape(ab_counts(e))])
                 for e in experiments], "experiments")]
        in_workload = [p for p in pages if p.series.workload == workload]
        for kind in KINDS:
            of_kind = [p for p in in_workload if kind_of(p.series.metric) == kind]
            if not of_kind:
                continue
            rows2 = []
            for page in of_kind:
                s, last = page.series, (page.series.points[-1] if page.series.points else None)
                kinds = [c.kind for c in s.change_points]
                rows2.append((kind, f"{s.metric} {s.target}", [
                    f'<a href="{escape(page.path)}">{escape(s.metric)}</a>', escape(s.target), escape(s.direction),
                    str(len(s.points)),
                    f"{num(last.mean)} [{num(last.low)}, {num(last.high)}] at {escape(last.short)}" if last else "-",
                    "order unknown" if s.order == "unknown"
                    else ", ".join(f"{kinds.count(k)} {k}" for k in dict.fromkeys(kinds)) or "none"]))
            body += [f'<h3 data-kind="{kind}">{kind.capitalize()} metrics</h3>', *_filtered(
                ("metric", "target", "better", "commits", "latest mean [interval]", "change points"), rows2, "metrics")]
        body.append("</section>")
    body += ['<p class="none" id="nothing-shown" hidden>Nothing matches the filter.</p>',
             '<script src="filter.js"></script>']
    return _doc("omnibench history", body, "")


SWEEP_KIND, AB_KIND = "sweep", "ab"
KINDS = ("speed", "quality", "resources")  # a metric's kind on the index, in this order
# matched against the words of a metric's leaf name (split at "_" and "."): what the score phase
# makes is quality, what the host used is resources (a word starting so: gpu_util_pct, memory)
_QUALITY_WORDS = frozenset(("wer", "cer", "sim", "utmos", "accuracy", "matched", "empty", "above", "score"))
_RESOURCE_STARTS = ("gpu", "mem", "power", "energy", "cpu", "mib", "clock", "rss", "vram")


def kind_of(metric: str) -> str:
    """``speed``, ``quality`` or ``resources``: what a metric measures, from the words of its name
    after the workload: the score phase's words are quality, the host's use resources, the rest speed."""
    words = re.split(r"[_.]", metric.split(".", 1)[-1].lower())
    if _QUALITY_WORDS.intersection(words):
        return "quality"
    if any(w.startswith(_RESOURCE_STARTS) or w in ("w", "j") for w in words):
        return "resources"
    return "speed"


def _filter_form() -> str:
    """The index's filter: words (every one must be in a row's name) and a box per kind."""
    shown = {SWEEP_KIND: "sweeps", AB_KIND: "A/B experiments"}
    boxes = "".join(f'<label><input type="checkbox" name="kind" value="{k}" checked> {shown.get(k, k)}</label> '
                    for k in (*KINDS, SWEEP_KIND, AB_KIND))
    return ('<form id="filter" class="filter" role="search" onsubmit="return false">'
            '<label>Filter <input type="search" id="filter-words" placeholder="workload, metric, sweep, experiment" '
            f'autocomplete="off"></label> {boxes}<span id="filter-count" class="about"></span></form>')


def _filtered(headers: Sequence[str], rows: Sequence[tuple[str, str, Sequence[str]]], cls: str) -> list[str]:
    """A table whose rows the filter narrows: each ``(kind, words, cells)``; ``words`` is what the
    filter's words are matched against (with the section's workload), the cells HTML already."""
    return ([f'<table class="{cls}" data-filtered><thead><tr>' + "".join(f"<th>{escape(h)}</th>" for h in headers)
             + "</tr></thead><tbody>"]
            + [f'<tr data-kind="{escape(kind)}" data-words="{escape(words.lower())}">'
               + "".join(f"<td>{c}</td>" for c in cells) + "</tr>" for kind, words, cells in rows]
            + ["</tbody></table>"])


# The filter, plain JavaScript in a file beside the index: no server, no library, no network. It
# reads names only through dataset and textContent (never innerHTML), so a planted name stays text.
FILTER_JS = """\
(function () {
  "use strict";
  var words = document.getElementById("filter-words");
  var boxes = Array.prototype.slice.call(document.querySelectorAll('#filter input[name="kind"]'));
  var count = document.getElementById("filter-count");
  var nothing = document.getElementById("nothing-shown");
  function apply() {
    var wanted = words.value.toLowerCase().split(/\\s+/).filter(Boolean);
    var kinds = boxes.filter(function (b) { return b.checked; }).map(function (b) { return b.value; });
    var shown = 0, total = 0;
    document.querySelectorAll("section.workload").forEach(function (section) {
      var workload = (section.dataset.workload || "").toLowerCase();
      var inSection = 0;
      section.querySelectorAll("table[data-filtered]").forEach(function (table) {
        var inTable = 0;
        table.querySelectorAll("tbody tr").forEach(function (row) {
          var text = workload + " " + row.dataset.words;
          var ok = kinds.indexOf(row.dataset.kind) >= 0 && wanted.every(function (w) { return text.indexOf(w) >= 0; });
          row.hidden = !ok;
          total += 1;
          if (ok) { inTable += 1; }
        });
        table.hidden = inTable === 0;
        var heading = table.previousElementSibling;
        if (heading && heading.tagName === "H3") { heading.hidden = inTable === 0; }
        inSection += inTable;
      });
      section.hidden = inSection === 0;
      shown += inSection;
    });
    count.textContent = shown + " of " + total + " shown";
    nothing.hidden = shown > 0;
  }
  words.addEventListener("input", apply);
  boxes.forEach(function (b) { b.addEventListener("change", apply); });
  apply();
}());
"""


def _better(s: Series) -> str:
    return "a context metric (no better side)" if s.direction == "context" else f"{escape(s.direction)} is better"


def _facts(p: Point, shown: Sequence[str]) -> str:
    """A commit's environment in a line: the facts that vary along the series, then how many in all."""
    varying = [f"{k} {p.environment[k]}" for k in shown if k in p.environment]
    return "; ".join([*varying, f"{len(p.environment)} facts"])


def series_page(s: Series, history: History, reports: dict[str, CopiedReport]) -> str:
    """One series: the plot, the change points, and a row per commit with its report and environment."""
    to_root = "../"
    by_rev = {p.revision: p for p in s.points}

    def link(p: Point) -> str | None:
        page = reports[p.revision].page
        return to_root + page if page else None

    body = [f'<nav><a href="{to_root}index.html">all series</a></nav>',
            f"<h1>{escape(s.metric)}</h1>",
            f'<p class="about">workload {escape(s.workload)}, target {escape(s.target)}, {_better(s)}; '
            f"each commit's mean with its {history.confidence:.0%} interval, and its runs (small dots); "
            "a dashed line marks a change point; a dot links to its campaign's report</p>"]
    body.append(plot(s, confidence=history.confidence, link=link) if s.points
                else '<p class="none">No measured commit.</p>')
    body.append("<h2>Change points</h2>")
    if s.order == "unknown":
        body.append(f'<p class="none">{escape(ORDER_UNKNOWN)}</p>')
    elif s.change_points:
        body += _table(("kind", "commits", "before → after", "step [interval]", "environment changed", "bisected"),
                       [[f'<span class="{escape(c.kind)}">{escape(c.kind)}</span>', escape(_range(c, by_rev)),
                         f"{num(c.before_mean)} → {num(c.after_mean)}",
                         f"{c.step:+.1%} [{c.step_low:+.1%}, {c.step_high:+.1%}]", escape(_env_change(c)),
                         escape(c.bisected or "-")] for c in s.change_points], "change-points")
    else:
        body.append('<p class="none">None found.</p>')
    if s.outputs_changed:  # a quality series: commits whose outputs moved, sample by sample (issue 44)
        body.append("<h2>Outputs changed</h2>")
        body.append('<ul class="outputs-changed">' + "".join(f"<li>{escape(line)}</li>" for line in s.outputs_changed)
                    + "</ul>")
    body.append("<h2>Commits</h2>")
    rows, shown = [], varying_facts(s.points)
    for p in reversed(s.points):  # newest first, as the regressions
        copied = reports[p.revision]
        report = (f'<a class="report" href="{escape(to_root + copied.page)}">{copied.label}</a>' if copied.page
                  else f'<span class="missing">{escape(copied.problem)}</span>')
        env = "".join(f"<tr><th>{escape(k)}</th><td>{escape(str(v))}</td></tr>" for k, v in sorted(p.environment.items()))
        rows.append([f'<code title="{escape(p.revision)}">{escape(p.short)}</code>', escape(p.commit_time),
                     escape(p.subject), f"{num(p.mean)} [{num(p.low)}, {num(p.high)}]",
                     escape(", ".join(num(v) for v in p.values)), report,
                     f"<details><summary>{escape(_facts(p, shown))}</summary><table class=\"env\">{env}</table></details>"
                     if env else "-"])
    body += _table(("commit", "time", "subject", "mean [interval]", "runs", "report (or campaign)", "environment"), rows,
                   "points")
    return _doc(f"{s.metric} ({s.target})", body, to_root)


STYLE = """\
body { font: 14px/1.45 system-ui, sans-serif; margin: 1.5em auto; max-width: 1100px; padding: 0 1em; color: #222; }
table { border-collapse: collapse; margin: .5em 0 1.5em; }
th, td { border-bottom: 1px solid #ddd; padding: .25em .6em; text-align: left; vertical-align: top; }
.about, .none, .missing { color: #666; }
.worse { color: #c62828; } .better { color: #2e7d32; } .changed { color: #6d6d6d; }
article.report img, figure img { max-width: 100%; }
article.report table { font-size: 13px; } article.report code { background: #f3f3f3; padding: 0 .2em; }
svg.series-plot { max-width: 100%; height: auto; background: #fff; }
svg .grid { stroke: #eee; } svg .axis { stroke: #999; } svg .yunit { fill: #555; font-size: 12px; }
svg .band { fill: #1565c0; fill-opacity: .10; stroke: none; }
svg .line { fill: none; stroke: #1565c0; stroke-opacity: .5; }
svg .interval, svg .cap { stroke: #1565c0; stroke-width: 1.5; }
svg .point { fill: #1565c0; } svg a:hover .point { fill: #ff6f00; }
svg .run { fill: #888; }
svg .change-point line { stroke-dasharray: 5 4; stroke-width: 2; }
svg text { font: 11px system-ui, sans-serif; fill: #444; }
svg.sweep-plot, svg.ab-plot { max-width: 100%; height: auto; background: #fff; }
svg .mean-line { fill: none; stroke-width: 2; } svg .p95-line { fill: none; stroke-dasharray: 6 4; stroke-opacity: .7; }
svg .xbar, svg .ybar, svg .cap { stroke-width: 1.2; } svg .knee { stroke-width: 1.8; }
svg .target line { stroke: #c62828; stroke-dasharray: 2 3; } svg .target text { fill: #c62828; }
svg .zero { stroke: #999; } svg .ab-plot .interval { stroke-width: 3; }
form.filter { margin: 1em 0; padding: .5em; background: #f6f6f6; } form.filter label { margin-right: .8em; }
h3 { margin-bottom: .2em; } .state { font-weight: 600; }
"""
