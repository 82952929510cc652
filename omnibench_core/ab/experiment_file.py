"""The A/B record, ``<results>/ab/<name>.json``, read and written: the typed records are
:mod:`omnibench_core.ab.record`'s. Written atomically after every change, so Ctrl-C or a crash
leaves an experiment that the same command resumes; checked field by field on load, so a file
edited by hand is refused with the field named rather than measured wrongly.

A duet's worker reports its side's run to the driver in a file of its own, written and read here
too (:func:`write_side_report`, :func:`read_side_report`).

Format 2 records the boundary of an experiment of ``--max-rounds`` (``sequential.boundary``);
format 3 how the rows share alpha (``family``: the decisive metrics first); format 4 a fixed
design's own decisive metrics (``decide``, from ``--decide``); format 5 how often a noisy round is
measured again (``noisy_retries``, and attempts set aside as ``noisy``). Older records are migrated through
:data:`MIGRATIONS` (format 1's looks were Bonferroni's, format 2's rows one Holm family, and each
keeps its rule), a newer one is refused: an older omnibench would judge a fixed design's rows with
the default decisive metrics in place of the ones it was made with.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from .. import defaults
from ..errors import RecordError
from ..jsonio import read_json, write_json
from ..records import ScorePolicy
from ..stats.looks import Boundary
from ..stats.looks import looks as schedule_of
from ..statuses import AttemptStatus, ExperimentStatus, SideStatus
from ..store import versions
from ..store.fields import folder_problem, run_problem, seconds_problem
from ..store.names import experiment_path
from . import record_check
from .record import (
    HOLDS_RUN,
    SIDES,
    Attempt,
    Design,
    Experiment,
    Family,
    Identity,
    Look,
    Position,
    Sequential,
    Side,
    SideReport,
    StopReason,
    now_iso,
    schedule,
)

FORMAT = 5


def _boundary_named(data: dict[str, Any]) -> dict[str, Any]:
    """Format 1 -> 2: an experiment of --max-rounds looked by Bonferroni over 3, 4, 6, 8, ...
    rounds; it says so, and is resumed and judged by that rule."""
    if isinstance(data.get("sequential"), dict):
        data["sequential"] = {**data["sequential"], "boundary": Boundary.BONFERRONI.value}
    return data


def _family_named(data: dict[str, Any]) -> dict[str, Any]:
    """Format 2 -> 3: every row was in one Holm family; it says so, and is judged by that rule."""
    return {**data, "family": Family.HOLM.value}


def _default_decisive(data: dict[str, Any]) -> dict[str, Any]:
    """Format 3 -> 4: nothing to change. A fixed design of format 3 could not name its decisive
    metrics; without ``decide`` it has the default ones, as format 3 judged it. One that holds
    ``decide`` was edited by hand, and is refused."""
    if "decide" in data:
        raise versions.Unmigratable("decide", "no format before 4 had such a field (it was added by hand); a "
                                    "fixed design of those formats was judged with the default decisive metrics")
    return data


def _noisy_counted(data: dict[str, Any]) -> dict[str, Any]:
    """Format 4 -> 5: nothing to change. No round of format 4 was measured again for noise, which a
    file without ``noisy_retries`` says (0); one that holds it was edited by hand, and is refused. A
    resumed experiment takes the command's ``--noisy-retries`` from then on, as it takes ``--retries``."""
    if "noisy_retries" in data:
        raise versions.Unmigratable("noisy_retries", "no format before 5 had such a field (it was added by hand)")
    return data


MIGRATIONS: dict[int, versions.Migration] = {1: _boundary_named, 2: _family_named, 3: _default_decisive,
                                             4: _noisy_counted}  # N -> N + 1

__all__ = ["FORMAT", "experiment_path", "load", "read_side_report", "save", "write_side_report"]


def save(path: Path, experiment: Experiment) -> Experiment:
    """Write the record atomically, stamped with the time."""
    experiment = replace(experiment, updated=now_iso(), created=experiment.created or now_iso())
    write_json(path, {"format": FORMAT, **experiment.as_record()})
    return experiment


# -- a duet side's outcome file, from its worker to the driver ------------------------------------------
def write_side_report(path: Path, report: SideReport) -> None:
    """Write a duet worker's report of its run, atomically (the driver reads it once the worker ended)."""
    write_json(path, {"status": report.status.value, "run": report.run, "run_dir": report.run_dir,
                      "error": report.error, "moved_to": report.moved_to})


