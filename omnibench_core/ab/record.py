"""The A/B record, ``<results>/ab/<name>.json``: the two sides, the design and its seed, the
schedule (which run of which side ran in which order), and every attempt with its run folder.

Written atomically after every change, so Ctrl-C or a crash leaves an experiment that the same
command resumes; checked field by field on load, so a file edited by hand is refused with the
field named rather than measured wrongly.
"""

from __future__ import annotations

import datetime as dt
import enum
import hashlib
import json
import random
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from ..errors import OmnibenchError
from ..identity import differences
from ..jsonio import read_json, write_json

FORMAT = 1
AB_FOLDER = "ab"
SIDES = ("A", "B")


class Design(str, enum.Enum):
    """How the two sides' runs are ordered in time."""

    DUET = "duet"  # each round runs A and B at the same time on two slots, which swap every round
    INTERLEAVED = "interleaved"  # each round runs A and B one after the other, in a seeded random order
    SEQUENTIAL = "sequential"  # A's runs, then B's: two campaigns one after another (the baseline)


class AttemptStatus(str, enum.Enum):
    """Where one attempt at one scheduled run stands."""

    RUNNING = "running"
    GENERATED = "generated"  # deferred scoring: generated, not yet scored
    COMPLETE = "complete"
    INCOMPLETE = "incomplete"
    FAILED = "failed"
    INTERRUPTED = "interrupted"
    NOT_READY = "not-ready"  # its slot's port or folder was not ready: not a retry spent, the experiment stops


class ExperimentStatus(str, enum.Enum):
    """Where the whole experiment stands."""

    RUNNING = "running"
    COMPLETE = "complete"
    STOPPED = "stopped"  # a run missed its gates more often than --retries allows
    INTERRUPTED = "interrupted"


class RecordError(OmnibenchError):
    """An A/B record that cannot be read, or that names another experiment."""


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
    rounds: int
    seed: int

    def as_record(self) -> dict[str, Any]:
        """The JSON form (lists, the design's word)."""
        return json.loads(json.dumps(asdict(self), default=str)) | {"design": self.design.value}

    def default_name(self) -> str:
        """``ab-<workloads>-<design>-<hash of the whole identity>``: the same command, the same name."""
        digest = hashlib.sha256(json.dumps(self.as_record(), sort_keys=True).encode()).hexdigest()[:12]
        return f"ab-{'+'.join(self.workloads)}-{self.design.value}-{digest}"


@dataclass(frozen=True)
class Slot:
    """One scheduled run: side ``side``'s run in round ``round`` (0: the side's warm-up run0)."""

    side: str
    round: int


def schedule(design: Design, rounds: int, seed: int) -> tuple[Slot, ...]:
    """The order of every run. Both warm-ups come first; then interleaved rounds run A and B in a
    seeded random order each round, sequential runs all of A's rounds, then all of B's, and a duet
    runs each round's two runs at once (the order within a round is only the record's)."""
    if design is Design.DUET:
        return tuple(Slot(side, r) for r in range(rounds + 1) for side in SIDES)
    if design is Design.SEQUENTIAL:
        return (Slot("A", 0), *(Slot("A", r) for r in range(1, rounds + 1)),
                Slot("B", 0), *(Slot("B", r) for r in range(1, rounds + 1)))
    rng = random.Random(seed)
    out = [Slot("A", 0), Slot("B", 0)]
    for r in range(1, rounds + 1):
        first = rng.choice(SIDES)
        out += [Slot(first, r), Slot("B" if first == "A" else "A", r)]
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


def duet_slot(side: str, round_: int) -> int:
    """Which of the two slots a side uses in a round: they swap every round, so each side spends
    as many rounds on each slot (with an even number of rounds)."""
    return (round_ + (0 if side == "A" else 1)) % 2


