"""Quality verdicts from samples paired across two sides (docs/verdicts.md, "Quality from paired
samples").

- correctness (Video-AMME accuracy): McNemar's exact test, a two-sided binomial test on the
  discordant pairs (b: right on A only, c: right on B only), and an interval for the difference
  in accuracy (c - b) / n from the discordant share's exact (Clopper-Pearson) interval;
- a per-sample score (seed-tts WER, SIM): the difference of the means over samples (for WER: of
  the corpus WER, errors over reference words, when the counts are known), its p from a paired
  sign-flip randomization test (exact under no change: each pair's sides exchangeable) and its
  interval from a paired bootstrap, resampling samples, never runs;
- the family of quality rows held to ``alpha`` with Holm's correction, as speed is; each row's
  interval at its own level; ``equivalent`` needs the interval inside plus or minus the row's
  margin (1 point of accuracy, 0.5 point of WER); an ``inconclusive`` row says about how many
  samples would resolve it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .verdict import Verdict, holm_levels

BOOTSTRAP = 2000  # resamples of the paired bootstrap
NEEDED_CAP = 1_000_000


@dataclass(frozen=True)
class McNemar:
    """Paired correctness: ``b`` right on A only, ``c`` right on B only, of ``n`` pairs."""

    n: int
    b: int
    c: int

    @property
    def discordant(self) -> int:
        """Pairs right on one side only."""
        return self.b + self.c

    @property
    def difference(self) -> float:
        """B's accuracy minus A's, as a fraction."""
        return (self.c - self.b) / self.n if self.n else 0.0

    def p(self) -> float:
        """McNemar's exact two-sided p: twice the smaller binomial tail of ``c`` in ``b + c`` at one
        half (capped at 1); 1 when no pair is discordant."""
        from scipy.special import bdtr  # lazily: scipy.stats cost every command ~0.5 s of CPU to start

        m = self.discordant
        if m == 0:
            return 1.0
        return float(min(1.0, 2 * bdtr(min(self.b, self.c), m, 0.5)))  # the binomial CDF

    def interval(self, level: float) -> tuple[float, float]:
        """A ``1 - level`` interval of the accuracy difference: the discordant pairs' share of B wins
        ``c / m`` in its exact interval [lo, hi], then ``(2 share - 1) m / n``."""
        from scipy.special import betaincinv  # the beta distribution's quantile (Clopper-Pearson)

        m = self.discordant
        if m == 0:
            return 0.0, 0.0
        lo = 0.0 if self.c == 0 else float(betaincinv(self.c, m - self.c + 1, level / 2))
        hi = 1.0 if self.c == m else float(betaincinv(self.c + 1, m - self.c, 1 - level / 2))
        return (2 * lo - 1) * m / self.n, (2 * hi - 1) * m / self.n


def mcnemar(a: Sequence[bool], b: Sequence[bool]) -> McNemar:
    """The discordant counts of two sides' correctness, sample by sample (same order)."""
    if len(a) != len(b):
        raise ValueError(f"{len(a)} and {len(b)} samples are not paired")
    return McNemar(len(a), sum(1 for x, y in zip(a, b, strict=True) if x and not y),
                   sum(1 for x, y in zip(a, b, strict=True) if y and not x))


@dataclass(frozen=True)
class Bootstrap:
    """A paired comparison of a mean (or a ratio of sums) over samples: the estimate B - A, the
    bootstrap's resampled differences (sorted, for the interval) and the sign-flip test's p."""

    n: int
    estimate: float
    draws: tuple[float, ...]
    sd: float
    p_value: float = 1.0

    def p(self) -> float:
        """The two-sided p of no change (the paired sign-flip randomization test)."""
        return self.p_value

    def interval(self, level: float) -> tuple[float, float]:
        """The percentile interval at ``1 - level``."""
        if not self.draws:
            return self.estimate, self.estimate
        k = len(self.draws)
        lo = self.draws[max(0, min(k - 1, int(math.floor(level / 2 * k))))]
        hi = self.draws[max(0, min(k - 1, int(math.ceil((1 - level / 2) * k)) - 1))]
        return lo, hi


