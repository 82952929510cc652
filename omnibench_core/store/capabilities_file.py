"""What a checkout at one commit supports, as omnibench's capability probe found it, and its cache
file ``<results>/capabilities/<commit>-<key>.json``: one probe per commit and interpreter, however
many campaigns of a matrix, bisect or history measure it.

Only answers are cached: a probe that failed (exited non-zero, ran past its deadline, printed too
much) is asked again next time, never remembered as a fact of the commit. A dirty checkout is
never cached (its files are not its commit's). A file of another format, or one that cannot be
read, is probed again, never trusted.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..jsonio import read_json, write_json
from .names import CAPABILITIES

FORMAT = 1
VAR_KEYWORD = "**"  # in a signature's names: it takes any keyword


@dataclass(frozen=True)
class Capabilities:
    """One commit's answers.

    ``client_flags``: by client (``-m MODULE`` or ``-c`` code, as the plan runs it), the option
    strings its ``--help`` prints, or None when ``--help`` failed (``errors`` says why; ``failed``
    names it).
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
    failed: frozenset[str] = frozenset()  # clients and functions whose probe failed: no answer, never cached

    def covers(self, clients: set[str], functions: set[str]) -> bool:
        """Whether every one of these clients and functions was answered already."""
        return clients <= set(self.client_flags) - self.failed and functions <= set(self.signatures) - self.failed

    def answered(self) -> Capabilities:
        """These answers without the failed probes: what may be cached."""
        return Capabilities(self.commit, {k: v for k, v in self.client_flags.items() if k not in self.failed},
                            {k: v for k, v in self.signatures.items() if k not in self.failed}, self.ci_models,
                            {k: v for k, v in self.errors.items() if k not in self.failed})

    def merged(self, other: Capabilities) -> Capabilities:
        """These answers with ``other``'s added (a later probe of more clients or functions)."""
        return Capabilities(self.commit, {**self.client_flags, **other.client_flags},
                            {**self.signatures, **other.signatures}, other.ci_models or self.ci_models,
                            {**self.errors, **other.errors}, other.failed)

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


def path_for(results_root: Path, commit: str, interpreter: str = "") -> Path:
    """``<results>/capabilities/<commit>-<key>.json``: ``key`` is a digest of the interpreter that
    was asked (another venv may import other code, or fail where this one answers)."""
    key = hashlib.sha256(interpreter.encode()).hexdigest()[:12]
    return results_root / CAPABILITIES / f"{commit}-{key}.json"


def load(results_root: Path, commit: str, interpreter: str = "") -> Capabilities | None:
    """The cached answers for ``commit`` asked of ``interpreter``, or None (none cached, or a file
    that cannot be trusted)."""
    path = path_for(results_root, commit, interpreter)
    try:
        found = Capabilities.from_dict(read_json(path))
    except (OSError, ValueError, KeyError, TypeError, AttributeError):  # a broken file: probe again
        return None
    return found if found.commit == commit else None


def save(results_root: Path, found: Capabilities, interpreter: str = "") -> Path:
    """Write ``found``'s answers (not its failed probes) to its cache file; returns the path."""
    return write_json(path_for(results_root, found.commit, interpreter), found.answered().as_dict())
