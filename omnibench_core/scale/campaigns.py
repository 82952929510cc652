"""The scale layer's adapter to the campaign layer: run one campaign, tell whether one is complete,
and compare two on a metric.

Each function calls the campaign layer (``omnibench_core.campaign``: ``measure``, ``compare``)
when it is importable. Until then (and this is marked FALLBACK below) a minimal campaign runs
over :func:`omnibench_core.api.run`: run0 (the warm-up) + N measured runs into the same
``<results>/<revision>/runN`` folders, recorded in ``<results>/<revision>/campaigns/<name>.json``
and resumed from it (complete runs are kept, nothing is measured twice); its comparison is a
difference of means against a threshold.
"""

from __future__ import annotations

import importlib
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import api
from ..errors import GateError, OmnibenchError, RunInterrupted, RunNotReady, StepFailed
from ..jsonio import read_json, write_json
from ..settings import Settings
from .jobs import CampaignJob, CampaignOutcome

CAMPAIGNS = "campaigns"
BETTER, WORSE, SAME = "better", "worse", "no significant change"
Progress = Callable[[str], None]


def campaign_layer() -> Any | None:
    """``omnibench_core.campaign`` when it is installed (after the merge), else None."""
    try:
        return importlib.import_module("omnibench_core.campaign")
    except ImportError:
        return None


def campaign_path(folder: Path, job: CampaignJob) -> Path:
    """``<results>/<revision folder>/campaigns/<name>.json`` (the campaign layer's place)."""
    return folder / CAMPAIGNS / f"{job.campaign_name}.json"


def _status(run_dir: Path) -> str:
    try:
        data = read_json(run_dir / "manifest.json")
    except (OSError, ValueError):
        return ""
    return str(data.get("status", "")) if isinstance(data, dict) else ""


def _measured(folder: Path, data: Mapping[str, Any]) -> list[str]:
    """The campaign's complete measured runs (run0 excluded) whose manifests still say complete."""
    runs = [a["run"] for a in data.get("attempts", []) if a.get("status") == "complete" and a.get("slot", 0) > 0]
    return [r for r in runs if _status(folder / r) == "complete"]


def is_complete(folder: Path, job: CampaignJob) -> bool:
    """The campaign file says complete and every measured run it names is still complete."""
    path = campaign_path(folder, job)
    try:
        data = read_json(path)
    except (OSError, ValueError):
        return False
    if not isinstance(data, dict) or data.get("status") != "complete":
        return False
    return len(_measured(folder, data)) >= job.runs


def means(folder: Path, runs: Sequence[str]) -> dict[str, float]:
    """Each numeric metric's mean over ``runs`` (``metrics.json``)."""
    values: dict[str, list[float]] = {}
    for run in runs:
        try:
            metrics = read_json(folder / run / "metrics.json").get("metrics", {})
        except (OSError, ValueError, AttributeError):
            continue
        for name, value in metrics.items():
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                values.setdefault(name, []).append(float(value))
    return {k: sum(v) / len(v) for k, v in sorted(values.items())}


def outcome_of(folder: Path, job: CampaignJob, *, slot: Mapping[str, Any] | None = None, seconds: float = 0.0,
               reused: bool = False) -> CampaignOutcome:
    """A complete campaign's outcome, read from its file and runs."""
    data = read_json(campaign_path(folder, job))
    runs = _measured(folder, data)[:job.runs]
    return CampaignOutcome(job.key, "complete", str(campaign_path(folder, job)), str(folder), tuple(runs),
                           means(folder, runs), dict(slot or data.get("slot", {})), seconds, "", reused)


def run_campaign(job: CampaignJob, settings: Settings, slot: Mapping[str, Any], progress: Progress = print
                 ) -> CampaignOutcome:
    """Run (or continue) ``job``'s campaign with ``settings`` (port, GPUs, CPUs and checkout are
    the slot's and the revision's already); the slot is recorded in the campaign file."""
    t0 = time.monotonic()
    layer = campaign_layer()
    if layer is not None:  # the campaign layer, once merged: same files, so `report` and `compare` read them
        asked = layer.asked_from(settings, job.workloads, job.options, job.client, job.runs, job.retries, "deferred")
        done = layer.measure(settings, asked, name=job.campaign_name, progress=progress)
        folder = done.path.parent.parent
        return CampaignOutcome(job.key, "complete", str(done.path), str(folder), tuple(a.run for a in done.campaign.measured()),
                               means(folder, [a.run for a in done.campaign.measured()]), dict(slot),
                               time.monotonic() - t0)
    return _fallback_campaign(job, settings, slot, progress, t0)


