"""``history()``: the series of the store per metric over commits in first-parent order, each
point's mean and interval, and its change points (with the commits between them that were not
measured, the step and its interval, and which environment facts changed there). ``invoke history``
prints it and ``invoke publish`` renders it."""

from __future__ import annotations

import difflib
import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..campaign.directions import direction, floor
from ..defaults import GIT_OUTPUT_BYTES, GIT_S
from ..errors import OmnibenchError, SettingsError
from ..process.capture import Ending, capture
from ..stats.estimators import t_quantile
from ..sweep.points import parse_point_metric
from . import store as st
from .changepoints import CONFIDENCE, MIN_EFFECT, Step, describe, find_steps
from .outputs import changed_lines
from .rebuild import ensure
from .series import ChangePoint, History, OrderSource, Point, Series, StepKind


class UnknownMetric(SettingsError):
    """``--metric`` names no metric of the selected campaigns."""


@dataclass(frozen=True)
class Commit:
    """One commit of the first-parent line."""

    revision: str
    time: str
    subject: str


@dataclass(frozen=True)
class Found:
    """A series with what it measured (the identity bisect needs) and the commit line it is on
    (empty when no checkout gave one: untested commits are then unknown)."""

    identity: st.Identity
    series: Series
    line: tuple[str, ...]


def check_revisions(spec: str) -> str:
    """``--revisions`` stripped; one starting with ``-`` (git would read it as an option) is a SettingsError."""
    spec = spec.strip()
    if spec.startswith("-"):
        raise SettingsError(f"--revisions {spec!r} starts with '-', which git would read as an option",
                            hint="name a range A..B or a branch")
    return spec


def first_parent_line(checkout: Path, revisions: str | None, git: str = "git", deadline_s: float = GIT_S) -> list[Commit]:
    """The commits of ``revisions`` (``A..B`` or a branch; default HEAD) in first-parent order,
    oldest first (``git log --first-parent --reverse``: ``A..B`` leaves A out, as git does)."""
    spec = check_revisions(revisions or "HEAD")
    argv = [git, "-C", str(checkout), "log", "--first-parent", "--reverse", "--format=%H%x1f%cI%x1f%s",
            "--end-of-options", spec, "--"]
    done = capture(argv, deadline_s, max_bytes=GIT_OUTPUT_BYTES)  # one deadline; nothing git started left running
    if done.ending is not Ending.EXITED:
        raise OmnibenchError(f"cannot run git in {checkout}: {done.why(deadline_s, GIT_OUTPUT_BYTES)}",
                             evidence={"argv": " ".join(argv)}, hint="install git, or check --checkout")
    if done.returncode != 0:
        raise SettingsError(f"git cannot list {spec!r} in {checkout}", evidence={"output": done.stderr.strip()},
                            hint="name a range A..B or a branch of the --checkout repository")
    out = []
    for line in done.stdout.splitlines():
        parts = line.split("\x1f")
        if len(parts) == 3:
            out.append(Commit(*parts))
    return out


def _is_repo(checkout: Path | None) -> bool:
    return checkout is not None and (checkout / ".git").exists()


def point_interval(values: Sequence[float], confidence: float = CONFIDENCE,
                   least: float | None = None) -> tuple[float, float, float]:
    """(mean, low, high): the t interval of the mean, its low end clipped at ``least`` (a metric
    with a floor: a WER interval never goes below 0); one value is its own interval."""
    mean = statistics.fmean(values)
    if len(values) < 2:
        return mean, mean, mean
    half = t_quantile(1 - (1 - confidence) / 2, len(values) - 1) * statistics.stdev(values) / math.sqrt(len(values))
    low = mean - half if least is None else max(least, mean - half)
    return mean, low, mean + half


def _kind(metric: str, step: float) -> StepKind:
    d = direction(metric)
    if d == "context":
        return "changed"
    return "worse" if (step > 0) == (d == "lower") else "better"


def environment_changes(before: Mapping[str, str], after: Mapping[str, str]) -> dict[str, tuple[str, str]]:
    """Each fact that differs: fact -> (before, after); a fact one side lacks reads ``""``."""
    return {k: (before.get(k, ""), after.get(k, "")) for k in sorted(set(before) | set(after))
            if before.get(k, "") != after.get(k, "")}


