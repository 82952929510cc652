"""``invoke ab``: one A/B experiment, resumed by the same command.

Each side first does its warm-up run0; then every round measures each side once, with a fresh
server per workload per run and every gate, exactly as ``invoke run`` does. The schedule (the
design, its seed, which side runs when) is fixed when the experiment is made and kept in the
record, so a resumed experiment runs what is left of the same schedule. A run that misses a gate
or a coverage rule is tried again inside its round; with deferred scoring each side's runs are
generated first and scored together afterwards.

With ``--max-rounds N`` the schedule is N rounds long, but the experiment looks at its verdicts
after the round counts :func:`.sequential.looks` fixes and stops at the first look that decides
every decisive metric (with deferred scoring, each look first scores the runs generated since
the last one). Every look is recorded; a resumed experiment never repeats one, nor runs past a
recorded stop.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from .. import api, defaults
from ..campaign import directions as meta
from ..campaign.attempt import Ended, reclaim, run_attempt, score_generated, server_starts
from ..campaign.progress import CampaignProgress, scoring_history, scoring_start_seconds
from ..campaign.record import SCORINGS
from ..campaign.summary import noisy_line, noisy_loads
from ..errors import OmnibenchError, RunInterrupted, RunNotReady, SettingsError, Terminated, WrongRevision
from ..identity import AB_SHARED_SETTINGS, counted_settings, recorded_settings
from ..records import PHASES, UNSCORED, Phase, ScorePolicy
from ..run import ownership
from ..scale import revisions
from ..scale.slots import HostSlot, check_free
from ..settings import Settings
from ..setup.tree_state import dirty_base
from ..statuses import AttemptStatus, ExperimentStatus, RunStatus, SideStatus
from ..store import manifest as manifest_file
from ..store.durations import phase_history
from ..store.names import check_name, lock_path
from ..sweep.points import at_point, parse_point_metric
from ..telemetry import hostload
from . import duet, experiment_file, record, sequential
from .analysis import analyse
from .record import Attempt, Design, Experiment, Identity, Position, Sequential, Side
from .sequential import DecideError
from .spec import Spec

# Where a run is and what it holds is the experiment's to decide, not a side's.
NOT_PER_SIDE = ("results", "port", "gpus", "cpus", "target", "worker_silence_s")


class ExperimentStopped(OmnibenchError):
    """A scheduled run missed its gates or coverage more often than ``--retries`` allows."""


class ExperimentBusy(OmnibenchError):
    """Another omnibench process is measuring this A/B experiment now."""


@contextlib.contextmanager
def experiment_lock(results_root: Path, name: str) -> Iterator[Path]:
    """Hold the experiment's lock, ``<results>/ab/<name>.lock``, while it is measured, judged and
    published: a second command for it at once (on another port or other slots) is refused,
    naming the holder; a dead holder's lock is taken over (the kernel drops it)."""
    path = experiment_file.experiment_path(results_root, name)
    lock = lock_path(path)

    def refuse(holder: str) -> Exception:
        return ExperimentBusy(f"A/B experiment {name!r} is being measured by another omnibench process",
                              evidence={"held by": holder, "lock": str(lock)},
                              hint="wait for it to end (the same command then resumes it), or pass --name")

    with ownership.measurement_lock(lock, refuse, "A/B experiment"):
        yield lock


def _dead(attempt: Attempt, results_root: Path, others: Sequence[Attempt] = ()) -> Attempt:
    """An attempt left running in an experiment whose lock was free: its process died (kill -9).
    When it had named its run and that run's own manifest says it finished (complete, or
    generated for deferred scoring), the run is taken as it is, never measured again; unless
    another attempt of the record already holds that run."""
    if attempt.run:
        on_disk = manifest_file.run_status(results_root / attempt.revision / attempt.run)
        held = any(o is not attempt and (o.revision, o.run) == (attempt.revision, attempt.run)
                   and o.status in record.HOLDS_RUN for o in others)
        if on_disk in (RunStatus.COMPLETE, RunStatus.GENERATED) and not held:
            return replace(attempt, status=AttemptStatus(on_disk.value), error="")
    return replace(attempt, status=AttemptStatus.INTERRUPTED,
                   error=attempt.error or "its omnibench process died while it ran (the experiment lock was free)")


@dataclass(frozen=True)
class Request:
    """What ``invoke ab`` was asked, checked."""

    identity: Identity
    retries: int
    scoring: str
    name: str = ""
    sequential: Sequential | None = None  # --max-rounds: the stopping rule asked for (no looks yet)
    score: ScorePolicy = ScorePolicy.LAST  # which rounds are scored for quality
    score_given: bool = False  # --score was passed (a resumed experiment otherwise keeps its own)
    decide: tuple[str, ...] = ()  # a fixed design's --decide (with --max-rounds, sequential.decide holds it)
    noisy_retries: int = defaults.NOISY_RETRIES  # a noisy round measured again at most this often

    @property
    def experiment_name(self) -> str:
        """The given name, or one made from the whole identity."""
        return self.name or self.identity.default_name()


def parse_sets(pairs: Sequence[str], flag: str) -> tuple[tuple[str, str], ...]:
    """``NAME=VALUE`` settings of one side, checked against the settings omnibench has."""
    known = Settings.keys()
    out: dict[str, str] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        name = name.strip()
        if not sep or not name:
            raise SettingsError(f"{flag} {pair!r} is not NAME=VALUE", hint=f"e.g. {flag} local_delay_ms=40")
        if name not in known:
            raise SettingsError(f"{flag} {pair!r}: unknown setting {name!r}",
                                hint=f"known settings: {', '.join(sorted(known))}")
        if name in NOT_PER_SIDE:
            raise SettingsError(f"{flag} {pair!r}: {name} is the experiment's, not a side's",
                                hint=f"set it once for both sides (--{name.replace('_', '-')})")
        if name in out:
            raise SettingsError(f"{flag} sets {name} twice", hint="give each setting once")
        out[name] = value.strip()
    return tuple(sorted(out.items()))


