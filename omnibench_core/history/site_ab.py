"""The site's A/B pages: each experiment in the results root (``<results>/ab/<name>.json``, read by
:mod:`..ab.experiment_file`) as a page with its verdicts drawn (:func:`.site_svg.ab_plot`: each
metric's change of B against A and its interval), its state (design, rounds, the stopping rule's
reason) and its result as ``invoke ab`` wrote it (the newest ``ab.md``, rendered safe by
:mod:`.site_markdown`: the verdict table, the rounds, the quality rows, the noise flags).

Nothing is recomputed: the verdicts are those of the result's ``ab.json``. A record or a result
that cannot be read is named (``invoke publish`` prints it), never a page of guessed numbers.
"""

from __future__ import annotations

import math
import re
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from html import escape
from pathlib import Path
from typing import Any

from ..ab import experiment_file
from ..ab.record import Experiment
from ..errors import OmnibenchError
from ..jsonio import read_json
from ..store.names import AB_FOLDER
from .site_markdown import render
from .site_svg import ab_plot

AB_PAGES = "ab"  # the site's folder of A/B pages
_RESULT = re.compile(r"ab(?:-(\d+))?")  # ab.md, ab-2.md, ...: the writer never overwrites an earlier result


@dataclass(frozen=True)
class AbPage:
    """One experiment: its page (relative to the site root), its record, its newest result's files."""

    path: str
    experiment: Experiment
    markdown: Path | None  # the newest ab.md (None: no result written yet)
    result: dict[str, Any] | None  # the same result's ab.json

    @property
    def workloads(self) -> str:
        """The workloads the experiment measured, in a line."""
        return ", ".join(self.experiment.identity.workloads)


def newest_result(folder: Path) -> tuple[Path, Path] | None:
    """The newest result in an experiment's folder: its ``ab-N.md`` and ``ab-N.json`` of the
    highest N (``ab.md`` is N = 1) that has both; None when there is none."""
    found = []
    for md in folder.glob("ab*.md") if folder.is_dir() else ():
        m = _RESULT.fullmatch(md.stem)
        if m and md.with_suffix(".json").is_file():
            found.append((int(m[1] or 1), md))
    if not found:
        return None
    md = max(found)[1]
    return md, md.with_suffix(".json")


def find_experiments(results: Path, slug: Callable[[str], str], skipped: list[str]) -> list[AbPage]:
    """Every A/B record in ``results/ab``, a page name each; a record or result that cannot be
    read is named in ``skipped`` (a record: left out; a result: the page says so)."""
    pages = []
    for path in sorted((results / AB_FOLDER).glob("*.json")):
        try:
            experiment = experiment_file.load(path)
        except OmnibenchError as exc:
            skipped.append(f"{path}: {exc.message}; its experiment has no page")
            continue
        newest = newest_result(path.with_suffix(""))
        doc: dict[str, Any] | None = None
        if newest is not None:
            try:
                read = read_json(newest[1])
                doc = read if isinstance(read, dict) and isinstance(read.get("analysis"), dict) else None
            except (OSError, ValueError):
                doc = None
            if doc is None:
                skipped.append(f"{newest[1]}: not an A/B result this omnibench reads; its page shows ab.md alone")
        pages.append(AbPage(f"{AB_PAGES}/{slug(path.stem)}.html", experiment, newest[0] if newest else None, doc))
    return pages


def plotted(result: dict[str, Any] | None) -> list[tuple[str, float, float, float, str]]:
    """The verdicts of ``result`` (``ab.json``) that are a change as a fraction of A with an
    interval: ``(metric, change, low, high, verdict)`` as the result holds them."""
    rows = []
    for v in (result or {}).get("analysis", {}).get("verdicts") or []:
        values = [v.get(k) if isinstance(v, dict) else None for k in ("change", "low", "high")]
        if isinstance(v, dict) and v.get("relative") is True and all(
                isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) for x in values):
            rows.append((str(v.get("metric")), float(values[0]), float(values[1]), float(values[2]),  # type: ignore[arg-type]
                         str(v.get("verdict"))))
    return rows


def _state(e: Experiment) -> str:
    """The experiment's state in a line: design, rounds, status, and why it stopped."""
    ident, seq = e.identity, e.sequential
    parts = [f"design {ident.design.value}", f"{ident.rounds} rounds a side" if not ident.max_rounds
             else f"at most {ident.max_rounds} rounds a side (--max-rounds)", f"status {e.status.value}"]
    if seq is not None:
        parts.append(f"stopped: {seq.stop.value} after {seq.rounds_run} rounds" if seq.stop else "not stopped yet")
    if e.reason:
        parts.append(e.reason)
    return "; ".join(parts)


def copy_result(page: AbPage, site: Path) -> str | None:
    """The result's ``ab.md`` and ``ab.json`` copied beside the page (``ab/<name>/``); the folder
    relative to the page, or None without a result."""
    if page.markdown is None:
        return None
    folder = site / page.path.removesuffix(".html")
    folder.mkdir(parents=True, exist_ok=True)
    for source in (page.markdown, page.markdown.with_suffix(".json")):
        if source.is_file() and not source.is_symlink():
            shutil.copy2(source, folder / source.name)
    return folder.name


def ab_page(page: AbPage, copied: str | None, doc: Callable[[str, list[str], str], str]) -> str:
    """The experiment's page (``doc`` is the site's page writer)."""
    e = page.experiment
    rows = plotted(page.result)
    body = ['<nav><a href="../index.html">index</a></nav>', f"<h1>A/B {escape(e.name)}</h1>",
            f'<p class="about">workloads {escape(page.workloads)}; A (base): {escape(e.identity.a.describe())}; '
            f"B: {escape(e.identity.b.describe())}</p>", f'<p class="state">{escape(_state(e))}</p>']
    if rows:
        body += ['<p class="about">Each metric\'s change of B against A (a dot) and its interval (a bar), as the '
                 "experiment judged them; the colour is the verdict.</p>", ab_plot(rows, relative=True)]
    if page.markdown is None:
        body.append('<p class="none">No result written yet: the same invoke ab command runs the rounds left and '
                    "writes it.</p>")
        return doc(f"A/B {e.name}", body, "../")
    name = page.markdown.name
    files = " · ".join(f'<a href="{escape(copied)}/{escape(n)}">{escape(n)}</a>'
                       for n in (name, page.markdown.with_suffix(".json").name)) if copied else ""
    body += [f"<h2>The result ({escape(name)}, as invoke ab wrote it)</h2>", f'<p class="about">{files}</p>' if files else "",
             f'<article class="report">\n{render(page.markdown.read_text(encoding="utf-8", errors="replace"))}\n</article>']
    return doc(f"A/B {e.name}", body, "../")


def counts(page: AbPage) -> str:
    """The verdict counts of the result, in a line for the index (``-`` without one)."""
    found: dict[str, int] = {}
    analysis = (page.result or {}).get("analysis", {})
    verdicts: Sequence[Any] = [*(analysis.get("verdicts") or []), *((analysis.get("quality") or {}).get("verdicts") or [])]
    for v in verdicts:
        word = str(v.get("verdict")) if isinstance(v, dict) else "?"
        found[word] = found.get(word, 0) + 1
    return ", ".join(f"{n} {w}" for w, n in found.items()) or "-"
