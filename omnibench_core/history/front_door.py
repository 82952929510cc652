"""What ``invoke history`` calls: rebuild the store, query it, hand flagged ranges to bisect and
save the history as JSON."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from .. import defaults
from ..campaign import pr_summary
from ..campaign.writing import write_atomic
from ..errors import SettingsError, storage_error
from ..jsonio import write_json
from ..settings import Settings
from ..store.names import path_problem
from . import inbox
from . import rebuild as rebuild_store
from .changepoints import CONFIDENCE, MIN_EFFECT, describe
from .query import Found, find
from .series import History
from .summary import from_history

Progress = Callable[[str], None]

@dataclass(frozen=True)
class SlotFlags:
    """How ``--bisect`` measures: the same slot flags ``invoke bisect`` takes."""

    slots: str = ""
    slot_per: str = "pair"
    slot_cpus: str = "rule"
    threshold: float = defaults.MIN_EFFECT


@dataclass(frozen=True)
class HistoryOutcome:
    """What the command did and found."""

    history: History
    rebuilt: rebuild_store.Rebuilt | None = None  # what --rebuild indexed
    bisected: tuple[str, ...] = field(default_factory=tuple)  # lines: range -> named commit
    saved: Path | None = None
    summary: Path | None = None  # the pull-request summary written by --summary
    step_summary: Path | None = None  # the $GITHUB_STEP_SUMMARY it was appended to (a range asked)


def checkout_of(settings: Settings, checkout: str | None) -> Path | None:
    """The git repository whose first-parent order a history follows: ``--checkout``, else the
    checkout setting (``invoke history`` and ``invoke publish`` alike). A ``--checkout`` that is
    not a folder is refused, as the run commands refuse it (it was ignored: the history fell back
    to its own order without a word); the setting's default may be absent on a host without one."""
    value = checkout if checkout is not None else settings.run.checkout
    where = Path(value).expanduser() if value else None
    if checkout and path_problem(checkout):
        raise SettingsError(f"--checkout {checkout[:60]!r}... refused: {path_problem(checkout)}",
                            evidence={"flag": "--checkout"}, hint="give the checkout's path")
    if checkout and where is not None and not where.is_dir():
        raise SettingsError(f"no sglang-omni checkout at {where}", evidence={"flag": "--checkout"},
                            hint="pass --checkout the git clone whose first-parent order the history follows, or "
                                 "leave it out (the checkout setting, when that folder exists)")
    return where


def run_history(settings: Settings, *, metric: str | None = None, workload: str | None = None,
                revisions: str | None = None, target: str | None = None, checkout: str | None = None,
                rebuild: bool = False, bisect: bool = False, json_out: str | None = None, min_effect: float = MIN_EFFECT,
                slot_flags: SlotFlags = SlotFlags(), progress: Progress = print,
                summary_out: str | None = None) -> HistoryOutcome:
    """``invoke history``: (``rebuild``) the store made again; the selected series; (``bisect``)
    each change point with untested commits bisected and its named commit stored, then the
    series again; (``json_out``) the History saved as JSON; (``summary_out``) the pull-request
    summary written there. For a range (``revisions``) the summary is also appended to
    ``$GITHUB_STEP_SUMMARY`` when that is set."""
    results, git = settings.run.results_root, settings.tools.git
    where = checkout_of(settings, checkout)
    # a campaign shipped home from a Ray node names the node's worktree: its commit is looked up here
    rebuilt = rebuild_store.rebuild(results, git=git, progress=progress,
                                    checkouts=[str(where)] if where else []) if rebuild else None

    def query() -> list[Found]:
        return find(results, metric=metric, workload=workload, revisions=revisions, target=target, checkout=where, git=git,
                    min_effect=min_effect)

    found = query()
    lines: list[str] = []
    if bisect:
        lines = _bisect_all(settings, found, metric, slot_flags, progress)
        found = query()
    history = History(tuple(f.series for f in found), CONFIDENCE, describe(min_effect))
    saved = None
    if json_out:
        saved = Path(json_out).expanduser()
        try:
            write_json(saved, history.to_json())
        except OSError as exc:
            raise storage_error("writing --json", exc) from exc
    summary_path = step_summary = None
    if summary_out or revisions:
        text = pr_summary.markdown(from_history(history, f"invoke history --revisions {revisions}"
                                                           if revisions else "invoke history"))
        if summary_out:
            try:
                summary_path = write_atomic(Path(summary_out).expanduser(), text)
            except OSError as exc:
                raise storage_error("writing --summary", exc) from exc
        if revisions:
            step_summary = pr_summary.append_step_summary(text)
    return HistoryOutcome(history, rebuilt, tuple(lines), saved, summary_path, step_summary)