def request_from(settings: Settings, workloads: Sequence[str], *, a_opts: Sequence[str] = (),
                 b_opts: Sequence[str] = (), a_sets: Sequence[str] = (), b_sets: Sequence[str] = (),
                 options: Sequence[str] = (), client: str | None = None, design: str = "interleaved",
                 rounds: int | None = None, seed: int = 0, retries: int = defaults.RETRIES,
                 scoring: str = defaults.SCORING, score: str | None = None, aa: bool = False,
                 name: str = "", a_rev: str = "", b_rev: str = "", max_rounds: int | None = None,
                 decide: Sequence[str] = (), alpha: float = defaults.ALPHA,
                 min_effect: float = defaults.MIN_EFFECT, noisy_retries: int = defaults.NOISY_RETRIES) -> Request:
    """The experiment's request, checked before anything starts. ``rounds`` None is the default
    (:data:`defaults.ROUNDS`); ``max_rounds`` runs rounds until every ``decide`` metric is decided
    (at ``alpha`` and ``min_effect``), at most that many, in place of a fixed number. ``score``
    (``--score``; None: ``last``, or every round for a quality ``decide``) says which rounds are
    scored for quality (:func:`omnibench_core.api.score_policy`). ``noisy_retries``
    (``--noisy-retries``): how often a round whose timed window the noise guard marked is measured
    again before it is judged as it is."""
    if not workloads:
        raise SettingsError("no workload given", hint="pass --workload NAME (see `invoke plugins`)")
    if name:
        check_name(name, "experiment name")  # a given name: the one rule every command's names follow
    try:
        chosen = Design(design)
    except ValueError:
        raise SettingsError(f"unknown --design {design!r}",
                            hint=f"use {' or '.join(d.value for d in Design)}") from None
    if rounds is not None and max_rounds is not None:
        raise SettingsError(f"--rounds {rounds} and --max-rounds {max_rounds} cannot go together: --rounds fixes the "
                            "rounds, --max-rounds runs rounds until the answer is known",
                            hint="keep one: --rounds N for exactly N rounds, --max-rounds N for at most N")
    if len(set(decide)) != len(decide) or not all(m.strip() for m in decide):
        raise SettingsError(f"--decide {','.join(decide)}: a metric named twice, or an empty name",
                            hint="name each metric once, e.g. --decide selftest.latency_mean_s")
    if max_rounds is not None:
        _check_max_rounds(max_rounds, chosen)
    options, decide = _at_decided_point(options, (a_opts, b_opts), workloads, decide)
    api.check_decide(workloads, decide)  # a misspelt metric, refused now, not at the first look
    # a declared metric with no better side is never called: a fixed design's gate would stay shut all
    # along, a look would never decide (an undeclared plugin's names are checked at the first look)
    context = [m for m in decide if meta.direction(m) == "context" and api.declares(workloads, m)]
    if context:
        raise SettingsError(f"--decide {', '.join(context)}: a context metric (no better side), never called better "
                            "or worse", hint="decide on metrics with a better side, e.g. a latency or throughput one")
    flag = "--max-rounds" if max_rounds is not None else "--rounds"
    rounds = max_rounds if max_rounds is not None else defaults.ROUNDS if rounds is None else rounds
    if rounds < 2:
        raise SettingsError(f"--rounds {rounds}: an A/B needs at least 2 rounds for a spread",
                            hint="use --rounds 3 or more")
    if rounds > defaults.MAX_ROUNDS:  # checked before the schedule, which holds two entries a round, is made
        raise SettingsError(f"{flag} {rounds}: an A/B schedules at most {defaults.MAX_ROUNDS} rounds (each runs both "
                            "sides: weeks of a host)", hint=f"use {flag} {defaults.MAX_ROUNDS} or fewer")
    if retries < 0:
        raise SettingsError("--retries cannot be negative", hint="0 stops at the first miss")
    if not 0 <= noisy_retries <= defaults.MAX_NOISY_RETRIES:
        raise SettingsError(f"--noisy-retries {noisy_retries}: from 0 (noisy rounds judged as measured) to "
                            f"{defaults.MAX_NOISY_RETRIES}", hint="2 measures a round a tenant disturbed again twice")
    if scoring not in SCORINGS:
        raise SettingsError(f"unknown --scoring {scoring!r}", hint=f"use {' or '.join(SCORINGS)}")
    policy = api.score_policy(workloads, api.score_word(score), decide)
    revs = sides_revisions(settings, a_rev, b_rev)
    a = Side("A", tuple(sorted({*options, *a_opts})), parse_sets(a_sets, "--a-set"), revs[0])
    b = Side("B", tuple(sorted({*options, *b_opts})), parse_sets(b_sets, "--b-set"), revs[1])
    for side in (a, b):  # a bad option (or a --decide load point's) refused before the record is made
        api.check_options(workloads, side.options, client)
    # a bad value is refused now, not after side A's runs; the sides are compared by the values their
    # settings take (local_delay_ms=5 and =5.0 are one setting)
    named = sorted({k for k, _ in (*a.sets, *b.sets)})
    values = [tuple((k, side_settings(settings, side).flat()[k]) for k in named) for side in (a, b)]
    compared: list[tuple[str, object, object]] = [
        ("options (--a-opt/--b-opt)", a.options, b.options), ("settings (--a-set/--b-set)", values[0], values[1]),
        ("revision (--a-rev/--b-rev)", a.revision, b.revision)]
    differ = {what: f"A {x!r}, B {y!r}" for what, x, y in compared if x != y}
    if not differ and not aa:
        raise SettingsError("both sides are the same (the same revision, options and settings): that is an A/A "
                            "experiment",
                            hint="give B what differs (--b-rev REV, --b-opt W.K=V or --b-set NAME=VALUE), or pass --aa to "
                                 "measure the noise of identical sides on purpose")
    if aa and differ:  # an A/A measures noise: sides that differ would have their difference called a verdict
        raise SettingsError("--aa measures identical sides, but these differ: " + ", ".join(differ),
                            evidence=differ,
                            hint="drop --aa to compare the sides, or give both sides the same (--opt is both sides' option)")
    recorded = recorded_settings(settings)
    # a later setting left empty is not part of it: names of experiments already on disk stay
    shared = counted_settings(recorded, AB_SHARED_SETTINGS)
    identity = Identity(tuple(workloads), client, shared, a, b, chosen, rounds, seed, max_rounds or 0)
    rule = Sequential(tuple(decide), alpha, min_effect) if max_rounds is not None else None
    return Request(identity, retries, scoring, name, rule, policy, score is not None,
                   () if max_rounds is not None else tuple(decide), noisy_retries)


