"""The scale layer's adapter to the campaign layer: run one campaign on a slot, tell whether one is
complete, and compare two on a metric. The only module of ``scale/`` that calls the campaign
layer (``omnibench_core.campaign``), and the one that tells the plugins (the history) of a campaign it
measured, so the two meet in one place and through data: the campaign
files under ``<results>/<revision>/campaigns/``, which ``invoke report`` and ``invoke compare``
read as well.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ..campaign import campaign_file, record
from ..campaign.compare import BETTER, EQUIVALENT, INCONCLUSIVE, WORSE, Comparison
from ..campaign.execute import asked_from, measure
from ..campaign.front_door import campaign_done
from ..campaign.front_door import compare as compare_campaigns
from ..campaign.pr_summary import COMPARISON_SUMMARY
from ..errors import RunFileError
from ..settings import Settings
from ..stats.paired_quality import QualityVerdict
from ..stats.verdict import change_text, interval_text
from ..statuses import CampaignStatus, JobStatus, RunStatus
from ..store import manifest as manifest_file
from ..store import metrics as metrics_file
from .jobs import CampaignJob, CampaignOutcome

__all__ = ["BETTER", "EQUIVALENT", "INCONCLUSIVE", "WORSE", "Verdict", "campaign_path", "compare", "compare_all",
           "is_complete", "outcome_of", "run_campaign"]

Progress = Callable[[str], None]


def campaign_path(folder: Path, job: CampaignJob, settings: Settings) -> Path:
    """``<results>/<revision folder>/campaigns/<name>.json``: the file ``invoke measure`` with
    these settings would use (an older omnibench's name for it, when only that one is there)."""
    name = job.campaign_name(settings)
    return campaign_file.campaign_path(folder, name) if name else campaign_file.path_for(folder, job.identity(settings))


def _measured_runs(folder: Path, campaign: record.Campaign) -> list[str]:
    """The campaign's complete measured runs (run0 excluded) whose manifests still say complete."""
    runs = []
    for attempt in campaign.measured():
        try:
            status = manifest_file.read(folder / attempt.run).status
        except RunFileError:
            continue
        if status is RunStatus.COMPLETE:
            runs.append(attempt.run)
    return runs


def is_complete(path: Path, job: CampaignJob) -> bool:
    """The campaign file ``path`` says complete and every measured run it names is still complete."""
    if not path.is_file():
        return False
    campaign = campaign_file.load(path)
    return campaign.status == CampaignStatus.COMPLETE and len(_measured_runs(path.parent.parent, campaign)) >= job.runs


def means(folder: Path, runs: Sequence[str]) -> dict[str, float]:
    """Each numeric metric's mean over ``runs`` (``metrics.json``)."""
    values: dict[str, list[float]] = {}
    for run in runs:
        try:
            metrics = metrics_file.read(folder / run).measured
        except RunFileError:
            continue
        for name, value in metrics.items():
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                values.setdefault(name, []).append(float(value))
    return {k: sum(v) / len(v) for k, v in sorted(values.items())}


def outcome_of(path: Path, job: CampaignJob, *, slot: Mapping[str, Any] | None = None, seconds: float = 0.0,
               reused: bool = False) -> CampaignOutcome:
    """A complete campaign's outcome, read from its file (``path``) and runs."""
    folder, campaign = path.parent.parent, campaign_file.load(path)
    runs = _measured_runs(folder, campaign)[:job.runs]
    return CampaignOutcome(job.key, JobStatus.COMPLETE, str(path), str(folder), tuple(runs), means(folder, runs),
                           dict(slot or {}), seconds, "", reused, campaign.asked.score)


def run_campaign(job: CampaignJob, settings: Settings, slot: Mapping[str, Any], progress: Progress = print
                 ) -> CampaignOutcome:
    """Run (or continue) ``job``'s campaign with ``settings`` (port, GPUs, CPUs and checkout are the
    slot's and the revision's already). Deferred scoring, as ``invoke measure``'s default, of the
    runs ``job.score`` names."""
    t0 = time.monotonic()
    asked = asked_from(settings, job.workloads, job.options, job.client, job.runs, job.retries, "deferred", job.score)
    # named by its identity, as measure names it (a plugin engine's campaign: with the engine's name)
    done = measure(settings, asked, name=job.campaign_name(settings), progress=progress)
    campaign_done(settings, done.path, progress)  # a matrix makes no report: told at once
    return outcome_of(done.path, job, slot=slot, seconds=time.monotonic() - t0)


@dataclass(frozen=True)
class Verdict:
    """One metric of campaign B against base A: the campaign layer's verdict and interval."""

    metric: str
    a_mean: float | None
    b_mean: float | None
    pct: float | None
    verdict: str  # one of stats.verdict.VERDICTS, or "missing"
    why: str = ""
    low: float | None = None  # the change's interval (fractions of A; B - A when not relative)
    high: float | None = None
    relative: bool = True
    level: float | None = None  # the alpha the row was held to (Holm)
    needed: int | None = None  # inconclusive: about this many runs a side would resolve it

    def change_and_interval(self) -> str:
        """The change and its interval, as the compare table shows them."""
        diff = None if self.a_mean is None or self.b_mean is None else self.b_mean - self.a_mean
        change = change_text(self.pct if self.relative else diff, self.relative)
        return f"{change} {interval_text(self.low, self.high, self.relative)}"


def _comparison(a: CampaignOutcome, b: CampaignOutcome, threshold: float, settings: Settings,
                metrics: Sequence[str] | None) -> Comparison:
    """The campaign layer's comparison of B with A (its compare.md/json written too); campaigns of
    one matrix may differ in their slot's CPU group, which is noted rather than refused."""
    return compare_campaigns(settings, a.campaign, b.campaign, min_effect=threshold, across_slots=True, metrics=metrics,
                             summary=COMPARISON_SUMMARY).comparison


def _rows(comparison: Comparison) -> tuple[Verdict, ...]:
    return tuple(Verdict(m.name, m.a_mean, m.b_mean, m.pct, m.verdict, m.why, m.low, m.high, m.relative, m.level,
                         m.needed) for m in comparison.metrics)


def compare_all(a: CampaignOutcome, b: CampaignOutcome, threshold: float, settings: Settings,
                metrics: Sequence[str] | None = None) -> tuple[Verdict, ...]:
    """B against A on every metric (or on ``metrics``): the campaign layer's verdicts (Welch's t
    interval, the family Holm-held to alpha, a minimum effect of ``threshold``)."""
    return _rows(_comparison(a, b, threshold, settings, metrics))


def compare(a: CampaignOutcome, b: CampaignOutcome, metric: str, threshold: float, settings: Settings) -> Verdict:
    """B against A on one metric, a family of one (``missing`` when the campaigns lack it). A
    quality metric judged sample by sample (``videoamme.accuracy``: McNemar's test) takes the
    paired verdict: run against run, a deterministic server's accuracy can never be ``worse``."""
    made = _comparison(a, b, threshold, settings, (metric,))
    found = [v for v in _rows(made) if v.metric == metric]
    paired = [q for q in (made.quality.verdicts if made.quality else ()) if q.metric == metric]
    if found and paired:
        return paired_verdict(found[0], paired[0])
    return found[0] if found else Verdict(metric, None, None, None, "missing", "not in the comparison")


def paired_verdict(run_against_run: Verdict, paired: QualityVerdict) -> Verdict:
    """The row of ``run_against_run`` with the paired samples' verdict, interval (B - A, not
    relative) and level in place."""
    return replace(run_against_run, verdict=paired.verdict.value, low=paired.low, high=paired.high, relative=False,
                   level=paired.level, needed=None,
                   why=f"paired samples ({paired.counts or paired.method}): {paired.why}")