def _bisect_all(settings: Settings, found: list[Found], metric: str | None, flags: SlotFlags,
                progress: Progress) -> list[str]:
    """Bisect every change point that holds untested commits and has a better side (once per
    range: a series' identity and metric)."""
    from ..scale import front_door as scale

    if metric is None:
        raise SettingsError("--bisect needs --metric: each bisect judges one metric",
                            hint="pass --metric NAME (invoke history lists the series)")
    done: list[str] = []
    for f in found:
        for c in f.series.change_points:
            if not c.untested or c.bisected or c.kind == "changed":
                continue
            runs = max(2, min(len(p.values) for p in f.series.points if p.revision in (c.last_before, c.first_after)))
            progress(f"bisecting {c.last_before[:7]}..{c.first_after[:7]} ({len(c.untested)} untested) on "
                     f"{f.series.metric}, {runs} runs a commit")
            # the series' own target and planted delays, not whatever --target or the config say
            own = Settings.from_mapping({**settings.flat(), "target": f.identity.target, **dict(f.identity.settings)})
            engine = scale.make_engine(own, slots=flags.slots, slot_per=flags.slot_per, slot_cpus=flags.slot_cpus,
                                       progress=progress)
            result = scale.bisect(own, good=c.last_before, bad=c.first_after, metric=f.series.metric,
                                  workloads=f.identity.workloads, engine=engine, threshold=flags.threshold, runs=runs,
                                  options=f.identity.options, client=f.identity.client or None, progress=progress)
            stored = inbox.index_bisect(settings.run.results_root, result.file, git=settings.tools.git) is not None
            unsplit = (f"; could not split: one of {', '.join(x[:7] for x in result.candidates)} (the others are not "
                       "measurable with these options)" if len(result.candidates) > 1 else "")
            done.append(f"{c.last_before[:7]}..{c.first_after[:7]}: bisect named {result.first_bad} ({result.file})"
                        + unsplit + ("" if stored else "; not stored: its good end's campaign file cannot be read"))
    if not done:
        progress("no change point with untested commits to bisect")
    return done


def outcome_text(done: HistoryOutcome, series_text: str) -> str:
    """What was rebuilt and bisected, then the series (``series_text``), then where the JSON went."""
    lines = []
    if done.rebuilt is not None:
        lines.append(f"rebuilt the history database: {done.rebuilt.campaigns} campaigns, {done.rebuilt.bisects} bisects"
                     + (f" ({done.rebuilt.caught_up} source file{'s' if done.rebuilt.caught_up > 1 else ''} completed "
                        "or changed while it ran: read again before the swap)" if done.rebuilt.caught_up else ""))
        lines += [f"  skipped {why}" for why in done.rebuilt.skipped]
    lines += done.bisected
    lines.append(series_text)
    if done.saved:
        lines.append(f"history saved: {done.saved}")
    if done.summary:
        lines.append(f"pull-request summary: {done.summary}")
    if done.step_summary:
        lines.append(f"appended to the step summary: {done.step_summary}")
    return "\n".join(lines)