@dataclass(frozen=True)
class Experiment:
    """The whole A/B record."""

    name: str
    identity: Identity
    retries: int
    scoring: str
    order: tuple[Slot, ...]
    attempts: tuple[Attempt, ...] = ()
    status: ExperimentStatus = ExperimentStatus.RUNNING
    reason: str = ""
    created: str = ""
    updated: str = ""

    def latest(self, slot: Slot) -> Attempt | None:
        """The last attempt at ``slot``."""
        found = [a for a in self.attempts if (a.side, a.round) == (slot.side, slot.round)]
        return found[-1] if found else None

    def failures(self, slot: Slot) -> int:
        """Attempts at ``slot`` that missed a gate or coverage rule."""
        return sum(a.status in (AttemptStatus.FAILED, AttemptStatus.INCOMPLETE) for a in self.attempts
                   if (a.side, a.round) == (slot.side, slot.round))

    def with_attempt(self, attempt: Attempt) -> Experiment:
        """``attempt`` added, or the last attempt at its slot replaced when it is the same try."""
        attempts = list(self.attempts)
        for i in range(len(attempts) - 1, -1, -1):
            if (attempts[i].side, attempts[i].round) == (attempt.side, attempt.round):
                if attempts[i].started == attempt.started:
                    attempts[i] = attempt
                    return replace(self, attempts=tuple(attempts))
                break
        return replace(self, attempts=(*attempts, attempt))

    def measured(self, side: str) -> dict[int, Attempt]:
        """Round -> the complete attempt of ``side`` in that round (warm-ups left out)."""
        out = {}
        for slot in self.order:
            last = self.latest(slot)
            if slot.side == side and slot.round > 0 and last is not None and last.status is AttemptStatus.COMPLETE:
                out[slot.round] = last
        return out

    def as_record(self) -> dict[str, Any]:
        """The JSON form."""
        return {"format": FORMAT, "name": self.name, "identity": self.identity.as_record(),
                "retries": self.retries, "scoring": self.scoring,
                "order": [[s.side, s.round] for s in self.order],
                "attempts": [asdict(a) | {"status": a.status.value} for a in self.attempts],
                "status": self.status.value, "reason": self.reason, "created": self.created, "updated": self.updated}


def experiment_path(results_root: Path, name: str) -> Path:
    """``<results>/ab/<name>.json``."""
    return results_root / AB_FOLDER / f"{name}.json"


def save(path: Path, experiment: Experiment) -> Experiment:
    """Write the record atomically, stamped with the time."""
    experiment = replace(experiment, updated=now_iso(), created=experiment.created or now_iso())
    write_json(path, experiment.as_record())
    return experiment


# -- loading, checked field by field ----------------------------------------------------------------
class _Reader:
    def __init__(self, path: Path):
        self.path = path

    def fail(self, where: str, why: str) -> RecordError:
        return RecordError(f"the A/B record {self.path} is not valid at {where}: {why}",
                           evidence={"file": str(self.path), "field": where},
                           hint="repair the field, or move the file aside to start the experiment anew")

    def get(self, data: Mapping[str, Any], key: str, kind: type | tuple[type, ...], where: str) -> Any:
        if key not in data:
            raise self.fail(f"{where}{key}", "missing")
        value = data[key]
        if not isinstance(value, kind) or (isinstance(value, bool) and kind in (int, float, (int, float))):
            names = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
            raise self.fail(f"{where}{key}", f"must be {names}, got {value!r}")
        return value

    def words(self, data: Mapping[str, Any], key: str, where: str) -> tuple[str, ...]:
        items = self.get(data, key, list, where)
        if not all(isinstance(x, str) for x in items):
            raise self.fail(f"{where}{key}", "must be a list of strings")
        return tuple(items)

    def pairs(self, data: Mapping[str, Any], key: str, where: str) -> tuple[tuple[str, str], ...]:
        items = self.get(data, key, list, where)
        if not all(isinstance(p, list) and len(p) == 2 and all(isinstance(x, str) for x in p) for p in items):
            raise self.fail(f"{where}{key}", "must be a list of [name, value] strings")
        return tuple((p[0], p[1]) for p in items)

    def enum(self, kind: type[enum.Enum], data: Mapping[str, Any], key: str, where: str) -> Any:
        word = self.get(data, key, str, where)
        try:
            return kind(word)
        except ValueError:
            raise self.fail(f"{where}{key}", f"{word!r} is not one of {', '.join(m.value for m in kind)}") from None

    def side(self, data: Any, label: str) -> Side:
        where = f"identity.{label.lower()}."
        if not isinstance(data, dict):
            raise self.fail(where.rstrip("."), "must be an object")
        if data.get("label") != label:
            raise self.fail(f"{where}label", f"must be {label!r}")
        return Side(label, self.words(data, "options", where), self.pairs(data, "sets", where),
                    self.get(data, "revision", str, where))


