"""The campaign layer's front door, called by the Invoke tasks: measure (then report, then tell the
plugins: the history indexes the campaign), report and compare. Each returns data; the ``*_text``
functions render it for the terminal."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import api, defaults
from ..errors import OmnibenchError, SettingsError
from ..heartbeat import working
from ..identity import RUN_SETTINGS
from ..quality.paired import HEADERS as QUALITY_HEADERS
from ..quality.paired import deciding
from ..quality.paired import lines as quality_lines
from ..quality.paired import rows as quality_rows
from ..registry import manager as plugin_manager
from ..settings import Settings
from ..stats.verdict import Verdict
from ..store.names import COMPARISONS, REPORTS, path_problem
from ..tables import table
from . import campaign_file, execute, record, references
from .compare import Comparison
from .compare import compare as compare_stats
from .summary import RunSetStats, campaign_stats, environment_of, stats_of
from .writing import (
    COMPARE_HEADERS,
    REPORT_HEADERS,
    PullRequestSummary,
    Written,
    compare_rows,
    report_rows,
    write_compare,
    write_report,
)


@dataclass(frozen=True)
class Reported:
    """A report made."""

    stats: RunSetStats
    written: Written
    campaign: record.Campaign | None
    picked: str = ""  # how a campaign no one named was chosen ("" when it was named)


@dataclass(frozen=True)
class Compared:
    """A comparison made."""

    comparison: Comparison
    written: Written


def measure(settings: Settings, asked: record.Asked, *, name: str | None = None,
            progress: Callable[[str], None] = print) -> Reported:
    """What ``invoke measure`` does: measure (or resume) the campaign, write its report, then tell
    the plugins it was measured (the history indexes it and links the report; told when the
    report failed too, the runs being on disk)."""
    outcome = execute.measure(settings, asked, name=name, progress=progress)
    try:
        with working(progress, f"writing the report of campaign {outcome.campaign.name} (tables and plots)"):
            return report(settings, outcome.campaign.name)
    finally:
        campaign_done(settings, outcome.path, progress)


def campaign_done(settings: Settings, path: Path, progress: Callable[[str], None] = print) -> None:
    """Tell every plugin that the campaign at ``path`` was measured (``omnibench_campaign_done``:
    the history indexes it); a plugin that fails is said through ``progress``, never raised."""
    plugin_manager.load()[0].campaign_done(settings, path, progress)


def find_campaign(settings: Settings, ref: str | None) -> Path:
    """A campaign file from NAME (this revision folder), REVISION/NAME, a file path, or None (the
    newest one no longer being measured: :func:`latest_campaign`)."""
    return latest_campaign(settings)[0] if not ref else _named_campaign(settings, ref)


def latest_campaign(settings: Settings) -> tuple[Path, str]:
    """The newest campaign of this revision folder that is no longer being measured, and a line
    saying so (naming the newer ones passed over); none there is an error naming those."""
    revision = api.revision_dir(settings)
    found = campaign_file.latest_finished(revision)
    newer = ", ".join(found.passed_over)
    if found.path is None:
        if newer:
            raise OmnibenchError(f"no finished campaign in {revision}: {newer} still running (being measured, or cut "
                                 "short)", evidence={"still running": newer},
                                 hint=f"wait for it to end, or report it as it stands: invoke report --name "
                                      f"{found.passed_over[0]}")
        raise OmnibenchError(f"no campaign in {revision}", hint="run one: invoke measure --workload NAME")
    line = f"the newest finished campaign of {revision.name}: {found.path.stem}"
    if newer:
        line += f" (newer, still running, not reported: {newer}; --name NAME reports one as it stands)"
    return found.path, line


def _named_campaign(settings: Settings, ref: str) -> Path:
    """A campaign file from NAME (this revision folder), REVISION/NAME or a file path."""
    if path_problem(ref):
        raise SettingsError(f"--name {ref[:60]!r}... refused: {path_problem(ref)}", evidence={"name": ref[:200]},
                            hint="give a campaign's name, REVISION/NAME or a campaign file's path")
    if ref and Path(ref).is_file():
        return Path(ref)
    if ref and "/" in ref:
        revision_name, name = ref.rsplit("/", 1)
        path = campaign_file.campaign_path(settings.run.results_root / revision_name, name)
    else:
        path = campaign_file.campaign_path(api.revision_dir(settings), ref)
    if not path.is_file():
        known = sorted(p.stem for p in path.parent.glob("*.json")) if path.parent.is_dir() else []
        raise OmnibenchError(f"no campaign {ref!r} at {path}", evidence={"campaigns there": ", ".join(known) or "none"},
                             hint="name a campaign listed there, REVISION/NAME, or a campaign file")
    return path


def report(settings: Settings, name: str | None = None, *, runs: Sequence[str] = ()) -> Reported:
    """Report one campaign (default: the latest of the revision folder), or named complete runs."""
    if runs:
        revision = api.revision_dir(settings)
        dirs = [revision / r for r in runs]
        stats = stats_of(f"{revision.name} runs {', '.join(runs)}", dirs, environment_of(dirs[0]))
        header: dict[str, Any] = {"revision": revision.name, "runs named": ", ".join(runs),
                  "settings": settings_line({k: stats.identity.get(k) for k in RUN_SETTINGS})}
        written = write_report(revision / REPORTS, stats, header)
        return Reported(stats, written, None)
    path, picked = (_named_campaign(settings, name), "") if name else latest_campaign(settings)
    c, stats = campaign_stats(path)
    header = {"campaign": c.name, "revision": c.revision, "status": c.status, "target": c.asked.settings.get("target"),
              "workloads": ", ".join(c.asked.workloads), "options": ", ".join(c.asked.options) or "defaults",
              "settings": settings_line(c.asked.settings), "scoring": c.asked.scoring,
              "quality scored on": c.asked.score.campaign_runs(), "server starts": c.server_starts, "campaign file": str(path)}
    written = write_report(path.parent / c.name, stats, header)
    return Reported(stats, written, c, picked)


def compare(settings: Settings, a: str, b: str, *, force: bool = False, min_effect: float = defaults.MIN_EFFECT,
            alpha: float = defaults.ALPHA, across_slots: bool = False, metrics: Sequence[str] | None = None,
            summary: PullRequestSummary | None = None) -> Compared:
    """Compare campaign B with base A; the files go to ``<results>/comparisons/<A>__vs__<B>/``.
    ``across_slots``: campaigns of one matrix, which may differ in their slot's CPU group;
    ``metrics``: only these (the family held to ``alpha`` is then just them); ``summary``: how its
    pull-request summary is written (none without it)."""
    pa, pb = find_campaign(settings, a), find_campaign(settings, b)
    (ca, sa), (cb, sb) = campaign_stats(pa), campaign_stats(pb)
    comparison = compare_stats(sa, sb, alpha=alpha, min_effect=min_effect, force=force, across_slots=across_slots,
                               metrics=metrics)
    values = {m.name: (_numbers(sa, m.name), _numbers(sb, m.name)) for m in comparison.metrics}
    folder = settings.run.results_root / COMPARISONS / f"{ca.revision}.{ca.name}__vs__{cb.revision}.{cb.name}"[:200]
    return Compared(comparison, write_compare(folder, comparison, values, summary))


# What the embedded local target never uses: a report on it does not list them as if they counted.
LOCAL_UNUSED = ("checkout", "venv", "gpus")


def settings_line(values: Mapping[str, object]) -> str:
    """The settings that change numbers, as ``key=value`` (a planted ``local_delay_ms`` among them);
    on the local target, not the checkout, venv and GPUs it never uses."""
    unused = LOCAL_UNUSED if values.get("target") == "local" else ()
    return ", ".join(f"{k}={v}" for k, v in values.items() if v not in (None, "") and k not in unused) or "defaults"


def _files(w: Written, what: str) -> list[str]:
    lines = [f"{what}: {w.markdown}", f"{what} data: {w.json}"]
    if w.unchanged:
        lines.append(f"(nothing changed since this {what}: the same runs, values and settings; not written again)")
    elif w.numbered:
        lines.append(f"(an earlier {what} is kept; this one got the next number)")
    if w.replaced_partial:
        lines.append(f"(an unfinished {what} under this name, cut short while it was written, was replaced)")
    lines.append(f"plots: {len(w.plots)} in {w.plots[0].parent}" if w.plots else w.plots_note)
    lines += [f"pull-request summary: {w.summary}"] if w.summary else []
    lines += [f"appended to $GITHUB_STEP_SUMMARY: {w.step_summary}"] if w.step_summary else []
    return lines


def report_text(made: Reported) -> str:
    """What ``invoke report`` and ``invoke measure`` print."""
    s = made.stats
    lines = [made.picked] if made.picked else []
    lines += [f"report of {s.title}: runs {', '.join(s.runs) or 'none'}", table(report_rows(s), REPORT_HEADERS)]
    lines += [f"FLAG {m.name}: {f}" for m in s.metrics for f in m.flags]
    lines += [f"note: {n}" for n in s.notes]
    if references.for_workloads(list(s.identity.get("workloads") or [])):
        lines.append("the runbook's reference results (OTHER setups, not comparable) are in the report file")
    return "\n".join(lines + _files(made.written, "report"))


def compare_text(made: Compared) -> str:
    """What ``invoke compare`` prints."""
    c = made.comparison
    family = sum(1 for m in c.metrics if m.in_family)
    lines = [f"A (base) {c.a}  vs  B {c.b}: {c.test}; a family of {family} held to alpha {c.alpha:g} ({c.correction}), "
             f"minimum effect {c.min_effect:.0%}; each interval at 1 - the level its row was held to"]
    lines += [f"SETUP DIFFERS (--force): {d}" for d in c.differences]
    lines.append(table(compare_rows(c), COMPARE_HEADERS))
    if c.quality is not None and (c.quality.changed or c.quality.verdicts):  # what the model said, by sample
        lines += [f"outputs: {line}" for line in quality_lines(c.quality)]
        if c.quality.verdicts:
            lines.append(table(quality_rows(c.quality), QUALITY_HEADERS))
            lines += deciding(c.quality, {m.name: str(m.verdict) for m in c.metrics})
    lines += [f"{m.verdict} {m.name}: {m.why}" for m in c.metrics if m.verdict == Verdict.INCONCLUSIVE]
    lines += [f"note: {n}" for n in c.notes]
    lines.append("verdicts: " + ", ".join(f"{k} {v}" for k, v in c.verdicts().items()))
    return "\n".join(lines + _files(made.written, "comparison"))


def _numbers(stats: RunSetStats, name: str) -> list[float]:
    """A compared metric's run values (every compared metric is in both sets)."""
    metric = stats.metric(name)
    return list(metric.numbers) if metric is not None else []
