"""The campaign file, ``<results>/<revision>/campaigns/<name>.json``: what was asked, the
environment it ran in, and every run attempt with its status and the server starts it took.
Written atomically after every change, so Ctrl-C or a crash leaves a resumable campaign."""

from __future__ import annotations

import datetime as dt
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Literal, NoReturn

from .. import defaults
from ..errors import OmnibenchError, SettingsError, storage_error
from ..identity import Identity
from ..jsonio import read_json, write_json

CAMPAIGNS = "campaigns"
Scoring = Literal["deferred", "per-run"]
SCORINGS: tuple[str, ...] = ("deferred", "per-run")


def now_iso() -> str:
    """The current UTC time, ISO 8601 with microseconds: it also tells attempts apart (a retry
    can start within the second its failed attempt started)."""
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="microseconds")


@dataclass(frozen=True)
class Asked:
    """What a campaign measures: its identity (workloads, options, client, settings) plus how
    (runs, retries, scoring), which a later command may change."""

    workloads: tuple[str, ...]
    options: tuple[str, ...]  # WORKLOAD.KEY=VALUE as given, sorted
    client: str | None
    settings: Mapping[str, str]  # identity.RECORDED_SETTINGS, as strings
    runs: int = defaults.RUNS
    retries: int = defaults.RETRIES
    scoring: str = defaults.SCORING

    def identity(self) -> Identity:
        """What must match for a command to continue this campaign (see :mod:`omnibench_core.identity`:
        the slot and the checkout's path are recorded but are not identity)."""
        return Identity.of(self.workloads, self.options, self.client, self.settings)


@dataclass(frozen=True)
class Attempt:
    """One try at one slot of the campaign (slot 0 is the warm-up run0)."""

    slot: int
    run: str  # the runN directory name it got ("" if it never got one)
    status: str  # running, generated, complete, incomplete, failed, interrupted
    started: str = ""
    seconds: float = 0.0
    server_starts: int = 0
    error: str = ""
    moved_to: str = ""  # where the run layer moved it aside


@dataclass(frozen=True)
class Campaign:
    """The whole campaign file."""

    name: str
    revision: str  # the revision folder name
    asked: Asked
    attempts: tuple[Attempt, ...] = ()
    environment: Mapping[str, Any] = field(default_factory=dict)
    status: str = "running"  # running, complete, stopped, interrupted
    reason: str = ""
    created: str = ""
    updated: str = ""

    @property
    def slots(self) -> int:
        """run0 plus the measured runs."""
        return self.asked.runs + 1

    def latest(self, slot: int) -> Attempt | None:
        """The last attempt at ``slot``."""
        found = [a for a in self.attempts if a.slot == slot]
        return found[-1] if found else None

    def failures(self, slot: int) -> int:
        """Attempts at ``slot`` that missed a gate or a coverage rule (retries spent)."""
        return sum(a.status in ("incomplete", "failed") for a in self.attempts if a.slot == slot)

    def measured(self) -> list[Attempt]:
        """The latest attempt at each measured slot (1..runs) that is complete."""
        out = []
        for slot in range(1, self.slots):
            last = self.latest(slot)
            if last is not None and last.status == "complete":
                out.append(last)
        return out

    @property
    def server_starts(self) -> int:
        """Every server start of every attempt."""
        return sum(a.server_starts for a in self.attempts)

    def with_attempt(self, attempt: Attempt) -> Campaign:
        """A new attempt added, or the last one of its slot and run replaced (its status moved on)."""
        attempts = list(self.attempts)
        for i in range(len(attempts) - 1, -1, -1):
            if attempts[i].slot == attempt.slot:
                if attempts[i].started == attempt.started:
                    attempts[i] = attempt
                    return replace(self, attempts=tuple(attempts))
                break
        return replace(self, attempts=(*attempts, attempt))

    def as_record(self) -> dict[str, Any]:
        """The JSON form."""
        data = asdict(self)
        data["asked"]["workloads"] = list(self.asked.workloads)
        data["asked"]["options"] = list(self.asked.options)
        data["server_starts"] = self.server_starts
        data["format"] = FORMAT
        return data


def campaign_path(revision_dir: Path, name: str) -> Path:
    """``<revision>/campaigns/<name>.json``."""
    return revision_dir / CAMPAIGNS / f"{name}.json"


