"""Bisect: the first commit where a metric got worse, by compare's verdict on full campaigns.

The step decision (:func:`is_bad`): a commit is bad when its verdict against the good end is
``worse``, good when ``better`` or ``equivalent``. When that verdict is ``inconclusive``, the bad
end decides: a commit measurably ``better`` than the bad end lacks its regression (good); one
``equivalent`` to it, or ``worse``, has it (bad). Inconclusive against both stops the bisect
(InconclusiveStep): guessing either way can send the search into the wrong half and name a wrong
commit with confidence. The error names each such commit, its interval and about how many runs
would resolve it; the same command with that ``--runs`` continues (complete runs are kept).

With k free slots each round measures k commits (a k-ary search: the unknown stretch shrinks to
about 1/(k+1) a round); the first round measures the good and bad ends (the base and the
confirmation) with k-2 commits between. Campaigns already complete are reused, so a repeated or
interrupted bisect resumes. asv's ``find`` is the model; it measures one commit at a time and
starts no servers.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .. import defaults
from ..errors import OmnibenchError, SettingsError, UnsupportedOption
from ..identity import file_name
from ..jsonio import write_json
from ..records import ScorePolicy
from ..settings import Settings
from ..statuses import JobStatus
from ..store.names import BISECTS
from ..tables import table
from . import campaigns
from .campaigns import BETTER, EQUIVALENT, INCONCLUSIVE, WORSE, Verdict
from .engine import Engine
from .jobs import CampaignJob, CampaignOutcome
from .matrix import measure_all

Progress = Callable[[str], None]


def pick(lo: int, hi: int, k: int, known: Mapping[int, bool | None]) -> list[int]:
    """Up to ``k`` unmeasured indices strictly between ``lo`` and ``hi``, evenly spread."""
    gap = hi - lo
    picks = []
    for j in range(1, k + 1):
        i = lo + round(j * gap / (k + 1))
        if lo < i < hi and i not in known and i not in picks:
            picks.append(i)
    for i in range(lo + 1, hi):  # small gaps: fill the slots with what is left
        if len(picks) >= min(k, gap - 1):
            break
        if i not in known and i not in picks:
            picks.append(i)
    return sorted(picks)


def bounds(n: int, known: Mapping[int, bool | None]) -> tuple[int, int]:
    """The last good index before the first bad one, and that first bad one (skipped indices,
    None, are neither)."""
    hi = min((i for i, bad in known.items() if bad), default=n - 1)
    lo = max((i for i, bad in known.items() if bad is False and i < hi), default=0)
    return lo, hi


@dataclass(frozen=True)
class Search:
    """The search's rounds (indices measured in each) and the first bad index; ``candidates``
    is more than that one index when skipped (not measurable) indices before it leave the
    range unsplit, as ``git bisect skip`` does: the first bad is one of them."""

    first_bad: int
    rounds: tuple[tuple[int, ...], ...]
    known: Mapping[int, bool | None] = field(default_factory=dict)
    candidates: tuple[int, ...] = ()


def kary_search(n: int, k: int, judge: Callable[[Sequence[int]], Mapping[int, bool | None]]) -> Search:
    """The first bad index among ``n`` commits (0 good, n-1 bad), ``k`` measured a round.

    ``judge(indices)`` measures them (together) and says which are bad, or None for one that
    cannot be measured (skipped, never good or bad); the first round holds 0 and n-1 (index 0 is
    the base every verdict is against). A bad end that judges good, or a good end that judges bad,
    is an OmnibenchError: there is nothing to find. When only skipped indices are left between
    the last good and the first bad, the search stops and names them all as candidates.
    """
    if n < 2:
        raise SettingsError("bisect needs at least two commits", hint="--good must be an ancestor of --bad")
    k = max(1, k)
    known: dict[int, bool | None] = {}
    rounds: list[tuple[int, ...]] = []
    first = sorted({0, n - 1, *pick(0, n - 1, max(0, k - 2), {})})
    while True:
        batch = first if not rounds else pick(*bounds(n, known), k, known)
        if not batch:
            break  # only skipped commits are left between the bounds
        known.update(judge(batch))
        rounds.append(tuple(batch))
        if len(rounds) == 1 and (known.get(0) or not known.get(n - 1)):
            raise OmnibenchError("the bad end is not worse than the good end" if not known.get(n - 1)
                                 else "the good end judges bad", evidence={"verdicts": str(known)},
                                 hint="check --good/--bad, --metric and --threshold")
        lo, hi = bounds(n, known)
        if hi - lo <= 1:
            break
    lo, hi = bounds(n, known)
    skipped = [i for i in range(lo + 1, hi) if i in known and known[i] is None]
    return Search(hi, tuple(rounds), dict(known), tuple([*skipped, hi]) if skipped else (hi,))


def rounds_needed(n: int, k: int) -> int:
    """The rounds a k-ary search needs at most among ``n`` commits (the first round included)."""
    gap, rounds = n - 1, 1
    gap = math.ceil(gap / max(1, k - 1)) if k > 2 else gap  # the first round's k-2 interior picks
    while gap > 1:
        gap, rounds = math.ceil(gap / (k + 1)), rounds + 1
    return rounds


class InconclusiveStep(OmnibenchError):
    """A commit cannot be told from the good end, nor from the bad end: the search cannot step."""


def _checked(v: Verdict) -> Verdict:
    if v.verdict not in (BETTER, WORSE, EQUIVALENT, INCONCLUSIVE):
        raise SettingsError(f"bisect cannot decide on {v.metric!r}: its verdict is {v.verdict!r}",
                            evidence={"why": v.why},
                            hint="name a --metric with a better side (higher or lower) that both campaigns have")
    return v


def is_bad(against_good: Verdict, against_bad: Verdict | None = None) -> bool | None:
    """The step decision from a commit's verdict against the good end and, when that one is
    inconclusive, against the bad end (None for the bad end itself): True bad, False good, None
    cannot tell (the caller stops). A verdict without a better side is a SettingsError."""
    v = _checked(against_good).verdict
    if v == WORSE:
        return True
    if v in (BETTER, EQUIVALENT):
        return False
    w = _checked(against_bad).verdict if against_bad is not None else INCONCLUSIVE
    if w == BETTER:
        return False
    if w in (EQUIVALENT, WORSE):
        return True
    return None


def inconclusive_error(unsure: Mapping[str, Verdict], runs: int) -> InconclusiveStep:
    """The error that stops a bisect at commits it cannot place, with the runs that would resolve them."""
    more = max((v.needed or 0 for v in unsure.values()), default=0)
    return InconclusiveStep(
        f"bisect stopped: {len(unsure)} commit(s) cannot be told from the good end (nor from the bad end) "
        f"at --runs {runs}",
        evidence={c[:7]: f"{v.metric} {v.change_and_interval()}: {v.why}" for c, v in unsure.items()},
        hint=(f"repeat the command with --runs {more} (about what the observed spread needs; complete runs are kept)"
              if more > runs else "repeat the command with more --runs (complete runs are kept), or a larger "
                                  "--threshold if a change that small does not matter"))


@dataclass(frozen=True)
class BisectResult:
    """The first bad commit, its compare against its parent, every commit measured and the rounds.

    ``not_measurable``: the commits whose checkout lacks an option the campaign passes (skipped,
    never good or bad); ``candidates``: more than the first bad commit when skipped commits before
    it leave the range unsplit; ``skipped_ends``: the good end's not-measurable commits (the base
    is then the first measurable commit after them)."""

    commits: tuple[str, ...]
    first_bad: str
    against_parent: Verdict
    measured: Mapping[str, CampaignOutcome]
    verdicts: Mapping[str, Verdict]  # by commit, against the good end
    rounds: tuple[tuple[str, ...], ...]
    file: Path
    against_bad_end: Mapping[str, Verdict] = field(default_factory=dict)  # where the good end's was inconclusive
    not_measurable: Mapping[str, CampaignOutcome] = field(default_factory=dict)
    candidates: tuple[str, ...] = ()
    skipped_ends: tuple[str, ...] = ()


class _GoodEndNotMeasurable(Exception):
    """The base cannot be measured: the bisect moves its base to the first measurable commit."""


def _first_measurable(settings: Settings, commits: Sequence[str], job: Callable[[int], CampaignJob], engine: Engine,
                      k: int, skipped: dict[str, CampaignOutcome], progress: Progress) -> int:
    """The index of the first commit after the good end that can be measured, scanning ``k`` at a
    time; each one that cannot goes into ``skipped``. None before the bad end: an UnsupportedOption."""
    i = 1
    while i < len(commits) - 1:
        batch = list(range(i, min(i + k, len(commits) - 1)))
        progress(f"bisect: looking for a measurable base among {', '.join(commits[j][:7] for j in batch)}")
        outcomes = measure_all(settings, [job(j) for j in batch], engine, resume=True, progress=progress)
        for j in batch:
            o = outcomes[job(j).key]
            if o.status is JobStatus.COMPLETE:
                return j
            if o.status is not JobStatus.NOT_MEASURABLE:
                raise OmnibenchError(f"the campaign of {commits[j][:7]} is {o.status}", evidence={"error": o.error},
                                     hint="fix the cause; the same command resumes (complete campaigns are kept)")
            skipped[commits[j]] = o
        i += k
    raise UnsupportedOption(f"no commit from {commits[0][:7]} up to the bad end {commits[-1][:7]} is measurable with "
                            "these options: nothing to compare the bad end with", option="(see each commit)",
                            commit=commits[0], evidence={c[:7]: o.error.splitlines()[0] for c, o in skipped.items()},
                            hint="choose a --good whose checkout supports the options (a later one), or other options")


def bisect(settings: Settings, commits: Sequence[str], *, workloads: Sequence[str], metric: str, engine: Engine,
           threshold: float = defaults.MIN_EFFECT, runs: int = defaults.RUNS, options: Sequence[str] = (),
           client: str | None = None, progress: Progress = print,
           skipped_ends: Mapping[str, CampaignOutcome] | None = None,
           score: ScorePolicy = ScorePolicy.EVERY_ROUND) -> BisectResult:
    """Find the first commit of ``commits`` (good first, bad last) whose campaign is worse on
    ``metric`` than the good one's; k = the engine's slots.

    A commit whose checkout lacks an option the campaign passes is "not measurable" (skipped, as
    ``git bisect skip``): never good or bad. A good end that is not measurable moves the base to
    the first measurable commit after it (the commits before are named: a change among them cannot
    be found); a not-measurable bad end is an UnsupportedOption. ``score``: which runs of each
    campaign are scored for quality (none: a speed metric's bisect skips the scoring)."""
    def job(i: int) -> CampaignJob:
        return CampaignJob(commits[i], tuple(workloads), tuple(sorted(options)), runs, client, engine=engine.name,
                           score=score)

    measured: dict[str, CampaignOutcome] = {}
    not_measurable: dict[str, CampaignOutcome] = dict(skipped_ends or {})
    verdicts: dict[str, Verdict] = {}
    against_bad_end: dict[str, Verdict] = {}
    k = max(1, len(engine.slots()))

    def judge(batch: Sequence[int]) -> dict[int, bool | None]:
        progress(f"bisect round: measuring {', '.join(commits[i][:7] for i in batch)} on {k} slot(s)")
        outcomes = measure_all(settings, [job(i) for i in batch], engine, resume=True, progress=progress)
        out: dict[int, bool | None] = {}
        for i in batch:
            o = outcomes[job(i).key]
            if o.status is JobStatus.NOT_MEASURABLE:
                progress(f"  {commits[i][:7]}: not measurable with these options ({o.error.splitlines()[0]})")
                if i == len(commits) - 1:
                    raise UnsupportedOption(f"the bad end {commits[i][:7]} is not measurable with these options",
                                            option="(see the error)", commit=commits[i], evidence={"error": o.error},
                                            hint="choose a --bad whose checkout supports the options, or other options")
                not_measurable[commits[i]] = o
                out[i] = None
                continue
            if o.status is not JobStatus.COMPLETE:
                raise OmnibenchError(f"the campaign of {commits[i][:7]} is {o.status}", evidence={"error": o.error},
                                     hint="fix the cause; the same command resumes (complete campaigns are kept)")
            measured[commits[i]] = o
        if 0 in out:
            raise _GoodEndNotMeasurable()
        base, bad_end = measured[commits[0]], measured.get(commits[-1])
        unsure: dict[str, Verdict] = {}
        for i in batch:
            if i in out:
                continue
            if i == 0:  # the base itself: good by definition (against itself an interval may still be wide)
                out[i] = False
                continue
            v = campaigns.compare(base, measured[commits[i]], metric, threshold, settings)
            if v.verdict == "missing":
                raise SettingsError(f"no metric {metric!r} in the campaigns", evidence={"metrics": ", ".join(base.means)})
            verdicts[commits[i]] = v
            note = ""
            other = None
            if v.verdict == INCONCLUSIVE and bad_end is not None and i != len(commits) - 1:
                other = against_bad_end[commits[i]] = campaigns.compare(bad_end, measured[commits[i]], metric,
                                                                        threshold, settings)
                note = f"; against the bad end {other.verdict} ({other.change_and_interval()})"
            progress(f"  {commits[i][:7]}: {v.verdict} ({metric} {v.change_and_interval()}){note}")
            bad = is_bad(v, other)
            if bad is None:
                unsure[commits[i]] = v
            else:
                out[i] = bad
        if unsure:
            raise inconclusive_error(unsure, runs)
        return out

    try:
        search = kary_search(len(commits), k, judge)
    except _GoodEndNotMeasurable:
        skipped = {commits[0]: not_measurable[commits[0]]}
        base = _first_measurable(settings, commits, job, engine, k, skipped, progress)
        progress(f"bisect: the good end {commits[0][:7]} is not measurable with these options; the base is "
                 f"{commits[base][:7]}, the first measurable commit after it")
        return bisect(settings, commits[base:], workloads=workloads, metric=metric, engine=engine, threshold=threshold,
                      runs=runs, options=options, client=client, progress=progress,
                      skipped_ends={**not_measurable, **skipped})
    bad = commits[search.first_bad]
    # against the last measured commit before it (its parent, unless that one was not measurable)
    parent = commits[max(i for i in range(search.first_bad) if commits[i] in measured)]
    against = campaigns.compare(measured[parent], measured[bad], metric, threshold, settings)
    rounds = tuple(tuple(commits[i] for i in r) for r in search.rounds)
    candidates = tuple(commits[i] for i in search.candidates)
    ends = tuple(c for c in (skipped_ends or {}) if c not in commits)
    # one file per range, metric and measurement: bisects of two option sets over one range (a
    # sweep's series, history --bisect), or of another engine or --score, must not overwrite each other
    measurement = job(0).campaign_name(settings) or job(0).identity(settings).name()
    path = settings.run.results_root / BISECTS / (
        file_name([f"{commits[0][:7]}..{commits[-1][:7]}", metric, measurement]) + ".json")
    write_json(path, {"good": commits[0], "bad": commits[-1], "metric": metric, "threshold": threshold,
                      "score": score.value,
                      "first_bad": bad, "against_parent": against.__dict__, "rounds": [list(r) for r in rounds],
                      "verdicts": {c: v.__dict__ for c, v in verdicts.items()},
                      "against_bad_end": {c: v.__dict__ for c, v in against_bad_end.items()},
                      "campaigns": {c: o.as_dict() for c, o in measured.items()},
                      "not_measurable": {c: o.as_dict() for c, o in not_measurable.items()},
                      "candidates": list(candidates), "skipped_ends": list(ends)})
    return BisectResult(tuple(commits), bad, against, measured, verdicts, rounds, path, against_bad_end,
                        not_measurable, candidates, ends)


def _num(value: float | None) -> str:
    """A mean as the table shows it: four significant digits (``0.1162``), not seventeen."""
    return "-" if value is None else f"{value:.4g}"


def bisect_text(result: BisectResult) -> str:
    """The first bad commit, its compare against its parent, and the table of every commit measured."""
    v = result.against_parent
    lines = []
    if result.skipped_ends:
        lines.append(f"the good end is not measurable with these options: {len(result.skipped_ends)} commit(s) "
                     f"{result.skipped_ends[0][:7]}..{result.skipped_ends[-1][:7]} skipped; the base is "
                     f"{result.commits[0][:7]} (a change before it cannot be found)")
    if len(result.candidates) > 1:
        lines.append(f"could not split {result.candidates[0][:7]}..{result.candidates[-1][:7]}: the first bad commit "
                     f"is one of {', '.join(c[:7] for c in result.candidates)} (the others are not measurable "
                     "with these options)")
    lines += [f"first bad commit: {result.first_bad}",
              f"against its parent: {v.metric} {_num(v.a_mean)} -> {_num(v.b_mean)} ({v.change_and_interval()}): "
              f"{v.verdict} "
             f"({v.why})",
             f"{len(result.rounds)} round(s), {len(result.measured)} commits measured"
             + (f", {len(result.not_measurable)} not measurable" if result.not_measurable else "")]
    rows: list[tuple[object, ...]] = []
    for i, c in enumerate((*result.skipped_ends, *result.commits), start=-len(result.skipped_ends)):
        if c in result.not_measurable:
            rows.append((i, c[:7], "", "", "not measurable with these options", ""))
        elif c in result.measured:
            verdict, other = result.verdicts.get(c), result.against_bad_end.get(c)
            rnd = next(n for n, r in enumerate(result.rounds, 1) if c in r)
            mean = result.measured[c].means.get(v.metric)
            rows.append((i, c[:7], rnd, "" if mean is None else f"{mean:.4g}",
                         ("base (good)" if i == 0 else (str(verdict.verdict) if verdict else "") +
                          (f"; against the bad end {other.verdict}" if other else ""))
                         + ("  <- first bad" if c == result.first_bad else "")))
    lines.append(table(rows, ("#", "commit", "round", v.metric, "against the good end")))
    lines.append(f"bisect file: {result.file}")
    return "\n".join(lines)
