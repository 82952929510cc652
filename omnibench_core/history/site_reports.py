"""The campaigns' reports, copied into the site (``reports/<path in the results root>``) with an
HTML page beside each, so every point's link works when the site folder is opened alone, moved
or served elsewhere; the results root is never linked into."""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass
from html import escape
from pathlib import Path

REPORTS = "reports"  # the site's folder of copied reports
_IMAGE = re.compile(r"!\[([^\]]*)\]\(([^)\s]+)\)")  # the report's plots: ![name](report-plots/x.png)


@dataclass(frozen=True)
class CopiedReport:
    """A report in the site: ``page`` (the HTML to link, relative to the site root), or why there is none."""

    page: str | None
    problem: str = ""


def inside(root: Path, relative: str) -> Path | None:
    """``root / relative`` when it stays inside ``root`` (no ``..`` or absolute path out)."""
    path = (root / relative).resolve()
    return path if path.is_relative_to(root.resolve()) else None


def copy_report(results: Path, report: str | None, site: Path, cache: dict[str, CopiedReport]) -> CopiedReport:
    """Copy ``report`` (relative to ``results``) and its plots into ``site``, with an HTML page;
    each report once (``cache``). A missing report is named, never a broken link."""
    if report is None:
        return CopiedReport(None, "no report")
    if report in cache:
        return cache[report]
    source = inside(results, report)
    if source is None or not source.is_file():
        made = CopiedReport(None, f"report not found at {results / report}")
    else:
        rel = source.relative_to(results.resolve())
        target = site / REPORTS / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target)
        plots = source.with_name(f"{source.stem}-plots")  # as campaign.writing names them
        if plots.is_dir():
            shutil.copytree(plots, target.with_name(plots.name), dirs_exist_ok=True)
        page = target.with_suffix(".html")
        page.write_text(report_page(source.read_text(encoding="utf-8", errors="replace"), target.name,
                                    "../" * len(rel.parts)), encoding="utf-8")
        made = CopiedReport(page.relative_to(site).as_posix())
    cache[report] = made
    return made


def report_page(markdown: str, md_name: str, to_root: str) -> str:
    """A report's Markdown as a page: the text as written, and its plots shown below it."""
    images = "\n".join(f'<figure><img src="{escape(src)}" alt="{escape(alt)}"><figcaption>{escape(alt)}</figcaption>'
                       "</figure>" for alt, src in _IMAGE.findall(markdown) if not src.startswith(("http:", "https:")))
    title = next((line[2:] for line in markdown.splitlines() if line.startswith("# ")), md_name)
    return (f'<!doctype html>\n<html lang="en"><head><meta charset="utf-8"><title>{escape(title)}</title>'
            f'<link rel="stylesheet" href="{to_root}style.css"></head><body>\n'
            f'<nav><a href="{to_root}index.html">all series</a> · <a href="{escape(md_name)}">{escape(md_name)}</a></nav>\n'
            f'<pre class="report">{escape(markdown)}</pre>\n{images}\n</body></html>\n')
