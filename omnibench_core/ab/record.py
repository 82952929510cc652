"""The A/B record's typed records: the two sides, the design and its seed, the schedule (which
run of which side ran in which order), every attempt with its run folder and, for rounds until
the answer is known (``--max-rounds``), the stopping rule and what each look found.
:mod:`omnibench_core.ab.experiment_file` reads and writes them (``<results>/ab/<name>.json``).
"""

from __future__ import annotations

import datetime as dt
import enum
import hashlib
import json
import random
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

from .. import defaults
from ..errors import RecordError
from ..identity import differences
from ..records import ScorePolicy
from ..stats.looks import Boundary
from ..statuses import AttemptStatus, ExperimentStatus, SideStatus

SIDES = ("A", "B")


class Design(str, enum.Enum):
    """How the two sides' runs are ordered in time."""

    DUET = "duet"  # each round runs A and B at the same time on two slots, which swap every round
    INTERLEAVED = "interleaved"  # each round runs A and B one after the other, in a seeded random order
    SEQUENTIAL = "sequential"  # A's runs, then B's: two campaigns one after another (the baseline)


def now_iso() -> str:
    """The current UTC time, ISO 8601 with microseconds."""
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="microseconds")


@dataclass(frozen=True)
class Side:
    """One side of the experiment: workload options and settings on top of the shared ones."""

    label: str  # A (the base) or B
    options: tuple[str, ...] = ()  # WORKLOAD.KEY=VALUE, sorted
    sets: tuple[tuple[str, str], ...] = ()  # settings NAME=VALUE, sorted
    revision: str = ""  # a full commit of the checkout (target sglang-omni); "" for the checkout as it is

    def describe(self) -> str:
        """``revision ...; options ...; settings ...`` for a header line."""
        parts = [f"revision {self.revision[:12]}"] if self.revision else []
        parts.append(", ".join(self.options) or "default options")
        parts.append(", ".join(f"{k}={v}" for k, v in self.sets) or "shared settings")
        return "; ".join(parts)


@dataclass(frozen=True)
class Identity:
    """What makes two A/B commands the same experiment."""

    workloads: tuple[str, ...]
    client: str | None
    settings: tuple[tuple[str, str], ...]  # the shared settings that change numbers
    a: Side
    b: Side
    design: Design
    rounds: int  # the schedule's rounds: with max_rounds, the most it may run
    seed: int
    max_rounds: int = 0  # --max-rounds: rounds until the answer is known, at most this many; 0: a fixed design

    def as_record(self) -> dict[str, Any]:
        """The JSON form (lists, the design's word). A fixed design leaves max_rounds out, so the
        names of experiments made before it existed stay what they were."""
        out = json.loads(json.dumps(asdict(self), default=str)) | {"design": self.design.value}
        if not self.max_rounds:
            del out["max_rounds"]
        return out

    def default_name(self) -> str:
        """``ab-<workloads>-<design>-<hash of the whole identity>``: the same command, the same name."""
        digest = hashlib.sha256(json.dumps(self.as_record(), sort_keys=True).encode()).hexdigest()[:12]
        return f"ab-{'+'.join(self.workloads)}-{self.design.value}-{digest}"


@dataclass(frozen=True)
class Position:
    """A place in the schedule: side ``side``'s run in round ``round`` (0: the side's warm-up run0).
    Not a host slot (:class:`omnibench_core.records.Slot`): a duet places a position on one."""

    side: str
    round: int


def schedule(design: Design, rounds: int, seed: int) -> tuple[Position, ...]:
    """The order of every run. Both warm-ups come first; then interleaved rounds run A and B in a
    seeded random order each round, sequential runs all of A's rounds, then all of B's, and a duet
    runs each round's two runs at once (the order within a round is only the record's)."""
    if design is Design.DUET:
        return tuple(Position(side, r) for r in range(rounds + 1) for side in SIDES)
    if design is Design.SEQUENTIAL:
        return (Position("A", 0), *(Position("A", r) for r in range(1, rounds + 1)),
                Position("B", 0), *(Position("B", r) for r in range(1, rounds + 1)))
    rng = random.Random(seed)
    out = [Position("A", 0), Position("B", 0)]
    for r in range(1, rounds + 1):
        first = rng.choice(SIDES)
        out += [Position(first, r), Position("B" if first == "A" else "A", r)]
    return tuple(out)


@dataclass(frozen=True)
class Attempt:
    """One try at one scheduled run."""

    side: str
    round: int
    run: str  # the runN folder it got ("" when it never got one)
    revision: str  # the revision folder under the results root
    status: AttemptStatus
    started: str
    seconds: float = 0.0
    error: str = ""
    moved_to: str = ""
    where: str = ""  # the slot it ran on (duet), e.g. "slot 1 (port 8001, CPUs 1)"
    alone: bool = False  # duet: its partner was not running for the whole of it (a retry, or it ended early)
    server_starts: int = 0  # the servers it started (a shared scoring start counts in none)

    @property
    def position(self) -> Position:
        """Its place in the schedule."""
        return Position(self.side, self.round)


