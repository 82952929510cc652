"""The results layout: ``<results>/<short-sha>/run0, run1, ...`` and ``runN-incomplete``."""

from __future__ import annotations

import os
import re
from pathlib import Path

_RUN_RE = re.compile(r"^run(\d+)$")


def next_run_name(revision_dir: Path) -> str:
    """The lowest ``runN`` that does not exist.

    A run moved aside to ``runN-incomplete`` frees ``runN``, so repeating it reuses the name,
    as the runbook's "move the run aside and repeat it" does.
    """
    taken = set()
    if revision_dir.is_dir():
        for entry in revision_dir.iterdir():
            match = _RUN_RE.match(entry.name)
            if match:
                taken.add(int(match.group(1)))
    n = 0
    while n in taken:
        n += 1
    return f"run{n}"


def move_aside(run_dir: Path) -> Path:
    """Rename ``run_dir`` to ``<run>-incomplete`` (``-incomplete-2``... if taken); never overwrite."""
    candidate = run_dir.with_name(f"{run_dir.name}-incomplete")
    n = 2
    while True:
        try:
            # os.rename onto an existing non-empty dir fails; onto an empty one it would
            # replace it, so check first and rely on mkdir's atomicity for races.
            candidate.mkdir()
        except FileExistsError:
            candidate = run_dir.with_name(f"{run_dir.name}-incomplete-{n}")
            n += 1
            continue
        os.rename(run_dir, candidate)  # replaces the empty placeholder atomically
        return candidate
