"""The built-in scorers and run-wide checks, registered through the ``omnibench`` entry point
``scorers`` like any third-party plugin.

- ``asr-wer`` (scorer): WER of a workload's speech through an ASR server, on one ASR server start
  shared by every workload of the run (equal server specs share a start). Parameters: those of
  :class:`~omnibench_core.scoring.asr_wer.WerJob`, plus ``step`` (the step's name, default
  ``wer``) and ``lang``; it reads the workload option ``asr_concurrency`` when there is one.
- ``audio`` (check): every WAV of the run (``<run>/*/audio/*.wav``, and an upstream sweep's
  ``<run>/*/c*_r*/audio/*.wav``) exists, is readable and is neither empty nor NaN; contributes
  ``audio.files``, ``audio.empty_or_nan`` and the rates.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

from ..hooks.specs import hookimpl
from ..records import Collected, Command, RuleResult, RunCheck, RunContext, Scorer, ServeSpec, Step
from ..records.options import format_value
from ..scoring.asr_wer import WerJob
from ..scoring.audio_check import run_audio_summary

ASR_MODEL = "Qwen/Qwen3-ASR-1.7B"  # the runbook's ASR model for every WER
# One spec for every WER step: equal specs share one ASR server start in a run.
ASR_SERVER = ServeSpec("asr", model_path=ASR_MODEL, model_name=ASR_MODEL)


def plan_asr_wer(ctx: RunContext) -> list[Step]:
    """One WER step for ``ctx.workload`` on the shared ASR server."""
    job = WerJob.from_params(ctx.params)
    argv = [sys.executable, "-m", "omnibench_core.scoring.asr_wer", "--output-dir", str(ctx.workload_dir),
            "--port", str(ctx.port), "--asr-model", ASR_MODEL, "--asr-label", ctx.target.facts.substitute("asr"),
            "--lang", str(ctx.params.get("lang", "en")),
            "--asr-concurrency", format_value(ctx.options.get("asr_concurrency", 4)), *job.argv()]
    return [Step(str(ctx.params.get("step", "wer")), Command(tuple(argv)), phase="score", server=ASR_SERVER,
                 outputs=(f"{ctx.workload}/{job.output}",))]


def collect_audio(run_dir: Path) -> Collected:
    """The run-wide audio figures and rules."""
    metrics, rates, rules = run_audio_summary(run_dir)
    return Collected(metrics, frozenset(rates), tuple(RuleResult(*r) for r in rules))


@hookimpl
def omnibench_scorers() -> Iterator[Scorer]:
    """The ASR WER scorer."""
    yield Scorer("asr-wer", "WER of the workload's speech through an ASR server (one start per run)", plan_asr_wer)


@hookimpl
def omnibench_run_checks() -> Iterator[RunCheck]:
    """The run-wide audio check."""
    yield RunCheck("audio", "every WAV of the run readable, not empty, not NaN; audio.files and rates",
                   collect_audio)
