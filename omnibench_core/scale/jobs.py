"""What a scale command asks of one slot (a campaign job) and what it got back (an outcome)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from enum import Enum
from typing import Any, TypeVar

from .. import defaults
from ..identity import Identity, file_name
from ..records import ScorePolicy, short_revision
from ..settings import Settings
from ..statuses import JobStatus

E = TypeVar("E", bound=Enum)


@dataclass(frozen=True)
class CampaignJob:
    """One campaign: ``revision`` (a full commit of the checkout; "" for the target's own) with
    ``options`` (``WORKLOAD.KEY=VALUE``) over ``workloads``, ``runs`` measured runs after run0."""

    revision: str
    workloads: tuple[str, ...]
    options: tuple[str, ...] = ()
    runs: int = defaults.RUNS
    client: str | None = None
    retries: int = defaults.RETRIES
    engine: str = ""  # a plugin engine that measures it; "" for measure's own (defaults.SHARED_ENGINES)
    # which runs are scored for quality (--score): every one, as measure's; none for a speed question
    score: ScorePolicy = ScorePolicy.EVERY_ROUND

    @property
    def short(self) -> str:
        """The revision as its results folder names it."""
        return short_revision(self.revision) if self.revision else "own"

    @property
    def key(self) -> str:
        """Unique within a matrix: revision and option set."""
        return f"{self.short}|{';'.join(self.options) or 'defaults'}"

    def identity(self, settings: Settings) -> Identity:
        """The measurement this job's campaign makes under ``settings``: the same identity, and so
        the same campaign name, as ``invoke measure`` with those settings."""
        return Identity.from_settings(settings, self.workloads, self.options, self.client)

    def __post_init__(self) -> None:
        # omnibench's own engines measure measure's campaigns: stored as "" so that a job, its matrix
        # file and that file's name (a hash of the jobs) are the same whichever of them ran it
        if self.engine in defaults.SHARED_ENGINES:
            object.__setattr__(self, "engine", "")

    def campaign_name(self, settings: Settings) -> str | None:
        """The campaign's own name when a plugin's engine measures it (its identity's name with
        ``engine-NAME``: what another engine ran is not what ``invoke measure`` measured, so it is
        neither refused as existing nor resumed as done), or when not every run is scored
        (``score-none``, ``score-last``: such a campaign lacks the quality metrics, so a command that
        needs them never takes it for its own); None: the identity's name, as measure's."""
        parts = ([f"engine-{self.engine}"] if self.engine else []) + \
            ([f"score-{self.score.value}"] if self.score is not ScorePolicy.EVERY_ROUND else [])
        return file_name([self.identity(settings).name(), *parts]) if parts else None

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready (for subprocesses, Ray tasks and the matrix file); ``engine`` only when set and
        ``score`` only when not every run, so a matrix file's hash (its name) stays what it was."""
        data = asdict(self)
        if not self.engine:
            del data["engine"]
        if self.score is ScorePolicy.EVERY_ROUND:
            del data["score"]
        else:
            data["score"] = self.score.value
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CampaignJob:
        """Inverse of :meth:`as_dict`."""
        return cls(str(data["revision"]), tuple(data["workloads"]), tuple(data.get("options", ())),
                   int(data.get("runs", defaults.RUNS)), data.get("client"),
                   int(data.get("retries", defaults.RETRIES)), str(data.get("engine", "")),
                   ScorePolicy(data.get("score", ScorePolicy.EVERY_ROUND.value)))


@dataclass(frozen=True)
class CampaignOutcome:
    """Where a campaign stands after its job ended.

    ``status``: ``complete``, ``failed``, ``interrupted`` or ``lost`` (its slot went away: it is
    tried again elsewhere). ``means`` are each metric's mean over the measured runs; ``slot``
    is the slot it held (port, GPUs, CPUs, node).
    """

    key: str
    status: JobStatus
    campaign: str = ""  # the campaign file
    folder: str = ""  # <results>/<revision folder>
    runs: tuple[str, ...] = ()  # measured runs, run0 not included
    means: Mapping[str, float] = field(default_factory=dict)
    slot: Mapping[str, Any] = field(default_factory=dict)
    seconds: float = 0.0
    error: str = ""
    reused: bool = False  # complete before this command: nothing was measured
    score: ScorePolicy = ScorePolicy.EVERY_ROUND  # the campaign's own (a kept one may score more than asked)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        data = asdict(self)
        data["means"], data["slot"], data["score"] = dict(self.means), dict(self.slot), self.score.value
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CampaignOutcome:
        """Inverse of :meth:`as_dict`; :class:`OutcomeUnreadable` for a status or score word this
        omnibench does not know (a worker of another version wrote it); KeyError or ValueError for
        what is no outcome at all."""
        if not isinstance(data, Mapping):
            raise ValueError(f"an outcome is a JSON object, not {type(data).__name__}")
        status = _known(JobStatus, "status", data["status"], data)  # absent: no outcome (KeyError), not another version's
        score = _known(ScorePolicy, "score", data.get("score", ScorePolicy.EVERY_ROUND.value), data)
        return cls(str(data["key"]), status, str(data.get("campaign", "")), str(data.get("folder", "")),
                   tuple(data.get("runs", ())), dict(data.get("means", {})), dict(data.get("slot", {})),
                   float(data.get("seconds", 0.0)), str(data.get("error", "")), bool(data.get("reused", False)), score)


class OutcomeUnreadable(ValueError):
    """A worker's outcome names a status or score this omnibench does not know: the campaign ran,
    but which runs it measured or scored cannot be told, so it is failed, not taken as lost and
    measured again."""


def received_outcome(data: Mapping[str, Any], key: str, slot: Mapping[str, Any]) -> CampaignOutcome:
    """What an engine makes of the outcome a worker sent for job ``key`` on ``slot``: one naming a
    word this omnibench does not know is the campaign failed, with that word and what to do."""
    try:
        return CampaignOutcome.from_dict(data)
    except OutcomeUnreadable as exc:
        return CampaignOutcome(key, JobStatus.FAILED, slot=dict(slot), error=str(exc))


def _known(kind: type[E], field_name: str, word: object, data: Mapping[str, Any]) -> E:
    try:
        return kind(word)
    except ValueError:
        known = ", ".join(str(k.value) for k in kind)
        raise OutcomeUnreadable(
            f"campaign {data.get('key', '?')}: its worker's outcome says {field_name} {word!r}, which this "
            f"omnibench does not know ({known}): is that node running another omnibench version? Install the same "
            "omnibench on every node, then run the command again") from None
