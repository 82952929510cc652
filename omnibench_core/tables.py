"""Tables for the terminal (tabulate), so every task prints alike, and for Markdown files, with
the one escape of user-given text (:func:`md_text`) that every Markdown file omnibench writes
(report.md, compare.md, ab.md, summary.md, ``$GITHUB_STEP_SUMMARY``) puts names through.

:func:`md_text` makes backticks, ``[link](...)``, ``![img](...)``, ``<html>``, ``@mentions``,
emphasis and bare URLs render as the text they are. Backslash escapes work in GitHub's Markdown
and in Python-Markdown (mkdocs) alike; ``<``, ``&`` and ``~`` become entities (``>`` opens nothing inline) because
Python-Markdown has no ``\\<`` or ``\\~``; a mention and a bare URL are broken by a zero-width space,
because GitHub finds them in the rendered text, after escapes.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextvars import ContextVar
from typing import Any

from tabulate import tabulate

from .records import RunResult
from .units import display

ZWSP = "\u200b"
_ENTITIES = {"&": "&amp;", "<": "&lt;", "~": "&#126;"}  # neither renderer escapes these alike; a lone ">" opens nothing inline
_ESCAPED = set("\\`*[]|")
# An underscore between letters is never emphasis (both renderers): `latency_mean_s` stays readable.
_LONE_UNDERSCORE = re.compile(r"(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])")


def md_text(value: object) -> str:
    """``value`` as Markdown that renders as exactly its text, on one line."""
    out = []
    for ch in " ".join(str(value).splitlines()):
        if ch in _ENTITIES:
            out.append(_ENTITIES[ch])
        elif ch in _ESCAPED:
            out.append("\\" + ch)
        elif ord(ch) < 32 or ord(ch) == 127:
            out.append(" ")
        else:
            out.append(ch)
    escaped = _LONE_UNDERSCORE.sub(r"\\_", "".join(out))
    return escaped.replace("@", "@" + ZWSP).replace("://", ":" + ZWSP + "//").replace("www.", "www" + ZWSP + ".")


def md_code(value: object) -> str:
    """``value`` as an inline code span, where nothing renders: its fence is one backtick longer
    than any run of backticks in it, so a backtick in a name cannot close the span early."""
    body = " ".join(str(value).splitlines()).replace("@", "@" + ZWSP)  # some chats mention even in code
    runs = [len(r) for r in re.findall(r"`+", body)]
    fence = "`" * (max(runs, default=0) + 1)
    pad = " " if body.startswith("`") or body.endswith("`") or runs else ""
    return f"{fence}{pad}{body}{pad}{fence}"


def md_table(headers: Sequence[str], rows: Iterable[Sequence[object]], *, escape: bool = True) -> list[str]:
    """A Markdown table's lines; each cell through :func:`md_text` (its ``|`` escaped, so it
    stays in its cell), unless ``escape=False`` for cells that are Markdown already."""
    def cell(value: object) -> str:
        return md_text(value) if escape else str(value).replace("|", "\\|")
    out = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    return out + ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows]


def emit(text: str) -> None:
    """Print a line for the user; a reader that went away (``invoke run | head``) is not an error.

    After the first broken pipe, stdout points at /dev/null, so the run goes on and its exit code
    still says how it ended.
    """
    try:
        print(text, flush=True)
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)


# --wide: tables at their full width and summaries whole (a task's flag sets it for its body)
_WIDE: ContextVar[bool] = ContextVar("omnibench_wide", default=False)
MIN_COLUMN = 8  # a wrapped column keeps at least this many characters
GAP = 2  # tabulate's "simple" format: two spaces between columns


@contextlib.contextmanager
def full_width(wide: bool) -> Iterator[None]:
    """Inside, tables are printed at their full width and summaries whole when ``wide``."""
    token = _WIDE.set(wide)
    try:
        yield
    finally:
        _WIDE.reset(token)


def _size(name: str, index: int) -> int | None:
    """$COLUMNS or $LINES when set, else the terminal's (standard output's) size; None when
    standard output is no terminal and the variable is unset: a file or pipe gets everything."""
    value = os.environ.get(name, "")
    if value.isdigit() and int(value) > 0:
        return int(value)
    try:
        return os.get_terminal_size(sys.stdout.fileno())[index] if sys.stdout.isatty() else None
    except (OSError, ValueError):
        return None


def terminal_width() -> int | None:
    """The width tables are fitted to: $COLUMNS, else the terminal's; None (no limit) for a pipe
    or with ``--wide``."""
    return None if _WIDE.get() else _size("COLUMNS", 0)


def terminal_height() -> int | None:
    """The lines a summary may take: $LINES, else the terminal's; None for a pipe or ``--wide``."""
    return None if _WIDE.get() else _size("LINES", 1)


