"""The matrix: every revision x option set is one campaign, run on slots through an engine, then a
table of every campaign and a compare of each against the first revision (same option set)."""

from __future__ import annotations

import hashlib
import itertools
import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from .. import api, defaults
from ..errors import SettingsError
from ..jsonio import read_json, write_json
from ..records import ScorePolicy, short_revision
from ..run.layout import revision_dir
from ..settings import Settings
from ..statuses import JobStatus
from ..tables import table
from . import campaigns
from .campaigns import BETTER, INCONCLUSIVE, WORSE, Verdict
from .engine import Engine
from .jobs import CampaignJob, CampaignOutcome
from .revisions import WORKTREES
from .schedule import ScaleInterrupted, run_jobs
from .slots import HostSlot
from .worker import WorkerSpec

Progress = Callable[[str], None]


def parse_sweep(sweeps: Sequence[str]) -> list[tuple[str, ...]]:
    """``["w.a=1,4", "w.b=x,y"]`` -> every combination, e.g. ``("w.a=1", "w.b=x")``; none: one empty set."""
    axes = []
    for sweep in sweeps:
        key, sep, values = sweep.partition("=")
        if not sep or "." not in key or not values.strip():
            raise SettingsError(f"cannot read --sweep {sweep!r}", hint="write --sweep WORKLOAD.KEY=V1,V2,...")
        axes.append([f"{key.strip()}={v.strip()}" for v in values.split(",") if v.strip()])
    check_size(math.prod(len(axis) for axis in axes), "--sweep's option sets")
    return [tuple(combo) for combo in itertools.product(*axes)] if axes else [()]


def check_size(campaigns: int, what: str) -> None:
    """Refuse a matrix of more than ``defaults.MAX_MATRIX_CAMPAIGNS`` campaigns before it is planned."""
    if campaigns > defaults.MAX_MATRIX_CAMPAIGNS:
        raise SettingsError(f"{what} make {campaigns:,} campaigns, over the {defaults.MAX_MATRIX_CAMPAIGNS:,} one "
                            "matrix may plan", hint="sweep fewer values or revisions, or split it into several matrices")


@dataclass(frozen=True)
class MatrixSpec:
    """What to measure: ``revisions`` (full commits; ``("",)`` for the target's own) x option sets."""

    revisions: tuple[str, ...]
    workloads: tuple[str, ...]
    option_sets: tuple[tuple[str, ...], ...] = ((),)
    options: tuple[str, ...] = ()  # --opt, in every campaign
    runs: int = defaults.RUNS
    client: str | None = None
    engine: str = ""  # the engine's name (CampaignJob.engine)
    score: ScorePolicy = ScorePolicy.EVERY_ROUND  # which runs are scored for quality (CampaignJob.score)

    def jobs(self) -> list[CampaignJob]:
        """One job per revision x option set, revisions outermost."""
        return [CampaignJob(rev, self.workloads, tuple(sorted((*self.options, *opts))), self.runs, self.client,
                            engine=self.engine, score=self.score)
                for rev, opts in itertools.product(self.revisions, self.option_sets)]


def folder_of(settings: Settings, job: CampaignJob) -> Path:
    """``<results>/<revision folder>`` of a job: the commit's short SHA, or the target's own folder."""
    if job.revision and settings.run.target != "local":
        return revision_dir(settings.run.results_root, short_revision(job.revision))
    return api.revision_dir(settings)


def split_done(settings: Settings, jobs: Sequence[CampaignJob], resume: bool) -> tuple[list[CampaignJob], dict[str, CampaignOutcome]]:
    """Jobs still to run, and the complete campaigns kept (``resume``). Without ``resume`` a job
    whose campaign file exists is a SettingsError: nothing is measured twice by accident. A job
    scored less than every run (``--score none``) also keeps the complete campaign of the same
    measurement scored on every run (measure's): its speed metrics are the same measurement's."""
    todo, kept = [], {}
    for job in jobs:
        folder = folder_of(settings, job)
        path = campaigns.campaign_path(folder, job, settings)
        complete = resume and campaigns.is_complete(path, job)  # each look reads the file and its runs' manifests
        if resume and not complete and job.score is not ScorePolicy.EVERY_ROUND:
            scored = campaigns.campaign_path(folder, replace(job, score=ScorePolicy.EVERY_ROUND), settings)
            if campaigns.is_complete(scored, job):
                path, complete = scored, True
        if complete:
            kept[job.key] = campaigns.outcome_of(path, job, reused=True)
        elif path.exists() and not resume:
            raise SettingsError(f"campaign {job.key} exists already ({path})",
                                hint="pass --resume to keep complete campaigns and runs and continue the others")
        else:
            todo.append(job)
    return todo, kept


