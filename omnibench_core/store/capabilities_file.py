"""What a checkout at one commit supports, as omnibench's capability probe found it, and its cache
file ``<results>/capabilities/<commit>.json``: one probe per commit, however many campaigns of a
matrix, bisect or history measure it.

A dirty checkout is never cached (its files are not its commit's). A file of another format, or
one that cannot be read, is probed again, never trusted.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..jsonio import read_json, write_json

CAPABILITIES = "capabilities"  # in the results root
FORMAT = 1
VAR_KEYWORD = "**"  # in a signature's names: it takes any keyword


@dataclass(frozen=True)
class Capabilities:
    """One commit's answers.

    ``client_flags``: by client (``-m MODULE`` or ``-c`` code, as the plan runs it), the option
    strings its ``--help`` prints, or None when ``--help`` failed (``errors`` says why).
    ``signatures``: by ``module:function``, its parameter names (``**`` when it takes any
    keyword), or None when it could not be imported. ``ci_models``: the model names the
    checkout's CI config knows when it reads ``OMNI_CI_MODEL`` (empty: its CI ignores the variable
    and runs Qwen3-Omni).
    """

    commit: str
    client_flags: Mapping[str, tuple[str, ...] | None] = field(default_factory=dict)
    signatures: Mapping[str, tuple[str, ...] | None] = field(default_factory=dict)
    ci_models: tuple[str, ...] = ()
    errors: Mapping[str, str] = field(default_factory=dict)

    def covers(self, clients: set[str], functions: set[str]) -> bool:
        """Whether every one of these clients and functions was probed already."""
        return clients <= set(self.client_flags) and functions <= set(self.signatures)

    def merged(self, other: Capabilities) -> Capabilities:
        """These answers with ``other``'s added (a later probe of more clients or functions)."""
        return Capabilities(self.commit, {**self.client_flags, **other.client_flags},
                            {**self.signatures, **other.signatures}, other.ci_models or self.ci_models,
                            {**self.errors, **other.errors})

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return {"format": FORMAT, "commit": self.commit,
                "client_flags": {k: None if v is None else list(v) for k, v in self.client_flags.items()},
                "signatures": {k: None if v is None else list(v) for k, v in self.signatures.items()},
                "ci_models": list(self.ci_models), "errors": dict(self.errors)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Capabilities:
        """Inverse of :meth:`as_dict`; a KeyError, TypeError or ValueError for another shape."""
        if data.get("format") != FORMAT:
            raise ValueError(f"capabilities format {data.get('format')!r}")

        def names(table: Mapping[str, Any]) -> dict[str, tuple[str, ...] | None]:
            return {str(k): None if v is None else tuple(str(x) for x in v) for k, v in table.items()}

        return cls(str(data["commit"]), names(data["client_flags"]), names(data["signatures"]),
                   tuple(str(m) for m in data["ci_models"]), {str(k): str(v) for k, v in data["errors"].items()})


def path_for(results_root: Path, commit: str) -> Path:
    """``<results>/capabilities/<commit>.json``."""
    return results_root / CAPABILITIES / f"{commit}.json"


def load(results_root: Path, commit: str) -> Capabilities | None:
    """The cached answers for ``commit``, or None (none cached, or a file that cannot be trusted)."""
    path = path_for(results_root, commit)
    try:
        found = Capabilities.from_dict(read_json(path))
    except (OSError, ValueError, KeyError, TypeError, AttributeError):  # a broken file: probe again
        return None
    return found if found.commit == commit else None


def save(results_root: Path, found: Capabilities) -> Path:
    """Write ``found`` to its cache file; returns the path."""
    return write_json(path_for(results_root, found.commit), found.as_dict())
