"""A report's numbers: per metric the mean, sample sd, values labelled by run, direction,
relative spread and the runbook's flags, over a campaign's measured runs or named runs, which must
all measure the same thing (workloads, options, target)."""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..defaults import SERVER_PROFILE
from ..errors import OmnibenchError, RunFileError
from ..identity import differences
from ..records import UNSCORED_NOTES
from ..setup.pins import load_pins
from ..stats.estimators import mean_sd
from ..statuses import CampaignStatus
from ..store import manifest as manifest_file
from ..store import metrics as metrics_file
from ..telemetry.hostload import HostLoad, noisy_windows, present_windows
from . import campaign_file, record
from . import directions as meta


class MixedRuns(OmnibenchError):
    """Runs that measured different things were asked to be reported together."""


@dataclass(frozen=True)
class MetricStats:
    """One metric over the runs."""

    name: str
    values: dict[str, Any]  # by run name
    mean: float | None
    sd: float | None
    direction: str
    rel_spread: float | None  # sd / |mean|
    flags: tuple[str, ...] = ()
    problem: str = ""  # why it has no mean: a value that is not a finite number, named with its run
    unscored: bool = False  # a quality metric the campaign's --score left out of most runs on purpose
    thin: bool = False  # a percentile too few samples support in some run: not measured, so not a gap

    @property
    def numbers(self) -> list[float]:
        """The values, when all are finite numbers (else none)."""
        return [] if self.problem else [float(v) for v in self.values.values()]


@dataclass(frozen=True)
class RunSetStats:
    """What a report says about a set of runs."""

    title: str
    runs: tuple[str, ...]
    run_dirs: tuple[Path, ...]
    identity: dict[str, Any]
    metrics: tuple[MetricStats, ...]
    notes: tuple[str, ...] = ()
    environment: dict[str, Any] = field(default_factory=dict)
    run_notes: tuple[str, ...] = ()  # the runs' own notes (metrics.json), each once, in order
    noisy: tuple[str, ...] = ()  # "runN: window: ..." for each timed window the noise guard marked

    def metric(self, name: str) -> MetricStats | None:
        """The metric called ``name``."""
        return next((m for m in self.metrics if m.name == name), None)


def value_problem(name: str, values: dict[str, Any]) -> str:
    """Why ``values`` (by run) give no mean: ``non-finite metric X in runN (nan)`` or ``metric X in
    runN is not a number ('fast')``; "" when every value is a finite number."""
    for run, v in values.items():
        if not isinstance(v, (int, float)) or isinstance(v, bool):
            return f"metric {name} in {run} is not a number ({v!r})"
        if not math.isfinite(v):
            return f"non-finite metric {name} in {run} ({v!r})"
    return ""


def run_identity(run_dir: Path) -> dict[str, Any]:
    """What a run measured, from its manifest: workloads, options, target, result settings."""
    try:
        m = manifest_file.read(run_dir)
    except RunFileError as exc:
        raise OmnibenchError(f"cannot read the manifest of {run_dir}: {exc.message}", evidence=exc.evidence,
                             hint="name complete runs") from exc
    return {"workloads": list(m.workloads), "options": dict(m.options), "target": m.target,
            "local_delay_ms": m.settings.get("local_delay_ms", "0.0"),
            "local_stream_delay": m.settings.get("local_stream_delay", ""),
            "server_profile": m.settings.get("server_profile", SERVER_PROFILE), "gpus": m.settings.get("gpus"),
            "cpus": m.settings.get("cpus")}


def check_same_measurement(run_dirs: Sequence[Path]) -> dict[str, Any]:
    """Refuse runs of different workloads, options or targets, naming each difference."""
    ids = [run_identity(d) for d in run_dirs]
    problems = [f"{run_dirs[0].name} vs {d.name}: {diff}" for d, i in zip(run_dirs[1:], ids[1:], strict=True)
                for diff in differences(ids[0], i)]
    if problems:
        raise MixedRuns("these runs measured different things, so a mean over them means nothing",
                        evidence={"differences": "\n".join(problems)},
                        hint="report one campaign (invoke report --name NAME) or name runs of one measurement")
    return ids[0] if ids else {}


