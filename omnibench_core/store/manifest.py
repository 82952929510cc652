"""The run manifest, ``<run>/manifest.json``: every step, gate and server with times, exit codes
and logs. :class:`Manifest` writes it (atomically after each change, so a crash or Ctrl-C leaves
an accurate manifest); :func:`read` gives a reader the typed :class:`RunManifest`.

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
from ..jsonio import read_json, write_json
from . import versions
from .names import manifest_path, run_manifests
from .statuses import GateStatus, RunStatus, StepStatus, words

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


# -- typed step and server entries ----------------------------------------------------------------
class _Fields:
    """Typed access to one object of the manifest (``steps[2]``, say); a failure names the file
    and the field, and the keys no reader asked for are kept (``rest``) so a rewrite loses none."""

    def __init__(self, path: Path, where: str, data: Any):
        self.path, self.where = path, where
        if not isinstance(data, dict):
            raise _fail(path, where, f"must be an object, not {type(data).__name__}")
        self.data: dict[str, Any] = data
        self.seen: set[str] = set()

    def _get(self, key: str) -> Any:
        self.seen.add(key)
        return self.data.get(key)

    def fail(self, key: str, problem: str) -> RunFileError:
        return _fail(self.path, f"{self.where}.{key}", problem)

    def text(self, key: str, default: str = "") -> str:
        value = self._get(key)
        if value is None:
            return default
        if not isinstance(value, str):
            raise self.fail(key, f"must be a string, not {value!r}")
        return value

    def required(self, key: str) -> str:
        value = self._get(key)
        if key not in self.data:
            raise self.fail(key, "is missing")
        if not isinstance(value, str) or not value:
            raise self.fail(key, f"must be a non-empty string, not {value!r}")
        return value

    def maybe_text(self, key: str) -> str | None:
        return None if self._get(key) is None else self.text(key)

    def integer(self, key: str) -> int | None:
        value = self._get(key)
        if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
            raise self.fail(key, f"must be a whole number or null, not {value!r}")
        return value

    def strings(self, key: str) -> tuple[str, ...]:
        value = self._get(key) or []
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise self.fail(key, f"must be a list of strings, not {value!r}")
        return tuple(value)

    def integers(self, key: str) -> tuple[int, ...]:
        value = self._get(key) or []
        if not isinstance(value, list) or not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
            raise self.fail(key, f"must be a list of whole numbers, not {value!r}")
        return tuple(value)

    def mapping(self, key: str) -> Mapping[str, Any] | None:
        value = self._get(key)
        if value is not None and not isinstance(value, dict):
            raise self.fail(key, f"must be an object or null, not {value!r}")
        return value

    def status(self) -> StepStatus:
        word = self.required("status")
        try:
            return StepStatus(word)
        except ValueError:
            raise self.fail("status", f"is {word!r}; it must be one of {', '.join(words(StepStatus))}") from None

    def rest(self) -> dict[str, Any]:
        return {k: v for k, v in self.data.items() if k not in self.seen}


@dataclass(frozen=True)
class OutputFile:
    """A step's output file as it wrote it: the size and SHA-256 that let a later phase skip it."""

    size: int
    sha256: str

    def as_record(self) -> dict[str, Any]:
        """The manifest's ``{"size", "sha256"}``."""
        return {"size": self.size, "sha256": self.sha256}


