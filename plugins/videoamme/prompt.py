"""The Video-AMME request text: sglang-omni's own, read from the checkout where it defines it.

sglang-omni's Video-AMME client sends one fixed text (``VIDEOAMME_REQUEST_TEXT`` in
``benchmarks/tasks/video_understanding.py``) with each video and spoken question. The native client
sends the same text: read from the checkout's file (parsed, never imported or run, so it needs
neither the checkout's venv nor its dependencies), else omnibench's copy of it. Which one, and the
text's sha256, are recorded in the client's command (so in the manifest) and in its results.
"""

from __future__ import annotations

import ast
import hashlib
from dataclasses import dataclass
from pathlib import Path

NAME = "VIDEOAMME_REQUEST_TEXT"
DEFINED_IN = "benchmarks/tasks/video_understanding.py"  # where sglang-omni defines it
OWN_COPY = "omnibench's copy"
# omnibench's copy: sglang-omni's text as its checkouts of 2026 define it.
REQUEST_TEXT = "Use the video and the audio question to answer. Return the final answer as Answer: $LETTER."


def sha256(text: str) -> str:
    """The hex sha256 of the text's UTF-8 bytes."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class RequestText:
    """The text sent, where it came from (a checkout-relative path or ``OWN_COPY``) and, when a
    checkout was there but its text could not be used, why."""

    text: str
    source: str
    why: str = ""

    @property
    def sha256(self) -> str:
        """The text's hash, as recorded."""
        return sha256(self.text)

    @property
    def recorded_source(self) -> str:
        """The source as the command and the results record it: with the reason, for a fallback."""
        return f"{self.source}: {self.why}" if self.why else self.source


def _defined(tree: ast.Module) -> str | None:
    """The string a module-level ``NAME = ...`` assigns (literal pieces only), else None."""
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        if any(isinstance(t, ast.Name) and t.id == NAME for t in targets) and node.value is not None:
            try:
                value = ast.literal_eval(node.value)
            except (ValueError, TypeError, SyntaxError, RecursionError):  # not a literal: a call, a name...
                return None
            return value if isinstance(value, str) and value.strip() else None
    return None


def read_request_text(checkout: Path | None) -> RequestText:
    """The checkout's ``VIDEOAMME_REQUEST_TEXT``, or omnibench's copy when there is no checkout (or,
    with the reason, when the file is missing or unreadable or defines no literal text)."""
    if checkout is None:
        return RequestText(REQUEST_TEXT, OWN_COPY)
    path = Path(checkout) / DEFINED_IN
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    except (OSError, UnicodeDecodeError, SyntaxError, ValueError, RecursionError) as exc:
        return RequestText(REQUEST_TEXT, OWN_COPY, f"{DEFINED_IN} not readable in the checkout ({type(exc).__name__})")
    text = _defined(tree)
    if text is None:
        return RequestText(REQUEST_TEXT, OWN_COPY, f"{DEFINED_IN} defines no literal {NAME}")
    return RequestText(text, DEFINED_IN)