def paired_bootstrap(a: Sequence[float], b: Sequence[float], weights: Sequence[float] | None = None,
                     *, draws: int = BOOTSTRAP, seed: int = 0) -> Bootstrap:
    """B - A of the (weighted) mean over paired samples, resampling samples with replacement.
    With ``weights`` (a sample's reference words) the mean is the corpus rate: sum(w x) / sum(w),
    so a sample's WER counts by its words, as corpus WER does."""
    n = len(a)
    if n != len(b):
        raise ValueError(f"{n} and {len(b)} samples are not paired")
    w = np.asarray(weights if weights is not None else [1.0] * n, dtype=float)
    if n == 0 or w.sum() <= 0:
        return Bootstrap(n, 0.0, (), 0.0)
    d = np.asarray(b, dtype=float) - np.asarray(a, dtype=float)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, n, size=(draws, n))
    weight = w[idx].sum(axis=1)
    out = np.sort(np.where(weight > 0, (w[idx] * d[idx]).sum(axis=1) / np.where(weight > 0, weight, 1), 0.0))
    estimate = float((w * d).sum() / w.sum())
    # The p: under no change each pair's two sides are exchangeable, so each difference's sign is a
    # coin toss; the percentile bootstrap's own p runs above its level at tens of samples (8 % of
    # A/As at 40 utterances in tests/test_paired_quality.py), the randomization test does not.
    terms = w * d / w.sum()
    observed = abs(float(terms.sum()))
    if observed == 0:
        return Bootstrap(n, 0.0, tuple(map(float, out)), float(out.std(ddof=1)) if draws > 1 else 0.0, 1.0)
    signs = rng.choice((-1.0, 1.0), size=(draws, n))
    beyond = int((np.abs((signs * terms).sum(axis=1)) >= observed - 1e-12).sum())
    return Bootstrap(n, estimate, tuple(map(float, out)), float(out.std(ddof=1)) if draws > 1 else 0.0,
                     (beyond + 1) / (draws + 1))


@dataclass(frozen=True)
class QualityVerdict:
    """One quality row: B - A (a fraction of accuracy, or a WER/SIM difference), its interval at
    ``1 - level``, the verdict, why, and about how many samples would resolve an inconclusive one."""

    metric: str
    direction: str  # higher or lower
    method: str
    n: int
    change: float
    low: float
    high: float
    p: float
    level: float
    margin: float
    verdict: Verdict
    why: str
    needed: int | None = None
    counts: str = ""  # McNemar's b and c, in words


@dataclass(frozen=True)
class QualityTest:
    """A row before its level is chosen: the metric, its direction and margin, and the test."""

    metric: str
    direction: str
    margin: float
    test: McNemar | Bootstrap


def _needed(test: McNemar | Bootstrap, level: float, margin: float) -> int | None:
    """About how many samples the interval needs to shrink inside the margin or past 0, at the
    current spread per sample (half-width scales as 1 / sqrt(n))."""
    lo, hi = test.interval(level)
    half = (hi - lo) / 2
    if test.n == 0 or half <= 0:
        return None
    change = (lo + hi) / 2
    target = max(abs(change), margin - abs(change)) if abs(change) < margin else abs(change)
    if target <= 0:
        return None
    need = math.ceil(test.n * (half / target) ** 2)
    return min(NEEDED_CAP, max(need, test.n + 1))


def decide(row: QualityTest, level: float) -> QualityVerdict:
    """The row's verdict at ``level``: worse or better when the interval excludes 0 (by the test's
    p), equivalent when it lies inside plus or minus the margin, else inconclusive."""
    test = row.test
    lo, hi = test.interval(level)
    p = test.p()
    change = test.difference if isinstance(test, McNemar) else test.estimate
    counts = (f"McNemar: {test.b} right on A only, {test.c} right on B only, of {test.n}"
              if isinstance(test, McNemar) else "")
    method = "McNemar exact" if isinstance(test, McNemar) else f"paired bootstrap over {test.n} samples"
    needed = None
    if p < level and (lo > 0 or hi < 0 or isinstance(test, McNemar)):
        good = (change > 0) == (row.direction == "higher")
        verdict = Verdict.BETTER if good else Verdict.WORSE
        why = f"p {p:.3g} < {level:.3g}: the interval {lo:+.4g} .. {hi:+.4g} excludes 0"
    elif -row.margin <= lo and hi <= row.margin:
        verdict = Verdict.EQUIVALENT
        why = f"the interval {lo:+.4g} .. {hi:+.4g} lies inside the margin +-{row.margin:g}"
    else:
        verdict = Verdict.INCONCLUSIVE
        needed = _needed(test, level, row.margin)
        why = (f"p {p:.3g} >= {level:.3g} and the interval {lo:+.4g} .. {hi:+.4g} is not inside +-{row.margin:g}"
               + (f"; about {needed} samples would resolve it" if needed else ""))
    return QualityVerdict(row.metric, row.direction, method, test.n, change, lo, hi, p, level, row.margin, verdict,
                          why, needed, counts)


def judge(rows: Sequence[QualityTest], alpha: float = 0.05) -> tuple[QualityVerdict, ...]:
    """Every row's verdict, the family held to ``alpha`` by Holm's step-down correction."""
    levels = holm_levels([r.test.p() for r in rows], alpha)
    return tuple(decide(r, level) for r, level in zip(rows, levels, strict=True))