def _at_decided_point(options: Sequence[str], side_opts: Sequence[Sequence[str]], workloads: Sequence[str],
                      decide: Sequence[str]) -> tuple[list[str], list[str]]:
    """``--decide seedtts@c16.throughput_qps``: both sides measured at the load point (its options
    added to ``options``), the metric decided by its plain name. One experiment measures one load,
    so every point named must be the same one, of a workload the experiment measures, and no
    option of both sides or of one (``side_opts``) may set its concurrency or rate otherwise."""
    points = {m: p for m in decide if (p := parse_point_metric(m)) is not None}
    where = {(p.workload, p.point) for p in points.values()}
    if len(where) > 1:
        raise SettingsError(f"--decide {','.join(points)} names {len(where)} load points; an experiment measures one",
                            hint="decide on metrics of one point, and run an experiment per point")
    out = list(options)
    for p in points.values():
        p.check_measured(workloads, "this experiment")
        for own in side_opts:  # a side's own option may not move it off the point either
            at_point([*out, *own], p)
        out = at_point(out, p)
    plain = [points[m].metric if m in points else m for m in decide]
    if len(set(plain)) != len(plain):  # seedtts@c16.x and seedtts.x, or c16 and c16-rinf: one metric
        raise SettingsError(f"--decide {','.join(decide)} names one metric twice (at the point and without it, or "
                            "in two spellings)", hint="name each metric once")
    return out, plain


def _check_max_rounds(max_rounds: int, design: Design) -> None:
    """--max-rounds needs a look's worth of rounds and a design whose every round pairs A and B."""
    if max_rounds < defaults.FIRST_LOOK:
        raise SettingsError(f"--max-rounds {max_rounds}: the first look needs {defaults.FIRST_LOOK} rounds",
                            hint=f"use --max-rounds {defaults.FIRST_LOOK} or more")
    if design is Design.SEQUENTIAL:
        # A's rounds all come before B's: stopping early would leave B unmeasured
        raise SettingsError("--max-rounds cannot stop a sequential design early: it runs all of A's rounds before "
                            "any of B's", hint="use --design interleaved or duet (or auto, which picks one of them)")


def sides_revisions(settings: Settings, a_rev: str, b_rev: str) -> tuple[str, str]:
    """Both sides' revisions as full commits of the checkout, or ``("", "")`` for none."""
    if not (a_rev or b_rev):
        return "", ""
    if settings.run.target == "local":
        raise SettingsError("the local target measures omnibench's own commit; --a-rev and --b-rev do not apply",
                            hint="use --target sglang-omni --checkout PATH to compare commits of a checkout, or "
                                 "--a-set/--b-set and --a-opt/--b-opt on the local target")
    if not (a_rev and b_rev):
        raise SettingsError(f"only side {'A' if a_rev else 'B'} names a revision",
                            hint="name both: --a-rev BASE_REVISION --b-rev NEW_REVISION")
    checkout = Path(settings.run.checkout).expanduser()
    a, b = (revisions.resolve(checkout, rev, settings.tools.git)[0] for rev in (a_rev, b_rev))
    return a, b


def side_settings(settings: Settings, side: Side) -> Settings:
    """The shared settings with the side's on top."""
    return Settings.from_mapping({**settings.flat(), **dict(side.sets)})


def run_ab(settings: Settings, request: Request, *, slots: Sequence[HostSlot] = (),
           progress: Callable[[str], None] = print) -> tuple[Path, Experiment]:
    """Run (or continue) the experiment; raises ExperimentStopped, RunInterrupted or a setup error.
    ``slots``: the two slots of a duet (where a slot is not part of the experiment's identity).
    The caller holds :func:`experiment_lock`."""
    if request.identity.design is Design.DUET and len(slots) != 2:
        raise SettingsError(f"the duet design needs two slots, {len(slots)} given",
                            hint="pass two with --slots (e.g. --slots 0,1), or --design interleaved on one slot")
    path = experiment_file.experiment_path(settings.run.results_root, request.experiment_name)
    ident = request.identity
    if path.exists():
        experiment = experiment_file.load(path)
        diffs = record.identity_differences(experiment.identity, ident)
        if diffs:
            raise SettingsError(f"A/B experiment {experiment.name!r} measured something else",
                                evidence={"differences": "\n".join(diffs), "record": str(path)},
                                hint="repeat its own command, or pass --name for a new experiment")
        judged = _judged(experiment)
        experiment = replace(experiment, retries=request.retries, noisy_retries=request.noisy_retries,
                             status=ExperimentStatus.RUNNING, reason="",
                             attempts=tuple(_dead(a, settings.run.results_root, experiment.attempts)
                                            if a.status is AttemptStatus.RUNNING else a for a in experiment.attempts))
        if experiment.scoring != request.scoring and _any(experiment, AttemptStatus.GENERATED):
            raise SettingsError(f"the experiment has generated runs waiting for {experiment.scoring} scoring; "
                                f"--scoring {request.scoring} would leave them unscored",
                                hint=f"repeat with --scoring {experiment.scoring}")
        experiment = replace(experiment, scoring=request.scoring, score=_score_kept(experiment, request, path),
                             sequential=_rule_kept(experiment, request.sequential, path),
                             decide=_decisive_kept(experiment, request.decide, path))
    else:
        judged = 0
        experiment = Experiment(request.experiment_name, ident, request.retries, request.scoring,
                                record.schedule(ident.design, ident.rounds, ident.seed), sequential=request.sequential,
                                score=request.score, decide=request.decide, noisy_retries=request.noisy_retries)
    experiment = experiment_file.save(path, experiment)
    return path, _Driver(settings, path, experiment, progress, tuple(slots), judged).go()


