"""Typed records exchanged between plugins and the runner.

Plugins return these from their hooks; the plugin manager validates them; the runner consumes
them. They hold data and callables only: no record reaches back into the runner.

- :mod:`.run`      the records: workloads, options, targets, scorers, steps, slots, contexts, results
  (re-exported here: ``from omnibench_core.records import Workload``)
- :mod:`.options`  a workload's options: ``--opt`` strings checked against its ``Option`` schema
"""

from .run import (
    NAME_RE,
    OPTION_TYPES,
    PHASES,
    RUN_PHASES,
    SCORE_WORDS,
    UNSCORED,
    UNSCORED_NOTE,
    CiStage,
    Collected,
    Command,
    Endpoint,
    Option,
    OptionValue,
    Phase,
    RuleResult,
    RunCheck,
    RunContext,
    RunInfo,
    RunResult,
    ScorePolicy,
    Scorer,
    ScorerUse,
    ServeSpec,
    Slot,
    Step,
    StepAction,
    StepContext,
    Target,
    TargetEnv,
    TargetFacts,
    Workload,
    short_revision,
)

__all__ = [
    "CiStage",
    "Collected",
    "Command",
    "Endpoint",
    "NAME_RE",
    "OPTION_TYPES",
    "Option",
    "OptionValue",
    "PHASES",
    "Phase",
    "RUN_PHASES",
    "RuleResult",
    "RunCheck",
    "RunContext",
    "RunInfo",
    "RunResult",
    "SCORE_WORDS",
    "ScorePolicy",
    "Scorer",
    "ScorerUse",
    "ServeSpec",
    "Slot",
    "Step",
    "StepAction",
    "StepContext",
    "Target",
    "TargetEnv",
    "TargetFacts",
    "UNSCORED",
    "UNSCORED_NOTE",
    "Workload",
    "short_revision",
]