def read_side_report(path: Path, exit_code: int | None) -> SideReport:
    """A duet worker's report; a worker that left none, or one this omnibench cannot read, is
    ``lost`` (its exit code said), never a guess at how its run ended."""
    try:
        data = read_json(path)
    except (OSError, ValueError):
        return SideReport(SideStatus.LOST, error=f"the worker ended with {exit_code} and no outcome")
    if not isinstance(data, dict):
        return SideReport(SideStatus.LOST, error=f"the worker ended with {exit_code} and an outcome that is not an object")
    word = str(data.get("status", ""))
    try:
        status = SideStatus(word)
    except ValueError:
        return SideReport(SideStatus.LOST, error=f"the worker ended with {exit_code} and an unknown status {word!r}")
    text = {k: str(data.get(k) or "") for k in ("run", "run_dir", "error", "moved_to")}
    return SideReport(status, **text)


# -- loading, checked field by field ----------------------------------------------------------------
_MISSING = object()


class _Reader:
    def __init__(self, path: Path):
        self.path = path

    def fail(self, where: str, why: str) -> RecordError:
        return RecordError(f"the A/B record {self.path} is not valid at {where}: {why}",
                           evidence={"file": str(self.path), "field": where},
                           hint="repair the field, or move the file aside to start the experiment anew")

    def get(self, data: Mapping[str, Any], key: str, kind: type | tuple[type, ...], where: str,
            default: Any = _MISSING) -> Any:
        if key not in data:
            if default is not _MISSING:
                return default
            raise self.fail(f"{where}{key}", "missing")
        value = data[key]
        if not isinstance(value, kind) or (isinstance(value, bool) and kind in (int, float, (int, float))):
            names = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
            raise self.fail(f"{where}{key}", f"must be {names}, got {value!r}")
        return value

    def checked(self, data: Mapping[str, Any], key: str, where: str, problem: Callable[[Any], str],
                kind: type | tuple[type, ...] = str) -> Any:
        """``data[key]`` of ``kind`` that the store's shared check (:mod:`.fields`) finds no problem with."""
        value = self.get(data, key, kind, where)
        why = problem(value)
        if why:
            raise self.fail(f"{where}{key}", why)
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
    data = versions.current(path, "A/B record", data, version=data.get("format"), reads=FORMAT,
                            migrations=MIGRATIONS, error=RecordError)
    ident = r.get(data, "identity", dict, "")
    rounds = r.get(ident, "rounds", int, "identity.")
    identity = Identity(
        workloads=r.words(ident, "workloads", "identity."),
        client=ident.get("client") if isinstance(ident.get("client"), str) else None,
        settings=r.pairs(ident, "settings", "identity."),
        a=r.side(ident.get("a"), "A"), b=r.side(ident.get("b"), "B"),
        design=r.enum(Design, ident, "design", "identity."), rounds=rounds,
        seed=r.get(ident, "seed", int, "identity."),
        # records of fixed designs, every one before --max-rounds, hold none
        max_rounds=r.get(ident, "max_rounds", int, "identity.", default=0))
    if rounds < 2:
        raise r.fail("identity.rounds", f"must be at least 2, got {rounds}")
    if identity.max_rounds and (identity.max_rounds != rounds or rounds < defaults.FIRST_LOOK
                                or identity.design is Design.SEQUENTIAL):
        raise r.fail("identity.max_rounds", f"{identity.max_rounds} must be the rounds ({rounds}), at least "
                                            f"{defaults.FIRST_LOOK}, of an interleaved or duet design")
    order = tuple(Position(*p) for p in r.get(data, "order", list, "")
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
            run=r.checked(raw, "run", where, run_problem), revision=r.checked(raw, "revision", where, folder_problem),
            status=r.enum(AttemptStatus, raw, "status", where), started=r.get(raw, "started", str, where),
            seconds=float(r.checked(raw, "seconds", where, seconds_problem, (int, float))),
            error=r.get(raw, "error", str, where),
            moved_to=r.get(raw, "moved_to", str, where), where=r.get(raw, "where", str, where),
            alone=r.get(raw, "alone", bool, where),
            # records written before attempts counted their server starts hold none
            server_starts=r.get(raw, "server_starts", int, where, default=0))
        if attempt.server_starts < 0:
            raise r.fail(f"{where}server_starts", f"must be at least 0, got {attempt.server_starts}")
        if attempt.position not in order:
            raise r.fail(f"{where}round", f"side {attempt.side} round {attempt.round} is not in the schedule")
        if attempt.run and attempt.status in HOLDS_RUN:
            owner = runs_seen.setdefault((attempt.revision, attempt.run), f"{attempt.side}{attempt.round}")
            if owner != f"{attempt.side}{attempt.round}":
                raise r.fail(f"{where}run", f"{attempt.revision}/{attempt.run} is already the run of {owner}")
        attempts.append(attempt)
    sequential = None
    if identity.max_rounds:
        sequential = _sequential(r, r.get(data, "sequential", dict, ""), identity.max_rounds)
    elif "sequential" in data:
        raise r.fail("sequential", "a fixed design (no identity.max_rounds) has no looks")
    if "decide" in data and identity.max_rounds:  # one place for it: the stopping rule's
        raise r.fail("decide", "an experiment of --max-rounds keeps --decide in sequential.decide")
    decide = r.words(data, "decide", "") if "decide" in data else ()
    if len(set(decide)) != len(decide) or not all(m and m == m.strip() for m in decide):
        raise r.fail("decide", f"{decide!r}: a metric named twice, an empty name or one with spaces around it")
    if decide and r.enum(Family, data, "family", "") is Family.HOLM:
        raise r.fail("decide", "a record of one Holm family (format 2 and before) has no decisive metrics")
    experiment = Experiment(
        name=r.get(data, "name", str, ""), identity=identity, retries=r.get(data, "retries", int, ""),
        scoring=r.get(data, "scoring", str, ""), order=order, attempts=tuple(attempts),
        status=r.enum(ExperimentStatus, data, "status", ""), reason=r.get(data, "reason", str, ""),
        created=r.get(data, "created", str, ""), updated=r.get(data, "updated", str, ""), sequential=sequential,
        # a file from before --score scored every round
        score=r.enum(ScorePolicy, data, "score", "") if "score" in data else ScorePolicy.EVERY_ROUND,
        family=r.enum(Family, data, "family", ""), decide=decide,
        noisy_retries=r.get(data, "noisy_retries", int, "", default=0))
    if not 0 <= experiment.noisy_retries <= defaults.MAX_NOISY_RETRIES:
        raise r.fail("noisy_retries", f"must be from 0 to {defaults.MAX_NOISY_RETRIES}, got {experiment.noisy_retries}")
    noisy = [a for a in experiment.attempts if a.status is AttemptStatus.NOISY and (a.round == 0 or not a.run)]
    if noisy:  # a warm-up is never judged, so never redone; a noisy attempt is one that ended with its run
        raise r.fail(f"attempts[{experiment.attempts.index(noisy[0])}].status",
                     "noisy is a measured round's attempt with its run (never a warm-up's)")
    record_check.check(experiment, path)  # the sequential block recomputed from the record's own settings
    return experiment