def _judged(experiment: Experiment) -> int:
    """The rounds a verdict has judged already: a finished experiment's all (its verdict was
    printed), else those of its last look (--max-rounds); 0 when none was judged yet."""
    state = experiment.sequential
    if experiment.status is ExperimentStatus.COMPLETE:
        return state.rounds_run if state is not None and state.stop is not None else experiment.identity.rounds
    return state.looks[-1].rounds if state is not None and state.looks else 0


def _rule_kept(experiment: Experiment, asked: Sequential | None, path: Path) -> Sequential | None:
    """The stopping rule a resumed experiment goes on with: the one asked, while no look has
    seen data (a misspelt --decide is corrected so); after a look, only the same one, since a
    rule changed after seeing data would no longer hold its alpha."""
    state = experiment.sequential
    if state is None or asked is None:  # the identity (max_rounds) already says both or neither
        return state
    if not state.looks:  # no look has seen data: the rule asked, boundary too (a format 1 record's Bonferroni)
        return replace(state, decide=asked.decide, alpha=asked.alpha, min_effect=asked.min_effect,
                       boundary=asked.boundary)
    if state.rule() != asked.rule():
        decide, alpha, min_effect = state.rule()
        raise SettingsError(f"A/B experiment {experiment.name!r} fixed its stopping rule at its first look (after "
                            f"{state.looks[0].rounds} rounds)",
                            evidence={"rule": f"--decide {','.join(decide) or '(default)'} --alpha {alpha:g} "
                                              f"--min-effect {min_effect * 100:g}",
                                      "asked": f"--decide {','.join(asked.decide) or '(default)'} --alpha "
                                               f"{asked.alpha:g} --min-effect {asked.min_effect * 100:g}",
                                      "record": str(path)},
                            hint="repeat it with its own rule, or pass --name for a new experiment")
    return state


def _decisive_kept(experiment: Experiment, asked: tuple[str, ...], path: Path) -> tuple[str, ...]:
    """A fixed design's decisive metrics on resuming: the ones asked while no round is measured;
    after that, only its own. Chosen after seeing rounds, they would pick the rows judged first
    from the data, and the gate would no longer hold alpha."""
    if set(asked) == set(experiment.decide):  # one family whatever the order: the record's own
        return experiment.decide
    if not _measured(experiment):
        return asked
    def said(metrics: tuple[str, ...]) -> str:
        return f"--decide {','.join(metrics)}" if metrics else "no --decide (the default decisive metrics)"
    raise SettingsError(f"A/B experiment {experiment.name!r} has measured rounds judged with its own decisive metrics",
                        evidence={"rule": said(experiment.decide), "asked": said(asked), "record": str(path)},
                        hint=f"repeat it with {said(experiment.decide)}, or pass --name for a new experiment")


def _score_kept(experiment: Experiment, request: Request, path: Path) -> ScorePolicy:
    """Which rounds a resumed experiment scores: its own, or ``--score`` when given; while no round
    past the warm-ups (never scored) is measured, also what a ``--decide`` taken now needs (a quality
    one: every round). Another policy once a round is measured is refused: its rounds would be
    scored by two rules."""
    score = request.score if request.score_given else experiment.score
    if not request.score_given and request.score is ScorePolicy.EVERY_ROUND and not _measured(experiment):
        score = request.score
    if score is not experiment.score and _measured(experiment):
        raise SettingsError(f"A/B experiment {experiment.name!r} began with --score {experiment.score.value}; "
                            f"--score {score.value} would leave its rounds scored by two rules",
                            evidence={"record": str(path)},
                            hint=f"repeat it with --score {experiment.score.value} (or without --score), or pass "
                                 "--name for a new experiment")
    return score


def _measured(experiment: Experiment) -> bool:
    """A round past the warm-ups has a run whose timings are on disk (complete, or generated and
    waiting for deferred scoring, or set aside as noisy): a verdict's data has been seen."""
    return any(a.round > 0 and a.run and a.status in record.HOLDS_RUN for a in experiment.attempts)


def _any(experiment: Experiment, status: AttemptStatus) -> bool:
    return any((a := experiment.latest(p)) is not None and a.status is status for p in experiment.order)