def stats_of(title: str, run_dirs: Sequence[Path], environment: dict[str, Any] | None = None,
             notes: Sequence[str] = ()) -> RunSetStats:
    """Statistics over ``run_dirs`` (complete runs of one measurement)."""
    if len(run_dirs) < 2:
        raise OmnibenchError("mean and spread need at least two complete runs",
                             evidence={"runs": ", ".join(d.name for d in run_dirs) or "none"},
                             hint="measure more runs: invoke measure --runs 3")
    identity = check_same_measurement(run_dirs)
    docs = []
    for d in run_dirs:
        try:
            docs.append(metrics_file.read(d))
        except RunFileError as exc:
            raise OmnibenchError(exc.message, evidence=exc.evidence, hint="name complete runs") from exc
    incomplete = [d.name for d, doc in zip(run_dirs, docs, strict=True) if not doc.complete]
    if incomplete:
        raise OmnibenchError("a run is incomplete", evidence={"runs": ", ".join(incomplete)},
                             hint="repeat those runs; incomplete runs are moved aside as runN-incomplete")
    names = [d.name for d in run_dirs]
    # runs left unscored (a sweep point's runs but its last: --score last) lack the quality metrics;
    # those are listed with the scored runs' values, without a mean or spread
    unscored = {n for n, doc in zip(names, docs, strict=True) if set(UNSCORED_NOTES) & set(doc.notes)}
    rows, numeric = [], {}
    for key in dict.fromkeys(k for doc in docs for k in doc.metrics):
        present = {n: doc.metrics[key] for n, doc in zip(names, docs, strict=True) if key in doc.metrics}
        values: dict[str, Any] = {n: doc.metrics.get(key) for n, doc in zip(names, docs, strict=True)}
        mean: float | None
        sd: float | None
        rel: float | None
        problem = value_problem(key, values)
        left_out = bool(problem) and set(names) - set(present) <= unscored and not value_problem(key, present)
        if left_out:
            problem = f"{key}: scored in {', '.join(present)} only (the other runs were left unscored, --score)"
        thin = {n: doc.thin_percentiles[key] for n, doc in zip(names, docs, strict=True) if key in doc.thin_percentiles}
        if thin and not problem:  # a workload's own percentile (kept in metrics) its requests cannot support
            problem = thin_problem(key, thin)
        if not problem:
            mean, sd = mean_sd([float(v) for v in values.values()])
            rel = sd / abs(mean) if sd is not None and mean else (0.0 if sd == 0 else None)
            numeric[key] = [float(v) for v in values.values()]
        else:
            mean = sd = rel = None
            notes = [*notes, f"{problem}: no mean or spread, and it cannot be compared"]
        rows.append(MetricStats(key, values, mean, sd, meta.direction(key), rel, problem=problem, unscored=left_out,
                                thin=bool(thin)))
    flagged: dict[str, list[str]] = {}
    for f in meta.flags(numeric, {r.name: r.rel_spread for r in rows}):
        flagged.setdefault(f.metric, []).append(f.note)
    rows = [replace(r, flags=tuple(flagged.get(r.name, ()))) for r in rows]
    shown = {r.name for r in rows}  # a kept one's row says it already
    notes = [*notes, *thin_notes(names, [{k: v for k, v in doc.thin_percentiles.items() if k not in shown}
                                         for doc in docs])]
    if unscored == set(names):  # --score none: say so, or a report without quality rows reads as complete
        notes = [*notes, "quality not scored: no run of this set was scored (--score left out their score "
                         "phase): the metrics only scoring makes are not here"]
    run_notes = dict.fromkeys(n for doc in docs for n in doc.notes)
    noisy = tuple(noisy_runs(run_dirs))
    return RunSetStats(title, tuple(names), tuple(run_dirs), identity, tuple(rows), (*notes, *noisy), environment or {},
                       tuple(run_notes), noisy)


