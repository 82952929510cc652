"""Reading result files for collection: a missing or corrupt file becomes a broken rule, and a
missing field a None, never an exception."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ..jsonio import read_json
from ..records import RuleResult


def load_doc(folder: Path, name: str, problems: list[RuleResult]) -> Any:
    """``folder/name`` as JSON, or None with the reason appended to ``problems``."""
    try:
        return read_json(folder / name)
    except FileNotFoundError:
        problems.append(RuleResult(f"{name} exists", False, f"{folder / name} is missing"))
    except ValueError as exc:
        problems.append(RuleResult(f"{name} is valid JSON", False, f"{folder / name}: {exc}"))
    return None


def field(doc: Any, *keys: str) -> Any:
    """``doc[k1][k2]...`` or None where any level is missing."""
    for key in keys:
        if not isinstance(doc, Mapping) or key not in doc:
            return None
        doc = doc[key]
    return doc


def rule(name: str, check: Callable[[], bool], detail: str) -> RuleResult:
    """A rule whose check may hit missing data (then it is broken, not raised)."""
    try:
        ok = bool(check())
    except (TypeError, KeyError):
        ok = False
    return RuleResult(name, ok, detail)