# -- FALLBACK: a minimal campaign over api.run, until the campaign layer is merged ----------------
def _fallback_campaign(job: CampaignJob, settings: Settings, slot: Mapping[str, Any], progress: Progress,
                       t0: float) -> CampaignOutcome:
    folder = api.revision_dir(settings)
    path = campaign_path(folder, job)
    try:
        data: dict[str, Any] = read_json(path)
    except (OSError, ValueError):
        data = {"name": job.campaign_name, "revision": folder.name, "attempts": []}
    data.update(asked=job.as_dict(), status="running", slot=dict(slot), kind="scale fallback campaign")
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json(path, data)

    def done(k: int) -> bool:
        return any(a["slot"] == k and a["status"] == "complete" and _status(folder / a["run"]) == "complete"
                   for a in data["attempts"])

    for k in range(job.runs + 1):
        failures = 0
        while not done(k):
            if failures > job.retries:
                data.update(status="stopped", reason=f"run slot {k} failed {failures} times")
                write_json(path, data)
                raise OmnibenchError(f"campaign {job.key}: run slot {k} failed {failures} times",
                                     evidence={"campaign": str(path)}, hint="fix the cause; the same command resumes")
            progress(f"{'run0 (warm-up)' if k == 0 else f'measured run {k}/{job.runs}'} of {job.key}")
            try:
                result = api.run(settings, job.workloads, options=job.options, client=job.client, progress=progress)
                status, run, error = result.status, result.run_dir.name, result.error
            except RunInterrupted:
                data.update(status="interrupted")
                write_json(path, data)
                raise
            except (GateError, StepFailed) as exc:
                if isinstance(exc, RunNotReady):
                    raise
                status, run, error = "failed", Path(str(exc.evidence.get("run moved to", ""))).name, exc.message
            data["attempts"].append({"slot": k, "run": run, "status": status, "error": error})
            write_json(path, data)
            failures += status != "complete"
    data.update(status="complete")
    write_json(path, data)
    return outcome_of(folder, job, slot=slot, seconds=time.monotonic() - t0)


# -- comparison ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Verdict:
    """One metric of campaign B against base A."""

    metric: str
    a_mean: float | None
    b_mean: float | None
    pct: float | None
    verdict: str  # better, worse, no significant change, or "context" / "missing"
    why: str = ""


def direction(metric: str) -> str:
    """``higher`` or ``lower`` is better, or ``context``; the campaign layer's table when merged,
    else by the metric's name (FALLBACK)."""
    try:
        table = importlib.import_module("omnibench_core.campaign.metrics")
        found = table.direction(metric)  # the campaign layer's own directions
        if found:
            return str(found)
    except (ImportError, AttributeError):
        pass
    name = metric.lower()
    if any(w in name for w in ("qps", "throughput", "per_s", "tok_s", "accuracy", "matched", "sim", "utmos")):
        return "higher"
    if any(w in name for w in ("latency", "_s", "_ms", "wer", "failed", "ttft", "tpot", "rtf")):
        return "lower"
    return "context"


def compare(a: CampaignOutcome, b: CampaignOutcome, metric: str, threshold: float = 0.05,
            settings: Settings | None = None) -> Verdict:
    """B against A on ``metric``. With the campaign layer: its verdict (Welch's t-test and a
    minimum effect of ``threshold``); FALLBACK: worse/better when the means differ by at least
    ``threshold`` in the bad/good direction."""
    layer = campaign_layer()
    if layer is not None and settings is not None and a.campaign and b.campaign:
        made = layer.compare(settings, a.campaign, b.campaign, min_effect=threshold)
        for m in made.comparison.metrics:
            if m.name == metric:
                return Verdict(metric, m.a_mean, m.b_mean, m.pct, m.verdict, m.why)
        return Verdict(metric, None, None, None, "missing", "not in the comparison")
    am, bm = a.means.get(metric), b.means.get(metric)
    if am is None or bm is None:
        return Verdict(metric, am, bm, None, "missing", "the metric is not in both campaigns")
    pct = (bm - am) / abs(am) if am else None
    way = direction(metric)
    if way == "context":
        return Verdict(metric, am, bm, pct, "context", "no better side")
    if pct is None or abs(pct) < threshold:
        return Verdict(metric, am, bm, pct, SAME, f"|change| below {threshold:.0%}")
    worse = (pct > 0) == (way == "lower")
    return Verdict(metric, am, bm, pct, WORSE if worse else BETTER, f"means differ by {pct:+.1%} ({way} is better)")
