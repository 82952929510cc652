"""An A/B experiment's verdicts: per metric the rounds' paired values (B's run and A's run of the
same round), judged by the verdict code every comparison uses (``stats.verdict``), with the
noise guard's findings for the runs each verdict rests on."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from .. import defaults
from ..campaign import directions as meta
from ..campaign.summary import noisy_runs, present_runs
from ..errors import OmnibenchError, RunFileError
from ..quality.paired import QualityReport, compare_runs
from ..stats import verdict
from ..stats.matched import matched_rounds
from ..statuses import AttemptStatus
from ..store import metrics as metrics_file
from . import sequential
from .record import Experiment, runs_of


class NotEnoughRounds(OmnibenchError):
    """Fewer than two rounds have a complete run on both sides."""


@dataclass(frozen=True)
class RoundValues:
    """One metric's value in each round, on each side (None: not a number in that run)."""

    metric: str
    rounds: tuple[int, ...]
    a: tuple[Any, ...]
    b: tuple[Any, ...]


@dataclass(frozen=True)
class NotCompared:
    """A metric that gets no verdict, and why (a value that is not a finite number, or missing)."""

    metric: str
    direction: str
    why: str
    unscored: bool = False  # a quality metric of rounds --score left unscored on purpose: not a gap

    def describe(self) -> str:
        """One line for the console and ab.md."""
        return f"{self.metric}: {self.why}; it gets no verdict"


@dataclass(frozen=True)
class Analysis:
    """The experiment's verdicts and what they rest on."""

    name: str
    design: str
    rounds: tuple[int, ...]  # the rounds with a complete run on both sides
    runs: Mapping[str, tuple[str, ...]]  # side -> "revision/runN" in round order
    values: tuple[RoundValues, ...]
    verdicts: tuple[verdict.MetricVerdict, ...]
    not_compared: tuple[NotCompared, ...]
    alone: tuple[str, ...]  # duet rounds a side ran without its partner (a retry, or the partner ended early)
    noisy: tuple[str, ...]  # "A round 2 (run3) was noisy: ..." for each noisy timed window
    alpha: float  # the level a family of one is held to (with --max-rounds, the stopping look's)
    min_effect: float
    looks: tuple[str, ...] = ()  # --max-rounds: the rounds run, why it stopped, the rule and one line per look
    score: str = "every-round"  # --score: which rounds were scored for quality
    scored_rounds: tuple[int, ...] = ()  # of ``rounds``, those scored for quality
    # outputs matched by sample id across the sides, and the quality verdicts of the paired samples
    quality: QualityReport | None = None
    # "A round 1: run2 selftest.client: present on the slot's GPUs ..." for each window that was not
    # noisy but saw another process hold GPU memory idle: named, not weighed as noise
    present: tuple[str, ...] = ()
    # the rows judged first (gatekeeping: sequential.primary); () none, so one family; None: one Holm
    # family, as records of format 2 and before are judged
    primary: tuple[str, ...] | None = ()
    # --noisy-retries: "A round 2 (run3) set aside, measured again: ..." for each run set aside as noisy
    redone: tuple[str, ...] = ()

    def scored_text(self) -> str:
        """Which runs were scored for quality, in words for the console and ab.md."""
        if self.score == "none":
            return "quality: no run scored (--score none): the verdicts are on speed alone"
        at = [i for i, r in enumerate(self.rounds) if r in self.scored_rounds]
        runs = ", ".join(f"{side} {self.runs[side][i]}" for i in at for side in ("A", "B"))
        if len(at) == len(self.rounds):
            return f"quality: every round scored (--score {self.score}); warm-ups are never scored"
        return (f"quality: scored on round {', '.join(str(self.rounds[i]) for i in at) or '(none)'} only ({runs or '-'}; "
                f"--score {self.score}): the other rounds and the warm-ups were generated and timed, not scored; "
                f"--score every-round scores every round")

    def counts(self) -> dict[str, int]:
        """How many metrics got each verdict."""
        out: dict[str, int] = {}
        words = [v.verdict.value for v in self.verdicts] + [q.verdict.value for q in
                                                            (self.quality.verdicts if self.quality else ())]
        for word in words:
            out[word] = out.get(word, 0) + 1
        return out


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _metrics(run_dir: Path) -> Mapping[str, Any]:
    try:
        return metrics_file.read(run_dir).measured
    except RunFileError as exc:
        raise OmnibenchError(exc.message, evidence=exc.evidence,
                             hint="move that run folder aside (its manifest still says complete), then repeat the "
                                  "A/B command: the run is measured again") from exc


