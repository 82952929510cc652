"""Terminal tables fit the terminal (issue 46: the sweep table was 297 columns, `invoke plugins`
388): the widest columns wrap to $COLUMNS, `--wide` prints them whole, and a summary longer than a
screen ends with a count of the rest and where to see it."""

from __future__ import annotations

import pytest
from invoke import Program
from run_helpers import load_tasks

from omnibench_core import tables

HEADERS = ("point", "campaign", "throughput req/s", "latency p95 s", "note")
ROWS = [["c1", "sweep-seedtts-max_samples-4.c1", "19.441", "0.054", "the knee: latency grew faster than throughput "
         "from here on, so the next point buys little"],
        ["c4", "sweep-seedtts-max_samples-4.c4", "36.3165", "0.1065", "on the Pareto front"]]


def widest(text: str) -> int:
    return max(len(line) for line in text.splitlines())


def chars(text: str) -> list[str]:
    """Every character of the header and the cells (the dashed rule and the padding aside)."""
    return sorted(c for line in text.splitlines() if set(line) - {"-", " "} for c in line if c != " ")


def test_a_table_wider_than_the_terminal_wraps_its_widest_columns_and_keeps_every_word(monkeypatch):
    whole = tables.table(ROWS, HEADERS, width=None)
    monkeypatch.delenv("COLUMNS", raising=False)  # a pipe, no $COLUMNS: everything, as before
    assert tables.table(ROWS, HEADERS) == whole and widest(whole) > 100
    for width in (100, 72, 60):
        fitted = tables.table(ROWS, HEADERS, width=width)
        assert widest(fitted) <= width, fitted
        assert chars(fitted) == chars(whole)  # wrapped onto more lines, nothing lost
        assert "19.441" in fitted and "0.1065" in fitted  # the narrow columns stay whole
    monkeypatch.setenv("COLUMNS", "72")
    assert widest(tables.table(ROWS, HEADERS)) <= 72
    with tables.full_width(True):  # --wide
        assert tables.table(ROWS, HEADERS) == whole


def test_a_summary_over_a_screen_ends_with_a_count_and_a_pointer(monkeypatch):
    text = "\n".join(f"line {i}" for i in range(444))
    shown = tables.screenful(text, "--wide prints it whole", height=40).splitlines()
    assert len(shown) == 40 and shown[-1] == "... 405 more lines (444 in all): --wide prints it whole"
    assert tables.screenful("a\nb", "x", height=40) == "a\nb"
    monkeypatch.setenv("LINES", "40")
    with tables.full_width(True):
        assert tables.screenful(text, "x") == text


@pytest.mark.parametrize("wide", [False, True])
def test_invoke_plugins_fits_columns_unless_wide(monkeypatch, capsys, wide):
    """`invoke plugins` was 388 columns wide whatever the terminal."""
    monkeypatch.setenv("COLUMNS", "100")
    Program(namespace=load_tasks().ns).run(["invoke", "plugins", *(["--wide"] if wide else [])], exit=False)
    out = capsys.readouterr().out
    assert "seedtts" in out and (widest(out) > 100 if wide else widest(out) <= 100), widest(out)
