"""Two campaigns (A the base, B the candidate): the comparability guard, and per metric mean ± sd,
the difference, the percent change and a verdict from Welch's t-test together with a minimum
relative effect, so noise is not called a change."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import OmnibenchError
from . import telemetry_view
from .stats import welch
from .summary import RunSetStats

BETTER, WORSE, SAME = "better", "worse", "no significant change"
NOT_COMPARABLE = "not comparable"  # a side has no mean (a value that is not a finite number, or missing)


class NotComparable(OmnibenchError):
    """The two campaigns ran in different setups (target, GPU, driver, models, CPU set, options)."""


def setup_facts(stats: RunSetStats) -> dict[str, Any]:
    """What must match for two campaigns to be compared."""
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


def setup_differences(a: RunSetStats, b: RunSetStats) -> list[str]:
    """Each fact that differs, named with both values."""
    fa, fb = setup_facts(a), setup_facts(b)
    return [f"{k}: A {fa[k]!r}, B {fb[k]!r}" for k in fa if fa[k] != fb[k]]


@dataclass(frozen=True)
class MetricComparison:
    """One metric of A against B."""

    name: str
    direction: str
    a_mean: float | None  # None (and diff None) when the metric cannot be compared
    a_sd: float | None
    b_mean: float | None
    b_sd: float | None
    diff: float | None
    pct: float | None
    p: float | None
    verdict: str
    why: str


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

    def fail_on(self, verdict: str) -> list[str]:
        """What makes ``--fail-on VERDICT`` fail: each metric with that verdict, and each metric
        that could not be compared (it might hide that verdict; a CI gate must not pass it unseen)."""
        return [f"{m.name}: {m.verdict}" + (f" ({m.why})" if m.verdict == NOT_COMPARABLE else "")
                for m in self.metrics if m.verdict == verdict or (m.verdict == NOT_COMPARABLE and m.direction != "context")]

    def verdicts(self) -> Mapping[str, int]:
        """How many metrics got each verdict."""
        out: dict[str, int] = {}
        for m in self.metrics:
            out[m.verdict] = out.get(m.verdict, 0) + 1
        return out


def _verdict(direction: str, pct: float | None, p: float | None, alpha: float, min_effect: float, diff: float
             ) -> tuple[str, str]:
    if direction == "context":
        return "context", "no better side (runbook): read with the others"
    if diff == 0:
        return SAME, "identical means"
    if p is None:
        return SAME, "fewer than two runs a side"
    big = pct is None or abs(pct) >= min_effect
    if p >= alpha:
        return SAME, f"p = {p:.3g} >= {alpha:g}"
    if not big:
        return SAME, f"p = {p:.3g} but |change| {abs(pct or 0):.1%} < {min_effect:.0%} minimum effect"
    up = diff > 0
    return (BETTER if up == (direction == "higher") else WORSE), f"p = {p:.3g} < {alpha:g}, |change| >= {min_effect:.0%}"


SLOT_FACTS = ("CPU set", "pinned CPUs")  # a matrix measures on several slots, each with its CPU group


def compare(a: RunSetStats, b: RunSetStats, *, alpha: float = 0.05, min_effect: float = 0.05,
            force: bool = False, across_slots: bool = False) -> Comparison:
    """Compare B with A; refuses different setups unless ``force``. ``across_slots``: a difference
    of CPU set only (two slots of one host) is written into the comparison, not refused."""
    diffs = setup_differences(a, b)
    refused = [d for d in diffs if not (across_slots and d.split(":", 1)[0] in SLOT_FACTS)]
    if refused and not force:
        raise NotComparable("the two campaigns ran in different setups, so a difference may not be the code's",
                            evidence={"differences": "\n".join(refused)},
                            hint="compare campaigns of the same target, GPU, driver, models, CPU set and options, "
                                 "or pass --force (the differences are then written into the comparison)")
    rows = []
    for ma in a.metrics:
        mb = b.metric(ma.name)
        if mb is None or ma.mean is None or mb.mean is None:  # listed, never dropped in silence
            why = "B has no such metric" if mb is None else "; ".join(
                f"{side}: {m.problem or 'no mean'}" for side, m in (("A", ma), ("B", mb)) if m.mean is None)
            rows.append(MetricComparison(ma.name, ma.direction, ma.mean, ma.sd, mb.mean if mb else None,
                                         mb.sd if mb else None, None, None, None, NOT_COMPARABLE, why))
            continue
        diff = mb.mean - ma.mean
        pct = diff / abs(ma.mean) if ma.mean else None
        try:
            p = welch(ma.numbers, mb.numbers).p
        except ValueError:
            p = None
        verdict, why = _verdict(ma.direction, pct, p, alpha, min_effect, diff)
        rows.append(MetricComparison(ma.name, ma.direction, ma.mean, ma.sd, mb.mean, mb.sd, diff, pct, p, verdict, why))
    rows += [MetricComparison(m.name, m.direction, None, None, m.mean, m.sd, None, None, None, NOT_COMPARABLE,
                              "A has no such metric") for m in b.metrics if a.metric(m.name) is None]
    notes = _length_notes(rows, min_effect)
    notes += [f"{r.name} is not comparable: {r.why}" for r in rows if r.verdict == NOT_COMPARABLE]
    # The GPU said a side is not comparable as measured (throttled in a timed window, shared).
    for side, stats in (("A", a), ("B", b)):
        notes += [f"{side} GPU telemetry: {w}" for w in telemetry_view.view(stats.run_dirs).warnings]
    return Comparison(a.title, b.title, "Welch's two-sided t-test", alpha, min_effect, tuple(rows), tuple(diffs),
                      bool(diffs), tuple(notes))


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