@dataclass(frozen=True)
class SideReport:
    """What one side's worker of a duet round reports of its run (its outcome file)."""

    status: SideStatus
    run: str = ""  # the runN the run claimed ("" when it never got one)
    run_dir: str = ""  # where the run is now ("" when it never got a folder)
    error: str = ""
    moved_to: str = ""  # the folder the run layer moved it aside to

    def attempt_status(self) -> AttemptStatus:
        """The attempt's status: a run's own status as it is; a worker that failed, raised
        another error or was lost is a failed attempt (a retry spent)."""
        return {SideStatus.COMPLETE: AttemptStatus.COMPLETE, SideStatus.GENERATED: AttemptStatus.GENERATED,
                SideStatus.INCOMPLETE: AttemptStatus.INCOMPLETE, SideStatus.INTERRUPTED: AttemptStatus.INTERRUPTED,
                SideStatus.NOT_READY: AttemptStatus.NOT_READY}.get(self.status, AttemptStatus.FAILED)


class StopReason(str, enum.Enum):
    """Why an experiment of ``--max-rounds`` stopped where it did."""

    DECIDED = "decided"  # at a look, every decisive metric was better, worse or equivalent
    MAX_ROUNDS = "max-rounds"  # the last look, at --max-rounds, left a decisive metric undecided

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class Look:
    """One look at the verdicts: after ``rounds`` rounds, a family of one held to ``level`` (the
    experiment's boundary at this look); the decisive metrics' verdict words."""

    rounds: int
    level: float
    verdicts: tuple[tuple[str, str], ...]  # (decisive metric, better/worse/equivalent/inconclusive)

    def undecided(self) -> tuple[str, ...]:
        """The decisive metrics this look left inconclusive."""
        return tuple(m for m, v in self.verdicts if v not in ("better", "worse", "equivalent"))


@dataclass(frozen=True)
class Sequential:
    """Rounds until the answer is known: the stopping rule (``--decide``, ``--alpha`` and
    ``--min-effect``, and the boundary, fixed once a look has seen data) and what the looks found."""

    decide: tuple[str, ...] = ()  # as asked; () is every latency and throughput metric (defaults.DECIDE_WORDS)
    alpha: float = defaults.ALPHA
    min_effect: float = defaults.MIN_EFFECT
    decisive: tuple[str, ...] = ()  # the metrics the looks wait for, resolved at the first look
    looks: tuple[Look, ...] = ()
    stop: StopReason | None = None  # None: not stopped yet
    rounds_run: int = 0  # the stopping look's rounds: what the verdicts rest on (0 before it stops)
    # how alpha is spent over the looks; records of format 1 looked by Bonferroni, and keep it
    boundary: Boundary = Boundary.POCOCK

    def rule(self) -> tuple[tuple[str, ...], float, float]:
        """What a look's verdicts depend on besides the data: it may not change once a look saw data."""
        return self.decide, self.alpha, self.min_effect

    def as_record(self) -> dict[str, Any]:
        """The JSON form."""
        return {"decide": list(self.decide), "alpha": self.alpha, "min_effect": self.min_effect,
                "decisive": list(self.decisive),
                "looks": [{"rounds": k.rounds, "level": k.level, "verdicts": [list(v) for v in k.verdicts]}
                          for k in self.looks],
                "stop": self.stop.value if self.stop else None, "rounds_run": self.rounds_run,
                "boundary": self.boundary.value}


# an attempt in one of these states holds its run folder: no other attempt may name the same run
HOLDS_RUN = (AttemptStatus.COMPLETE, AttemptStatus.GENERATED, AttemptStatus.NOISY)


def duet_slot(side: str, round_: int) -> int:
    """Which of the two slots a side uses in a round: they swap every round, so each side spends
    as many rounds on each slot (with an even number of rounds)."""
    return (round_ + (0 if side == "A" else 1)) % 2


