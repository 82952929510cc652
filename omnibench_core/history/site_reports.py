"""The campaigns' reports, copied into the site (``reports/<path in the results root>``) with an
HTML page beside each (for a campaign without a report, its campaign file and a page of the
point), so every point's link works when the site folder is opened alone, moved or served
elsewhere; the results root is never linked into.

Nothing from outside the results root is copied: a report, a plots folder or a plot that is a
symbolic link is skipped and named in :attr:`CopiedReport.skipped` (``invoke publish`` prints
it), as is anything that is not a regular file."""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from html import escape
from pathlib import Path

from .series import Point
from .site_markdown import render

REPORTS = "reports"  # the site's folder of copied reports


@dataclass(frozen=True)
class CopiedReport:
    """A report in the site: ``page`` (the HTML to link, relative to the site root), or why there is none."""

    page: str | None
    problem: str = ""
    label: str = "report"  # what the link opens: "report", or "campaign" for a campaign without one
    skipped: tuple[str, ...] = ()  # links (and other non-files) of the report's plots left out, with why


def inside(root: Path, relative: str) -> Path | None:
    """``root / relative`` when it stays inside ``root`` (no ``..`` or absolute path out)."""
    path = (root / relative).resolve()
    return path if path.is_relative_to(root.resolve()) else None


def copy_report(results: Path, point: Point, site: Path, cache: dict[str, CopiedReport]) -> CopiedReport:
    """The page a point links to: its campaign's report (``report.md`` and its plots, copied, with
    an HTML page), or, for a campaign without one (a matrix makes none), a page of its campaign
    file (copied) and the point's numbers; each once (``cache``). Neither found is named, never a
    broken link."""
    key = point.report or point.campaign
    if key not in cache:
        made = _copy_report(results, point.report, site) if point.report else None
        cache[key] = made if made and made.page else (_copy_campaign(results, point, site) or CopiedReport(
            None, f"{made.problem if made else 'no report'}; no campaign file at {results / point.campaign}"))
    return cache[key]


def _copied(results: Path, relative: str, site: Path) -> tuple[Path, Path, Path] | None:
    """``relative`` copied from ``results`` to ``site/reports/``: (source, copy, path under results)."""
    source = inside(results, relative)
    if source is None or not source.is_file():
        return None
    rel = source.relative_to(results.resolve())
    target = site / REPORTS / rel
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(source, target)
    return source, target, rel


def _copy_report(results: Path, report: str, site: Path) -> CopiedReport:
    copied = _copied(results, report, site)
    if copied is None:
        return CopiedReport(None, f"report not found at {results / report}")
    source, target, rel = copied
    plots = source.with_name(f"{source.stem}-plots")  # as campaign.writing names them
    skipped = _copy_plots(results, plots, target.with_name(plots.name))
    page = target.with_suffix(".html")
    page.write_text(report_page(source.read_text(encoding="utf-8", errors="replace"), target.name,
                                "../" * len(rel.parts)), encoding="utf-8")
    return CopiedReport(page.relative_to(site).as_posix(), skipped=skipped)


def _copy_plots(results: Path, plots: Path, target: Path) -> tuple[str, ...]:
    """The report's plots folder copied file by file, never following a link: a folder or file
    that is a link (it may point anywhere) or is no regular file is left out and named."""
    if plots.is_symlink():
        return (f"{plots}: a link, not a folder of the results root; not copied",)
    if not plots.is_dir():
        return ()
    skipped = []
    for folder, dirs, files in os.walk(plots):  # os.walk follows no link to a folder
        here = Path(folder)
        for name in [*dirs, *files]:
            path = here / name
            if path.is_symlink():
                skipped.append(f"{path}: a link; not copied")
            elif name in files and not path.is_file():
                skipped.append(f"{path}: not a regular file; not copied")
            elif name in files and inside(results, str(path.relative_to(results))) is not None:
                copy = target / path.relative_to(plots)
                copy.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(path, copy, follow_symlinks=False)
        dirs[:] = [d for d in dirs if not (here / d).is_symlink()]
    return tuple(skipped)


def _copy_campaign(results: Path, point: Point, site: Path) -> CopiedReport | None:
    copied = _copied(results, point.campaign, site)
    if copied is None:
        return None
    source, target, rel = copied
    revision, name = rel.parts[0], source.stem
    page = target.with_suffix(".html")
    page.write_text(campaign_page(point, source.read_text(encoding="utf-8", errors="replace"), target.name,
                                  f"invoke report --name {revision}/{name}", "../" * len(rel.parts)), encoding="utf-8")
    return CopiedReport(page.relative_to(site).as_posix(), label="campaign")


def campaign_page(point: Point, campaign_json: str, json_name: str, make_report: str, to_root: str) -> str:
    """A campaign without a report: the point's numbers, how to make the report, and the campaign file."""
    numbers = (f"{point.short} {point.subject}\nmean {point.mean:.6g} [{point.low:.6g}, {point.high:.6g}]; runs: "
               + ", ".join(f"{v:.6g}" for v in point.values))
    return (f'<!doctype html>\n<html lang="en"><head><meta charset="utf-8"><title>{escape(point.campaign)}</title>'
            f'<link rel="stylesheet" href="{to_root}style.css"></head><body>\n'
            f'<nav><a href="{to_root}index.html">all series</a> · <a href="{escape(json_name)}">{escape(json_name)}</a>'
            f"</nav>\n<h1>Campaign {escape(point.campaign)}</h1>\n<pre>{escape(numbers)}</pre>\n"
            f'<p class="about">No report was made for this campaign (a matrix makes none); '
            f"<code>{escape(make_report)}</code> makes one, and the next <code>invoke publish</code> links it. "
            f'The campaign file:</p>\n<pre class="campaign">{escape(campaign_json)}</pre>\n</body></html>\n')


def report_page(markdown: str, md_name: str, to_root: str) -> str:
    """A report's Markdown as a page: rendered as HTML (tables, headings, its plots in place;
    :mod:`.site_markdown` keeps it safe), with a link to the Markdown as written."""
    title = next((line[2:] for line in markdown.splitlines() if line.startswith("# ")), md_name)
    return (f'<!doctype html>\n<html lang="en"><head><meta charset="utf-8"><title>{escape(title)}</title>'
            f'<link rel="stylesheet" href="{to_root}style.css"></head><body>\n'
            f'<nav><a href="{to_root}index.html">all series</a> · <a href="{escape(md_name)}">{escape(md_name)}</a></nav>\n'
            f'<article class="report">\n{render(markdown)}\n</article>\n</body></html>\n')
