"""The results layout, in one place: ``<results>/<revision folder>/run0, run1, ...``,
``runN-incomplete`` for runs moved aside, and ``ci/runN`` for the CI stages (campaigns keep
their files in ``campaigns/``). The revision folder is the checkout's short commit (as in the runbook) or what the
target names (``local-<omnibench commit>``).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from ..store.names import CI_FOLDER

_RUN_RE = re.compile(r"^run(\d+)$")


def revision_dir(results_root: Path, folder: str) -> Path:
    """``<results>/<folder>``: where one revision's runs go."""
    return results_root / folder


def ci_dir(results_root: Path, folder: str) -> Path:
    """``<results>/<folder>/ci``: where the CI stages' runs go."""
    return revision_dir(results_root, folder) / CI_FOLDER


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
        try:
            os.rename(run_dir, candidate)  # replaces the empty placeholder atomically
        except OSError:
            candidate.rmdir()  # leave no empty -incomplete placeholder behind
            raise
        return candidate
