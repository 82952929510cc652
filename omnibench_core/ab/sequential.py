"""Rounds until the answer is known (``invoke ab --max-rounds N``): when to look, which metrics
decide, and when to stop.

The rule (docs/verdicts.md, "Rounds until the answer is known"): the looks happen only at round
counts fixed up front from N alone (:func:`omnibench_core.stats.looks.looks`), and at each look
every metric is judged as a fixed design judges it, each test held to the level the experiment's
boundary gives that look: Lan-DeMets Pocock-type alpha spending by rounds / N, on the paired t
statistics' own null law (:mod:`omnibench_core.stats.boundary`), Holm's steps each through it.
An experiment begun before (its record says ``bonferroni``) keeps its rule: alpha / K at each of
its K looks.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

from .. import defaults
from ..errors import SettingsError
from ..stats import verdict
from ..stats.looks import Boundary, at, looks
from .record import Experiment, Family, Look, Sequential, StopReason

DECIDED = (verdict.Verdict.BETTER.value, verdict.Verdict.WORSE.value, verdict.Verdict.EQUIVALENT.value)


class DecideError(SettingsError):
    """``--decide`` names a metric the runs do not have, or one that has no better side, or no
    metric of the runs is decisive by default."""


def decisive(asked: Sequence[str], directions: Mapping[str, str]) -> tuple[str, ...]:
    """The metrics the looks wait for: ``asked`` (``--decide``), each checked against the
    metrics the runs have (``directions``: metric -> higher, lower or context); none asked, every
    metric with a better side whose name holds a word of :data:`defaults.DECIDE_WORDS`."""
    known = sorted(directions)
    if not asked:
        chosen = tuple(m for m in directions if directions[m] != "context"
                       and any(word in m.split(".", 1)[-1] for word in defaults.DECIDE_WORDS))
        if not chosen:
            raise DecideError(f"no metric of the runs is a latency or throughput metric to decide on; "
                              f"known: {', '.join(known)}",
                              hint="name the metrics to decide on with --decide METRIC,... (the same command "
                                   "with it continues this experiment: its rounds are kept)")
        return chosen
    unknown = [m for m in asked if m not in directions]
    if unknown:
        raise DecideError(f"--decide {', '.join(unknown)}: not a metric of the runs; known: {', '.join(known)}",
                          evidence={"asked": ", ".join(asked)},
                          hint="repeat the command with metric names from the list (its rounds are kept: no look "
                               "has seen them yet)")
    context = [m for m in asked if directions[m] == "context"]
    if context:
        raise DecideError(f"--decide {', '.join(context)}: no better side (a context metric), so never better, worse "
                          f"or equivalent",
                          hint="decide on metrics with a better side: "
                               + ", ".join(m for m in known if directions[m] != "context"))
    return tuple(asked)


def primary(experiment: Experiment, directions: Mapping[str, str]) -> tuple[str, ...] | None:
    """The rows judged first (``Family.GATEKEEPING``): the decisive metrics, as the looks resolved
    them or :func:`decisive` would of these metrics (a fixed design's: its ``--decide``, else every
    latency and throughput one); () when none resolves (then every row is in the one family); None
    for a record whose rows are one Holm family (format 2 and before)."""
    if experiment.family is Family.HOLM:
        return None
    state = experiment.sequential
    if state is not None and state.decisive:
        return state.decisive
    try:
        return decisive(state.decide if state is not None else experiment.decide, directions)
    except DecideError:
        # an experiment of --max-rounds: its first look says why (it stops there), judged meanwhile as one
        # family; a fixed design's own --decide stays first, and a metric of it without a row keeps the gate shut
        return experiment.decide if state is None else ()


def schedule(experiment: Experiment) -> tuple[int, ...]:
    """The rounds ``experiment`` looks after (by its recorded boundary); () for a fixed design."""
    n, state = experiment.identity.max_rounds, experiment.sequential
    return looks(n, state.boundary if state is not None else Boundary.POCOCK) if n else ()


def boundary_at(state: Sequential, max_rounds: int, rounds: int) -> Callable[[float], float]:
    """The look after ``rounds`` rounds by ``state``'s boundary: an alpha -> the level a test is held to."""
    return at(max_rounds, rounds, state.boundary)


def look_at(rounds: int, verdicts: Sequence[verdict.MetricVerdict], chosen: Sequence[str], held_to: float) -> Look:
    """The look after ``rounds`` rounds: each decisive metric's verdict (inconclusive when it got
    no row: a value missing or not a number)."""
    by_metric = {v.metric: v.verdict.value for v in verdicts}
    return Look(rounds, held_to, tuple((m, by_metric.get(m, verdict.Verdict.INCONCLUSIVE.value)) for m in chosen))


def stop_reason(look: Look, max_rounds: int) -> StopReason | None:
    """Whether to stop after ``look``: every decisive metric decided, or the last look; else None."""
    if not look.undecided():
        return StopReason.DECIDED
    if look.rounds >= max_rounds:
        return StopReason.MAX_ROUNDS
    return None


@dataclass(frozen=True)
class Outcome:
    """Where :func:`run_looks` stopped: the looks it did, why it stopped, and the stopping look's verdicts."""

    looks: tuple[Look, ...]
    stop: StopReason
    verdicts: tuple[verdict.MetricVerdict, ...]

    @property
    def rounds(self) -> int:
        """The rounds the verdicts rest on."""
        return self.looks[-1].rounds