def load(path: Path) -> Experiment:
    """Read and check an A/B record: a newer format, a missing or mistyped field, a run counted
    twice or a round outside the schedule is refused, naming the file and the field."""
    try:
        data = read_json(path)
    except (OSError, ValueError) as exc:
        raise RecordError(f"cannot read the A/B record {path}: {exc}", evidence={"file": str(path)},
                          hint="move the file aside to start the experiment anew") from exc
    r = _Reader(path)
    if not isinstance(data, dict):
        raise r.fail("the top level", "must be an object")
    version = r.get(data, "format", int, "")
    if version != FORMAT:
        raise RecordError(f"the A/B record {path} has format {version}; this omnibench reads format {FORMAT}",
                          evidence={"file": str(path), "format": str(version)},
                          hint="use the omnibench that wrote it, or move the file aside")
    ident = r.get(data, "identity", dict, "")
    rounds = r.get(ident, "rounds", int, "identity.")
    identity = Identity(
        workloads=r.words(ident, "workloads", "identity."),
        client=ident.get("client") if isinstance(ident.get("client"), str) else None,
        settings=r.pairs(ident, "settings", "identity."),
        a=r.side(ident.get("a"), "A"), b=r.side(ident.get("b"), "B"),
        design=r.enum(Design, ident, "design", "identity."), rounds=rounds,
        seed=r.get(ident, "seed", int, "identity."))
    if rounds < 2:
        raise r.fail("identity.rounds", f"must be at least 2, got {rounds}")
    order = tuple(Slot(*p) for p in r.get(data, "order", list, "")
                  if isinstance(p, list) and len(p) == 2 and p[0] in SIDES and isinstance(p[1], int))
    if order != schedule(identity.design, rounds, identity.seed):
        raise r.fail("order", "does not match the design, rounds and seed")
    attempts = []
    runs_seen: dict[tuple[str, str], str] = {}
    for i, raw in enumerate(r.get(data, "attempts", list, "")):
        where = f"attempts[{i}]."
        if not isinstance(raw, dict):
            raise r.fail(where.rstrip("."), "must be an object")
        attempt = Attempt(
            side=r.get(raw, "side", str, where), round=r.get(raw, "round", int, where),
            run=r.get(raw, "run", str, where), revision=r.get(raw, "revision", str, where),
            status=r.enum(AttemptStatus, raw, "status", where), started=r.get(raw, "started", str, where),
            seconds=float(r.get(raw, "seconds", (int, float), where)), error=r.get(raw, "error", str, where),
            moved_to=r.get(raw, "moved_to", str, where), where=r.get(raw, "where", str, where),
            alone=r.get(raw, "alone", bool, where))
        if Slot(attempt.side, attempt.round) not in order:
            raise r.fail(f"{where}round", f"side {attempt.side} round {attempt.round} is not in the schedule")
        if attempt.run and attempt.status in (AttemptStatus.COMPLETE, AttemptStatus.GENERATED):
            owner = runs_seen.setdefault((attempt.revision, attempt.run), f"{attempt.side}{attempt.round}")
            if owner != f"{attempt.side}{attempt.round}":
                raise r.fail(f"{where}run", f"{attempt.revision}/{attempt.run} is already the run of {owner}")
        attempts.append(attempt)
    return Experiment(
        name=r.get(data, "name", str, ""), identity=identity, retries=r.get(data, "retries", int, ""),
        scoring=r.get(data, "scoring", str, ""), order=order, attempts=tuple(attempts),
        status=r.enum(ExperimentStatus, data, "status", ""), reason=r.get(data, "reason", str, ""),
        created=r.get(data, "created", str, ""), updated=r.get(data, "updated", str, ""))


def identity_differences(a: Identity, b: Identity) -> list[str]:
    """``field: A != B`` for each part of the identity that differs."""
    return differences(a.as_record(), b.as_record())


def runs_of(experiment: Experiment, side: str) -> Sequence[Attempt]:
    """The side's complete measured attempts in round order."""
    measured = experiment.measured(side)
    return [measured[r] for r in sorted(measured)]


__all__ = ["AB_FOLDER", "Attempt", "AttemptStatus", "Design", "Experiment", "ExperimentStatus", "Identity",
           "RecordError", "Side", "Slot", "duet_slot", "experiment_path", "identity_differences", "load", "runs_of",
           "save", "schedule"]