_VERDICT_WORDS = ("better", "worse", "equivalent", "inconclusive")


def _sequential(r: _Reader, data: Mapping[str, Any], max_rounds: int) -> Sequential:
    """The stopping rule and the looks of an experiment of ``--max-rounds``, checked: a look
    off the schedule, out of order, or a stop that is not the last look's is refused."""
    where = "sequential."
    alpha = r.get(data, "alpha", (int, float), where)
    min_effect = r.get(data, "min_effect", (int, float), where)
    if not 0 < alpha < 1:
        raise r.fail(f"{where}alpha", f"must be between 0 and 1, got {alpha!r}")
    if not 0 <= min_effect < float("inf"):
        raise r.fail(f"{where}min_effect", f"must be a finite number >= 0, got {min_effect!r}")
    done: list[Look] = []
    boundary = r.enum(Boundary, data, "boundary", where)
    allowed = schedule_of(max_rounds, boundary)
    for i, raw in enumerate(r.get(data, "looks", list, where)):
        at = f"{where}looks[{i}]."
        if not isinstance(raw, dict):
            raise r.fail(at.rstrip("."), "must be an object")
        n = r.get(raw, "rounds", int, at)
        if n not in allowed or (done and n <= done[-1].rounds):
            raise r.fail(f"{at}rounds", f"{n} is not the next look of {', '.join(map(str, allowed))}")
        verdicts = r.pairs(raw, "verdicts", at)
        bad = [v for _, v in verdicts if v not in _VERDICT_WORDS]
        if bad:
            raise r.fail(f"{at}verdicts", f"{bad[0]!r} is not one of {', '.join(_VERDICT_WORDS)}")
        done.append(Look(n, float(r.get(raw, "level", (int, float), at)), verdicts))
    stop = None if data.get("stop") is None else r.enum(StopReason, data, "stop", where)
    rounds_run = r.get(data, "rounds_run", int, where)
    if stop is not None and (not done or rounds_run != done[-1].rounds):
        raise r.fail(f"{where}rounds_run", f"{rounds_run} is not the rounds of the last look")
    if stop is None and rounds_run:
        raise r.fail(f"{where}rounds_run", f"{rounds_run} with no stop")
    return Sequential(r.words(data, "decide", where), float(alpha), float(min_effect), r.words(data, "decisive", where),
                      tuple(done), stop, rounds_run, boundary)