def save(path: Path, campaign: Campaign) -> Campaign:
    """Write the campaign atomically, stamped with the time; a disk that refuses is a StorageError."""
    campaign = replace(campaign, updated=now_iso(), created=campaign.created or now_iso())
    try:
        write_json(path, campaign.as_record())
    except OSError as exc:
        raise storage_error("writing the campaign file", exc) from exc
    return campaign


class CampaignFileError(OmnibenchError):
    """A campaign file that cannot be trusted: unreadable, of another format, or a field of the
    wrong type or value (edited by hand, say). Names the file and the field."""


FORMAT = 1  # the campaign file's format; a file of another one is refused, never guessed at
ATTEMPT_STATUSES = ("running", "generated", "complete", "incomplete", "failed", "interrupted")
CAMPAIGN_STATUSES = ("running", "complete", "stopped", "interrupted")
LIVE = ("running", "generated", "complete")  # attempts whose run directory is (or will be) runN itself
_RUN_NAME = re.compile(r"(run[0-9]+)?")
_MISSING = object()


class _Reader:
    """Typed access to one JSON object of the file; each failure names the file and the field."""

    def __init__(self, path: Path, data: Any, where: str):
        self.path, self.where = path, where
        if not isinstance(data, dict):
            self.fail("", f"must be an object, not {type(data).__name__}")
        self.data: dict[str, Any] = data

    def fail(self, key: str, problem: str) -> NoReturn:
        name = f"{self.where}.{key}" if self.where and key else (self.where or key or "(top level)")
        raise CampaignFileError(f"the campaign file {self.path} is not valid: {name} {problem}",
                                evidence={"file": str(self.path), "field": name},
                                hint="mend that field (or restore the file), or move the file aside "
                                     "to start the campaign again")

    def get(self, key: str, default: Any = _MISSING) -> Any:
        if key not in self.data:
            if default is _MISSING:
                self.fail(key, "is missing")
            return default
        return self.data[key]

    def text(self, key: str, default: Any = _MISSING, *, choices: Sequence[str] = ()) -> str:
        value = self.get(key, default)
        if not isinstance(value, str):
            self.fail(key, f"must be a string, not {value!r}")
        if choices and value not in choices:
            self.fail(key, f"is {value!r}; it must be one of {', '.join(choices)}")
        return value

    def integer(self, key: str, default: Any = _MISSING, *, least: int = 0) -> int:
        value = self.get(key, default)
        if not isinstance(value, int) or isinstance(value, bool):  # "1" and true are not slots
            self.fail(key, f"must be a whole number, not {value!r}")
        if value < least:
            self.fail(key, f"is {value}; it must be at least {least}")
        return value

    def number(self, key: str, default: Any = _MISSING) -> float:
        value = self.get(key, default)
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value) or value < 0:
            self.fail(key, f"must be a finite number >= 0, not {value!r}")
        return float(value)

    def strings(self, key: str) -> tuple[str, ...]:
        value = self.get(key)
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            self.fail(key, f"must be a list of strings, not {value!r}")
        return tuple(value)

    def mapping(self, key: str, default: Any = _MISSING) -> dict[str, Any]:
        value = self.get(key, default)
        if not isinstance(value, dict):
            self.fail(key, f"must be an object, not {value!r}")
        return dict(value)


def _asked_from(r: _Reader) -> Asked:
    settings = r.mapping("settings")
    bad = [k for k, v in settings.items() if not isinstance(v, str)]
    if bad:
        r.fail(f"settings.{bad[0]}", f"must be a string, not {settings[bad[0]]!r}")
    client = r.get("client", None)
    if client is not None and not isinstance(client, str):
        r.fail("client", f"must be a string or null, not {client!r}")
    workloads = r.strings("workloads")
    if not workloads:
        r.fail("workloads", "is empty")
    return Asked(workloads, r.strings("options"), client, settings, r.integer("runs", least=1),
                 r.integer("retries"), r.text("scoring", choices=SCORINGS))