def spec_maker(settings: Settings, slot_timeout_s: float = 30.0) -> Callable[[CampaignJob, HostSlot], WorkerSpec]:
    """How a job and a slot become a worker's spec."""
    flat = settings.flat()
    flat["results"] = str(settings.run.results_root)
    flat["checkout"] = str(Path(settings.run.checkout).expanduser().resolve())
    worktrees = str(settings.run.results_root / WORKTREES)
    return lambda job, slot: WorkerSpec(job, slot, flat, worktrees, slot_timeout_s)


def measure_all(settings: Settings, jobs: Sequence[CampaignJob], engine: Engine, *, resume: bool,
                progress: Progress = print) -> dict[str, CampaignOutcome]:
    """Every job's outcome: kept complete campaigns plus those run now."""
    todo, kept = split_done(settings, jobs, resume)
    for key in kept:
        progress(f"{key}: complete already, kept")
    try:
        return {**kept, **run_jobs(todo, engine, spec_maker(settings), progress=progress)}
    except ScaleInterrupted as exc:
        exc.campaigns = {**kept, **exc.campaigns}
        raise


@dataclass(frozen=True)
class MatrixResult:
    """Every campaign's outcome (in job order) and each compared with the first revision."""

    jobs: tuple[CampaignJob, ...]
    outcomes: Mapping[str, CampaignOutcome]
    verdicts: Mapping[str, tuple[Verdict, ...]]  # by job key; the first revision's have none
    shared_cpus: bool
    file: Path


def matrix_path(settings: Settings, jobs: Sequence[CampaignJob]) -> Path:
    """``<results>/matrices/matrix-<hash of the jobs>.json``: the same command, the same file."""
    ident = hashlib.sha256(json.dumps([j.as_dict() for j in jobs], sort_keys=True).encode()).hexdigest()[:12]
    return settings.run.results_root / "matrices" / f"matrix-{ident}.json"


def was_interrupted(path: Path) -> bool:
    """Whether the matrix file says its last command was interrupted."""
    try:
        return read_json(path).get("status") == JobStatus.INTERRUPTED
    except (OSError, ValueError, AttributeError):
        return False


def run_matrix(settings: Settings, spec: MatrixSpec, engine: Engine, *, resume: bool = False,
               threshold: float = defaults.MIN_EFFECT, progress: Progress = print) -> MatrixResult:
    """Run the matrix; returns its table data. Written to ``<results>/matrices/<id>.json``, with
    ``status`` ``interrupted`` (and which campaigns were) after Ctrl-C or SIGTERM; the same
    command then resumes it without ``--resume``."""
    jobs = spec.jobs()
    path = matrix_path(settings, jobs)
    if not resume and was_interrupted(path):
        progress(f"the matrix was interrupted before ({path}): it resumes, keeping complete campaigns and runs")
        resume = True
    try:
        outcomes = measure_all(settings, jobs, engine, resume=resume, progress=progress)
    except ScaleInterrupted as exc:
        write_json(path, {"engine": engine.name, "status": JobStatus.INTERRUPTED, "jobs": [j.as_dict() for j in jobs],
                          "interrupted": sorted(k for k, o in exc.campaigns.items() if o.status == JobStatus.INTERRUPTED),
                          "outcomes": {k: o.as_dict() for k, o in exc.campaigns.items()}})
        raise
    verdicts: dict[str, tuple[Verdict, ...]] = {}
    first = spec.revisions[0]
    for job in jobs:
        base = next(j for j in jobs if j.revision == first and j.options == job.options)
        a, b = outcomes.get(base.key), outcomes.get(job.key)
        if job.revision != first and a and b and a.status is b.status is JobStatus.COMPLETE:
            verdicts[job.key] = campaigns.compare_all(a, b, threshold, settings)
    shared = any(bool(o.slot.get("shared_cpus")) for o in outcomes.values())
    write_json(path, {"engine": engine.name, "status": JobStatus.COMPLETE, "jobs": [j.as_dict() for j in jobs], "shared_cpus": shared,
                      "outcomes": {k: o.as_dict() for k, o in outcomes.items()},
                      "verdicts": {k: [v.__dict__ for v in vs] for k, vs in verdicts.items()}})
    return MatrixResult(tuple(jobs), outcomes, verdicts, shared, path)