def _change_point(points: Sequence[Point], s: Step, line: Sequence[str], metric: str,
                  bisected: Sequence[st.Bisected]) -> ChangePoint:
    before, after = points[s.index - 1], points[s.index]
    untested: tuple[str, ...] = ()
    if line and before.revision in line and after.revision in line:
        untested = tuple(line[line.index(before.revision) + 1:line.index(after.revision)])
    named = next((b.first_bad for b in reversed(bisected) if b.metric == metric
                  and b.first_bad in (after.revision, *untested)), None)
    return ChangePoint(before.revision, after.revision, untested, s.before_mean, s.after_mean, s.step, s.low, s.high,
                       _kind(metric, s.step), environment_changes(before.environment, after.environment), named)


def _line_known(c: st.IndexedCampaign) -> bool:
    """Whether ``c``'s first-parent line was stored: its commit was found (a commit time) and it
    has a stored line, or no parent at all (a root commit's line is empty)."""
    return bool(c.revision and c.commit_time and (c.ancestry or not c.first_parent))


def stored_order(campaigns: Sequence[st.IndexedCampaign]) -> tuple[list[st.IndexedCampaign], tuple[str, ...]] | None:
    """The campaigns (one per commit) in first-parent order from the lines stored with them, and
    that line from the oldest to the newest (the untested commits between them included); None
    when the stored lines do not link every consecutive pair (a campaign indexed without its
    checkout, commits on different branches, or further apart than the stored depth)."""
    if len(campaigns) < 2:
        return list(campaigns), tuple(c.revision for c in campaigns if c.revision)
    if not all(_line_known(c) for c in campaigns):
        return None
    revisions = {c.revision for c in campaigns}
    ordered = sorted(campaigns, key=lambda c: len(revisions.intersection(c.ancestry)))
    line = [ordered[0].revision]
    for before, after in zip(ordered, ordered[1:], strict=False):
        if before.revision not in after.ancestry:
            return None
        between = after.ancestry[:after.ancestry.index(before.revision)]
        line += [*reversed(between), after.revision]
    return ordered, tuple(line)


def _latest_per_commit(campaigns: Sequence[st.IndexedCampaign]) -> dict[str, st.IndexedCampaign]:
    """A commit measured more than once: its newest campaign of those whose runs hold the most
    metrics. A campaign scored on every run holds its quality metrics too, so a newer one of the same
    measurement scored less (matrix --score none) never hides them; it stands where it is the only one."""
    out: dict[str, st.IndexedCampaign] = {}
    for c in sorted(campaigns, key=lambda c: (len({m for run in c.runs.values() for m in run}), c.completed)):
        out[c.revision or c.folder] = c
    return out


def find(results: Path, *, metric: str | None = None, workload: str | None = None, revisions: str | None = None,
         target: str | None = None, checkout: Path | None = None, git: str = "git",
         min_effect: float = MIN_EFFECT) -> list[Found]:
    """The series of :func:`history` with their identities (for ``--bisect``). A ``metric`` at a
    load point (``seedtts@c16.throughput_qps``) selects the campaigns measured at that point (their
    plain metric), and those whose runs hold it by that name (sglang-omni's own sweep)."""
    point = parse_point_metric(metric) if metric else None  # a misspelt name is refused before any work
    # the run directories are the truth: a missing or 0-byte database is made again
    ensure(results, git=git, checkouts=[str(checkout)] if checkout else [])
    with st.opened(results) as store:
        campaigns, bisects = store.campaigns(), store.bisects()
    reads: dict[st.Identity, str] = {}  # with a point: which name each series reads from its runs
    if point is not None:
        asked = str(metric)
        at = [c for c in campaigns if _holds_name(c, asked)
              or (point.workload in c.identity.workloads and point.holds(c.identity.options))]
        reads = {c.identity: asked if _holds_name(c, asked) else point.metric for c in at}
        if not at:
            seen = sorted({" ".join(c.identity.options) or "(no options)" for c in campaigns
                           if point.workload in c.identity.workloads})
            raise UnknownMetric(f"no campaign of {point.workload} was measured at {point.point.label} ({point.name})",
                                evidence={"at the point": " ".join(point.options()) or "(no load options)",
                                          "options measured": "; ".join(seen[:20]) or "(none)"},
                                hint="measure the point (invoke sweep, or invoke measure with those --opt), or name "
                                     "a point that was measured")
        campaigns, metric = at, point.metric
    if target:
        campaigns = [c for c in campaigns if c.identity.target == target]
    if workload:
        campaigns = [c for c in campaigns if workload in c.identity.workloads]
    line: list[Commit] = []
    if _is_repo(checkout):
        assert checkout is not None
        line = first_parent_line(checkout, revisions, git)
    elif revisions:
        raise SettingsError("--revisions needs the git repository whose first-parent order it follows",
                            evidence={"checkout": str(checkout) if checkout else "(none)"},
                            hint="pass --checkout PATH (the measured repository)")
    order = {c.revision: i for i, c in enumerate(line)}
    by_rev = {c.revision: c for c in line}
    if line:
        campaigns = [c for c in campaigns if c.revision in order]
    names = sorted({m for c in campaigns for run in c.runs.values() for m in run})
    if metric and not ({metric, *reads.values()} & set(names)):
        close = difflib.get_close_matches(metric, names, n=5, cutoff=0.4)
        raise UnknownMetric(f"no metric {metric!r} in the selected campaigns",
                            evidence={"close names": ", ".join(close) or "(none)",
                                      "metrics": ", ".join(names[:40]) or "(no campaign selected)"},
                            hint="name one of those with --metric (leave it out for every metric)")
    groups: dict[st.Identity, list[st.IndexedCampaign]] = {}
    for c in campaigns:
        groups.setdefault(c.identity, []).append(c)
    found = []
    for identity, members in sorted(groups.items(), key=lambda kv: kv[0].key()):
        per_commit = list(_latest_per_commit(members).values())
        source: OrderSource = "checkout"
        series_line = tuple(c.revision for c in line)
        if line:
            ordered = sorted(per_commit, key=lambda c: (order[c.revision], c.completed))
        elif (stored := stored_order(per_commit)) is not None:
            (ordered, series_line), source = stored, "stored"
        else:  # never a guessed order: shown by commit time, with no change point drawn
            ordered, series_line, source = sorted(per_commit, key=lambda c: (c.commit_time, c.completed)), (), "unknown"
        for m in ([reads.get(identity, metric)] if metric else
                  sorted({m for c in ordered for run in c.runs.values() for m in run})):
            series = _series(identity, m, ordered, by_rev, [b for b in bisects if b.series == identity.key()],
                             series_line, min_effect, source, results)
            if series is not None:
                found.append(Found(identity, series, series_line))
    return found