def round_samples(name: str, direction: str, a: Sequence[float], b: Sequence[float],
                  a_requests: Sequence[Mapping[str, float] | None],
                  b_requests: Sequence[Mapping[str, float] | None]) -> verdict.Samples:
    """One metric's paired samples: each round's geometric mean over the requests matched by id
    across the sides when every round of both has the metric's per-request values
    (:mod:`omnibench_core.stats.matched`), else the rounds' own values ``a`` and ``b``."""
    matched = matched_rounds(a_requests, b_requests)
    if matched is None:
        return verdict.Samples(name, direction, tuple(a), tuple(b))
    return verdict.Samples(name, direction, matched.a, matched.b, matched.requests)


def analyse(experiment: Experiment, results_root: Path, *, alpha: float = defaults.ALPHA,
            min_effect: float = defaults.MIN_EFFECT, upto: int | None = None,
            at: Callable[[float], float] | None = None) -> Analysis:
    """Judge B against A over the rounds where both sides have a complete run (paired); with
    ``upto``, over those of rounds 1 to ``upto`` only (a look of --max-rounds, whose boundary
    ``at`` maps an alpha to the level it holds a test to)."""
    a_runs = {at.round: at for at in runs_of(experiment, "A")}
    b_runs = {at.round: at for at in runs_of(experiment, "B")}
    rounds = tuple(sorted(r for r in set(a_runs) & set(b_runs) if upto is None or r <= upto))
    if len(rounds) < 2:
        raise NotEnoughRounds(f"only {len(rounds)} round(s) have a complete run on both sides; a verdict needs 2",
                              hint="repeat the A/B command to measure the missing rounds")
    dirs = {side: [results_root / runs[r].revision / runs[r].run for r in rounds]
            for side, runs in (("A", a_runs), ("B", b_runs))}
    docs = {side: [_metrics(d) for d in ds] for side, ds in dirs.items()}
    requests = {side: [metrics_file.read_request_values(d) for d in ds] for side, ds in dirs.items()}
    names = list(dict.fromkeys(k for side in ("A", "B") for m in docs[side] for k in m))  # every metric, never dropped
    looked = sequential.schedule(experiment)
    scored = tuple(r for r in rounds if experiment.scores(r, looked))
    values, samples, not_compared = [], [], []
    for name in names:
        missing = [(side, r) for side in ("A", "B") for r, m in zip(rounds, docs[side], strict=True) if name not in m]
        if missing and all(r not in scored for _, r in missing):  # a quality metric of the rounds not scored
            not_compared.append(NotCompared(
                name, meta.direction(name), f"scored on round {', '.join(map(str, scored)) or '(none)'} only "
                f"(--score {experiment.score.value}); --score every-round judges it", unscored=True))
            continue
        if missing:
            where = ", ".join(f"{side} round {r}" for side, r in missing)
            not_compared.append(NotCompared(name, meta.direction(name), f"missing in {where}"))
            continue
        a = tuple(m[name] for m in docs["A"])
        b = tuple(m[name] for m in docs["B"])
        values.append(RoundValues(name, rounds, a, b))
        if all(_number(v) for v in a + b):
            samples.append(round_samples(name, meta.direction(name), tuple(map(float, a)), tuple(map(float, b)),
                                         [r.get(name) for r in requests["A"]], [r.get(name) for r in requests["B"]]))
        else:
            bad = next(v for v in a + b if not _number(v))
            not_compared.append(NotCompared(name, meta.direction(name), f"a value is not a finite number ({bad!r})"))
    noisy: list[str] = []
    present: list[str] = []
    for side, ds in dirs.items():
        for r, d in zip(rounds, ds, strict=True):
            noisy += [f"{side} round {r}: {line}" for line in noisy_runs([d])]
            present += [f"{side} round {r}: {line}" for line in present_runs([d])]
    redone = [f"{a.side} round {a.round} ({a.run}) set aside, measured again: {a.error}" for a in experiment.attempts
              if a.status is AttemptStatus.NOISY and (upto is None or a.round <= upto)]
    alone = [f"{side} round {r} ({runs[r].run}) ran without its partner"
             for side, runs in (("A", a_runs), ("B", b_runs)) for r in rounds if runs[r].alone]
    first = sequential.primary(experiment, {s.metric: s.direction for s in samples})
    return Analysis(experiment.name, experiment.identity.design.value, rounds,
                    {s: tuple(f"{d.parent.name}/{d.name}" for d in ds) for s, ds in dirs.items()}, tuple(values),
                    verdict.judge(samples, verdict.Design.PAIRED, alpha=alpha, min_effect=min_effect, at=at,
                                  primary=first),
                    tuple(not_compared), tuple(alone), tuple(noisy), alpha if at is None else at(alpha), min_effect,
                    score=experiment.score.value, scored_rounds=scored,
                    quality=compare_runs(dirs["A"], dirs["B"], alpha if at is None else at(alpha)),
                    present=tuple(present), primary=first, redone=tuple(redone))


