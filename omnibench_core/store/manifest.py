"""The run manifest, ``<run>/manifest.json``: every step, gate and server with times, exit codes
and logs. :class:`Manifest` writes it (atomically after each change, so a crash or Ctrl-C leaves
an accurate manifest); :func:`read` gives a reader the typed :class:`RunManifest`, whose steps and
servers are :mod:`.run_entries`' records.

Format 1 is every manifest so far: one written before the ``format`` field existed has none and
is read as format 1. The JSON fields are the ones sglang-omni's scripts and the runbook read;
``format`` is the only one added.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from ..errors import RunFileError
from ..jsonio import write_json
from ..statuses import GateStatus, RunStatus, StepStatus, words
from . import versions
from .names import manifest_path, run_manifests
from .run_entries import ServerEntry, StepEntry, invalid, servers_of, steps_of

if TYPE_CHECKING:
    from ..records import RuleResult

FORMAT = 1
MIGRATIONS: dict[int, versions.Migration] = {}  # none yet: format 1 is the only one


class GateOutcome(Protocol):
    """What the manifest records of a gate that passed or did not apply (the run layer's
    ``GateRecord``; the store stands below that layer, so it names only the fields)."""

    @property
    def gate(self) -> str: ...

    @property
    def status(self) -> GateStatus: ...

    @property
    def seconds(self) -> float: ...

    @property
    def evidence(self) -> Mapping[str, Any]: ...


def now_iso() -> str:
    """The current UTC time, ISO 8601 with milliseconds."""
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="milliseconds")


@dataclass(frozen=True)
class RunHeader:
    """What a run is, written once when it starts: the first fields of its manifest."""

    run: str
    owner: Mapping[str, Any]
    target: str
    revision: str
    dirty: bool
    target_details: Mapping[str, Any]
    workloads: tuple[str, ...]
    options: Mapping[str, Mapping[str, Any]]
    slot_port: int
    slot_gpus: tuple[str, ...]
    slot_cpus: tuple[int, ...]
    settings: Mapping[str, str]
    environment: Mapping[str, Any]

    def as_record(self) -> dict[str, Any]:
        """The manifest's header fields, in the order they have always had."""
        return {"run": self.run, "owner": dict(self.owner), "target": self.target, "revision": self.revision,
                "dirty": self.dirty, "target_details": dict(self.target_details), "workloads": list(self.workloads),
                "options": {k: dict(v) for k, v in self.options.items()},
                "slot": {"port": self.slot_port, "gpus": list(self.slot_gpus), "cpus": list(self.slot_cpus)},
                "settings": dict(self.settings), "environment": dict(self.environment)}


@dataclass(frozen=True)
class Coverage:
    """One coverage rule as the manifest records it."""

    rule: str
    ok: bool
    detail: str


@dataclass(frozen=True)
class RunManifest:
    """A run's manifest as read, typed; the gates and the resumes stay the mappings they are in
    the file."""

    path: Path = field(compare=False)
    status: RunStatus | None  # None: a manifest without a status (written by hand or by a test)
    run: str = ""
    owner: Mapping[str, Any] = field(default_factory=dict)
    target: str = ""
    revision: str = ""
    dirty: bool | None = None
    target_details: Mapping[str, Any] = field(default_factory=dict)
    workloads: tuple[str, ...] = ()
    options: Mapping[str, Any] = field(default_factory=dict)
    slot: Mapping[str, Any] = field(default_factory=dict)
    settings: Mapping[str, Any] = field(default_factory=dict)
    environment: Mapping[str, Any] = field(default_factory=dict)
    started: str = ""
    ended: str | None = None
    gates: tuple[Mapping[str, Any], ...] = ()
    servers: tuple[ServerEntry, ...] = ()
    steps: tuple[StepEntry, ...] = ()
    error: Mapping[str, Any] | None = None
    coverage: tuple[Coverage, ...] = ()
    resumes: tuple[Mapping[str, Any], ...] = ()
    reason: str = ""

    @property
    def error_message(self) -> str:
        """The message of the error that ended the run ("" for none)."""
        return str((self.error or {}).get("message", ""))

    @property
    def broken_rules(self) -> str:
        """``rule: detail; ...`` for each coverage rule that did not hold."""
        return "; ".join(f"{c.rule}: {c.detail}" for c in self.coverage if not c.ok)

    @property
    def server_starts(self) -> int:
        """Server starts the run made itself (a shared scoring start counts once, where it was made)."""
        return sum(1 for s in self.servers if s.started_here)


