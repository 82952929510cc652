"""Bisect: the first commit where a metric got worse, by compare's verdict on full campaigns.

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

from ..errors import OmnibenchError, SettingsError
from ..jsonio import write_json
from ..report import table
from ..settings import Settings
from . import campaigns
from .campaigns import WORSE, Verdict
from .engine import Engine
from .jobs import CampaignJob, CampaignOutcome
from .matrix import measure_all

Progress = Callable[[str], None]


def pick(lo: int, hi: int, k: int, known: Mapping[int, bool]) -> list[int]:
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


def bounds(n: int, known: Mapping[int, bool]) -> tuple[int, int]:
    """The last good index before the first bad one, and that first bad one."""
    hi = min((i for i, bad in known.items() if bad), default=n - 1)
    lo = max((i for i, bad in known.items() if not bad and i < hi), default=0)
    return lo, hi


@dataclass(frozen=True)
class Search:
    """The search's rounds (indices measured in each) and the first bad index."""

    first_bad: int
    rounds: tuple[tuple[int, ...], ...]
    known: Mapping[int, bool] = field(default_factory=dict)


def kary_search(n: int, k: int, judge: Callable[[Sequence[int]], Mapping[int, bool]]) -> Search:
    """The first bad index among ``n`` commits (0 good, n-1 bad), ``k`` measured a round.

    ``judge(indices)`` measures them (together) and says which are bad; the first round holds
    0 and n-1 (index 0 is the base every verdict is against). A bad end that judges good, or a
    good end that judges bad, is an OmnibenchError: there is nothing to find.
    """
    if n < 2:
        raise SettingsError("bisect needs at least two commits", hint="--good must be an ancestor of --bad")
    k = max(1, k)
    known: dict[int, bool] = {}
    rounds: list[tuple[int, ...]] = []
    first = sorted({0, n - 1, *pick(0, n - 1, max(0, k - 2), {})})
    while True:
        batch = first if not rounds else pick(*bounds(n, known), k, known)
        if not batch:
            break
        known.update(judge(batch))
        rounds.append(tuple(batch))
        if len(rounds) == 1 and (known.get(0) or not known.get(n - 1)):
            raise OmnibenchError("the bad end is not worse than the good end" if not known.get(n - 1)
                                 else "the good end judges bad", evidence={"verdicts": str(known)},
                                 hint="check --good/--bad, --metric and --threshold")
        lo, hi = bounds(n, known)
        if hi - lo <= 1:
            break
    return Search(bounds(n, known)[1], tuple(rounds), dict(known))


def rounds_needed(n: int, k: int) -> int:
    """The rounds a k-ary search needs at most among ``n`` commits (the first round included)."""
    gap, rounds = n - 1, 1
    gap = math.ceil(gap / max(1, k - 1)) if k > 2 else gap  # the first round's k-2 interior picks
    while gap > 1:
        gap, rounds = math.ceil(gap / (k + 1)), rounds + 1
    return rounds


@dataclass(frozen=True)
class BisectResult:
    """The first bad commit, its compare against its parent, every commit measured and the rounds."""

    commits: tuple[str, ...]
    first_bad: str
    against_parent: Verdict
    measured: Mapping[str, CampaignOutcome]
    verdicts: Mapping[str, Verdict]  # by commit, against the good end
    rounds: tuple[tuple[str, ...], ...]
    file: Path


def bisect(settings: Settings, commits: Sequence[str], *, workloads: Sequence[str], metric: str, engine: Engine,
           threshold: float = 0.05, runs: int = 3, options: Sequence[str] = (), client: str | None = None,
           progress: Progress = print) -> BisectResult:
    """Find the first commit of ``commits`` (good first, bad last) whose campaign is worse on
    ``metric`` than the good one's; k = the engine's slots."""
    def job(i: int) -> CampaignJob:
        return CampaignJob(commits[i], tuple(workloads), tuple(sorted(options)), runs, client)

    measured: dict[str, CampaignOutcome] = {}
    verdicts: dict[str, Verdict] = {}
    k = max(1, len(engine.slots()))

    def judge(batch: Sequence[int]) -> dict[int, bool]:
        progress(f"bisect round: measuring {', '.join(commits[i][:7] for i in batch)} on {k} slot(s)")
        outcomes = measure_all(settings, [job(i) for i in batch], engine, resume=True, progress=progress)
        for i in batch:
            o = outcomes[job(i).key]
            if o.status != "complete":
                raise OmnibenchError(f"the campaign of {commits[i][:7]} is {o.status}", evidence={"error": o.error},
                                     hint="fix the cause; the same command resumes (complete campaigns are reused)")
            measured[commits[i]] = o
        base = measured[commits[0]]
        out = {}
        for i in batch:
            v = campaigns.compare(base, measured[commits[i]], metric, threshold, settings)
            if v.verdict == "missing":
                raise SettingsError(f"no metric {metric!r} in the campaigns", evidence={"metrics": ", ".join(base.means)})
            verdicts[commits[i]] = v
            out[i] = v.verdict == WORSE
            progress(f"  {commits[i][:7]}: {v.verdict} ({(v.pct or 0):+.1%} {metric})")
        return out

    search = kary_search(len(commits), k, judge)
    bad, parent = commits[search.first_bad], commits[search.first_bad - 1]
    against = campaigns.compare(measured[parent], measured[bad], metric, threshold, settings)
    rounds = tuple(tuple(commits[i] for i in r) for r in search.rounds)
    path = settings.run.results_root / "bisects" / f"{commits[0][:7]}..{commits[-1][:7]}-{metric}.json"
    write_json(path, {"good": commits[0], "bad": commits[-1], "metric": metric, "threshold": threshold,
                      "first_bad": bad, "against_parent": against.__dict__, "rounds": [list(r) for r in rounds],
                      "verdicts": {c: v.__dict__ for c, v in verdicts.items()},
                      "campaigns": {c: o.as_dict() for c, o in measured.items()}})
    return BisectResult(tuple(commits), bad, against, measured, verdicts, rounds, path)


def bisect_text(result: BisectResult) -> str:
    """The first bad commit, its compare against its parent, and the table of every commit measured."""
    v = result.against_parent
    lines = [f"first bad commit: {result.first_bad}",
             f"against its parent: {v.metric} {v.a_mean} -> {v.b_mean} ({(v.pct or 0):+.1%}): {v.verdict} ({v.why})",
             f"{len(result.rounds)} round(s), {len(result.measured)} commits measured"]
    rows = []
    for i, c in enumerate(result.commits):
        if c in result.measured:
            verdict = result.verdicts.get(c)
            rnd = next(n for n, r in enumerate(result.rounds, 1) if c in r)
            mean = result.measured[c].means.get(v.metric)
            rows.append((i, c[:7], rnd, "" if mean is None else f"{mean:.4g}",
                         "base (good)" if i == 0 else (verdict.verdict if verdict else ""),
                         "<- first bad" if c == result.first_bad else ""))
    lines.append(table(rows, ("#", "commit", "round", v.metric, "against the good end", "")))
    lines.append(f"bisect file: {result.file}")
    return "\n".join(lines)