def judged(experiment: Experiment, results_root: Path, *, alpha: float = defaults.ALPHA,
           min_effect: float = defaults.MIN_EFFECT) -> Analysis:
    """The experiment's result: a fixed design's rounds at ``alpha`` and ``min_effect``; with
    --max-rounds, the stopping look's verdicts at that look's level and the experiment's own
    rule (the ones given are part of it, checked when it resumed), with what the looks found."""
    state, n = experiment.sequential, experiment.identity.max_rounds
    if state is None:
        return analyse(experiment, results_root, alpha=alpha, min_effect=min_effect)
    if state.stop is None:  # any other set of rounds, or level, would not be the rule's verdict
        raise NotEnoughRounds(f"A/B experiment {experiment.name!r} has not stopped: no look has decided it yet",
                              hint="repeat the A/B command to measure the rounds up to its next look")
    made = analyse(experiment, results_root, alpha=state.alpha, min_effect=state.min_effect, upto=state.rounds_run,
                   at=sequential.boundary_at(state, n, state.rounds_run))
    return replace(made, verdicts=sequential.with_hints(made.verdicts, state, n), looks=sequential.describe(state, n))


def rows(analysis: Analysis) -> list[list[str]]:
    """The console and Markdown table: metric, direction, A and B by round, change, interval, verdict."""
    by_name = {v.metric: v for v in analysis.values}
    out = []
    for v in analysis.verdicts:
        vals = by_name[v.metric]
        out.append([v.metric, v.direction, ", ".join(f"{x:.6g}" for x in vals.a), ", ".join(f"{x:.6g}" for x in vals.b),
                    verdict.change_text(v.change, v.relative), verdict.interval_text(v.low, v.high, v.relative, v.method),
                    f"{v.level:.3g}", v.verdict.value.upper() if v.verdict.value in ("better", "worse") else v.verdict.value])
    return out


HEADERS = ("metric", "better", "A by round", "B by round", "change", "interval", "held to", "verdict")


def explanations(analysis: Analysis) -> Sequence[str]:
    """One line per metric with a better side: why its verdict is what it is."""
    return [f"{v.metric}: {v.verdict.value}: {v.why}" for v in analysis.verdicts if v.direction != "context"]
