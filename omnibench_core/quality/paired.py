"""Two sides' outputs matched by sample id: how many changed between the sides, how often a side
changes them between its own runs, and the quality verdicts of the paired samples.

Repeated runs of a side (rounds) are combined per sample, never counted as more samples: a
sample's answer is the one most of its runs gave, right when most runs were right, and its WER
and SIM the mean over its runs. Only samples every run of both sides answered are compared.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from .. import defaults
from ..stats.paired_quality import QualityTest, QualityVerdict, judge, mcnemar, paired_bootstrap
from .outputs import SEEDTTS, VIDEOAMME, SampleOutput, read_outputs

# equivalence margins: 1 point of accuracy, 0.5 point of WER, 0.01 of speaker similarity
MARGINS = {"videoamme.accuracy": 0.01, "seedtts.wer": 0.005, "seedtts.sim": 0.01}
OUTPUT_WORD = {VIDEOAMME: "answers", SEEDTTS: "transcripts"}


@dataclass(frozen=True)
class Combined:
    """A sample's output on one side over its runs."""

    text: str
    correct: bool | None
    wer: float | None
    words: int | None
    sim: float | None


@dataclass(frozen=True)
class OutputsChanged:
    """One workload's matched samples: how many outputs differ between the sides, and within each
    side between its own runs (None: a side with one run cannot say)."""

    workload: str
    matched: int
    changed: int
    within: Mapping[str, tuple[int, int] | None]  # side -> (samples whose runs disagree, runs)

    def describe(self) -> str:
        """One line: ``videoamme: 58 of 200 answers changed between A and B (29.0 %); A ...``."""
        word = OUTPUT_WORD.get(self.workload, "outputs")
        share = f" ({self.changed / self.matched:.1%})" if self.matched else ""
        parts = [f"{self.workload}: {self.changed} of {self.matched} {word} changed between A and B{share}"]
        for side, w in self.within.items():
            if w is None:
                parts.append(f"{side}: one run, its own nondeterminism unknown")
            elif w[0] == 0:
                parts.append(f"{side} deterministic (0 of {self.matched} changed over its {w[1]} runs)")
            else:
                parts.append(f"{side} NOT deterministic: {w[0]} of {self.matched} ({w[0] / self.matched:.1%}) changed "
                             f"between its own {w[1]} runs")
        return "; ".join(parts)


@dataclass(frozen=True)
class QualityReport:
    """Outputs changed per workload and the quality verdicts, the family held to ``alpha``."""

    changed: tuple[OutputsChanged, ...]
    verdicts: tuple[QualityVerdict, ...]
    alpha: float


def combine(outputs: Sequence[SampleOutput]) -> Combined:
    """A sample's runs as one: the most common text, right by majority, mean WER and SIM."""
    text = Counter(o.text for o in outputs).most_common(1)[0][0]
    rights = [o.correct for o in outputs if o.correct is not None]
    wers = [o.wer for o in outputs if o.wer is not None]
    sims = [o.sim for o in outputs if o.sim is not None]
    words = next((o.words for o in outputs if o.words is not None), None)
    return Combined(text, sum(rights) * 2 > len(rights) if rights else None,
                    statistics.fmean(wers) if wers else None, words, statistics.fmean(sims) if sims else None)


