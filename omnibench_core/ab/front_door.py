"""What ``invoke ab`` calls: the slots and design of an experiment, measuring and judging it, and
the text it prints (the package's face; ``__init__`` stays empty so importing one module of the
layer does not import them all)."""


from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..errors import SettingsError
from ..quality.paired import HEADERS as QUALITY_HEADERS
from ..quality.paired import deciding
from ..quality.paired import lines as quality_lines
from ..quality.paired import rows as quality_rows
from ..registry import manager as plugin_manager
from ..scale.slots import HostSlot, host_slots
from ..settings import Settings
from ..stats.verdict import Verdict
from ..tables import table
from .analysis import HEADERS, Analysis, judged, rows
from .execute import Request, experiment_lock, request_from, run_ab
from .record import Design, Experiment, StopReason
from .writing import write_result

__all__ = ["DESIGN_WORDS", "Done", "Request", "ab", "ab_text", "design_for", "failing", "request_from", "slots_for"]
DESIGN_WORDS = ("auto", *(d.value for d in Design))


@dataclass(frozen=True)
class Done:
    """An A/B experiment measured and judged."""

    record: Path
    experiment: Experiment
    analysis: Analysis
    markdown: Path
    json: Path
    summary: Path | None = None  # the pull-request summary beside ab.md


def slots_for(settings: Settings, design: str, slots: str, slot_per: str, slot_cpus: str,
              progress: Callable[[str], None] = print) -> list[HostSlot]:
    """The slots an experiment runs on: none given, the settings' own port, GPUs and CPUs; else
    this host's slots from ``--slots`` (two for a duet)."""
    if design not in DESIGN_WORDS:
        raise SettingsError(f"unknown --design {design!r}", hint=f"use {', '.join(DESIGN_WORDS)}")
    if not slots:
        if design == Design.DUET.value:
            raise SettingsError("the duet design needs two slots, and --slots names none",
                                hint="pass --slots with two ids (GPUs on sglang-omni; any two ids on local, e.g. "
                                     "--slots 0,1), or --design interleaved on one slot")
        return []
    planned = host_slots(settings, slots, slot_per, slot_cpus, progress)
    if design == Design.DUET.value and len(planned) < 2:
        raise SettingsError(f"the duet design needs two slots; --slots {slots} makes {len(planned)}",
                            hint="name two GPUs (or two pairs with --slot-per pair), or --design interleaved")
    if len(planned) > 2:
        raise SettingsError(f"an A/B runs on at most two slots; --slots {slots} makes {len(planned)}",
                            hint="name two slots")
    return planned


def design_for(design: str, slots: list[HostSlot]) -> str:
    """``auto``: a duet when two slots are given, else interleaved."""
    if design == "auto":
        return Design.DUET.value if len(slots) == 2 else Design.INTERLEAVED.value
    return design


def ab(settings: Settings, request: Request, *, alpha: float, min_effect: float, slots: list[HostSlot] | None = None,
       progress: Callable[[str], None] = print) -> Done:
    """Measure (or resume) the experiment, then judge and publish it. With --max-rounds the
    verdicts are the stopping look's, by the experiment's own rule (``alpha`` and ``min_effect``
    are the rule's: a resumed experiment refused another)."""
    slots = slots or []
    if request.identity.design is not Design.DUET and slots:
        settings = slots[0].settings_on(settings.flat())  # one slot: every run on it
    if slots and request.identity.design is not Design.DUET:
        progress(f"note: the {request.identity.design.value} design runs on one slot: {slots[0].label}")
    with experiment_lock(settings.run.results_root, request.experiment_name):
        path, experiment = run_ab(settings, request, slots=slots if request.identity.design is Design.DUET else (),
                                  progress=progress)
        analysis = judged(experiment, settings.run.results_root, alpha=alpha, min_effect=min_effect)
        md, summary, js = write_result(experiment, analysis, path)
    # after its result, as a campaign after its report: the history indexes the sides that measured a commit
    plugin_manager.load()[0].experiment_done(settings, path, progress)
    return Done(path, experiment, analysis, md, js, summary)


def failing(done: Done, verdict: str) -> list[str]:
    """What makes ``--fail-on VERDICT`` fail: each metric with that verdict, and each metric that
    could not be compared (it might hide that verdict; a CI gate must not pass it unseen), except
    the quality metrics ``--score`` left unscored on purpose (ab.md says which runs were scored)."""
    quality = done.analysis.quality.verdicts if done.analysis.quality else ()
    return [f"{v.metric}: {v.verdict.value}" for v in done.analysis.verdicts if v.verdict.value == verdict] + \
        [f"{q.metric} (paired samples): {q.verdict.value}" for q in quality if q.verdict.value == verdict] + \
        [f"not compared: {n.describe()}" for n in done.analysis.not_compared
         if n.direction != "context" and not n.unscored]  # left unscored by --score: said in the report


def ab_text(done: Done) -> str:
    """What ``invoke ab`` prints."""
    a = done.analysis
    lines = [f"A/B {a.name}: {a.design}, rounds {', '.join(map(str, a.rounds))}; A runs {', '.join(a.runs['A'])}; "
             f"B runs {', '.join(a.runs['B'])}",
             table(rows(a), HEADERS)]
    if a.quality is not None and (a.quality.changed or a.quality.verdicts):  # what the model said, by sample
        lines += [f"outputs: {line}" for line in quality_lines(a.quality)]
        if a.quality.verdicts:
            lines.append(table(quality_rows(a.quality), QUALITY_HEADERS))
            lines += deciding(a.quality, {v.metric: str(v.verdict) for v in a.verdicts})
    lines += list(a.looks)
    lines.append(a.scored_text())
    state = done.experiment.sequential
    if state is not None and state.stop is StopReason.MAX_ROUNDS:  # why each undecided one is so, and what to do
        lines += [f"inconclusive {v.metric}: {v.why}" for v in a.verdicts
                  if v.metric in state.decisive and v.verdict is Verdict.INCONCLUSIVE]
    lines += [f"note: {n.describe()}" for n in a.not_compared]
    lines += [f"ALONE: {n}" for n in a.alone]
    lines += [f"NOISY: {n}" for n in a.noisy]
    lines += [f"REDONE: {n}" for n in a.redone]
    lines.append("verdicts: " + ", ".join(f"{k} {v}" for k, v in a.counts().items()))
    lines += [f"result: {done.markdown}", f"result data: {done.json}", f"record: {done.record}"]
    lines += [f"pull-request summary: {done.summary}"] if done.summary else []
    return "\n".join(lines)