def thin_problem(key: str, thin: Mapping[str, Mapping[str, Any]]) -> str:
    """Why a percentile a workload reported itself has no mean: some run had too few samples for it."""
    where = ", ".join(f"{n} n={t.get('n')}" for n, t in thin.items())
    needed = next(iter(thin.values())).get("needed")
    return f"{key}: thin percentile, not measured ({needed} samples needed; {where})"


def thin_notes(names: Sequence[str], thin: Sequence[Mapping[str, Mapping[str, Any]]]) -> list[str]:
    """A note for each percentile too few samples supported in some run (metrics.json's
    ``thin_percentiles``): marked as not measured, with each run's sample count and the count needed."""
    return [thin_problem(key, {n: t[key] for n, t in zip(names, thin, strict=True) if key in t})
            for key in sorted({k for t in thin for k in t})]


def _manifests(run_dirs: Sequence[Path]) -> Iterator[tuple[Path, manifest_file.RunManifest]]:
    """Each run folder with its readable manifest (unreadable ones left out: named elsewhere)."""
    for d in run_dirs:
        try:
            yield d, manifest_file.read(d)
        except RunFileError:
            continue


def noisy_runs(run_dirs: Sequence[Path]) -> list[str]:
    """Each timed window the noise guard marked, as ``runN: <what other processes took>``."""
    return [noisy_line(d, w) for d, w in noisy_loads(run_dirs)]


def noisy_loads(run_dirs: Sequence[Path]) -> list[tuple[Path, HostLoad]]:
    """Each timed window the noise guard marked, with its run folder (each manifest read once)."""
    return [(d, w) for d, m in _manifests(run_dirs) for w in noisy_windows(m.steps)]


def noisy_line(run_dir: Path, window: HostLoad) -> str:
    """``runN was noisy: <what other processes took>``."""
    return f"{run_dir.name} was noisy: {window.describe()}"


def present_runs(run_dirs: Sequence[Path]) -> list[str]:
    """Each timed window not noisy in which another process only held GPU memory, as ``runN: ...``."""
    return [f"{d.name} {w.describe_present()}" for d, m in _manifests(run_dirs) for w in present_windows(m.steps)]


def campaign_stats(path: Path) -> tuple[record.Campaign, RunSetStats]:
    """A campaign and the statistics of its complete measured runs."""
    c = campaign_file.load(path)
    revision = path.parent.parent
    measured = c.measured()
    notes = []
    if c.status != CampaignStatus.COMPLETE or len(measured) < c.asked.runs:
        notes.append(f"campaign is {c.status}: {len(measured)} of {c.asked.runs} measured runs complete"
                     + (f" ({c.reason})" if c.reason else ""))
    if len(measured) < 2:
        # a campaign stopped before two runs (a port another run held, say) has no statistics: say
        # which campaign, why it stopped, and that the same command resumes it
        raise OmnibenchError(f"campaign {c.revision}/{c.name} has {len(measured)} complete measured run(s); mean and "
                             "spread need at least two", evidence={"campaign file": str(path), "status": str(c.status),
                                                                   "why": c.reason or "not measured yet"},
                             hint="run the measure command that made it again: it resumes the campaign with its "
                                  "settings")
    env = dict(c.environment) or environment_of(revision / measured[0].run)  # two or more runs here
    stats = stats_of(f"{c.revision}/{c.name}", [revision / a.run for a in measured], env, notes)
    return c, stats


def environment_of(run_dir: Path) -> dict[str, Any]:
    """The environment a campaign ran in, from its first run's manifest: host, GPU model and driver,
    CPU set, package versions, target and its details, and the pinned model revisions."""
    try:
        manifest = manifest_file.read(run_dir)
    except OmnibenchError:
        return {}
    try:
        pins = load_pins(manifest.settings.get("pins_file") or None)
        models = {p.repo: p.revision for p in pins.pins}
    except OmnibenchError:
        models = {}
    return {**manifest.environment, "target": manifest.target, "revision": manifest.revision,
            "dirty": manifest.dirty, "target_details": dict(manifest.target_details),
            "slot_cpus": manifest.slot.get("cpus", []), "slot_gpus": manifest.slot.get("gpus", []),
            "model_revisions": models}
