"""The run manifest: every step, gate and server with times, exit codes and logs.

Rewritten atomically after each change, so a crash or Ctrl-C leaves an accurate manifest.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

from ..jsonio import read_json, write_json
from .gates import GateRecord

MANIFEST_NAME = "manifest.json"


def run_status(run_dir: Path) -> str:
    """What a run's manifest says its status is now ("" when the run is gone or unreadable)."""
    try:
        data = read_json(run_dir / MANIFEST_NAME)
    except (OSError, ValueError):
        return ""
    return str(data.get("status", "")) if isinstance(data, dict) else ""


def now_iso() -> str:
    """The current UTC time, ISO 8601 with milliseconds."""
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="milliseconds")


class Manifest:
    """Mutable manifest of one run, saved to ``<run>/manifest.json`` on every change."""

    def __init__(self, run_dir: Path, header: dict[str, Any]):
        self.run_dir = run_dir
        self.data: dict[str, Any] = {
            **header,
            "status": "running",
            "started": now_iso(),
            "ended": None,
            "gates": [],
            "servers": [],
            "steps": [],
            "error": None,
        }

    @classmethod
    def reopen(cls, run_dir: Path, owner: dict[str, Any], phases: tuple[str, ...]) -> Manifest:
        """Continue the manifest of a ``generated`` run (its later phases run now, by ``owner``)."""
        manifest = cls(run_dir, {})
        manifest.data = read_json(run_dir / MANIFEST_NAME)
        manifest.data.setdefault("resumes", []).append({"at": now_iso(), "phases": list(phases),
                                                        "previous_owner": manifest.data.get("owner")})
        manifest.data.update(status="running", ended=None, owner=owner)
        manifest.save()
        return manifest

    @property
    def path(self) -> Path:
        """Where the manifest lives now (follows the run if it is moved aside)."""
        return self.run_dir / MANIFEST_NAME

    def save(self) -> None:
        """Write the manifest atomically."""
        if self.run_dir.is_dir():
            write_json(self.path, self.data)

    def gate(self, record: GateRecord, context: str = "") -> None:
        """Record a gate that passed or did not apply."""
        self.data["gates"].append({"gate": record.gate, "status": record.status, "context": context,
                                   "at": now_iso(), "seconds": round(record.seconds, 4),
                                   "evidence": record.evidence})
        self.save()

    def gate_failed(self, gate: str, error: Exception, context: str = "") -> None:
        """Record a gate that failed, with the error's evidence."""
        self.data["gates"].append({"gate": gate, "status": "failed", "context": context, "at": now_iso(),
                                   "error": _error_record(error)})
        self.save()

    def server(self, entry: dict[str, Any]) -> dict[str, Any]:
        """Add a server entry; the returned dict is updated in place by the caller."""
        self.data["servers"].append(entry)
        self.save()
        return entry

    def step(self, entry: dict[str, Any]) -> dict[str, Any]:
        """Add a step entry; the returned dict is updated in place by the caller."""
        self.data["steps"].append(entry)
        self.save()
        return entry

    def finish(self, status: str, error: BaseException | None = None, **extra: Any) -> None:
        """Mark the run ended."""
        self.data.update(status=status, ended=now_iso(), **extra)
        if error is not None:
            self.data["error"] = _error_record(error)
        self.save()


def _error_record(error: BaseException) -> dict[str, Any]:
    as_record = getattr(error, "as_record", None)
    if callable(as_record):
        return dict(as_record())
    return {"type": type(error).__name__, "message": str(error)}
