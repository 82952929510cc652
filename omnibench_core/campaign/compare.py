"""Two campaigns (A the base, B the candidate): the comparability guard, and per metric mean ± sd,
the difference, the change with its interval and one of the four verdicts of :mod:`.verdict`
(unpaired: Welch's t interval of B - A, the family held to alpha with Holm's correction), so
noise is not called a change and a wide interval reads ``inconclusive``."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .. import defaults
from ..errors import OmnibenchError
from ..quality.paired import QualityReport, compare_runs
from ..run.collection import SERVER_READY
from ..stats.verdict import CORRECTION, VERDICTS, Design, MetricVerdict, Samples, Verdict, judge
from . import telemetry_view
from .summary import RunSetStats

__all__ = ["BETTER", "EQUIVALENT", "INCONCLUSIVE", "NOT_COMPARABLE", "VERDICTS", "WORSE", "Comparison",
           "MetricComparison", "NotComparable", "SetupDifference", "compare"]

BETTER, WORSE, EQUIVALENT, INCONCLUSIVE = Verdict.BETTER, Verdict.WORSE, Verdict.EQUIVALENT, Verdict.INCONCLUSIVE
NOT_COMPARABLE = "not comparable"  # a side has no mean (a value that is not a finite number, or missing)
TEST = "Welch's t interval of B - A, as a fraction of A's mean"


class NotComparable(OmnibenchError):
    """The two campaigns ran in different setups (target, GPU, driver, models, CPU set, options)."""


# The facts that say where on a host a campaign ran (its slot's CPU group), not what it measured:
# a matrix measures on several slots, so ``across_slots`` notes them rather than refusing.
SLOT_FACTS = ("CPU set", "pinned CPUs")


@dataclass(frozen=True)
class SetupDifference:
    """One setup fact whose values differ between A and B."""

    fact: str
    a: Any
    b: Any

    @property
    def of_slot(self) -> bool:
        """A difference of the slot only (:data:`SLOT_FACTS`)."""
        return self.fact in SLOT_FACTS

    def text(self) -> str:
        """``fact: A ..., B ...``, as the comparison names it; for two mappings (the workload
        options) only the keys that differ: ``workload options: seedtts.max_samples A 4, B 3``."""
        if isinstance(self.a, Mapping) and isinstance(self.b, Mapping):
            return f"{self.fact}: " + "; ".join(f"{key} A {a}, B {b}" for key, a, b in _leaf_differences(self.a, self.b))
        return f"{self.fact}: A {self.a!r}, B {self.b!r}"


def _leaf_differences(a: Mapping[str, Any], b: Mapping[str, Any], prefix: str = "") -> list[tuple[str, str, str]]:
    """(dotted key, A's value, B's value) for each leaf that differs; a key one side lacks is
    ``(unset)`` there."""
    out: list[tuple[str, str, str]] = []
    for key in sorted(set(a) | set(b), key=str):
        va, vb = a.get(key, _UNSET), b.get(key, _UNSET)
        if va == vb:
            continue
        if isinstance(va, Mapping) and isinstance(vb, Mapping):
            out += _leaf_differences(va, vb, f"{prefix}{key}.")
        else:
            out.append((f"{prefix}{key}", "(unset)" if va is _UNSET else repr(va), "(unset)" if vb is _UNSET else repr(vb)))
    return out


_UNSET = object()


def setup_facts(stats: RunSetStats) -> dict[str, Any]:
    """What must match for two campaigns to be compared: the measurement's identity but for the
    code under test (its revision, and a planted delay that stands for one), and the environment."""
    env, ident = stats.environment, stats.identity
    gpus, used = env.get("gpus"), [str(g) for g in env.get("slot_gpus") or []]
    if isinstance(gpus, list):
        gpus = [g for g in gpus if isinstance(g, dict) and (not used or str(g.get("index")) in used)]
        models = sorted({str(g.get("name")) for g in gpus})
        drivers = sorted({str(g.get("driver_version")) for g in gpus})
    else:
        models, drivers = [str(gpus)], []
    return {"target": ident.get("target"), "workloads": ident.get("workloads"), "workload options": ident.get("options"),
            "GPU model": models, "GPU driver": drivers, "model revisions": env.get("model_revisions"),
            "CPU set": env.get("cpu_set"), "pinned CPUs": ident.get("cpus")}


def setup_differences(a: RunSetStats, b: RunSetStats) -> list[SetupDifference]:
    """Each fact that differs, with both values."""
    fa, fb = setup_facts(a), setup_facts(b)
    return [SetupDifference(k, fa[k], fb[k]) for k in fa if fa[k] != fb[k]]


@dataclass(frozen=True)
class MetricComparison:
    """One metric of A against B."""

    name: str
    direction: str
    a_mean: float | None  # None (and diff None) when the metric cannot be compared
    a_sd: float | None
    b_mean: float | None
    b_sd: float | None
    diff: float | None  # None (and a mean None) when the metric cannot be compared
    pct: float | None  # (B - A) / |A|, the verdict's change; None when A's mean is 0
    p: float | None
    verdict: Verdict | str  # a Verdict, or NOT_COMPARABLE
    why: str
    low: float | None = None  # the change's interval at 1 - level (fractions of A, or B - A if not relative)
    high: float | None = None
    relative: bool = True
    level: float = defaults.ALPHA  # the alpha this row was held to (Holm)
    method: str = ""
    needed: int | None = None  # inconclusive: about this many runs a side would resolve it
    in_family: bool = False  # counted in the family held to alpha
    unscored: bool = False  # not comparable because --score scored it on one run a side: not a gap
    thin: bool = False  # not comparable because a side's runs had too few samples for this percentile: not a gap


@dataclass(frozen=True)
class Comparison:
    """The whole comparison."""

    a: str
    b: str
    test: str
    alpha: float
    min_effect: float
    metrics: tuple[MetricComparison, ...]
    differences: tuple[str, ...]
    forced: bool
    notes: tuple[str, ...]
    correction: str = CORRECTION
    # the runs' outputs matched by sample id: outputs changed, and the quality verdicts of the pairs
    quality: QualityReport | None = None

    def fail_on(self, verdict: str) -> list[str]:
        """What makes ``--fail-on VERDICT`` fail: each metric with that verdict, and each metric
        that could not be compared (it might hide that verdict; a CI gate must not pass it unseen),
        except a quality metric ``--score`` scored on one run a side on purpose and a percentile too
        few samples support (the report says so of each)."""
        return [f"{m.name}: {m.verdict}" + (f" ({m.why})" if m.verdict == NOT_COMPARABLE else "")
                for m in self.metrics if m.verdict == verdict
                or (m.verdict == NOT_COMPARABLE and m.direction != "context" and not m.unscored and not m.thin)] + \
            [f"{q.metric} (paired samples): {q.verdict.value}" for q in (self.quality.verdicts if self.quality else ())
             if q.verdict.value == verdict]

    def verdicts(self) -> Mapping[str, int]:
        """How many metrics got each verdict."""
        out: dict[str, int] = {}
        for word in [str(m.verdict) for m in self.metrics] + [q.verdict.value for q in
                                                             (self.quality.verdicts if self.quality else ())]:
            out[word] = out.get(word, 0) + 1
        return out


def compare(a: RunSetStats, b: RunSetStats, *, alpha: float = defaults.ALPHA, min_effect: float = defaults.MIN_EFFECT,
            force: bool = False, across_slots: bool = False, metrics: Sequence[str] | None = None) -> Comparison:
    """Compare B with A; refuses different setups unless ``force``. ``across_slots``: a difference
    of CPU set only (two slots of one host) is written into the comparison, not refused.
    ``metrics``: compare only these (bisect asks about one), so the family is what is asked about."""
    found = setup_differences(a, b)
    diffs = [d.text() for d in found]
    refused = [d.text() for d in found if not (across_slots and d.of_slot)]
    if refused and not force:
        raise NotComparable("the two campaigns ran in different setups, so a difference may not be the code's",
                            evidence={"differences": "\n".join(refused)},
                            hint="compare campaigns of the same target, GPU, driver, models, CPU set and options, "
                                 "or pass --force (the differences are then written into the comparison)")
    asked = [m for m in a.metrics if metrics is None or m.name in metrics]
    pairs = [(ma, mb) for ma in asked if (mb := b.metric(ma.name)) is not None
             and ma.mean is not None and mb.mean is not None]
    judged = judge([Samples(ma.name, ma.direction, tuple(ma.numbers), tuple(mb.numbers)) for ma, mb in pairs],
                   Design.UNPAIRED, alpha=alpha, min_effect=min_effect)
    judged = tuple(_start_on_a_busy_host(v, a, b) for v in judged)
    by_name = {ma.name: MetricComparison(ma.name, ma.direction, ma.mean, ma.sd, mb.mean, mb.sd,
                                         (mb.mean or 0.0) - (ma.mean or 0.0), v.change if v.relative else None, v.p,
                                         v.verdict, v.why, v.low, v.high, v.relative, v.level, v.method, v.needed,
                                         v.in_family)
               for (ma, mb), v in zip(pairs, judged, strict=True)}
    rows = []
    for ma in asked:  # in A's order; a metric that cannot be compared is listed, never dropped in silence
        if ma.name in by_name:
            rows.append(by_name[ma.name])
            continue
        mb = b.metric(ma.name)
        why = "B has no such metric" if mb is None else "; ".join(
            f"{side}: {m.problem or 'no mean'}" for side, m in (("A", ma), ("B", mb)) if m.mean is None)
        rows.append(MetricComparison(ma.name, ma.direction, ma.mean, ma.sd, mb.mean if mb else None,
                                     mb.sd if mb else None, None, None, None, NOT_COMPARABLE, why,
                                     unscored=ma.unscored or (mb is not None and mb.unscored),
                                     thin=ma.thin or (mb is not None and mb.thin)))
    rows += [MetricComparison(m.name, m.direction, None, None, m.mean, m.sd, None, None, None, NOT_COMPARABLE,
                              "A has no such metric") for m in b.metrics
             if a.metric(m.name) is None and (metrics is None or m.name in metrics)]
    notes = _length_notes(rows, min_effect)
    notes += [f"{r.name} is not comparable: {r.why}" for r in rows if r.verdict == NOT_COMPARABLE]
    # The GPU said a side is not comparable as measured (throttled in a timed window, shared).
    for side, stats in (("A", a), ("B", b)):
        notes += [f"{side} GPU telemetry: {w}" for w in telemetry_view.view(stats.run_dirs).warnings]
        # Another process took the slot's CPUs during a timed window: a verdict may be the host's.
        notes += [f"{side} {n}" for n in stats.noisy]
    quality = compare_runs(a.run_dirs, b.run_dirs, alpha, metrics)  # bisect asks of one metric: a family of one
    return Comparison(a.title, b.title, TEST, alpha, min_effect, tuple(rows), tuple(diffs),
                      bool(diffs), tuple(notes), quality=quality)


def _start_on_a_busy_host(v: MetricVerdict, a: RunSetStats, b: RunSetStats) -> MetricVerdict:
    """A server's start time better or worse between two campaigns whose runs the noise guard
    found disturbed is the host's as likely as the code's: no timed window guards a start (it is
    spawn to READY, mostly imports and loading, CPU- and disk-bound), and two campaigns are
    measured at different times, so load that came or went between them moves it (an A/A pair
    on a busy host once read -28 %). Inconclusive then, saying why; ``ab``'s paired rounds and a
    quiet host judge it."""
    if not v.metric.endswith(f".{SERVER_READY}") or v.verdict not in (Verdict.BETTER, Verdict.WORSE) \
            or not (a.noisy or b.noisy):
        return v
    return dataclasses.replace(v, verdict=Verdict.INCONCLUSIVE, needed=None, why=(
        f"{v.why}; but the noise guard found the host busy in {len(a.noisy)} of A's and {len(b.noisy)} of B's "
        "timed windows, and a server's start is measured outside any window: this difference may be the host's "
        "(measure on a quiet host, or with invoke ab's paired rounds)"))


def _length_notes(rows: list[MetricComparison], min_effect: float) -> list[str]:
    """Where throughput moved with output length, say so (runbook: seed-tts output length varies)."""
    by = {r.name: r for r in rows}
    notes = []
    for wl in ("seedtts", "videoamme"):
        qps, tokens = by.get(f"{wl}.throughput_qps"), by.get(f"{wl}.completion_tokens_sum")
        length = tokens or by.get(f"{wl}.audio_duration_mean_s")
        if qps and length and qps.pct is not None and length.pct is not None and qps.verdict in (BETTER, WORSE) \
                and abs(length.pct) >= min_effect / 2 and (qps.pct > 0) != (length.pct > 0):
            notes.append(f"{wl}.throughput_qps moved {qps.pct:+.1%} while {length.name} moved {length.pct:+.1%}: "
                         "throughput moved with output length; read it as such before blaming the code")
    return notes
