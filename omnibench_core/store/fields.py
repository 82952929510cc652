"""Checks of the fields that both record files (a campaign file, an A/B record) hold for an
attempt, defined once: each returns the problem in words, or ``""`` when the value is fine.

A record names its run's folder; a hand-edited ``../../../etc`` or ``/etc`` there would send a
resume, a report or a rebuild outside the results root, so only ``runN`` (or nothing) is a run.
"""

from __future__ import annotations

import math
import re
from typing import Any

RUN_NAME = re.compile(r"(run[0-9]+)?")  # a run directory name, or "" (the attempt never got one)


def run_problem(value: str) -> str:
    """Why ``value`` is not a run directory name (``runN``) or empty."""
    return "" if RUN_NAME.fullmatch(value) else f"is {value[:80]!r}; it must be a run directory name (runN) or empty"


def folder_problem(value: str) -> str:
    """Why ``value`` is not one folder's name (a revision folder under the results root)."""
    if value in ("", ".", "..") or "/" in value or "\\" in value or any(ord(c) < 32 or ord(c) == 127 for c in value):
        return f"is {value[:80]!r}; it must be one folder's name (no /, not . or .., no control characters)"
    return ""


def seconds_problem(value: Any) -> str:
    """Why ``value`` is not a finite number >= 0 (``true``, NaN, Infinity and -1 are not)."""
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value) or value < 0:
        return f"must be a finite number >= 0, not {value!r}"
    return ""