class Family(str, enum.Enum):
    """How the speed rows share alpha (docs/verdicts.md, "Many metrics"): the decisive metrics
    first, the others once every decisive one is called changed (serial gatekeeping, format 3 on),
    or every row in one Holm family (the records before: each is judged by the rule it was made by)."""

    GATEKEEPING = "gatekeeping"
    HOLM = "holm"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class Experiment:
    """The whole A/B record."""

    name: str
    identity: Identity
    retries: int
    scoring: str
    order: tuple[Position, ...]
    attempts: tuple[Attempt, ...] = ()
    status: ExperimentStatus = ExperimentStatus.RUNNING
    reason: str = ""
    created: str = ""
    updated: str = ""
    sequential: Sequential | None = None  # with --max-rounds (identity.max_rounds); None for a fixed design
    # which rounds are scored for quality; a file from before --score scored every round
    score: ScorePolicy = ScorePolicy.EVERY_ROUND
    family: Family = Family.GATEKEEPING  # how the rows share alpha; records of format 2 and before: holm
    # a fixed design's --decide, the metrics judged first (format 4); with --max-rounds it is sequential.decide
    decide: tuple[str, ...] = ()
    # --noisy-retries (format 5): how often a round whose timed window the noise guard marked is
    # measured again; 0 (the default, and every record before it) judges noisy rounds as measured
    noisy_retries: int = 0

    def scores(self, round_: int, look_rounds: Sequence[int] = ()) -> bool:
        """Whether the runs of ``round_`` are scored for quality: never a warm-up (round 0); with
        ``last``, the schedule's last round, or with --max-rounds each round in ``look_rounds``
        (each look may be where the experiment stops, and a run is scored before it completes)."""
        if round_ == 0 or self.score is ScorePolicy.NONE:
            return False
        if self.score is ScorePolicy.EVERY_ROUND:
            return True
        return round_ in (look_rounds if self.identity.max_rounds else (self.identity.rounds,))

    def scored_rounds(self, look_rounds: Sequence[int] = ()) -> tuple[int, ...]:
        """The rounds :meth:`scores` scores, in order."""
        return tuple(r for r in range(1, self.identity.rounds + 1) if self.scores(r, look_rounds))

    def latest(self, position: Position) -> Attempt | None:
        """The last attempt at ``position``."""
        found = [a for a in self.attempts if a.position == position]
        return found[-1] if found else None

    def failures(self, position: Position) -> int:
        """Attempts at ``position`` that missed a gate or coverage rule."""
        return sum(a.status in (AttemptStatus.FAILED, AttemptStatus.INCOMPLETE) for a in self.attempts
                   if a.position == position)

    def redone(self, position: Position) -> int:
        """Attempts at ``position`` set aside as noisy (:data:`AttemptStatus.NOISY`)."""
        return sum(a.status is AttemptStatus.NOISY for a in self.attempts if a.position == position)

    def with_attempt(self, attempt: Attempt) -> Experiment:
        """``attempt`` added, or the last attempt at its position replaced when it is the same try."""
        attempts = list(self.attempts)
        for i in range(len(attempts) - 1, -1, -1):
            if attempts[i].position == attempt.position:
                if attempts[i].started == attempt.started:
                    attempts[i] = attempt
                    return replace(self, attempts=tuple(attempts))
                break
        return replace(self, attempts=(*attempts, attempt))

    def measured(self, side: str) -> dict[int, Attempt]:
        """Round -> the complete attempt of ``side`` in that round (warm-ups left out)."""
        out = {}
        for position in self.order:
            last = self.latest(position)
            if position.side == side and position.round > 0 and last is not None and last.status is AttemptStatus.COMPLETE:
                out[position.round] = last
        return out

    def as_record(self) -> dict[str, Any]:
        """The JSON form (``sequential`` only with --max-rounds, ``score`` only when not every round,
        ``decide`` only when a fixed design names its decisive metrics, ``noisy_retries`` only when
        not 0: a file of an experiment that could have been made before them is as it was)."""
        out = {"name": self.name, "identity": self.identity.as_record(),
               "retries": self.retries, "scoring": self.scoring,
               "order": [[p.side, p.round] for p in self.order],
               "attempts": [asdict(a) | {"status": a.status.value} for a in self.attempts],
               "status": self.status.value, "reason": self.reason, "created": self.created, "updated": self.updated,
               "family": self.family.value}
        if self.score is not ScorePolicy.EVERY_ROUND:  # every round: what a file without it means (before --score)
            out["score"] = self.score.value
        if self.sequential is not None:
            out["sequential"] = self.sequential.as_record()
        if self.decide:
            out["decide"] = list(self.decide)
        if self.noisy_retries:  # 0: what a file without it means (before --noisy-retries)
            out["noisy_retries"] = self.noisy_retries
        return out


def identity_differences(a: Identity, b: Identity) -> list[str]:
    """``field: A != B`` for each part of the identity that differs."""
    return differences(a.as_record(), b.as_record())


def runs_of(experiment: Experiment, side: str) -> Sequence[Attempt]:
    """The side's complete measured attempts in round order."""
    measured = experiment.measured(side)
    return [measured[r] for r in sorted(measured)]


__all__ = ["HOLDS_RUN", "Attempt", "Design", "Experiment", "Identity", "Look", "Position", "RecordError", "Sequential", "Side",
           "SideReport", "StopReason", "duet_slot", "identity_differences", "runs_of", "schedule"]
