"""Pull-request summaries: one GitHub-flavoured Markdown renderer for ``invoke compare`` (two
campaigns, :func:`from_comparison` here), ``invoke ab`` (an experiment: ``ab.writing``) and a history
range (``history.summary``), sized for a pull-request comment. Each layer builds a :class:`Summary`
of its own result; this module renders it.
The changed metrics come first, each with its change, interval and verdict; then the ones that
could not be told (inconclusive, not compared, a history whose order is unknown), never folded
and never read as "no change"; everything else is folded in ``<details>``. Each command writes it as ``summary.md`` beside its result and appends
it to ``$GITHUB_STEP_SUMMARY`` when that is set (append, never overwrite: a job's steps share it).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from ..errors import StorageError
from ..stats.verdict import Verdict, change_text, interval_text
from ..tables import md_code, md_text
from ..units import display
from .writing import PullRequestSummary

if TYPE_CHECKING:  # types only: compare imports verdict, as this module does
    from .compare import Comparison

# GitHub refuses a comment over 65,536 characters; a workflow may add a heading or a link around it.
MAX_CHARS = 60_000
CHANGED = ("worse", "better")  # the verdicts a reviewer must see; "changed" is a history step of a context metric
UNDECIDED = ("inconclusive", "not", "order")  # the first words of inconclusive, "not compared", "order unknown"
# What a row is in a summary: called better/worse, not told (inconclusive: no all-clear on it), or the rest.
Group = Literal["changed", "undecided", "other"]
STEP_SUMMARY = "GITHUB_STEP_SUMMARY"
HEADERS = ("metric", "better", "change", "interval", "verdict", "detail")


@dataclass(frozen=True)
class Row:
    """One metric's line: its change and interval as shown, its verdict, and a detail (means, commits)."""

    metric: str
    direction: str
    change: str
    interval: str
    verdict: str
    detail: str = ""


@dataclass(frozen=True)
class Summary:
    """What a summary says: a title, a few facts, the changed rows, the rows it could not tell
    (``undecided``) and the others."""

    title: str
    facts: tuple[str, ...]  # Markdown: each builder escapes the names it puts in (tables.md_text)
    changed: tuple[Row, ...]
    other: tuple[Row, ...]
    source: str  # the full result (compare.md, ab.md, the history), named at the end
    undecided: tuple[Row, ...] = ()  # inconclusive, not compared, order unknown: shown, never an all-clear


def _cell(text: str) -> str:
    return md_text(text)  # a name a user gave renders as text: no link, image, mention or HTML


def _own(text: str) -> str:
    """A cell omnibench wrote itself (a direction, a change, an interval): kept as it reads."""
    return text.replace("|", "\\|").replace("<", "&lt;").replace("\n", " ")


def _row(r: Row) -> str:
    verdict = f"**{r.verdict.upper()}**" if r.verdict.split(" ")[0] in CHANGED else r.verdict
    return "| " + " | ".join((_cell(r.metric), *(_own(c) for c in (r.direction, r.change, r.interval)))) \
        + f" | {verdict} | " + _cell(r.detail) + " |"


def _table(rows: Sequence[Row], budget: int) -> tuple[list[str], int]:
    """The Markdown table of as many ``rows`` as fit in ``budget`` characters, and how many did."""
    lines = ["| " + " | ".join(HEADERS) + " |", "|" + "---|" * len(HEADERS)]
    used = sum(len(line) + 1 for line in lines)
    shown = 0
    for r in rows:
        line = _row(r)
        if used + len(line) + 1 > budget:
            break
        lines.append(line)
        used += len(line) + 1
        shown += 1
    return lines, shown


