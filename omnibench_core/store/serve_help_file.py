"""The flags a checkout's ``sgl-omni serve --help`` printed at one commit, and its cache file
``<results>/capabilities/<commit>.serve.json``: serve's era is asked once per commit, however many
campaigns of a matrix, bisect or history start its servers.

Only an answer is cached, never a failure; a dirty checkout is never cached (its files are not its
commit's), and a file of another format, or one that cannot be read, is asked again, never trusted.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..jsonio import read_json, write_json
from .capabilities_file import CAPABILITIES

FORMAT = 1
SUFFIX = ".serve.json"


@dataclass(frozen=True)
class ServeHelp:
    """What ``serve --help`` printed at ``commit``: the option strings, and the program asked."""

    commit: str
    program: str
    flags: tuple[str, ...]

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return {"format": FORMAT, "commit": self.commit, "program": self.program, "flags": list(self.flags)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ServeHelp:
        """Inverse of :meth:`as_dict`; a KeyError, TypeError or ValueError for another shape."""
        if data.get("format") != FORMAT:
            raise ValueError(f"serve help format {data.get('format')!r}")
        flags = data["flags"]
        if not isinstance(flags, list) or not all(isinstance(f, str) for f in flags):
            raise TypeError("flags is not a list of strings")
        return cls(str(data["commit"]), str(data["program"]), tuple(flags))


def path_for(results_root: Path, commit: str) -> Path:
    """``<results>/capabilities/<commit>.serve.json``."""
    return results_root / CAPABILITIES / f"{commit}{SUFFIX}"


def load(results_root: Path, commit: str) -> ServeHelp | None:
    """The cached answer for ``commit``, or None (none cached, or a file that cannot be trusted)."""
    try:
        found = ServeHelp.from_dict(read_json(path_for(results_root, commit)))
    except (OSError, ValueError, KeyError, TypeError, AttributeError):  # a broken file: ask again
        return None
    return found if found.commit == commit else None


def save(results_root: Path, found: ServeHelp) -> Path:
    """Write ``found`` to its cache file; returns the path."""
    return write_json(path_for(results_root, found.commit), found.as_dict())