def _holds_name(c: st.IndexedCampaign, name: str) -> bool:
    return any(name in run for run in c.runs.values())


def _label(identity: st.Identity, metric: str) -> str:
    head = metric.split(".", 1)[0]
    name = head if head in identity.workloads else "+".join(identity.workloads)
    parts = [*identity.options, *(f"{k}={v}" for k, v in identity.settings)]
    return f"{name} [{' '.join(parts)}]" if parts else name


def _series(identity: st.Identity, metric: str, ordered: Sequence[st.IndexedCampaign], by_rev: Mapping[str, Commit],
            bisects: Sequence[st.Bisected], line: Sequence[str], min_effect: float,
            order: OrderSource = "checkout", results: Path | None = None) -> Series | None:
    points = []
    for c in ordered:
        values = tuple(run[metric] for _, run in sorted(c.runs.items()) if metric in run)
        if not values:
            continue
        mean, low, high = point_interval(values, least=floor(metric))
        commit = by_rev.get(c.revision)
        points.append(Point(c.revision, (c.revision or c.folder)[:7], commit.time if commit else c.commit_time,
                            commit.subject if commit else c.subject, c.file, c.report, values, mean, low, high,
                            dict(c.environment)))
    if not points:
        return None
    steps = find_steps([p.values for p in points], min_effect=min_effect) if order != "unknown" else []
    measured = [c for c in ordered if any(metric in run for run in c.runs.values())]
    return Series(_label(identity, metric), metric, identity.target, direction(metric), tuple(points),
                  tuple(_change_point(points, s, line, metric, bisects) for s in steps), order,
                  changed_lines(results, metric, measured) if results is not None and order != "unknown" else ())


def history(results: Path, *, metric: str | None = None, workload: str | None = None, revisions: str | None = None,
            target: str | None = None, checkout: Path | None = None, min_effect: float = MIN_EFFECT) -> History:
    """Every series of the results store that the filters select, in first-parent order of
    ``checkout`` (a git repository; without one, the first-parent lines stored when the campaigns
    were indexed; where those do not link the commits, the order is unknown: points by commit
    time and no change point) over ``revisions`` (``A..B``
    or a branch; default HEAD), with change points. A missing database is rebuilt first; a
    corrupt or newer one is a HistoryStoreError; an unknown ``metric`` an UnknownMetric naming
    close names. A step smaller than ``min_effect`` (a fraction) is not a change point."""
    found = find(results, metric=metric, workload=workload, revisions=revisions, target=target, checkout=checkout,
                 min_effect=min_effect)
    return History(tuple(f.series for f in found), CONFIDENCE, describe(min_effect))