def markdown(summary: Summary, limit: int = MAX_CHARS) -> str:
    """The summary as Markdown, at most ``limit`` characters: rows that do not fit are counted
    and left to the full result, the changed ones last of all."""
    tail = f"\nFull result: {md_code(summary.source)}\n"
    head = [f"### {_cell(summary.title)}", ""] + [f"- {f}" for f in summary.facts] + [""]
    room = limit - len("\n".join(head)) - len(tail) - 400  # 400: the notes and <details> tags below
    out = list(head)
    if summary.changed:
        table, shown = _table(summary.changed, room)
        out += table
        room -= len("\n".join(table))
        if shown < len(summary.changed):
            out.append(f"\n{len(summary.changed) - shown} more changed metrics: see the full result.")
    if summary.undecided:
        out += ["", f"**Could not tell** for {len(summary.undecided)} metric"
                    f"{'s' if len(summary.undecided) != 1 else ''}: not called better, worse or equivalent "
                    "(see the detail for what would decide it).", ""]
        table, shown = _table(summary.undecided, room)
        out += table
        room -= len("\n".join(table))
        if shown < len(summary.undecided):
            out.append(f"\n{len(summary.undecided) - shown} more undecided metrics: see the full result.")
    if not summary.changed and not summary.undecided:
        out.append("No metric changed.")
    elif not summary.changed:
        out.insert(len(head), "No metric was called better or worse, and not every one could be told apart:")
    if summary.other:
        table, shown = _table(summary.other, room)
        out += ["", f"<details><summary>{len(summary.other)} other metrics (no change called)</summary>", ""]
        out += (table if shown else []) + [""]
        if shown < len(summary.other):
            out.append(f"{len(summary.other) - shown} more: see the full result.\n")
        out.append("</details>")
    return "\n".join(out) + "\n" + tail


def stem_beside(stem: str) -> str:
    """The summary's file name (no suffix) beside a result named ``stem``: ``summary`` beside
    ``compare`` or ``ab``, ``summary-2`` beside ``compare-2``, so each result keeps its own."""
    return "summary" + stem[len(stem.split("-", 1)[0]):]


def append_step_summary(text: str, environ: Mapping[str, str] | None = None) -> Path | None:
    """Append ``text`` to the file ``$GITHUB_STEP_SUMMARY`` names (None when it is not set)."""
    name = (os.environ if environ is None else environ).get(STEP_SUMMARY, "")
    if not name:
        return None
    path = Path(name)
    try:
        with open(path, "a", encoding="utf-8") as handle:  # "a": a job's earlier steps keep theirs
            handle.write(text if text.endswith("\n") else text + "\n")
    except OSError as exc:
        raise StorageError(f"cannot append the summary to ${STEP_SUMMARY}",
                           evidence={STEP_SUMMARY: str(path), "error": exc.strerror or str(exc)},
                           hint=f"point {STEP_SUMMARY} at a writable file, or unset it (the result and its "
                                "summary.md are written)") from exc
    return path


def group(verdict: str) -> Group:
    """A verdict's group: better/worse changed, inconclusive (or not compared) undecided, else other."""
    head = verdict.split(" ")[0]
    return "changed" if head in CHANGED else "undecided" if head in UNDECIDED else "other"


def split(rows: Sequence[tuple[Row, Group]]) -> tuple[tuple[Row, ...], tuple[Row, ...], tuple[Row, ...]]:
    """Changed rows (worse before better), undecided rows and the rest, each in the given order."""
    changed = sorted((r for r, g in rows if g == "changed"), key=lambda r: r.verdict != "worse")
    return (tuple(changed), tuple(r for r, g in rows if g == "undecided"),
            tuple(r for r, g in rows if g == "other"))


def from_comparison(c: Comparison, source: Path) -> Summary:
    """``invoke compare``'s summary: per metric the change of B against base A and its verdict."""
    rows: list[tuple[Row, Group]] = []
    for m in c.metrics:
        verdict = str(m.verdict)
        detail = (f"A {display(m.name, m.a_mean)} ± {display(m.name, m.a_sd or 0.0)}, "
                  f"B {display(m.name, m.b_mean)} ± {display(m.name, m.b_sd or 0.0)}") \
            if m.a_mean is not None and m.b_mean is not None else m.why
        if m.verdict == Verdict.INCONCLUSIVE and m.needed:
            detail += f"; about {m.needed} runs a side would resolve it"
        rows.append((Row(m.name, m.direction, change_text(m.pct if m.relative else m.diff, m.relative),
                         interval_text(m.low, m.high, m.relative, m.method), verdict, detail), group(verdict)))
    changed, undecided, other = split(rows)
    facts = [f"A (base) {md_code(c.a)}, B {md_code(c.b)}",
             f"{c.test}; family held to alpha {c.alpha:g} ({c.correction}); minimum effect {c.min_effect:.0%}",
             "verdicts: " + ", ".join(f"{k} {v}" for k, v in c.verdicts().items())]
    facts += [f"setup differs (--force): {md_text(d)}" for d in c.differences]
    return Summary(f"omnibench compare: {c.b} vs {c.a}", tuple(facts), changed, other, str(source), undecided)


# A comparison's pull-request summary, as ``invoke compare`` and a matrix's comparisons write it.
COMPARISON_SUMMARY = PullRequestSummary(lambda c, md: markdown(from_comparison(c, md)), stem_beside,
                                        append_step_summary)