def _attempt_from(r: _Reader) -> Attempt:
    run = r.text("run")
    if not _RUN_NAME.fullmatch(run):
        r.fail("run", f"is {run!r}; it must be a run directory name (runN) or empty")
    return Attempt(slot=r.integer("slot"), run=run, status=r.text("status", choices=ATTEMPT_STATUSES),
                   started=r.text("started", ""), seconds=r.number("seconds", 0.0),
                   server_starts=r.integer("server_starts", 0), error=r.text("error", ""),
                   moved_to=r.text("moved_to", ""))


def _check_runs_distinct(r: _Reader, attempts: Sequence[Attempt]) -> None:
    """No run directory belongs to two slots: a measured run naming the warm-up, or two measured
    runs naming one run, would be counted twice (or the warm-up counted as measured)."""
    owner: dict[str, int] = {}
    for i, a in enumerate(attempts):
        if not a.run or a.status not in LIVE:
            continue
        first = owner.setdefault(a.run, a.slot)
        if first != a.slot:
            what = "the warm-up's run" if first == 0 or a.slot == 0 else "a run of another slot"
            r.fail(f"attempts[{i}].run", f"is {a.run!r}, {what} (slot {first}) too; each slot needs its own run")


def from_record(path: Path, data: Any) -> Campaign:
    """The campaign of a file's JSON, every field type-checked; a :class:`CampaignFileError` names
    the first field that is wrong."""
    r = _Reader(path, data, "")
    version = r.get("format", None)
    if version != FORMAT:
        raise CampaignFileError(f"the campaign file {path} has format {version!r}; this omnibench reads format {FORMAT}",
                                evidence={"file": str(path), "field": "format", "format": repr(version)},
                                hint="use the omnibench that wrote it (a newer one, if the number is higher), "
                                     "or move the file aside to start the campaign again")
    raw = r.get("attempts", [])
    if not isinstance(raw, list):
        r.fail("attempts", f"must be a list, not {raw!r}")
    attempts = tuple(_attempt_from(_Reader(path, a, f"attempts[{i}]")) for i, a in enumerate(raw))
    _check_runs_distinct(r, attempts)
    return Campaign(name=r.text("name"), revision=r.text("revision"), asked=_asked_from(_Reader(path, r.get("asked"), "asked")),
                    attempts=attempts, environment=r.mapping("environment", {}),
                    status=r.text("status", "running", choices=CAMPAIGN_STATUSES), reason=r.text("reason", ""),
                    created=r.text("created", ""), updated=r.text("updated", ""))


def load(path: Path) -> Campaign:
    """Read a campaign file, checked field by field (see :func:`from_record`)."""
    try:
        data = read_json(path)
    except (OSError, ValueError) as exc:
        raise CampaignFileError(f"cannot read the campaign file {path}: {type(exc).__name__}: {exc}",
                                evidence={"file": str(path)}, hint="name another campaign, or move that file aside") from exc
    return from_record(path, data)


def check_same(existing: Campaign, asked: Asked) -> None:
    """A command continues a campaign only when it asks for the same measurement."""
    diff = existing.asked.identity().differences(asked.identity())
    if diff:
        raise SettingsError(f"campaign {existing.name!r} measured something else", evidence={"differences": "\n".join(diff)},
                            hint="repeat the campaign's own command, or pass --name for a new campaign")


def latest_campaign(revision_dir: Path) -> Path | None:
    """The campaign file of ``revision_dir`` changed last."""
    files = sorted((revision_dir / CAMPAIGNS).glob("*.json"), key=lambda p: p.stat().st_mtime)
    return files[-1] if files else None


def sorted_options(pairs: Sequence[str]) -> tuple[str, ...]:
    """Options in a stable order (the name and identity do not depend on flag order)."""
    return tuple(sorted(pairs))


def name_for(revision_dir: Path, identity: Identity) -> str:
    """The name of ``identity``'s campaign in ``revision_dir``: :meth:`Identity.name`, unless
    only an older omnibench's name for it (:meth:`Identity.names`) is there, holding the same
    measurement; then that one, so a campaign made before is resumed, never measured again."""
    canonical, *older = identity.names()
    if campaign_path(revision_dir, canonical).exists():
        return canonical
    for name in older:
        path = campaign_path(revision_dir, name)
        if path.is_file() and not load(path).asked.identity().differences(identity):
            return name
    return canonical
