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

import os
import re
import sys
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from tabulate import tabulate

from .records import RunResult

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


def table(rows: Iterable[Sequence[object]], headers: Sequence[str]) -> str:
    """A plain-text table."""
    return tabulate(list(rows), headers=list(headers), tablefmt="simple", disable_numparse=True)


def plugins_table(rows: Iterable[Any]) -> str:
    """``invoke plugins``: kind, name, description and who provides it (``api.PluginRow``)."""
    return table(((r.kind, r.name, r.description, r.plugin, r.distribution, r.version) for r in rows),
                 ("kind", "name", "description", "plugin", "distribution", "version"))


def options_table(rows: Iterable[Any], owner: str = "workload") -> str:
    """``invoke plugins``'s option tables: each workload's (or engine's) option (``api.OptionRow``)."""
    return table(((o.workload, o.name, o.type, o.default, o.range, o.help) for o in rows),
                 (owner, "option", "type", "default", "range", "help"))


def _fmt(value: object) -> str:
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


def metrics_table(metrics: Mapping[str, object]) -> str:
    """The metrics of a run, one per line, sorted by name."""
    return table(((k, _fmt(v)) for k, v in sorted(metrics.items())), ("metric", "value"))


def run_summary(result: RunResult) -> str:
    """What ``invoke run`` prints at the end of a run."""
    lines = [metrics_table(result.metrics)] if result.metrics else []
    if result.rates:
        lines.append(f"audio rates: {', '.join(map(str, result.rates))}")
    lines += [f"note: {note}" for note in result.notes]
    for rule in result.broken_rules:
        lines.append(f"BROKEN RULE {rule.name}: {rule.detail}")
    lines.append(f"{'RUN_COMPLETE' if result.complete else 'RUN_INCOMPLETE'}: {result.run_dir}")
    lines.append(f"manifest: {result.manifest}")
    return "\n".join(lines)
