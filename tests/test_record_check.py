"""Issue 46 item 3: an A/B record's `sequential` block is recomputed from the record's own
settings on load, not trusted. Hand edits the field checks let through (a level, a stop, a
decisive metric, a verdict's metric) made the result contradict itself; each is now refused
naming the field. The good record is built by the rule's own functions (sequential.looks,
record_check.held_to), so it holds whatever boundary sequential.py applies."""

from __future__ import annotations

import json

from record_helpers import assert_each_edit_refused

from omnibench_core.ab import experiment_file, record, record_check, sequential
from omnibench_core.ab.record import Design, Look, Sequential, StopReason
from omnibench_core.errors import RecordError

LATENCY = "selftest.latency_mean_s"
MAX_ROUNDS = 12


def _experiment(state: Sequential) -> record.Experiment:
    ident = record.Identity(("selftest",), None, (("target", "local"),), record.Side("A"),
                            record.Side("B", sets=(("local_delay_ms", "9"),)), Design.INTERLEAVED, MAX_ROUNDS, 0,
                            MAX_ROUNDS)
    return record.Experiment("x", ident, 2, "per-run", record.schedule(Design.INTERLEAVED, MAX_ROUNDS, 0),
                             sequential=state)


def _good() -> Sequential:
    """Two looks as the driver records them: undecided at the first, worse at the second (stop)."""
    first, second = sequential.looks(MAX_ROUNDS)[:2]
    state = Sequential((), 0.05, 0.05, (LATENCY,))
    looks = (Look(first, record_check.held_to(state, MAX_ROUNDS, first), ((LATENCY, "inconclusive"),)),
             Look(second, record_check.held_to(state, MAX_ROUNDS, second), ((LATENCY, "worse"),)))
    return Sequential((), 0.05, 0.05, (LATENCY,), looks, StopReason.DECIDED, second)


def test_a_sequential_block_that_contradicts_its_own_rule_is_refused_naming_the_field(tmp_path):
    path = tmp_path / "x.json"
    experiment_file.save(path, _experiment(_good()))
    loaded = experiment_file.load(path)  # the driver's own record follows the rule
    assert loaded.sequential == _good() and record_check.problems(loaded) == []
    good = json.loads(path.read_text())

    def look(i: int, **changes: object):
        return lambda d: d["sequential"]["looks"][i].update(changes)

    def block(**changes: object):
        return lambda d: d["sequential"].update(changes)

    cases = {
        # "held to 0.025" beside "held to 0.5": a level the rule never gives
        "level": (look(1, level=0.5), "sequential.looks[1].level: 0.5 is not the"),
        # another alpha: every level stored is now not the rule's
        "alpha": (block(alpha=0.01), "sequential.looks[0].level"),
        # the first look decided: the experiment would have stopped there
        "early stop": (look(0, verdicts=[[LATENCY, "better"]]), "sequential.looks[0]: the rule stops at this look"),
        "stop word": (block(stop="max-rounds"), "sequential.stop: stop max-rounds, but the rule says stop decided"),
        "not stopped": (block(stop=None, rounds_run=0), "sequential.stop: not stopped, but the rule says stop decided"),
        "undecided stop": (look(1, verdicts=[[LATENCY, "inconclusive"]]),
                           "sequential.stop: stop decided, but the rule says not stopped"),
        # a decisive metric that does not exist: not a latency or throughput metric, not a workload's
        "decisive word": (block(decisive=["selftest.latncy"]), "sequential.decisive: selftest.latncy: not a latency"),
        "decisive workload": (block(decisive=["videoamme.latency_mean_s"]),
                              "sequential.decisive: videoamme.latency_mean_s: not a metric of this experiment"),
        "not --decide's": (block(decide=["selftest.throughput_qps"]),
                           f"sequential.decisive: {LATENCY} is not --decide's selftest.throughput_qps"),
        "verdict metric": (look(1, verdicts=[["selftest.latency_p99_s", "worse"]]),
                           f"sequential.looks[1].verdicts: names selftest.latency_p99_s; the decisive metrics are "
                           f"{LATENCY}"),
        "unresolved": (block(decisive=[]), "sequential.decisive: empty, yet looks were made"),
    }
    assert_each_edit_refused(path, good, cases, experiment_file.load, RecordError, names_the_file=True)
