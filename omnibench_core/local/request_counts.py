"""What the local server counts about its requests, for ``GET /local/stats`` and its log.

The real sglang-omni server answers with its own model whatever ``model`` a request names; the
local server does the same and records each name asked for, so a client that names the wrong
model is visible without failing the run.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

MAX_NAMES = 64  # distinct names kept; more are counted together, so a client cannot grow memory
MAX_NAME_CHARS = 100
OTHER = "(other names)"
NONE = "(no model named)"


@dataclass
class ModelNames:
    """Requests per route and per model name asked for."""

    served: str
    requests: Counter = field(default_factory=Counter)
    names: Counter = field(default_factory=Counter)

    def record(self, route: str, asked: str | None) -> str | None:
        """Count a request; returns a log line the first time a name other than the served one is seen."""
        self.requests[route] += 1
        key = NONE if asked is None else asked[:MAX_NAME_CHARS]
        if key not in self.names and len(self.names) >= MAX_NAMES:
            key = OTHER
        first = key not in self.names
        self.names[key] += 1
        if first and asked is not None and asked != self.served and key != OTHER:
            return f"a request names model {key!r}; answering as {self.served!r} (counted at GET /local/stats)"
        return None

    def as_json(self) -> dict:
        """The ``GET /local/stats`` body."""
        return {"served_model": self.served, "requests": dict(self.requests), "model_names_asked": dict(self.names)}
