"""The campaign file, ``<results>/<revision>/campaigns/<name>.json``, read and written: the typed
records are :mod:`omnibench_core.campaign.record`'s (what was asked, the environment, every run
attempt); this module writes them atomically after every change, so Ctrl-C or a crash leaves a
resumable campaign, and checks a file field by field on load.

Format 1 is every campaign file so far (``tests/fixtures/campaign-format1-f844481.json`` is one
from main f844481); an older format would be migrated through :data:`MIGRATIONS`, a newer one is
refused.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, NoReturn

from ..errors import CampaignFileError, OmnibenchError, storage_error
from ..identity import Identity
from ..jsonio import loads, read_json, write_json
from ..records import SCORE_WORDS, ScorePolicy
from ..statuses import AttemptStatus, CampaignStatus, words
from ..store import versions
from ..store.fields import run_problem, seconds_problem
from ..store.names import campaign_files, campaign_path, name_problem
from .record import SCORINGS, Asked, Attempt, Campaign, now_iso

FORMAT = 1  # the campaign file's format; a newer one is refused, never guessed at
MIGRATIONS: dict[int, versions.Migration] = {}  # format N -> N + 1; none yet

__all__ = ["FORMAT", "campaign_path", "from_record", "latest_finished", "load", "name_for", "parse", "path_for", "save"]


def save(path: Path, campaign: Campaign, *, stamp: bool = True) -> Campaign:
    """Write the campaign atomically, stamped with the time (``stamp=False``: as it is, for a copy
    of a file written elsewhere, such as one a node sent); a disk that refuses is a StorageError."""
    if stamp:
        campaign = replace(campaign, updated=now_iso(), created=campaign.created or now_iso())
    try:
        write_json(path, {**campaign.as_record(), "format": FORMAT})
    except OSError as exc:
        raise storage_error("writing the campaign file", exc) from exc
    return campaign


# a campaign never redoes a noisy run (``invoke ab --noisy-retries`` does): its files never say so
CAMPAIGN_WORDS = tuple(w for w in words(AttemptStatus) if w != AttemptStatus.NOISY.value)
LIVE = (AttemptStatus.RUNNING, AttemptStatus.GENERATED, AttemptStatus.COMPLETE)  # run directory is (or will be) runN
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

    def entry(self, key: str) -> str:
        """A text that names a file or folder (the campaign's name, its revision folder): one
        plain entry by :func:`.names.name_problem`, or a path built from it (a report's folder,
        a comparison's) could lead out of the results root."""
        value = self.text(key)
        problem = name_problem(value, given=False)
        if problem:
            self.fail(key, f"is {value!r}: {problem}")
        return value

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
        problem = seconds_problem(value)
        if problem:
            self.fail(key, problem)
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
                 r.integer("retries"), r.text("scoring", choices=SCORINGS),
                 ScorePolicy(r.text("score", ScorePolicy.EVERY_ROUND.value, choices=SCORE_WORDS)))


def _attempt_from(r: _Reader) -> Attempt:
    run = r.text("run")
    problem = run_problem(run)
    if problem:
        r.fail("run", problem)
    return Attempt(slot=r.integer("slot"), run=run, status=AttemptStatus(r.text("status", choices=CAMPAIGN_WORDS)),
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
    # A campaign file has said its format from the first one on: one without is not a campaign file.
    r = _Reader(path, versions.current(path, "campaign file", r.data, version=r.get("format", None), reads=FORMAT,
                                       migrations=MIGRATIONS, error=CampaignFileError), "")
    raw = r.get("attempts", [])
    if not isinstance(raw, list):
        r.fail("attempts", f"must be a list, not {raw!r}")
    attempts = tuple(_attempt_from(_Reader(path, a, f"attempts[{i}]")) for i, a in enumerate(raw))
    _check_runs_distinct(r, attempts)
    return Campaign(name=r.entry("name"), revision=r.entry("revision"), asked=_asked_from(_Reader(path, r.get("asked"), "asked")),
                    attempts=attempts, environment=r.mapping("environment", {}),
                    status=CampaignStatus(r.text("status", "running", choices=words(CampaignStatus))), reason=r.text("reason", ""),
                    created=r.text("created", ""), updated=r.text("updated", ""))


def parse(path: Path, data: bytes, *, origin: str) -> Campaign:
    """The campaign of a file's bytes sent from elsewhere (``origin``: who sent them, a node's
    task, say) for ``path``: bytes that are not JSON, of another format or with a wrong field are
    a :class:`CampaignFileError` naming the sender and the field; nothing is to be written then."""
    try:
        return load(path, data)
    except CampaignFileError as exc:
        raise CampaignFileError(f"{origin} sent a campaign file that cannot be used: {exc.message}",
                                evidence={**exc.evidence, "sent by": origin},
                                hint="run the same omnibench on every node as on the driver, then repeat the command "
                                     "with --resume (the runs already home are kept)") from exc


def load(path: Path, data: bytes | None = None) -> Campaign:
    """Read a campaign file (or ``data``, its bytes read already), checked field by field (see
    :func:`from_record`)."""
    try:
        record = read_json(path) if data is None else loads(data, path)
    except (OSError, ValueError) as exc:  # UnicodeDecodeError too
        raise CampaignFileError(f"cannot read the campaign file {path}: {type(exc).__name__}: {exc}",
                                evidence={"file": str(path)}, hint="name another campaign, or move that file aside") from exc
    return from_record(path, record)




@dataclass(frozen=True)
class Latest:
    """The newest campaign of a revision folder that is no longer being measured (``path``, None
    when there is none) and the newer ones passed over, still ``running`` (being measured, or
    cut short by a kill): ``invoke report`` with no name reports ``path`` and names both."""

    path: Path | None
    passed_over: tuple[str, ...]


def latest_finished(revision_dir: Path) -> Latest:
    """The campaign file of ``revision_dir`` changed last whose status is not ``running``, and the
    names of the newer ones that are (a file that cannot be read is reported, not passed over:
    its error names it)."""
    passed: list[str] = []
    for path in sorted(campaign_files(revision_dir), key=lambda p: p.stat().st_mtime, reverse=True):
        try:
            running = load(path).status == CampaignStatus.RUNNING
        except OmnibenchError:
            running = False
        if not running:
            return Latest(path, tuple(passed))
        passed.append(path.stem)
    return Latest(None, tuple(passed))


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


def path_for(revision_dir: Path, identity: Identity) -> Path:
    """The campaign file of ``identity`` in ``revision_dir`` (named by :func:`name_for`): the one
    ``invoke measure`` continues, that a matrix resumes on either engine."""
    return campaign_path(revision_dir, name_for(revision_dir, identity))