@dataclass
class StepEntry:
    """One step of a run as the manifest records it. Mutable: the runner updates the entry while
    the step runs and saves the manifest after each change (a crash leaves it accurate)."""

    step: str  # <workload>.<step>
    phase: str
    status: StepStatus
    server: str | None = None  # the label of the server it ran on
    command: tuple[str, ...] | str = ()  # the argv, or the callable's name
    started: str = ""
    ended: str | None = None
    exit_code: int | None = None
    log: str = ""  # relative to the run directory
    pgid: int | None = None  # the step's process group, once it spawned one
    host_load: Mapping[str, Any] | None = None  # the noise guard's record (telemetry.hostload), timed windows only
    outputs: Mapping[str, OutputFile | None] | None = None  # by relative path; None: the file was missing
    error: Mapping[str, Any] | None = None  # the error's record, for a failed step
    reason: str = ""  # why it was skipped
    rest: Mapping[str, Any] = field(default_factory=dict)  # fields this omnibench does not read, kept

    def as_record(self) -> dict[str, Any]:
        """The manifest's JSON of the entry: a skipped step has only its name, phase, status and
        reason; a step that ran has the fields it has always had, and the optional ones it got."""
        out: dict[str, Any] = {"step": self.step, "phase": self.phase}
        if self.status is StepStatus.SKIPPED:
            out.update(status=self.status, reason=self.reason)
            return {**out, **self.rest}
        out.update(server=self.server, command=list(self.command) if isinstance(self.command, tuple) else self.command,
                   status=self.status, started=self.started, ended=self.ended, exit_code=self.exit_code, log=self.log)
        if self.pgid is not None:
            out["pgid"] = self.pgid
        if self.host_load is not None:
            out["host_load"] = dict(self.host_load)
        if self.outputs is not None:
            out["outputs"] = {k: v.as_record() if v is not None else None for k, v in self.outputs.items()}
        if self.error is not None:
            out["error"] = dict(self.error)
        if self.reason:
            out["reason"] = self.reason
        return {**out, **self.rest}

    @classmethod
    def from_record(cls, path: Path, where: str, data: Any) -> StepEntry:
        """The entry of a manifest's JSON object; a mistyped field is a RunFileError naming it."""
        f = _Fields(path, where, data)
        command = f.data.get("command")
        f.seen.add("command")
        if command is not None and not isinstance(command, str) and not (
                isinstance(command, list) and all(isinstance(a, str) for a in command)):
            raise f.fail("command", f"must be an argv list or a name, not {command!r}")
        return cls(step=f.required("step"), phase=f.text("phase"), status=f.status(), server=f.maybe_text("server"),
                   command=command if isinstance(command, str) else tuple(command or ()),
                   started=f.text("started"), ended=f.maybe_text("ended"), exit_code=f.integer("exit_code"),
                   log=f.text("log"), pgid=f.integer("pgid"), host_load=f.mapping("host_load"),
                   outputs=_outputs(f), error=f.mapping("error"), reason=f.text("reason"), rest=f.rest())


def _outputs(f: _Fields) -> dict[str, OutputFile | None] | None:
    raw = f.mapping("outputs")
    if raw is None:
        return None
    out: dict[str, OutputFile | None] = {}
    for rel, rec in raw.items():
        if rec is None:
            out[rel] = None
        elif (isinstance(rec, dict) and isinstance(rec.get("size"), int) and not isinstance(rec.get("size"), bool)
              and isinstance(rec.get("sha256"), str)):
            out[rel] = OutputFile(rec["size"], rec["sha256"])
        else:
            raise f.fail(f"outputs.{rel}", f"must be {{\"size\", \"sha256\"}} or null, not {rec!r}")
    return out


