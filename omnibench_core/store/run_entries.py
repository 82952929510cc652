"""The entries of a run's manifest, typed: each step (:class:`StepEntry`) and each server start
(:class:`ServerEntry`) as the runner records them, read back field by field. :mod:`.manifest`
writes and reads the file; these records are its ``steps`` and ``servers``.

Each entry writes exactly the JSON the manifest has always held for it, and keeps the fields it
does not read (``rest``), so a manifest reopened by a later phase loses nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import RunFileError
from ..statuses import StepStatus, words
from .fields import seconds_problem


def invalid(path: Path, key: str, problem: str) -> RunFileError:
    """The error of a manifest field that is not valid, naming the file and the field."""
    return RunFileError(f"the manifest {path} is not valid: {key} {problem}",
                        evidence={"file": str(path), "field": key},
                        hint="the run's manifest was edited or cut short: move the run aside and repeat it")


class _Fields:
    """Typed access to one object of the manifest (``steps[2]``, say); a failure names the file
    and the field, and the keys no reader asked for are kept (``rest``) so a rewrite loses none."""

    def __init__(self, path: Path, where: str, data: Any):
        self.path, self.where = path, where
        if not isinstance(data, dict):
            raise invalid(path, where, f"must be an object, not {type(data).__name__}")
        self.data: dict[str, Any] = data
        self.seen: set[str] = set()

    def _get(self, key: str) -> Any:
        self.seen.add(key)
        return self.data.get(key)

    def fail(self, key: str, problem: str) -> RunFileError:
        return invalid(self.path, f"{self.where}.{key}", problem)

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

    def seconds(self, key: str) -> float | None:
        value = self._get(key)
        if value is not None and (problem := seconds_problem(value)):
            raise self.fail(key, problem + " or null")
        return None if value is None else float(value)

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
    served: Mapping[str, Any] | None = None  # what it said it serves once READY (run.served_model)
    ready_s: float | None = None  # seconds from its spawn to READY (the run's <workload>.server_ready_s)
    workloads: tuple[str, ...] = ()  # the workloads whose steps it served
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
        if self.ready_s is not None:
            out["ready_s"] = self.ready_s
        if self.workloads:
            out["workloads"] = list(self.workloads)
        if self.stop_record is not None:  # set together once it was stopped (an exit code may be null)
            out.update(stop_record=dict(self.stop_record), exit_code=self.exit_code)
        optional = {"strays": self.strays, "strays_stop": self.strays_stop, "telemetry": self.telemetry,
                    "served": self.served}
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
                   served=f.mapping("served"), ready_s=f.seconds("ready_s"), workloads=f.strings("workloads"),
                   started_in=f.text("started_in"), at=f.text("at"), rest=f.rest())


def _typed(path: Path, data: Mapping[str, Any], key: str,
           kind: type[StepEntry] | type[ServerEntry]) -> list[Any]:
    value = data.get(key) or []
    if not isinstance(value, list):
        raise invalid(path, key, f"must be a list, not {type(value).__name__}")
    return [kind.from_record(path, f"{key}[{i}]", v) for i, v in enumerate(value)]


def steps_of(path: Path, data: Mapping[str, Any]) -> list[StepEntry]:
    """The typed steps of a manifest's JSON."""
    return _typed(path, data, "steps", StepEntry)


def servers_of(path: Path, data: Mapping[str, Any]) -> list[ServerEntry]:
    """The typed servers of a manifest's JSON."""
    return _typed(path, data, "servers", ServerEntry)