def _tests(workload: str, ids: Sequence[str], a: Mapping[str, Combined], b: Mapping[str, Combined]) -> list[QualityTest]:
    tests = []
    if workload == VIDEOAMME and all(a[i].correct is not None and b[i].correct is not None for i in ids):
        test = mcnemar([bool(a[i].correct) for i in ids], [bool(b[i].correct) for i in ids])
        tests.append(QualityTest("videoamme.accuracy", "higher", MARGINS["videoamme.accuracy"], test))
    if workload == SEEDTTS:
        with_wer = [i for i in ids if a[i].wer is not None and b[i].wer is not None]
        if with_wer:
            weights = ([float(a[i].words or 0) for i in with_wer]
                       if all(a[i].words for i in with_wer) else None)  # corpus WER when the words are known
            tests.append(QualityTest("seedtts.wer", "lower", MARGINS["seedtts.wer"], paired_bootstrap(
                [float(a[i].wer or 0) for i in with_wer], [float(b[i].wer or 0) for i in with_wer], weights)))
        with_sim = [i for i in ids if a[i].sim is not None and b[i].sim is not None]
        if with_sim:
            tests.append(QualityTest("seedtts.sim", "higher", MARGINS["seedtts.sim"], paired_bootstrap(
                [float(a[i].sim or 0) for i in with_sim], [float(b[i].sim or 0) for i in with_sim])))
    return tests


def compare_runs(a_runs: Sequence[Path], b_runs: Sequence[Path], alpha: float = defaults.ALPHA,
                 metrics: Sequence[str] | None = None) -> QualityReport:
    """Each side's runs (run folders) compared sample by sample: outputs changed and the verdicts
    (of ``metrics`` only when given: bisect asks of one metric, so the family is that one)."""
    sides = {"A": [read_outputs(d) for d in a_runs], "B": [read_outputs(d) for d in b_runs]}
    workloads = [w for w in (VIDEOAMME, SEEDTTS) if any(w in r for runs in sides.values() for r in runs)]
    changed, tests = [], []
    for w in workloads:
        per_side = {s: [r[w] for r in runs if w in r] for s, runs in sides.items()}
        if not all(per_side.values()):
            continue
        ids = sorted(set.intersection(*(set(r) for runs in per_side.values() for r in runs)))
        if not ids:
            continue
        combined = {s: {i: combine([r[i] for r in runs]) for i in ids} for s, runs in per_side.items()}
        within = {s: (sum(1 for i in ids if len({r[i].text for r in runs}) > 1), len(runs)) if len(runs) > 1 else None
                  for s, runs in per_side.items()}
        changed.append(OutputsChanged(w, len(ids), sum(1 for i in ids if combined["A"][i].text != combined["B"][i].text),
                                      within))
        tests += [t for t in _tests(w, ids, combined["A"], combined["B"]) if metrics is None or t.metric in metrics]
    return QualityReport(tuple(changed), judge(tests, alpha), alpha)


HEADERS = ("quality metric", "better", "samples", "change (B - A)", "interval", "held to", "verdict", "evidence")


def rows(report: QualityReport) -> list[list[str]]:
    """The quality table beside the speed table: one row per metric."""
    return [[v.metric, v.direction, str(v.n), f"{v.change:+.4g}", f"{v.low:+.4g} .. {v.high:+.4g}", f"{v.level:.3g}",
             v.verdict.value.upper() if v.verdict.value in ("better", "worse") else v.verdict.value,
             v.counts or v.method] for v in report.verdicts]


def lines(report: QualityReport) -> list[str]:
    """Outputs changed, then why each quality verdict is what it is."""
    return ([c.describe() for c in report.changed]
            + [f"{v.metric}: {v.verdict.value}: {v.why}" + (f" ({v.counts})" if v.counts else "")
               for v in report.verdicts])


def deciding(report: QualityReport, others: Mapping[str, str]) -> list[str]:
    """Where a metric has both a row over runs or rounds (``others``: metric -> its verdict word)
    and a verdict of its paired samples that differ, which one to read: the samples', since a
    deterministic answer set gives every run the same value and two runs a side can tell nothing
    of it (``inconclusive [-28.8 %, -28.8 %]``) where hundreds of paired samples can."""
    out = []
    for v in report.verdicts:
        word = others.get(v.metric)
        if word is not None and word != v.verdict.value:
            out.append(f"{v.metric}: the runs' row says {word}; its paired samples decide it: {v.verdict.value}"
                       + (f" ({v.counts})" if v.counts else ""))
    return out
