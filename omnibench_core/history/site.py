"""``invoke publish``: a static site of a :class:`~.series.History` that works offline from disk
(``file://``): an index of workloads and metrics with the regressions newest first, and per
series a page with its plot (drawn server-side as SVG, no JavaScript: :mod:`.site_svg`), its
change points, and each commit's numbers, report and environment.

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
from .site_reports import CopiedReport, copy_report
from .site_svg import num, plot, varying_facts

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


def write_site(history: History, results: Path, site: Path, skipped: list[str] | None = None) -> None:
    """Every file of the site into the folder ``site``; what was not copied appended to ``skipped``."""
    pages = pages_of(history)
    copied: dict[str, CopiedReport] = {}
    (site / SERIES).mkdir(parents=True, exist_ok=True)
    (site / "style.css").write_text(STYLE, encoding="utf-8")
    for page in pages:
        reports = {p.revision: copy_report(results, p, site, copied) for p in page.series.points}
        (site / page.path).write_text(series_page(page.series, history, reports), encoding="utf-8")
    if skipped is not None:
        skipped.extend(line for made in copied.values() for line in made.skipped)
    (site / "index.html").write_text(index_page(history, pages), encoding="utf-8")
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


def index_page(history: History, pages: Sequence[Page]) -> str:
    """The index: every workload's metrics (commits, latest mean, change points) and the regressions."""
    body = ["<h1>omnibench history</h1>",
            f'<p class="about">{len(pages)} series; intervals at {history.confidence:.0%}; change points: '
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
    for workload in sorted({p.series.workload for p in pages}):
        body.append(f"<h2>Workload {escape(workload)}</h2>")
        rows = []
        for page in (p for p in pages if p.series.workload == workload):
            s, last = page.series, (page.series.points[-1] if page.series.points else None)
            kinds = [c.kind for c in s.change_points]
            rows.append([f'<a href="{escape(page.path)}">{escape(s.metric)}</a>', escape(s.target),
                         escape(s.direction), str(len(s.points)),
                         f"{num(last.mean)} [{num(last.low)}, {num(last.high)}] at {escape(last.short)}" if last else "-",
                         "order unknown" if s.order == "unknown"
                         else ", ".join(f"{kinds.count(k)} {k}" for k in dict.fromkeys(kinds)) or "none"])
        body += _table(("metric", "target", "better", "commits", "latest mean [interval]", "change points"),
                       rows, "metrics")
    return _doc("omnibench history", body, "")


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
"""