def _verdict_text(verdicts: Sequence[Verdict]) -> str:
    """The column against the first revision: what moved (with its interval), what could not be
    told apart from noise (with the runs that would tell), and otherwise "equivalent"."""
    moved = [f"{v.metric} {v.verdict} {v.change_and_interval()}" for v in verdicts
             if v.verdict in (BETTER, WORSE)]
    unsure = [v.metric + (f" (~{v.needed} runs)" if v.needed else "") for v in verdicts
              if v.verdict == INCONCLUSIVE]
    parts = moved + ([f"inconclusive: {', '.join(unsure)}"] if unsure else [])
    return "; ".join(parts) or "equivalent on every metric with a better side"


def _against_first(result: MatrixResult, job: CampaignJob, o: CampaignOutcome) -> str:
    """The last column: the verdicts, "base", why a campaign has none, or why it did not run."""
    vs = result.verdicts.get(job.key)
    if vs is not None:
        return _verdict_text(vs)
    if o.status is JobStatus.NOT_MEASURABLE:  # its era lacks an option: neither good nor bad
        return (o.error.splitlines() or ["not measurable with these options"])[0]
    if o.status is not JobStatus.COMPLETE:
        return o.error[:80]
    base = next((j for j in result.jobs if j.options == job.options), job)
    if base.key == job.key:
        return "base"
    first = result.outcomes.get(base.key)
    return f"no compare: the first revision is {first.status if first else 'not run'}"


def matrix_text(result: MatrixResult) -> str:
    """The table of every campaign, with its compare against the first revision."""
    rows = []
    for job in result.jobs:
        o = result.outcomes.get(job.key)
        if o is None:
            rows.append((job.short, ";".join(job.options) or "defaults", "not run", "", "", "", ""))
            continue
        slot = o.slot
        gpus = ",".join(slot.get("gpus", []))
        where = f"{slot.get('index', '?')}: {f'GPU {gpus}' if gpus else 'no GPU'} port {slot.get('port', '?')}"
        rows.append((job.short, ";".join(job.options) or "defaults", o.status + (" (kept)" if o.reused else ""), where,
                     ",".join(o.runs), f"{o.seconds:.0f}", _against_first(result, job, o)))
    lines = [table(rows, ("revision", "options", "campaign", "slot", "measured runs", "seconds", "against the first revision"))]
    notes = sorted({f"slot {o.slot.get('index', '?')}: {o.slot['note']}" for o in result.outcomes.values()
                    if o.slot.get("note")})
    lines += [f"note: {n}" for n in notes]
    # by the campaigns' own policies: --resume may keep one scored on every run for a --score none job
    for policy in sorted({o.score for o in result.outcomes.values()} - {ScorePolicy.EVERY_ROUND}):
        which = [job.short for job in result.jobs if (o := result.outcomes.get(job.key)) is not None and o.score is policy]
        lines.append(f"note: quality scored on {policy.campaign_runs()} in the campaigns of {', '.join(dict.fromkeys(which))}")
    if result.shared_cpus:
        lines.append("note: the slots shared CPUs (--slot-cpus shared): campaigns side by side may slow each other")
    lines.append(f"matrix file: {result.file}")
    return "\n".join(lines)
