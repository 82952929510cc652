"""The campaign file's typed records: what was asked, the environment it ran in, and every run
attempt with its status and the server starts it took. :mod:`omnibench_core.campaign.campaign_file`
reads and writes them (``<results>/<revision>/campaigns/<name>.json``)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Literal

from .. import defaults
from ..errors import SettingsError
from ..identity import Identity
from ..records import ScorePolicy
from ..statuses import AttemptStatus, CampaignStatus

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
    # which runs are scored for quality: every one (measure, the runbook's), or a sweep point's last
    score: ScorePolicy = ScorePolicy.EVERY_ROUND

    def scores(self, slot: int) -> bool:
        """Whether the run of ``slot`` (0: run0, the warm-up) is scored for quality: every run
        with ``every-round`` (run0 too, as the runbook scores it), the last measured run with
        ``last``, none with ``none``."""
        return self.score is ScorePolicy.EVERY_ROUND or (self.score is ScorePolicy.LAST and slot == self.runs)

    def identity(self) -> Identity:
        """What must match for a command to continue this campaign (see :mod:`omnibench_core.identity`:
        the slot and the checkout's path are recorded but are not identity)."""
        return Identity.of(self.workloads, self.options, self.client, self.settings)


@dataclass(frozen=True)
class Attempt:
    """One try at one slot of the campaign (slot 0 is the warm-up run0)."""

    slot: int
    run: str  # the runN directory name it got ("" if it never got one)
    status: AttemptStatus
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
    status: CampaignStatus = CampaignStatus.RUNNING
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
        return sum(a.status in (AttemptStatus.INCOMPLETE, AttemptStatus.FAILED) for a in self.attempts if a.slot == slot)

    def measured(self) -> list[Attempt]:
        """The latest attempt at each measured slot (1..runs) that is complete."""
        out = []
        for slot in range(1, self.slots):
            last = self.latest(slot)
            if last is not None and last.status == AttemptStatus.COMPLETE:
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
        if self.asked.score is ScorePolicy.EVERY_ROUND:  # what a file without it means (before --score)
            del data["asked"]["score"]
        else:
            data["asked"]["score"] = self.asked.score.value
        return data


def check_same(existing: Campaign, asked: Asked) -> None:
    """A command continues a campaign only when it asks for the same measurement."""
    diff = existing.asked.identity().differences(asked.identity())
    if diff:
        raise SettingsError(f"campaign {existing.name!r} measured something else", evidence={"differences": "\n".join(diff)},
                            hint="repeat the campaign's own command, or pass --name for a new campaign")


def sorted_options(pairs: Sequence[str]) -> tuple[str, ...]:
    """Options in a stable order (the name and identity do not depend on flag order)."""
    return tuple(sorted(pairs))
