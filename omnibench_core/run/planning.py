"""Orders a run's steps the way the runbook does.

1. For each workload in turn: its generate steps, each server spec on a fresh server.
2. Scoring steps that need a server, grouped by equal spec across workloads (one ASR start).
3. Scoring steps without a server.
4. Collect-phase steps.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ..errors import PluginError
from ..records import PHASES, ServeSpec, Step


@dataclass(frozen=True)
class PlannedStep:
    """A step with the workload it belongs to."""

    workload: str
    step: Step

    @property
    def key(self) -> str:
        """``workload.step``, unique within a run."""
        return f"{self.workload}.{self.step.name}"


@dataclass(frozen=True)
class Group:
    """Steps that run one after another on one server start (or with no server)."""

    phase: str
    server: ServeSpec | None
    steps: tuple[PlannedStep, ...]

    @property
    def label(self) -> str:
        """A short name for progress lines."""
        return self.server.label if self.server else f"{self.phase} (no server)"


def _group_by_server(phase: str, planned: Sequence[PlannedStep]) -> list[Group]:
    groups: dict[ServeSpec | None, list[PlannedStep]] = {}
    for p in planned:
        groups.setdefault(p.step.server, []).append(p)
    return [Group(phase, server, tuple(steps)) for server, steps in groups.items()]


def order_steps(steps_by_workload: Mapping[str, Sequence[Step]]) -> list[Group]:
    """Validate step names and phases, and return the groups in run order."""
    everything: list[PlannedStep] = []
    for workload, steps in steps_by_workload.items():
        seen: set[str] = set()
        for step in steps:
            if not isinstance(step, Step):
                raise PluginError(f"workload {workload!r} planned a {type(step).__name__}, not a Step")
            if step.name in seen:
                raise PluginError(f"workload {workload!r} has two steps named {step.name!r}",
                                  hint="give each step of a workload (and its scorers) a unique name")
            if step.phase not in PHASES:
                raise PluginError(f"step {workload}.{step.name} has unknown phase {step.phase!r}",
                                  hint=f"use one of {', '.join(PHASES)}")
            seen.add(step.name)
            everything.append(PlannedStep(workload, step))

    groups: list[Group] = []
    for workload in steps_by_workload:
        generate = [p for p in everything if p.workload == workload and p.step.phase == "generate"]
        groups += _group_by_server("generate", generate)
    score = [p for p in everything if p.step.phase == "score"]
    groups += _group_by_server("score", [p for p in score if p.step.server is not None])
    serverless = [p for p in score if p.step.server is None]
    if serverless:
        groups.append(Group("score", None, tuple(serverless)))
    collect = [p for p in everything if p.step.phase == "collect"]
    if collect:
        groups.append(Group("collect", None, tuple(collect)))
    return groups
