"""A results root holding one sweep and one A/B experiment, made by the real writers from small
records (no server): the sweep by ``sweep.writing.write_sweep`` from its points' numbers, the A/B by
``ab.experiment_file.save`` and ``ab.writing.write_result`` from scripted run folders judged by
``ab.analysis.analyse``. For the published site's tests (tests/test_publish_studies.py)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from omnibench_core.ab import experiment_file, record, sequential
from omnibench_core.ab.analysis import analyse, judged
from omnibench_core.ab.record import Attempt, Design, Experiment, Identity, Sequential, Side
from omnibench_core.ab.writing import write_result
from omnibench_core.statuses import AttemptStatus, ExperimentStatus
from omnibench_core.store.names import experiment_path
from omnibench_core.sweep.curve import PointResult
from omnibench_core.sweep.execute import SweepResult, SweepSpec
from omnibench_core.sweep.points import LoadPoint, Slo
from omnibench_core.sweep.writing import SweepWritten, write_sweep

REVISION = "local-0123456789ab"
# (concurrency, throughput, its sd, mean latency, its sd, p95): throughput flattens past 4 while latency climbs
POINTS = ((1, 1.0, 0.05, 0.50, 0.02, 0.6), (2, 1.9, 0.08, 0.52, 0.03, 0.66), (4, 3.5, 0.1, 0.58, 0.04, 0.8),
          (8, 3.8, 0.2, 1.10, 0.09, 1.6))
AB_NAME = "ab-selftest-delay"
AB_LATENCY = ((1.00, 1.20), (1.10, 1.32), (1.05, 1.27))  # (A, B) per round: B 20 % slower each round


def write_sweep_sample(results: Path, name: str = "") -> SweepWritten:
    """The sweep of :data:`POINTS` (2 runs each, a latency target) written under ``results``."""
    spec = SweepSpec("seedtts", tuple(LoadPoint(c, None) for c, *_ in POINTS), 2, ("seedtts.max_samples=4",),
                     slo=Slo("latency_p95_s", 1.0), name=name)
    points = tuple(PointResult(LoadPoint(c, None), f"{spec.sweep_name()}.c{c}", 2, t, t_sd, lat, p95,
                               {"latency_mean_s": lat, "latency_p95_s": p95}, failed=0, latency_sd=lat_sd)
                   for c, t, t_sd, lat, lat_sd, p95 in POINTS)
    return write_sweep(SweepResult(spec, results / REVISION, points), results)


def write_ab_sample(results: Path) -> Path:
    """The A/B of :data:`AB_LATENCY` (interleaved, rounds until the answer is known, at most 3, deciding
    the mean latency; B's round 2 noisy), its record and its result written under ``results``, each
    look taken as ``invoke ab`` takes it; the record's path."""
    n = len(AB_LATENCY)
    ident = Identity(("selftest",), None, (("target", "local"),), Side("A"), Side("B", sets=(("local_delay_ms", "9"),)),
                     Design.INTERLEAVED, n, 0, max_rounds=n)
    e = Experiment(AB_NAME, ident, 2, "deferred", record.schedule(Design.INTERLEAVED, n, 0),
                   sequential=Sequential(("selftest.latency_mean_s",)))
    i = 0
    for rnd, pair in enumerate(AB_LATENCY, 1):
        for side, latency in zip(("A", "B"), pair, strict=True):
            run = results / REVISION / f"run{i + 2}"
            run.mkdir(parents=True)
            (run / "metrics.json").write_text(json.dumps({"metrics": {"selftest.latency_mean_s": latency,
                                                                      "selftest.throughput_qps": 4.0 / latency},
                                                          "complete": True}))
            load = {"window": "selftest.client", "seconds": 2.0, "cpus": [0], "busy_cpu_s": 2.0, "own_cpu_s": 0.5,
                    "foreign_cpu_s": 1.5, "foreign_fraction": 0.75, "load_start": 1.0, "load_end": 2.0,
                    "threshold": 0.1, "noisy": (side, rnd) == ("B", 2)}
            (run / "manifest.json").write_text(json.dumps({"steps": [{"step": "selftest.client", "phase": "generate",
                                                                        "status": "ok", "host_load": load}]}))
            e = e.with_attempt(Attempt(side, rnd, run.name, REVISION, AttemptStatus.COMPLETE, f"t{i}"))
            i += 1
    for r in sequential.schedule(e):  # each look as invoke ab takes it (ab.execute's _look)
        state = e.sequential
        assert state is not None
        if state.stop is not None:
            break
        boundary = sequential.boundary_at(state, n, r)
        made = analyse(e, results, alpha=state.alpha, min_effect=state.min_effect, upto=r, at=boundary)
        chosen = state.decisive or sequential.decisive(state.decide, {v.metric: v.direction for v in made.verdicts})
        look = sequential.look_at(r, made.verdicts, chosen, boundary(state.alpha))
        stop = sequential.stop_reason(look, n)
        e = replace(e, sequential=replace(state, decisive=chosen, looks=(*state.looks, look), stop=stop,
                                          rounds_run=r if stop else 0))
    e = replace(e, status=ExperimentStatus.COMPLETE)
    path = experiment_path(results, AB_NAME)
    path.parent.mkdir(parents=True, exist_ok=True)
    experiment_file.save(path, e)
    write_result(e, judged(e, results), path)
    return path
