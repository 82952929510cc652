"""An A/B record's ``sequential`` block recomputed, not trusted (issue 46 item 3).

:mod:`.experiment_file` checks each field's type and that the looks lie on the schedule; this
checks that what the block says follows from the record's own settings by the rule
:mod:`.sequential` applies, each value recomputed through its public functions:

- ``decisive``: ``--decide``'s metrics when it named any; else metrics of the experiment's
  workloads that the default rule (:func:`.sequential.decisive`) would choose;
- each look's ``level``: what the rule holds a look after that many rounds to, from the record's
  ``alpha`` and ``--max-rounds`` (:func:`held_to`);
- each look's verdicts: one for each decisive metric, in their order;
- ``stop``: :func:`.sequential.stop_reason` of the last look, and none of an earlier one (the
  experiment would have stopped there).

A difference is refused as :class:`~omnibench_core.errors.RecordError` naming the file and the
field: a hand edit made the result contradict itself ("held to 0.025" beside "held to 0.5", a
decisive metric no run has).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from ..errors import RecordError
from . import sequential
from .record import Experiment, Sequential


def held_to(state: Sequential, max_rounds: int, rounds: int) -> float:
    """The level the rule holds the look after ``rounds`` rounds to, as :mod:`.sequential` computes
    it: by the record's boundary where sequential.py has one (``boundary_at``), else alpha shared
    among the looks (``level``). The one place that asks; looked up by name, so it follows the rule
    wherever sequential.py takes it."""
    boundary_at: Any = getattr(sequential, "boundary_at", None)
    if callable(boundary_at):
        return float(boundary_at(state, max_rounds, rounds)(state.alpha))
    level: Any = getattr(sequential, "level")  # noqa: B009 (looked up by name: see the docstring)
    return float(level(state.alpha, max_rounds))


def problems(experiment: Experiment) -> list[tuple[str, str]]:
    """``(field, why)`` for each value of the sequential block that differs from the rule
    recomputed from the record's own settings, in the block's order; [] when it follows."""
    state, max_rounds = experiment.sequential, experiment.identity.max_rounds
    if state is None or not max_rounds:
        return []
    out: list[tuple[str, str]] = []
    out += _decisive(state, experiment.identity.workloads)
    for i, look in enumerate(state.looks):
        at = f"sequential.looks[{i}]"
        expected = held_to(state, max_rounds, look.rounds)
        if not math.isclose(look.level, expected, rel_tol=1e-9, abs_tol=1e-15):
            out.append((f"{at}.level", f"{look.level!r} is not the {expected:.6g} the rule holds a look after "
                                       f"{look.rounds} rounds to (alpha {state.alpha:g}, --max-rounds {max_rounds})"))
        named = tuple(m for m, _ in look.verdicts)
        if state.decisive and named != state.decisive:
            out.append((f"{at}.verdicts", f"names {', '.join(named) or 'no metric'}; the decisive metrics are "
                                          f"{', '.join(state.decisive)}"))
        reason = sequential.stop_reason(look, max_rounds)
        if reason is not None and i < len(state.looks) - 1:
            out.append((at, f"the rule stops at this look ({reason}), yet {len(state.looks) - 1 - i} look(s) follow"))
    if state.looks:
        reason = sequential.stop_reason(state.looks[-1], max_rounds)
        if state.stop != reason:
            out.append(("sequential.stop", f"{_word(state.stop)}, but the rule says {_word(reason)} after the last "
                                           f"look ({state.looks[-1].rounds} rounds: "
                                           + ", ".join(f"{m} {v}" for m, v in state.looks[-1].verdicts) + ")"))
    elif state.stop is not None:
        out.append(("sequential.stop", f"{_word(state.stop)} with no look"))
    return out


def _decisive(state: Sequential, workloads: tuple[str, ...]) -> list[tuple[str, str]]:
    if not state.decisive:
        return [("sequential.decisive", "empty, yet looks were made: the first look resolves it")] if state.looks else []
    if state.decide:
        if state.decisive != state.decide:
            return [("sequential.decisive", f"{', '.join(state.decisive)} is not --decide's "
                                            f"{', '.join(state.decide)}")]
        return []
    foreign = [m for m in state.decisive if m.split(".", 1)[0].split("@", 1)[0] not in workloads]
    if foreign:
        return [("sequential.decisive", f"{', '.join(foreign)}: not a metric of this experiment's workloads "
                                        f"({', '.join(workloads)})")]
    try:  # the default rule over these names alone: each must be one it would choose
        chosen = sequential.decisive((), {m: "lower" for m in state.decisive})
    except sequential.DecideError:
        chosen = ()
    if tuple(chosen) != state.decisive:
        odd = [m for m in state.decisive if m not in chosen]
        return [("sequential.decisive", f"{', '.join(odd)}: not a latency or throughput metric, the only ones "
                                        "decisive without --decide")]
    return []


def _word(stop: object) -> str:
    return "not stopped" if stop is None else f"stop {stop}"


def check(experiment: Experiment, path: Path) -> None:
    """Refuse ``experiment`` (read from ``path``) when :func:`problems` finds any, naming the first
    field and why."""
    found = problems(experiment)
    if found:
        where, why = found[0]
        raise RecordError(f"the A/B record {path} is not valid at {where}: {why}",
                          evidence={"file": str(path), "field": where,
                                    "differences": "; ".join(f"{w}: {y}" for w, y in found)},
                          hint="the looks are recomputed from the record's own alpha, --max-rounds and --decide: "
                               "put the field back as omnibench wrote it, or move the file aside to start the "
                               "experiment anew")