class _Driver:
    def __init__(self, settings: Settings, path: Path, experiment: Experiment, progress: Callable[[str], None],
                 slots: tuple[HostSlot, ...] = (), judged: int = 0):
        self.path, self.experiment, self.slots = path, experiment, slots
        self.judged = judged  # rounds 1 to this were judged before this command: never measured again
        self.sides = {s.label: _prepared(side_settings(settings, s), s, progress)
                      for s in (experiment.identity.a, experiment.identity.b)}
        done = [a.seconds for a in experiment.attempts if a.status in (AttemptStatus.COMPLETE, AttemptStatus.GENERATED)]
        # A duet's unit is a round (both sides at once), the others' a run
        units = experiment.identity.rounds + 1 if experiment.identity.design is Design.DUET else len(experiment.order)
        # Deferred scoring comes after every run: its estimate is what scoring took in the sides'
        # revision folders before, as measure's (none timed: the estimate says so, never "~0s left")
        per_run = next((t for t in (scoring_history(api.revision_dir(s), experiment.identity.workloads)
                                    for s in self.sides.values()) if t is not None), None) \
            if experiment.scoring == "deferred" else None
        # a history run started its scoring servers for itself; each side's scoring starts them once
        start = next((t for t in (scoring_history(api.revision_dir(s), experiment.identity.workloads,
                                                  scoring_start_seconds) for s in self.sides.values())
                      if t is not None), 0.0) if per_run is not None else 0.0
        # Before a round of this experiment ended, the first estimate is the sides' history: a
        # run's generation there (a duet round runs both sides at once: one run's time)
        prior = next((h.total(("generate",) if experiment.scoring == "deferred" else None)
                      for h in (phase_history(api.revision_dir(s), experiment.identity.workloads)
                                for s in self.sides.values()) if h is not None), None)
        self.progress = CampaignProgress(progress, units, done,
                                         scoring_per_run_s=None if per_run is None else per_run - start,
                                         scoring_start_s=start, scoring_phases=len(record.SIDES),
                                         prior_run_s=prior or None)
        self._duet: duet.Duet | None = None  # the duet's two workers, while its rounds run

    def save(self, attempt: Attempt | None = None, **changes: Any) -> None:
        if attempt is not None:
            self.experiment = self.experiment.with_attempt(attempt)
        self.experiment = experiment_file.save(self.path, replace(self.experiment, **changes))

    def side(self, label: str) -> Side:
        ident = self.experiment.identity
        return ident.a if label == "A" else ident.b

    def _run_status(self, attempt: Attempt) -> RunStatus | None:
        """What the run's own manifest says now (None when it is gone)."""
        return manifest_file.run_status(self.sides[attempt.side].run.results_root / attempt.revision / attempt.run)

    def _done(self, position: Position) -> bool:
        last = self.experiment.latest(position)
        if last is None or not last.run:
            return False
        wanted = {AttemptStatus.COMPLETE} | ({AttemptStatus.GENERATED} if self.experiment.scoring == "deferred" else set())
        return last.status in wanted and self._run_status(last) == last.status.value

    def _reclaim(self) -> None:
        """Runs left "running" by a dead omnibench (kill -9): a run whose deferred scoring died goes
        back to generated (only its scoring is done again), others are moved aside; once, here,
        before any round asks what a run's manifest says."""
        reclaim(sorted({api.revision_dir(settings) for settings in self.sides.values()}), self.progress.say)

    def go(self) -> Experiment:
        e = self.experiment
        ident = e.identity
        with self.progress:
            self._reclaim()
            rounds = (f"at most {ident.max_rounds} rounds, looking after "
                      f"{', '.join(map(str, sequential.schedule(e)))}" if ident.max_rounds
                      else f"{ident.rounds} rounds")
            self.progress.say(f"A/B {e.name}: {ident.design.value}, {rounds} (seed {ident.seed}) of "
                              f"{', '.join(ident.workloads)}; A: {ident.a.describe()}; B: {ident.b.describe()}; "
                              f"record {self.path}")
            try:
                if ident.design is Design.DUET:
                    shared = duet.slots_share_cpus(self.slots[0].slot.cpus, self.slots[1].slot.cpus)
                    with duet.Duet(progress=self.progress, shared_cpus=shared,
                                   silence_s=self.sides["A"].run.worker_silence_s) as self._duet:
                        for r in range(ident.rounds + 1):
                            if self._stopped_before(r):
                                break
                            self._fill_duet(r)
                            self._look(r)
                else:
                    for k, position in enumerate(e.order, start=1):
                        if self._stopped_before(position.round):
                            break
                        self._fill(k, position)
                        if k == len(e.order) or e.order[k].round != position.round:  # the round's last run
                            self._look(position.round)
                if self.experiment.scoring == "deferred":
                    self._score_generated()
                self._check_complete(self._horizon())
            except (KeyboardInterrupt, Terminated) as exc:  # between runs: the same as during one
                self.save(status=ExperimentStatus.INTERRUPTED, reason="interrupted between runs")
                self.progress.say(f"A/B experiment interrupted; the same command resumes it ({self.path})")
                raise RunInterrupted("interrupted between runs", hint="repeat the same command to resume") from exc
            except RunInterrupted as exc:
                self.save(status=ExperimentStatus.INTERRUPTED, reason=exc.message)
                self.progress.say(f"A/B experiment interrupted; the same command resumes it ({self.path})")
                raise
            except (ExperimentStopped, RunNotReady, DecideError, WrongRevision) as exc:
                self.save(status=ExperimentStatus.STOPPED, reason=exc.message)
                raise
            self.save(status=ExperimentStatus.COMPLETE, reason="")
            state = self.experiment.sequential
            self.progress.say(f"A/B experiment complete: {self._horizon()} rounds a side"
                              + (f" (stopped: {state.stop})" if state is not None and state.stop else ""))
        return self.experiment

    # -- rounds until the answer is known (--max-rounds) -----------------------------------------
    def _horizon(self) -> int:
        """The last round this command may run: the schedule's last; with --max-rounds the
        recorded stop, else the next look (the runs scored and judged there)."""
        state, ident = self.experiment.sequential, self.experiment.identity
        if state is None:
            return ident.rounds
        if state.stop is not None:
            return state.rounds_run
        seen = state.looks[-1].rounds if state.looks else 0
        return next((n for n in sequential.schedule(self.experiment) if n > seen), ident.max_rounds)

    def _stopped_before(self, r: int) -> bool:
        """Round ``r`` lies past a recorded stop: it is never run."""
        state = self.experiment.sequential
        return state is not None and state.stop is not None and r > state.rounds_run

    def _check_complete(self, upto: int) -> None:
        missing = [f"{p.side}{p.round}" for p in self.experiment.order if p.round <= upto and not self._complete(p)]
        if missing:
            raise ExperimentStopped(f"runs {', '.join(missing)} did not complete in scoring",
                                    evidence={"record": str(self.path)},
                                    hint="repeat the command: the missing runs are measured again")

    def _look(self, r: int) -> None:
        """After round ``r``, when it is a look not yet recorded: score what waits for deferred
        scoring, judge rounds 1 to ``r`` at the look's level, record the look and whether to stop."""
        state, n = self.experiment.sequential, self.experiment.identity.max_rounds
        if state is None or state.stop is not None or r not in sequential.schedule(self.experiment) \
                or any(k.rounds == r for k in state.looks):
            return
        if self.experiment.scoring == "deferred":
            self._score_generated()
        self._check_complete(r)
        boundary = sequential.boundary_at(state, n, r)
        held_to = boundary(state.alpha)
        made = analyse(self.experiment, self.sides["A"].run.results_root, alpha=state.alpha,
                       min_effect=state.min_effect, upto=r, at=boundary)
        directions = {v.metric: v.direction for v in made.verdicts} | {m.metric: m.direction for m in made.not_compared}
        chosen = state.decisive or sequential.decisive(state.decide, directions)
        look = sequential.look_at(r, made.verdicts, chosen, held_to)
        stop = sequential.stop_reason(look, n)
        self.save(sequential=replace(state, decisive=chosen, looks=(*state.looks, look), stop=stop,
                                     rounds_run=r if stop else 0))
        then = {None: f"going on to round {r + 1}", record.StopReason.DECIDED: "every decisive metric is decided: "
                "stopping", record.StopReason.MAX_ROUNDS: f"--max-rounds {n} reached: stopping"}[stop]
        self.progress.say(f"{sequential.look_line(look, n, state.boundary)}; {then}")

    def _complete(self, position: Position) -> bool:
        last = self.experiment.latest(position)
        return (last is not None and last.status is AttemptStatus.COMPLETE
                and self._run_status(last) == RunStatus.COMPLETE)

    def _check_retries(self, position: Position, label: str) -> None:
        if self.experiment.failures(position) > self.experiment.retries:
            errors = [f"{a.run or '-'}: {a.status}: {a.error}" for a in self.experiment.attempts
                      if a.position == position]
            raise ExperimentStopped(f"{label} missed its gates or coverage {self.experiment.failures(position)} "
                                    f"times; --retries {self.experiment.retries} is spent",
                                    evidence={"attempts": "\n".join(errors), "record": str(self.path)},
                                    hint="fix the cause, then repeat the command (complete runs are kept)")

    def _fill(self, k: int, position: Position) -> None:
        label = _label(position)
        while True:
            while not self._done(position):
                self._check_retries(position, label)
                self._attempt(k, position, label)
            if not self._redo_noisy([position]):
                return

    # -- noisy rounds measured again (--noisy-retries) -------------------------------------------------
    def _redo_noisy(self, positions: Sequence[Position]) -> bool:
        """When a measured run of ``positions`` (one run, or a duet's round) had a timed window the
        noise guard marked, and ``--noisy-retries`` is not spent: set every one of them aside as
        noisy (kept on disk and named in the report, not judged) and say so; the caller measures
        them again. The guard reads only other processes' CPU and GPU use, never the run's own
        timings, so which rounds are kept does not depend on what they measured
        (docs/verdicts.md, "Noisy windows beside the verdicts"). A round a verdict has judged (a
        look's, or a finished experiment's) stays as it is: measured again after its verdict was
        seen, it would be chosen by that verdict."""
        budget = self.experiment.noisy_retries
        latest = [a for p in positions if p.round > 0 and (a := self.experiment.latest(p)) is not None and a.run
                  and a.status in (AttemptStatus.COMPLETE, AttemptStatus.GENERATED)]
        if not budget or not latest:
            return False
        root = self.sides["A"].run.results_root
        loads = {a.side: noisy_loads([root / a.revision / a.run]) for a in latest}  # each manifest read once
        noisy = {side: [noisy_line(d, w) for d, w in found] for side, found in loads.items() if found}
        if not noisy:
            return False
        what = "; ".join(f"{side}: {lines[0]}" for side, lines in sorted(noisy.items()))
        r = positions[0].round
        if r <= self.judged:
            self.progress.say(f"round {r} was noisy ({what}), but a verdict has judged it: it stays as measured")
            return False
        done = max(self.experiment.redone(a.position) for a in latest)
        if done >= budget:
            self.progress.say(f"round {r} was noisy again ({what}); --noisy-retries {budget} is spent: it is judged "
                              "as measured, and the report names it")
            return False
        for a in latest:
            self.save(replace(a, status=AttemptStatus.NOISY, error=f"noisy: {'; '.join(noisy.get(a.side, ()))}"
                              if a.side in noisy else f"its partner in round {r} was noisy"))
        self.progress.say(f"round {r} was noisy ({what}): measured again ({done + 1} of --noisy-retries {budget})")
        self._wait_quiet(sorted({c for found in loads.values() for _, w in found for c in w.cpus}))
        return True

    # injectable for tests: where the CPU counters are read, how a look waits, and the clock
    proc, sleep, clock = hostload.PROC, staticmethod(time.sleep), staticmethod(time.monotonic)
    quiet_look_s = 1.0

    def _wait_quiet(self, cpus: Sequence[int]) -> None:
        """Before a noisy round is measured again: look at ``cpus`` (the noisy windows') a second at
        a time while nothing of this experiment runs, until other processes take no more than the
        guard's share of them, or the setting ``noise_wait_s`` has passed (then measure anyway).
        Waiting costs no run; measured again at once, a round falls into the same busy spell. The
        CPUs only: a GPU tenant is seen by the next round's guard."""
        run = self.sides["A"].run
        if not cpus or run.noise_wait_s <= 0:
            return
        threshold, wait_s = run.noise_max_foreign, run.noise_wait_s
        t0, said = self.clock(), False
        while True:
            window = hostload.LoadWindow("between rounds", cpus, threshold, proc=self.proc, clock=self.clock)
            self.sleep(self.quiet_look_s)
            load = window.close()
            waited = self.clock() - t0
            if load is None or not load.noisy:
                if said:
                    self.progress.say(f"CPUs {_cpu_list(cpus)} quiet after {waited:.0f} s: measuring again")
                return
            if waited >= wait_s:
                self.progress.say(f"CPUs {_cpu_list(cpus)} still busy after {waited:.0f} s ({load.foreign_fraction:.0%} "
                                  "to other processes): measuring again anyway")
                return
            if not said:
                self.progress.say(f"waiting up to {wait_s:.0f} s (noise_wait_s) for CPUs {_cpu_list(cpus)} to be quiet: "
                                  f"{load.foreign_fraction:.0%} of them went to other processes in the last "
                                  f"{self.quiet_look_s:g} s")
                said = True

    # -- the duet --------------------------------------------------------------------------
    def _fill_duet(self, r: int) -> None:
        """Round ``r``'s two runs at once, one per slot; a retry of one side runs alone. A round
        that was noisy is measured again as a round: both sides at once. The estimate learns the
        whole round's time (its retries, its runs set aside and the waits for quiet CPUs): the
        rounds left will cost as much on this host."""
        t0, ran = self.clock(), False
        while True:
            both = [Position("A", r), Position("B", r)]
            pending = [p for p in both if not self._done(p)]
            if not pending and not self._redo_noisy(both):
                if ran:
                    self.progress.end_run(self.clock() - t0)
                return
            pending = pending or both
            for position in pending:
                self._check_retries(position, _label(position))
            self._duet_attempt(r, pending)
            ran = True

    def _duet_attempt(self, r: int, pending: list[Position]) -> None:
        e = self.experiment
        placed = {p.side: self.slots[record.duet_slot(p.side, r)] for p in pending}
        run = self.sides["A"].run
        for host in placed.values():  # a slot's wait: 30 s (a killed server may be dying), less where GPU_FREE's is
            check_free(host, nvidia_smi=self.sides["A"].tools.nvidia_smi, free_mib=run.gpu_free_mib,
                       timeout_s=min(defaults.SLOT_FREE_WAIT_S, run.gpu_free_timeout_s))
        what = " and ".join(f"{p.side} on {placed[p.side].label}" for p in pending)
        again = max(e.redone(p) for p in pending)
        self.progress.start_run(r + 1, f"round {r}{' (warm-ups)' if r == 0 else ''}"
                                f"{f', measured again ({again} noisy)' if again else ''}: {what}", self._to_score())
        phases = self._phases(r)
        specs, attempts = {}, {}
        on = {p.side: placed[p.side].settings_on(self.sides[p.side].flat()) for p in pending}
        revisions = {side: self._revision(side, settings) for side, settings in on.items()}  # both before either is saved
        for position in pending:
            side, settings = position.side, on[position.side]
            specs[side] = Spec(settings.flat(), e.identity.workloads, self.side(side).options, e.identity.client,
                               tuple(phases))
            attempts[side] = Attempt(side, r, "", revisions[side], AttemptStatus.RUNNING,
                                     record.now_iso(), where=placed[side].label, alone=len(pending) == 1)
            self.save(attempts[side])
        assert self._duet is not None, "a duet round runs inside go()'s Duet"
        t0 = time.monotonic()
        wait_s = self.sides["A"].run.ready_timeout_s + 60  # the partner's server has READY's own limit
        pair = self._duet.run_pair(specs, labels={s: f"{s} {placed[s].label}" for s in specs}, wait_s=wait_s)
        seconds = time.monotonic() - t0
        not_ready = ""
        for side, out in pair.sides.items():
            report, status = out.report, out.report.attempt_status()
            if pair.interrupted and report.status is SideStatus.LOST:  # stopped before it could report: no retry spent
                status = AttemptStatus.INTERRUPTED
            if status is AttemptStatus.NOT_READY:
                not_ready = f"side {side} on {placed[side].label}: {report.error}"
            elif status is AttemptStatus.FAILED and not pair.interrupted:
                self.progress.say(f"side {side} failed ({report.error}); it is tried again if retries are left")
            ended = Ended(status, seconds, report.run, report.moved_to, report.error,
                          server_starts(Path(report.run_dir)) if report.run_dir else 0)
            a = attempts[side]
            self.save(self._moved_run(replace(a, **ended.changes(), alone=a.alone or out.alone),
                                      Path(report.run_dir) if report.run_dir else None, on[side]))
        if pair.interrupted or any(o.report.status is SideStatus.INTERRUPTED for o in pair.sides.values()):
            raise RunInterrupted("the duet round was interrupted; both sides stopped their servers",
                                 hint="repeat the same command to resume the experiment")
        if not_ready:  # the slot's port or folder is not ready: a retry would miss the same way
            raise RunNotReady(not_ready, hint="free the slot (or choose others with --slots), then repeat the command")
        for side, settings in on.items():
            self._revision(side, settings)  # moved during the round: its runs were set aside above; stop

    def _revision(self, side: str, settings: Settings) -> str:
        """The revision folder the side's next run goes to; :class:`ExperimentStopped` when it is not
        the one its earlier runs went to (a commit or checkout in the measured tree mid-experiment:
        the next runs would measure other code than the rounds before them)."""
        now = api.revision_dir(settings).name
        before = sorted({a.revision for a in self.experiment.attempts if a.side == side and a.revision} - {now})
        if before and dirty_base(before[-1]) == dirty_base(now):  # the same commit: uncommitted edits moved it
            files = api.dirty_files(settings)
            raise ExperimentStopped(
                f"side {side}'s checkout changed its uncommitted files while the experiment measured ({before[-1]} -> "
                f"{now}); its next runs would measure other code than its rounds so far"
                + (f": {files}" if files else ": the tree is clean again"),
                evidence={"experiment": str(self.path), "side's revision": ", ".join(before), "revision now": now,
                          "changed files now": files or "none"},
                hint="to finish this experiment, put the files back as they were and repeat the command: its rounds "
                     "are kept; to measure the edit, commit it and pass --name for a new experiment")
        if before:
            raise ExperimentStopped(
                f"side {side}'s revision moved from {before[-1]} to {now} while the experiment measured; its next "
                f"runs would measure other code than its rounds so far",
                evidence={"experiment": str(self.path), "side's revision": ", ".join(before), "revision now": now},
                hint="to finish this experiment, go back to that commit (git checkout) and repeat the command: its "
                     "rounds are kept; to measure the new code, pass --name for a new experiment")
        return now

    def _moved_run(self, attempt: Attempt, run_dir: Path | None, settings: Settings) -> Attempt:
        """``attempt`` as recorded once its run ended: unchanged, unless its run went to another
        revision folder than it says (its name would find another run there) or the side's
        revision moved during it (servers started after the move may have served the new code):
        then not counted, interrupted (no retry spent); the caller's next ``_revision`` stops."""
        if run_dir is not None and run_dir.parent.name != attempt.revision:
            return replace(attempt, run="", status=AttemptStatus.INTERRUPTED,
                           error=f"measured {run_dir.parent.name}, not {attempt.revision}: kept there as {run_dir.name}")
        now = api.revision_dir(settings).name
        if now != attempt.revision and attempt.status is not AttemptStatus.INTERRUPTED:
            return replace(attempt, status=AttemptStatus.INTERRUPTED,
                           error=f"the side's revision moved to {now} during this run: not counted")
        return attempt

    def _attempt(self, k: int, position: Position, label: str) -> None:
        e = self.experiment
        settings = self.sides[position.side]
        tries, again = e.failures(position), e.redone(position)
        self.progress.start_run(k, label + (f", retry {tries}" if tries else "")
                                + (f", measured again ({again} noisy)" if again else ""), self._to_score())
        phases = self._phases(position.round)
        attempt = Attempt(position.side, position.round, "", self._revision(position.side, settings),
                          AttemptStatus.RUNNING, record.now_iso())
        try:
            result = run_attempt(settings, e.identity.workloads, options=self.side(position.side).options,
                                 client=e.identity.client, phases=phases, progress=self.progress, label=label,
                                 record=lambda ended: self.save(replace(attempt, **ended.changes())))
        except WrongRevision:  # REV_OK saw the tree move under the run: the move is what to say
            latest = self.experiment.latest(position)
            if latest is not None:
                self.save(self._moved_run(latest, None, settings))
            self._revision(position.side, settings)
            raise
        latest = self.experiment.latest(position)
        if latest is not None:
            self.save(self._moved_run(latest, result.run_dir if result is not None else None, settings))
        self._revision(position.side, settings)

    # -- which runs are scored (--score) ------------------------------------------------------------
    def _scores(self, round_: int) -> bool:
        """Whether round ``round_``'s runs are scored for quality (never a warm-up's)."""
        return self.experiment.scores(round_, sequential.schedule(self.experiment))

    def _phases(self, round_: int) -> tuple[Phase, ...]:
        """A new run's phases: generate alone with deferred scoring (scored, or finished unscored,
        at the next look or the end); per-run scoring: every phase, or none of scoring's."""
        if self.experiment.scoring == "deferred":
            return ("generate",)
        return PHASES if self._scores(round_) else UNSCORED

    def _score_generated(self) -> None:
        """Deferred scoring: each side's generated runs of rounds ``--score`` leaves unscored are
        finished without scoring (no server starts), then the rest are scored together, one start
        of each scoring server a side."""
        for label in record.SIDES:
            pending = [a for p in self.experiment.order if p.side == label
                       and (a := self.experiment.latest(p)) is not None and a.status is AttemptStatus.GENERATED]
            # runs set aside as noisy are collected (never scored), so no run is left half done on disk
            noisy = [a for a in self.experiment.attempts if a.side == label and a.status is AttemptStatus.NOISY
                     and self._run_status(a) is RunStatus.GENERATED]
            if not pending and not noisy:
                continue
            self._revision(label, self.sides[label])  # scoring servers import the side's tree too
            if noisy:
                self._score_side(label, noisy, quality=False, keep=True)
            unscored = [a for a in pending if not self._scores(a.round)]
            if unscored:
                self._score_side(label, unscored, quality=False)
            scored = [a for a in pending if self._scores(a.round)]
            if scored:
                self._score_side(label, scored)

    def _score_side(self, label: str, pending: Sequence[Attempt], quality: bool = True, keep: bool = False) -> None:
        """Score side ``label``'s generated runs together (``quality`` False: finish them unscored);
        ``keep``: runs set aside as noisy, whose attempts stay as they are."""
        settings = self.sides[label]
        runs = ', '.join(f'round {a.round} ({a.run})' for a in pending)
        if quality:
            self.progress.phase(f"scoring side {label}: {len(pending)} generated runs together", self._to_score(),
                                len(pending))
        elif keep:
            self.progress.say(f"side {label}: {runs} finished without scoring (set aside as noisy)")
        else:
            self.progress.say(f"side {label}: {runs} finished "
                              f"without scoring (--score {self.experiment.score.value}: a speed verdict needs none)")
        by_dir = {settings.run.results_root / a.revision / a.run: a for a in pending}
        t0 = time.monotonic()
        count = score_generated(settings, self.experiment.identity.workloads, list(by_dir), options=self.side(label).options,
                        client=self.experiment.identity.client, progress=self.progress,
                        record=(lambda run_dir, done: None) if keep else
                        lambda run_dir, done: self.save(replace(by_dir[run_dir], **done.changes())),
                        quality=quality)
        if quality:
            self.progress.scored(time.monotonic() - t0, count)

    def _to_score(self) -> int:
        """Runs deferred scoring has still to score (0 with per-run scoring): every position not
        complete yet that ``--score`` scores, whose scoring is part of what is left."""
        if self.experiment.scoring != "deferred":
            return 0
        horizon = self._horizon()  # with --max-rounds, what the next look scores
        return sum(not self._complete(p) for p in self.experiment.order if p.round <= horizon and self._scores(p.round))


def _prepared(settings: Settings, side: Side, progress: Callable[[str], None]) -> Settings:
    """A side of a revision runs in that revision's worktree with its venv, prepared as ``invoke
    matrix`` prepares one (venvs shared by dependency hash)."""
    if not side.revision:
        return settings
    prepared = revisions.prepare(Path(settings.run.checkout).expanduser(), side.revision,
                                 settings.run.results_root / revisions.WORKTREES, venv_name=settings.run.venv,
                                 git=settings.tools.git, bash=settings.tools.bash, progress=progress)
    progress(f"side {side.label}: revision {side.revision[:12]} in {prepared.worktree}")
    return Settings.from_mapping({**settings.flat(), "checkout": str(prepared.worktree)})


def _cpu_list(cpus: Sequence[int]) -> str:
    return ",".join(map(str, cpus))


def _label(position: Position) -> str:
    return f"{position.side} run0 warm-up" if position.round == 0 else f"{position.side} round {position.round}"
