"""Collection: every workload's metrics and coverage rules, and the run-wide checks, gathered
into ``metrics.json`` (the runbook's ``{"metrics", "rates", "complete"}``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..errors import PluginError, StepFailed
from ..records import UNSCORED_NOTE, Collected, Phase, RuleResult, RunCheck, Workload
from ..stats.percentiles import Percentile, percentiles_of
from ..store import metrics as metrics_file
from ..store.run_entries import ServerEntry


@dataclass(frozen=True)
class Collection:
    """What collection found in a run directory."""

    metrics: Mapping[str, Any]
    rates: tuple[int, ...]
    rules: tuple[RuleResult, ...]
    notes: tuple[str, ...]
    samples: Mapping[str, Sequence[float]] = field(default_factory=dict)
    by_request: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    # percentiles computed from too few samples to be read as measured: kept out of ``metrics``
    thin: tuple[Percentile, ...] = ()

    @property
    def broken(self) -> tuple[RuleResult, ...]:
        """The rules that did not hold."""
        return tuple(r for r in self.rules if not r.ok)

    @property
    def complete(self) -> bool:
        """RUN_COMPLETE: every rule held."""
        return not self.broken


def _call(what: str, collect: Any, *args: Any) -> Collected:
    try:
        collected = collect(*args)
    except Exception as exc:
        raise StepFailed(f"collecting {what} failed: {type(exc).__name__}: {exc}",
                         hint="a result file is missing or malformed; see the step logs") from exc
    if not isinstance(collected, Collected):
        raise PluginError(f"{what} collect returned {type(collected).__name__}, not Collected")
    return collected


def collect_run(run_dir: Path, workloads: Sequence[Workload], options: Mapping[str, Mapping[str, Any]],
                checks: Sequence[RunCheck], scored: bool = True) -> Collection:
    """Each workload's ``collect`` (``collect_unscored`` when the run's score phase was skipped),
    then each run-wide check once; metric names must not clash."""
    metrics: dict[str, Any] = {}
    rates: set[int] = set()
    rules: list[RuleResult] = []
    notes: list[str] = [] if scored else [UNSCORED_NOTE]
    samples: dict[str, Sequence[float]] = {}
    by_request: dict[str, Mapping[str, float]] = {}
    parts = []
    for w in workloads:
        read = w.collect if scored else w.collect_unscored
        if read is None and not scored and w.collect is not None:
            raise PluginError(f"workload {w.name!r} cannot finish a run without scoring (it has no collect_unscored)",
                              hint="score its runs (--score every-round), or give the workload a collect_unscored")
        if read is not None:
            parts.append((f"workload {w.name!r}", _call(f"workload {w.name!r}", read, run_dir, options.get(w.name, {}))))
    parts += [(f"check {c.name!r}", _call(f"check {c.name!r}", c.collect, run_dir)) for c in checks]
    for what, collected in parts:
        clash = set(metrics) & set(collected.metrics) | set(samples) & set(collected.samples) \
            | set(by_request) & set(collected.by_request)
        if clash:
            raise PluginError(f"{what} reports metrics that were reported already",
                              evidence={"metrics": ", ".join(sorted(clash))})
        metrics.update(collected.metrics)
        rates |= set(collected.rates)
        rules += collected.rules
        notes += collected.notes
        samples.update(collected.samples)
        by_request.update(collected.by_request)
    return Collection(metrics, tuple(sorted(rates)), tuple(rules), tuple(notes), samples, by_request)


SERVER_READY = "server_ready_s"  # <workload>.server_ready_s: seconds from its server's spawn to READY


# The phase whose servers' start is the workload's own (scoring servers are shared and not judged);
# typed as the records' Phase, so a renamed phase fails the type check instead of matching nothing.
GENERATING: Phase = "generate"


def with_server_ready(collection: Collection, servers: Sequence[ServerEntry]) -> Collection:
    """``collection`` with ``<workload>.server_ready_s`` for each workload whose generating server
    this run started: the seconds from its spawn to READY, most of a run on a GPU host, so a
    commit that slows model loading is flagged like one that slows requests. A workload that
    reports a metric of that name keeps its own."""
    ready: dict[str, float] = {}
    for s in servers:
        if s.started_here and s.phase == GENERATING and s.ready_s is not None:
            for w in s.workloads:
                ready.setdefault(f"{w}.{SERVER_READY}", s.ready_s)  # a workload's first server
    added = {k: v for k, v in ready.items() if k not in collection.metrics}
    return replace(collection, metrics={**collection.metrics, **added}) if added else collection


def latency_samples(collection: Collection) -> dict[str, list[float]]:
    """Each latency-like quantity's per-request values, by its base name (``selftest.latency``):
    a sample in seconds (``<w>.<x>_s``, e.g. ``seedtts.audio_ttfp_s``) and the values behind a mean
    in seconds (``<w>.<x>_mean_s`` in ``by_request``); a sample wins over the same base's values."""
    out: dict[str, list[float]] = {}
    for name, values in collection.samples.items():
        if name.endswith("_s"):
            out[name[:-2]] = [float(v) for v in values]
    for name, by_id in collection.by_request.items():
        if name.endswith("_mean_s"):
            out.setdefault(name[:-len("_mean_s")], [float(v) for v in by_id.values()])
    return out


def with_percentiles(collection: Collection, qs: Sequence[float]) -> Collection:
    """``collection`` with the percentiles ``qs`` of every latency-like quantity
    (:func:`latency_samples`): each one its samples support joins the metrics as
    ``<base>_p<q>_s``; one they do not is kept apart (``thin``), never printed as measured. A
    metric a workload reports itself (an upstream summary's p99) keeps its value in ``metrics``
    (upstream's keys are never replaced), and is marked thin too (``kept``) when it is one of
    ``qs`` its requests cannot support: a p99 of ten requests is no more measured for being upstream's."""
    metrics, thin = dict(collection.metrics), list(collection.thin)
    for base, values in sorted(latency_samples(collection).items()):
        for p in percentiles_of(base, values, qs):
            reported = metrics.get(p.metric)
            if p.supported:
                metrics.setdefault(p.metric, p.value)
            elif reported is None:
                thin.append(p)
            elif isinstance(reported, (int, float)):
                thin.append(replace(p, value=float(reported), kept=True))
    return replace(collection, metrics=metrics, thin=tuple(thin))


def write_metrics(run_dir: Path, collection: Collection, target: str) -> Path:
    """``metrics.json`` (through the store): the runbook's three keys, plus the target, broken rules
    and notes; and the per-request samples and values by request id beside it when a workload gave some."""
    if collection.samples:
        metrics_file.write_samples(run_dir, collection.samples)
    if collection.by_request:
        metrics_file.write_request_values(run_dir, collection.by_request)
    return metrics_file.write(run_dir, collection.metrics, collection.rates, collection.complete, target,
                              [metrics_file.BrokenRule(r.name, r.detail) for r in collection.broken], collection.notes,
                              {p.metric: p.as_record() for p in collection.thin})
