"""The hooks an omnibench plugin can implement.

A plugin is a module (or object) with functions marked ``@hookimpl`` and named like the specs
below. Register it through the ``omnibench`` entry-point group in your ``pyproject.toml``::

    [project.entry-points.omnibench]
    mywork = "mypackage.omnibench_plugin"

Registration hooks return a list of records (see :mod:`omnibench_core.records`), or ``yield``
them one by one; the plugin manager checks their types and that names are unique lower-case
words across all plugins.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import pluggy

if TYPE_CHECKING:
    from ..records import CiStage, EngineKind, RunCheck, RunInfo, RunResult, Scorer, Target, Workload
    from ..settings import Settings

PROJECT = "omnibench"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


@hookspec
def omnibench_workloads() -> list[Workload]:
    """Return the workloads this plugin provides.

    Each :class:`~omnibench_core.records.Workload` names itself, plans the steps of one run for a
    target (fresh server, client, scorers) and collects its metrics and coverage rules.
    """


@hookspec
def omnibench_targets() -> list[Target]:
    """Return the targets this plugin provides.

    A :class:`~omnibench_core.records.Target` says where the system under test comes from (an
    sglang-omni checkout, the embedded ``local`` server, another serving stack) and how its
    programs are started.
    """


@hookspec
def omnibench_scorers() -> list[Scorer]:
    """Return reusable scorers (ASR WER, speaker similarity, UTMOS, accuracy...).

    A workload lists scorer names in ``Workload.scorers``; the runner adds their steps.
    """


@hookspec
def omnibench_run_checks() -> list[RunCheck]:
    """Return run-wide checks (e.g. ``audio``: every WAV of the run readable, not empty or NaN).

    A workload names the checks it needs in ``Workload.checks``; each runs once per run, at
    collection, and its rules count towards RUN_COMPLETE.
    """


@hookspec
def omnibench_ci_stages() -> list[CiStage]:
    """Return model-CI stages (``nox -s ci_stages`` runs them in ``order``).

    A :class:`~omnibench_core.records.CiStage` names a pytest file of the sglang-omni checkout.
    Set ``replaces=True`` to take over a stage another plugin registered under the same name.
    """


@hookspec
def omnibench_engines() -> list[EngineKind]:
    """Return the engines this plugin provides: where ``invoke matrix`` and ``invoke bisect`` run
    their campaigns (``--engine NAME``; built in: ``local`` and ``ray``).

    An :class:`~omnibench_core.records.EngineKind` makes an engine from an ``EngineRequest``; the
    engine has the methods of :class:`omnibench_core.scale.engine.Engine` (docs/engines.md).
    """


@hookspec
def omnibench_run_start(run: RunInfo) -> None:
    """Called once a run passed RUN_READY and its directory exists, before any server starts.

    For collectors such as GPU telemetry. An exception here fails the run.
    """


@hookspec
def omnibench_run_finish(run: RunInfo, result: RunResult) -> None:
    """Called after a run ended, complete or not, with the final run directory in ``result``.

    Exceptions here are reported but do not change the result.
    """


# What happens after a campaign or an experiment: the history implements these (it is registered as
# omnibench's built-in plugin ``history``), so whoever measures, a task, a matrix worker or a library
# caller, has it indexed without importing the history. An exception in one of them is reported through
# ``progress`` and never fails the measurement: the files are the truth (``invoke history --rebuild``).


@hookspec
def omnibench_campaign_done(settings: Settings, path: Path, progress: Callable[[str], None]) -> None:
    """Called when a campaign has been measured, after its report where one is made (``invoke
    measure``, each point of ``invoke sweep``, each campaign of a matrix or a bisect), with its
    campaign file. Say what could not be done through ``progress``."""


@hookspec
def omnibench_experiment_done(settings: Settings, path: Path, progress: Callable[[str], None]) -> None:
    """Called when an A/B experiment is complete and its result written, with its A/B file."""


@hookspec
def omnibench_results_opening(results: Path, checkouts: Sequence[str], progress: Callable[[str], None]) -> None:
    """Called before many nodes send campaigns home into ``results`` (a Ray matrix): make here what
    :func:`omnibench_campaign_arrived` only adds to, so no arrival waits on a whole rebuild."""


@hookspec
def omnibench_campaign_arrived(results: Path, path: Path, git: str, checkouts: Sequence[str]) -> None:
    """Called when a complete campaign's file arrived home from a node (a Ray matrix's receiver):
    quick work only, every node's next call waits on it. ``checkouts``: where its commit can be
    looked up."""