def _load(path: Path) -> dict[str, Any]:
    """The manifest's JSON, of the current format; a file that cannot be read is a RunFileError."""
    return versions.read_object(path, "manifest", reads=FORMAT, migrations=MIGRATIONS,
                                hint="name a run directory that omnibench made (it has a manifest.json)")


def _entries(path: Path, data: Mapping[str, Any], key: str) -> tuple[Mapping[str, Any], ...]:
    value = data.get(key) or []
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        raise invalid(path, key, "must be a list of objects")
    return tuple(value)


def _mapping(path: Path, data: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = data.get(key) or {}
    if not isinstance(value, dict):
        raise invalid(path, key, f"must be an object, not {value!r}")
    return value


def _status(path: Path, data: Mapping[str, Any]) -> RunStatus | None:
    word = data.get("status")
    if word is None:
        return None
    try:
        return RunStatus(word)
    except ValueError:
        raise invalid(path, "status", f"is {word!r}; it must be one of {', '.join(words(RunStatus))}") from None


def from_record(path: Path, data: Mapping[str, Any]) -> RunManifest:
    """The typed manifest of a manifest's JSON (of the current format)."""
    error = data.get("error")
    return RunManifest(
        path=path, status=_status(path, data), run=str(data.get("run") or ""), owner=_mapping(path, data, "owner"),
        target=str(data.get("target") or ""), revision=str(data.get("revision") or ""),
        dirty=data.get("dirty") if isinstance(data.get("dirty"), bool) else None,
        target_details=_mapping(path, data, "target_details"),
        workloads=tuple(str(w) for w in data.get("workloads") or ()), options=_mapping(path, data, "options"),
        slot=_mapping(path, data, "slot"), settings=_mapping(path, data, "settings"),
        environment=_mapping(path, data, "environment"), started=str(data.get("started") or ""),
        ended=data.get("ended") if isinstance(data.get("ended"), str) else None,
        gates=_entries(path, data, "gates"), servers=tuple(servers_of(path, data)),
        steps=tuple(steps_of(path, data)), error=error if isinstance(error, dict) else None,
        coverage=tuple(Coverage(str(c.get("rule", "")), bool(c.get("ok")), str(c.get("detail", "")))
                       for c in _entries(path, data, "coverage")),
        resumes=_entries(path, data, "resumes"), reason=str(data.get("reason") or ""))


def read(run_dir: Path) -> RunManifest:
    """The manifest of ``run_dir``; an unreadable, malformed or newer one is a RunFileError."""
    path = manifest_path(run_dir)
    return from_record(path, _load(path))


def run_dirs(revision_dir: Path) -> list[Path]:
    """Every ``run*`` folder of a revision folder that has a manifest (moved-aside runs included)."""
    return [path.parent for path in run_manifests(revision_dir)]


def exists(run_dir: Path) -> bool:
    """Whether ``run_dir`` has a manifest file."""
    return manifest_path(run_dir).is_file()


def run_status(run_dir: Path) -> RunStatus | None:
    """What a run's manifest says its status is now (None when the run is gone or unreadable)."""
    try:
        return read(run_dir).status
    except RunFileError:
        return None


def abandon(run_dir: Path, reason: str) -> None:
    """A run whose owner died (moved aside to ``run_dir``): its manifest says ``abandoned`` and why."""
    data = _load(manifest_path(run_dir))
    data.update(status=RunStatus.ABANDONED, reason=reason)
    write_json(manifest_path(run_dir), data)


def rename_run(run_dir: Path, name: str) -> None:
    """A run that arrives under another ``runN`` name (shipped home from a node whose numbering
    clashed): its manifest names it as it is called here."""
    data = _load(manifest_path(run_dir))
    data["run"] = name
    write_json(manifest_path(run_dir), data)


def back_to_generated(run_dir: Path, why: str) -> None:
    """A scoring whose owner died: the run is ``generated`` again, its unfinished steps interrupted."""
    path = manifest_path(run_dir)
    data = _load(path)
    steps = steps_of(path, data)
    for step in steps:
        if step.status is StepStatus.RUNNING:
            step.status = StepStatus.INTERRUPTED
    data["steps"] = [s.as_record() for s in steps]
    data.setdefault("scoring_cut_short", []).append(why)
    data.update(status=RunStatus.GENERATED, ended=None)
    write_json(manifest_path(run_dir), data)


class Manifest:
    """The writer of one run's manifest, saved to ``<run>/manifest.json`` on every change."""

    def __init__(self, run_dir: Path, header: RunHeader | None = None):
        self.run_dir = run_dir
        self._steps: list[StepEntry] = []
        self._servers: list[ServerEntry] = []
        self._data: dict[str, Any] = {
            "format": FORMAT,
            **(header.as_record() if header is not None else {}),
            "status": RunStatus.RUNNING,
            "started": now_iso(),
            "ended": None,
            "gates": [],
            "servers": [],
            "steps": [],
            "error": None,
        }

    @classmethod
    def reopen(cls, run_dir: Path, owner: Mapping[str, Any], phases: tuple[str, ...]) -> Manifest:
        """Continue the manifest of a ``generated`` run (its later phases run now, by ``owner``)."""
        manifest = cls(run_dir)
        manifest._data = _load(manifest.path)
        manifest._steps, manifest._servers = steps_of(manifest.path, manifest._data), servers_of(manifest.path, manifest._data)
        manifest._data.setdefault("resumes", []).append({"at": now_iso(), "phases": list(phases),
                                                         "previous_owner": manifest._data.get("owner")})
        manifest._data.update(status=RunStatus.RUNNING, ended=None, owner=dict(owner))
        manifest.save()
        return manifest

    @property
    def path(self) -> Path:
        """Where the manifest lives now (follows the run if it is moved aside)."""
        return manifest_path(self.run_dir)

    @property
    def steps(self) -> Sequence[StepEntry]:
        """The step entries so far (the runner updates an entry in place, then saves)."""
        return tuple(self._steps)

    @property
    def servers(self) -> Sequence[ServerEntry]:
        """The server entries so far."""
        return tuple(self._servers)

    def save(self) -> None:
        """Write the manifest atomically (the entries in the places their keys have always had)."""
        if self.run_dir.is_dir():
            write_json(self.path, {**self._data, "servers": [s.as_record() for s in self._servers],
                                   "steps": [s.as_record() for s in self._steps]})

    def gate(self, record: GateOutcome, context: str = "") -> None:
        """Record a gate that passed or did not apply."""
        self._data["gates"].append({"gate": record.gate, "status": record.status, "context": context,
                                    "at": now_iso(), "seconds": round(record.seconds, 4),
                                    "evidence": record.evidence})
        self.save()

    def gate_failed(self, gate: str, error: Exception, context: str = "") -> None:
        """Record a gate that failed, with the error's evidence."""
        self._data["gates"].append({"gate": gate, "status": GateStatus.FAILED, "context": context, "at": now_iso(),
                                    "error": _error_record(error)})
        self.save()

    def server(self, entry: ServerEntry) -> ServerEntry:
        """Add a server entry; the caller updates the returned entry in place, then saves."""
        self._servers.append(entry)
        self.save()
        return entry

    def step(self, entry: StepEntry) -> StepEntry:
        """Add a step entry; the caller updates the returned entry in place, then saves."""
        self._steps.append(entry)
        self.save()
        return entry

    def coverage(self, rules: Sequence[RuleResult]) -> None:
        """Record every coverage rule and whether it held (saved with the run's end)."""
        self._data["coverage"] = [{"rule": r.name, "ok": r.ok, "detail": r.detail} for r in rules]

    def finish(self, status: RunStatus, error: BaseException | None = None, **extra: Any) -> None:
        """Mark the run ended."""
        self._data.update(status=RunStatus(status), ended=now_iso(), **extra)
        if error is not None:
            self._data["error"] = _error_record(error)
        self.save()


def _error_record(error: BaseException) -> dict[str, Any]:
    as_record = getattr(error, "as_record", None)
    if callable(as_record):
        return dict(as_record())
    return {"type": type(error).__name__, "message": str(error)}