def _caps(widths: Sequence[int], budget: int) -> list[int]:
    """Each column's width so that they sum to ``budget`` at most: the narrow ones whole, the
    others sharing what is left alike (never under :data:`MIN_COLUMN`)."""
    caps, left, todo = list(widths), budget, sorted(range(len(widths)), key=lambda i: widths[i])
    for k, i in enumerate(todo):
        fair = left // (len(todo) - k)
        if widths[i] <= fair:
            left -= widths[i]
            continue
        for j in todo[k:]:
            caps[j] = max(fair, MIN_COLUMN)
        break
    return caps


def table(rows: Iterable[Sequence[object]], headers: Sequence[str], width: int | None = None) -> str:
    """A plain-text table, fitted to ``width`` (default :func:`terminal_width`): when wider, its
    widest columns are wrapped onto more lines, the narrow ones kept whole."""
    cells = [[str(c) for c in row] for row in rows]
    plain = tabulate(cells, headers=list(headers), tablefmt="simple", disable_numparse=True)
    limit = terminal_width() if width is None else width
    if limit is None or max((len(line) for line in plain.splitlines()), default=0) <= limit:
        return plain
    columns = max([len(headers), *(len(r) for r in cells)])
    # tabulate pads a header by 2 (its MIN_PADDING): a column is never narrower than that
    widths = [max([len(headers[i]) + 2 if i < len(headers) else 0,
                   *(len(line) for r in cells if i < len(r) for line in r[i].splitlines())]) for i in range(columns)]
    caps = _caps(widths, limit - GAP * (columns - 1))
    return tabulate(cells, headers=list(headers), tablefmt="simple", disable_numparse=True, maxcolwidths=caps,
                    maxheadercolwidths=[max(c - 2, 1) for c in caps])


def screenful(text: str, pointer: str, height: int | None = None) -> str:
    """``text`` whole when it fits on a screen (``height``, default :func:`terminal_height`);
    else its first lines and one more that counts the rest and says where to see them
    (``pointer``: a narrower flag, a file, ``--wide``)."""
    limit = terminal_height() if height is None else height
    lines = text.splitlines()
    if limit is None or len(lines) <= limit:
        return text
    shown = max(limit - 1, 1)
    return "\n".join([*lines[:shown], f"... {len(lines) - shown} more lines ({len(lines)} in all): {pointer}"])


def plugins_table(rows: Iterable[Any]) -> str:
    """``invoke plugins``: kind, name, description and who provides it (``api.PluginRow``)."""
    return table(((r.kind, r.name, r.description, r.plugin, r.distribution, r.version) for r in rows),
                 ("kind", "name", "description", "plugin", "distribution", "version"))


def options_table(rows: Iterable[Any], owner: str = "workload") -> str:
    """``invoke plugins``'s option tables: each workload's (or engine's) option (``api.OptionRow``)."""
    return table(((o.workload, o.name, o.type, o.default, o.range, o.help) for o in rows),
                 (owner, "option", "type", "default", "range", "help"))


def thin_text(metric: str, record: Mapping[str, object]) -> str:
    """A percentile too few samples support, as a table shows it: marked, its value in brackets
    (a workload's own value, kept in metrics.json, says whose it is)."""
    whose = "the workload's " if record.get("kept") else ""
    return f"thin: n={record.get('n')} < {record.get('needed')} ({whose}{display(metric, record.get('value'))} not measured)"


def metrics_table(metrics: Mapping[str, object], thin: Mapping[str, Mapping[str, object]] | None = None) -> str:
    """The metrics of a run, one per line, sorted by name, in the units people read
    (:func:`omnibench_core.units.display`); a percentile in ``thin`` marked as unsupported."""
    thin = thin or {}
    rows = [(k, display(k, v)) for k, v in metrics.items() if k not in thin] + [(k, thin_text(k, r)) for k, r in thin.items()]
    return table(sorted(rows), ("metric", "value"))


def run_summary(result: RunResult) -> str:
    """What ``invoke run`` prints at the end of a run."""
    lines = [metrics_table(result.metrics, result.thin)] if result.metrics else []
    if result.rates:
        lines.append(f"audio rates: {', '.join(map(str, result.rates))}")
    lines += [f"note: {note}" for note in result.notes]
    for rule in result.broken_rules:
        lines.append(f"BROKEN RULE {rule.name}: {rule.detail}")
    lines.append(f"{'RUN_COMPLETE' if result.complete else 'RUN_INCOMPLETE'}: {result.run_dir}")
    lines.append(f"manifest: {result.manifest}")
    return "\n".join(lines)