def run_looks(samples: Sequence[verdict.Samples], max_rounds: int, *, decide: Sequence[str] = (),
              alpha: float = defaults.ALPHA, min_effect: float = defaults.MIN_EFFECT,
              boundary: Boundary = Boundary.POCOCK, family: Family = Family.GATEKEEPING) -> Outcome:
    """The whole rule over paired values known in advance (each sample has at least
    ``max_rounds`` rounds): at each look, the first ``n`` rounds judged at the boundary's level
    there (the decisive metrics first, by ``family``); stop at the first look where every decisive
    metric is decided, or at ``max_rounds``. ``invoke ab`` does the same one look at a time,
    measuring only the rounds up to each look."""
    state = Sequential(tuple(decide), alpha, min_effect, boundary=boundary)
    chosen = decisive(decide, {s.metric: s.direction for s in samples})
    done: list[Look] = []
    for n in looks(max_rounds, boundary):
        verdicts = judge_look(samples, state, max_rounds, n, chosen if family is Family.GATEKEEPING else None)
        done.append(look_at(n, verdicts, chosen, boundary_at(state, max_rounds, n)(alpha)))
        reason = stop_reason(done[-1], max_rounds)
        if reason is not None:
            return Outcome(tuple(done), reason, verdicts)
    raise AssertionError("the last look always stops")  # looks() ends at max_rounds


def judge_look(samples: Sequence[verdict.Samples], state: Sequential, max_rounds: int,
               n: int, primary: Sequence[str] | None = None) -> tuple[verdict.MetricVerdict, ...]:
    """The look after ``n`` rounds: the first ``n`` rounds of each metric (and of its matched
    requests' counts) judged at the levels ``state``'s boundary gives that look; ``primary``: the
    rows judged first (gatekeeping; None: one family)."""
    cut = [replace(s, a=s.a[:n], b=s.b[:n], matched=s.matched[:n]) for s in samples]
    return verdict.judge(cut, verdict.Design.PAIRED, alpha=state.alpha, min_effect=state.min_effect,
                         at=boundary_at(state, max_rounds, n), primary=primary)


def look_line(look: Look, max_rounds: int, boundary: Boundary = Boundary.POCOCK) -> str:
    """One look, one line: ``look 2 of 4, after 6 rounds (held to 0.0133): selftest.latency_mean_s worse``."""
    planned = looks(max_rounds, boundary)
    where = f"look {planned.index(look.rounds) + 1} of {len(planned)}" if look.rounds in planned else "look"
    return f"{where}, after {look.rounds} rounds (held to {look.level:.3g}): " + \
        ", ".join(f"{m} {v}" for m, v in look.verdicts)


def describe(state: Sequential, max_rounds: int) -> tuple[str, ...]:
    """What the console and ab.md say of the looks: the rounds run and why it stopped, the rule,
    then one line per look."""
    if state.stop is StopReason.DECIDED:
        why = f"stopped: decided after {state.rounds_run} of at most {max_rounds} rounds a side"
    elif state.stop is StopReason.MAX_ROUNDS:
        left = state.looks[-1].undecided() if state.looks else ()
        why = (f"stopped: --max-rounds {max_rounds} reached with {', '.join(left)} undecided: a larger --max-rounds "
               f"may decide it (a new experiment: this one has spent its alpha)")
    else:
        why = f"not stopped yet: {state.looks[-1].rounds if state.looks else 0} of at most {max_rounds} rounds looked at"
    rule = f"rounds until decided: {rule_text(state, max_rounds)}; decisive: {', '.join(state.decisive) or 'not resolved yet'}"
    return (why, rule, *(look_line(k, max_rounds, state.boundary) for k in state.looks))


def rule_text(state: Sequential, max_rounds: int) -> str:
    """The boundary in words: the looks and what each is held to."""
    planned = looks(max_rounds, state.boundary)
    if state.boundary is Boundary.BONFERRONI:
        return (f"looks after {', '.join(map(str, planned))} rounds, each held to alpha {state.alpha:g} / "
                f"{len(planned)} = {at(max_rounds, planned[0], state.boundary)(state.alpha):.3g} (Bonferroni over "
                f"the looks)")
    levels = ", ".join(f"{at(max_rounds, n, state.boundary)(state.alpha):.3g}" for n in planned)
    return (f"looks after {', '.join(map(str, planned))} rounds, held to {levels} (alpha {state.alpha:g} spent "
            f"over rounds / {max_rounds} by Lan-DeMets' Pocock-type function)")


def with_hints(verdicts: Sequence[verdict.MetricVerdict], state: Sequential,
               max_rounds: int) -> tuple[verdict.MetricVerdict, ...]:
    """The stopping look's rows, each inconclusive one saying why it is still so: --max-rounds
    was reached (a larger one, in a new experiment, may decide it), or the experiment stopped
    when the decisive metrics were decided (name it in --decide to wait for it)."""
    out = []
    for v in verdicts:
        if v.verdict is not verdict.Verdict.INCONCLUSIVE or state.stop is None:
            pass
        elif v.metric not in state.decisive:
            v = replace(v, why=f"{v.why}; not decisive: the looks did not wait for it (name it in --decide to)")
        elif state.stop is StopReason.MAX_ROUNDS and v.needed:
            v = replace(v, why=f"{v.why}; --max-rounds {max_rounds} was reached: repeat with a larger one, e.g. "
                               f"--max-rounds {max(2 * max_rounds, v.needed)} (a new experiment: this one has spent "
                               f"its alpha)")
        elif state.stop is StopReason.MAX_ROUNDS:
            v = replace(v, why=f"{v.why}; --max-rounds {max_rounds} was reached, and a larger one would not help "
                               f"at this spread")
        out.append(v)
    return tuple(out)