@dataclass
class ServerEntry:
    """One server start of a run as the manifest records it, or (``started_in``) a scoring start
    another run made and this run shared. Mutable, as :class:`StepEntry`: the runner fills in
    the start, READY, the stop, the strays and the telemetry as they happen."""

    label: str
    phase: str = ""
    argv: tuple[str, ...] = ()
    port: int | None = None
    log: str = ""  # relative to the run directory
    cpus: tuple[int, ...] = ()
    started: str = ""
    ready: str | None = None
    stopped: str | None = None
    stop: str | None = None  # how it stopped: exited, terminated, killed (process.stopping)
    shared_with: tuple[str, ...] = ()  # the other runs a shared scoring start served
    pid: int | None = None
    pgid: int | None = None
    tree_token: str | None = None
    died: str = ""  # when it had exited by itself before the stop
    stop_record: Mapping[str, Any] | None = None
    exit_code: int | None = None
    strays: Mapping[str, Any] | None = None  # what the stray scan found (process.strays)
    strays_stop: Mapping[str, Any] | None = None
    telemetry: Mapping[str, Any] | None = None  # the sampler's summary (telemetry.run_summary.server_summary)
    started_in: str = ""  # the run whose start this one shared ("": started here)
    at: str = ""  # when a shared start was joined
    rest: Mapping[str, Any] = field(default_factory=dict)  # fields this omnibench does not read, kept

    @property
    def started_here(self) -> bool:
        """Whether this run made the start itself (a shared scoring start counts where it was made)."""
        return not self.started_in

    def as_record(self) -> dict[str, Any]:
        """The manifest's JSON of the entry, with the fields it has always had."""
        if self.started_in:
            return {"label": self.label, "phase": self.phase, "started_in": self.started_in, "at": self.at,
                    **self.rest}
        out: dict[str, Any] = {"label": self.label, "phase": self.phase, "argv": list(self.argv), "port": self.port,
                               "log": self.log, "cpus": list(self.cpus), "started": self.started, "ready": self.ready,
                               "stopped": self.stopped, "stop": self.stop}
        if self.shared_with:
            out["shared_with"] = list(self.shared_with)
        if self.pid is not None:  # set together once the process started
            out.update(pid=self.pid, pgid=self.pgid, tree_token=self.tree_token)
        if self.died:
            out["died"] = self.died
        if self.stop_record is not None:  # set together once it was stopped (an exit code may be null)
            out.update(stop_record=dict(self.stop_record), exit_code=self.exit_code)
        optional = {"strays": self.strays, "strays_stop": self.strays_stop, "telemetry": self.telemetry}
        out.update({k: dict(v) for k, v in optional.items() if v is not None})
        return {**out, **self.rest}

    @classmethod
    def from_record(cls, path: Path, where: str, data: Any) -> ServerEntry:
        """The entry of a manifest's JSON object; a mistyped field is a RunFileError naming it."""
        f = _Fields(path, where, data)
        return cls(label=f.required("label"), phase=f.text("phase"), argv=f.strings("argv"), port=f.integer("port"),
                   log=f.text("log"), cpus=f.integers("cpus"), started=f.text("started"), ready=f.maybe_text("ready"),
                   stopped=f.maybe_text("stopped"), stop=f.maybe_text("stop"), shared_with=f.strings("shared_with"),
                   pid=f.integer("pid"), pgid=f.integer("pgid"), tree_token=f.maybe_text("tree_token"),
                   died=f.text("died"), stop_record=f.mapping("stop_record"), exit_code=f.integer("exit_code"),
                   strays=f.mapping("strays"), strays_stop=f.mapping("strays_stop"), telemetry=f.mapping("telemetry"),
                   started_in=f.text("started_in"), at=f.text("at"), rest=f.rest())


def _typed(path: Path, data: Mapping[str, Any], key: str,
           kind: type[StepEntry] | type[ServerEntry]) -> list[Any]:
    value = data.get(key) or []
    if not isinstance(value, list):
        raise _fail(path, key, f"must be a list, not {type(value).__name__}")
    return [kind.from_record(path, f"{key}[{i}]", v) for i, v in enumerate(value)]


def steps_of(path: Path, data: Mapping[str, Any]) -> list[StepEntry]:
    """The typed steps of a manifest's JSON."""
    return _typed(path, data, "steps", StepEntry)


def servers_of(path: Path, data: Mapping[str, Any]) -> list[ServerEntry]:
    """The typed servers of a manifest's JSON."""
    return _typed(path, data, "servers", ServerEntry)


def _fail(path: Path, key: str, problem: str) -> RunFileError:
    return RunFileError(f"the manifest {path} is not valid: {key} {problem}",
                        evidence={"file": str(path), "field": key},
                        hint="the run's manifest was edited or cut short: move the run aside and repeat it")


def _load(path: Path) -> dict[str, Any]:
    """The manifest's JSON, of the current format; a file that cannot be read is a RunFileError."""
    try:
        data = read_json(path)
    except (OSError, ValueError) as exc:
        raise RunFileError(f"cannot read the manifest {path}: {type(exc).__name__}: {exc}",
                           evidence={"file": str(path)},
                           hint="name a run directory that omnibench made (it has a manifest.json)") from exc
    if not isinstance(data, dict):
        raise _fail(path, "(top level)", f"must be an object, not {type(data).__name__}")
    return versions.current(path, "manifest", data, version=data.get("format", 1), reads=FORMAT,
                            migrations=MIGRATIONS)


def _entries(path: Path, data: Mapping[str, Any], key: str) -> tuple[Mapping[str, Any], ...]:
    value = data.get(key) or []
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        raise _fail(path, key, "must be a list of objects")
    return tuple(value)


def _mapping(path: Path, data: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = data.get(key) or {}
    if not isinstance(value, dict):
        raise _fail(path, key, f"must be an object, not {value!r}")
    return value


def _status(path: Path, data: Mapping[str, Any]) -> RunStatus | None:
    word = data.get("status")
    if word is None:
        return None
    try:
        return RunStatus(word)
    except ValueError:
        raise _fail(path, "status", f"is {word!r}; it must be one of {', '.join(words(RunStatus))}") from None


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
