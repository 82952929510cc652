"""The library's front door: what the Invoke tasks call. Everything returns data."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from .errors import SettingsError, storage_error
from .heartbeat import Heartbeat, beating
from .process.cpus import check_cpus_here
from .process.gpu import call_timeout
from .records import (
    PHASES,
    SCORE_WORDS,
    OptionValue,
    Phase,
    RunCheck,
    RunContext,
    RunResult,
    ScorePolicy,
    Slot,
    Step,
    TargetEnv,
    Workload,
)
from .records import options as workload_options
from .registry import manager as plugin_manager
from .registry.manager import PluginManager, Registry
from .run import capabilities, environment, layout, ownership
from .run.eta import RunEta
from .run.runner import Runner, RunPlan, score_together
from .settings import Settings
from .setup import doctor
from .setup.checkout_layout import checkout_packages
from .setup.doctor import Check
from .setup.tree_state import listed, tree_state
from .statuses import RunStatus
from .store.durations import phase_history


@dataclass(frozen=True)
class PluginRow:
    """One line of ``invoke plugins``."""

    kind: str
    name: str
    description: str
    plugin: str
    distribution: str
    version: str


def list_plugins(extra_plugins: Iterable[tuple[str, object]] = ()) -> list[PluginRow]:
    """Every workload, target, scorer, check, CI stage and engine with the plugin and distribution
    that provides it."""
    _, registry = plugin_manager.load(extra_plugins)
    rows = []
    for kind in ("workload", "target", "scorer", "check", "ci-stage", "engine"):
        for name, reg in sorted(registry.table(kind).items()):
            p = reg.provider
            rows.append(PluginRow(kind, name, reg.record.description, p.plugin, p.distribution or "-", p.version or "-"))
    return rows


@dataclass(frozen=True)
class OptionRow:
    """One workload option in ``invoke plugins``: what ``--opt WORKLOAD.NAME=VALUE`` accepts."""

    workload: str
    name: str
    type: str
    default: str
    range: str
    help: str


def list_options(extra_plugins: Iterable[tuple[str, object]] = ()) -> list[OptionRow]:
    """Every workload's options with their type, default, range and help, by workload name."""
    _, registry = plugin_manager.load(extra_plugins)
    return [OptionRow(*row) for name, reg in sorted(registry.table("workload").items())
            for row in workload_options.rows(name, reg.record.options)]


def list_engine_options(extra_plugins: Iterable[tuple[str, object]] = ()) -> list[OptionRow]:
    """Every engine's options (``--engine-opt KEY=VALUE``), by engine name; the first column names the engine."""
    _, registry = plugin_manager.load(extra_plugins)
    return [OptionRow(*row) for name, reg in sorted(registry.table("engine").items())
            for row in workload_options.rows(name, reg.record.options)]


def score_word(score: str | None) -> ScorePolicy | None:
    """``--score``'s word as a policy (None or "": not given), refused in one line naming the words when unknown."""
    if not score:
        return None
    try:
        return ScorePolicy(score)
    except ValueError:
        raise SettingsError(f"unknown --score {score!r}", hint=f"use {', '.join(SCORE_WORDS)}") from None


def score_policy(workloads: Sequence[str], asked: ScorePolicy | None, decide: Sequence[str],
                 extra_plugins: Iterable[tuple[str, object]] = (), flag: str = "--decide") -> ScorePolicy:
    """Which runs a speed question (``invoke ab``, ``invoke sweep``) scores for quality: ``asked``
    (``--score``), or when none was given ``last``, unless a ``decide`` metric is one only the
    score phase makes (then every round is scored: a verdict on it needs every round's value) or
    a workload cannot finish a run unscored. An asked policy those make impossible is refused, in
    the words of the command's ``flag`` that names the metrics (``--metric`` for a bisect)."""
    _, registry = plugin_manager.load(extra_plugins)
    chosen: list[Workload] = [registry.get("workload", name) for name in workloads]
    quality = [m for m in decide if any(w.is_quality(m) for w in chosen)]
    fixed = [w.name for w in chosen if w.collect is not None and w.collect_unscored is None]
    if asked is None:
        return ScorePolicy.EVERY_ROUND if quality or fixed else ScorePolicy.LAST
    if asked is not ScorePolicy.EVERY_ROUND and quality:
        raise SettingsError(f"{flag} {', '.join(quality)}: a quality metric, made only when a run is scored; "
                            f"--score {asked.value} would leave most runs without it",
                            hint=f"leave out --score (a quality {flag} scores every run), or pass --score every-round")
    if asked is not ScorePolicy.EVERY_ROUND and fixed:
        raise SettingsError(f"workload {', '.join(fixed)} cannot finish a run without scoring (its plugin has no "
                            f"collect_unscored); --score {asked.value} needs that",
                            hint="pass --score every-round, or leave out --score")
    return asked


def check_decide(workloads: Sequence[str], decide: Sequence[str], extra_plugins: Iterable[tuple[str, object]] = ()
                 ) -> None:
    """Refuse, before anything starts, a ``--decide`` metric no run of ``workloads`` can write: its
    first part names none of them (nor a run-wide check of theirs), or its workload declares its
    metrics (``Workload.metrics``) and this is not one. The refusal lists the known metrics."""
    _, registry = plugin_manager.load(extra_plugins)
    chosen = {name: registry.get("workload", name) for name in workloads}
    checks = {c for w in chosen.values() for c in w.checks}
    for metric in decide:
        head = metric.split(".", 1)[0]
        if head in checks or (head in chosen and chosen[head].may_report(metric)):
            continue
        known = [m[:-1] + ".*" if m.endswith(".") else m
                 for w in chosen.values() for m in ((*w.metrics, f"{w.name}.server_ready_s") if w.metrics
                                                    else (f"{w.name}.*",))] + [f"{c}.*" for c in sorted(checks)]
        raise SettingsError(f"--decide {metric}: no run of {', '.join(workloads)} can produce it; known: "
                            f"{', '.join(known)}, and percentiles <latency>_p<q>_s of a latency",
                            evidence={"asked": ", ".join(decide)},
                            hint="name metrics from the list (`invoke report` of a run shows them), or leave out "
                                 "--decide for the latency and throughput metrics")


def declares(workloads: Sequence[str], metric: str, extra_plugins: Iterable[tuple[str, object]] = ()) -> bool:
    """``metric`` is one its workload (of ``workloads``) declares (``Workload.metrics``): a name known
    before any run, not one only a run could show."""
    _, registry = plugin_manager.load(extra_plugins)
    head = metric.split(".", 1)[0]
    if head not in workloads:
        return False
    workload = registry.get("workload", head)
    return bool(workload.metrics) and workload.may_report(metric)


def check_options(workloads: Sequence[str], pairs: Sequence[str], client: str | None = None,
                  extra_plugins: Iterable[tuple[str, object]] = ()) -> None:
    """Refuse a bad ``WORKLOAD.KEY=VALUE`` (a workload or option these workloads lack, a bad value)
    before a command makes anything: a study's record or folder is not left behind for it."""
    _, registry = plugin_manager.load(extra_plugins)
    parse_options(pairs, [registry.get("workload", name) for name in workloads], client)


def parse_options(pairs: Sequence[str], workloads: Sequence[Workload], client: str | None = None
                  ) -> dict[str, dict[str, OptionValue]]:
    """``["seedtts.max_concurrency=8", ...]`` as checked, typed per-workload values over the
    defaults (see :func:`omnibench_core.records.options.parse`); a bad one raises SettingsError."""
    return workload_options.parse(pairs, workloads, client)




def run(
    settings: Settings,
    workloads: Sequence[str],
    *,
    options: Sequence[str] = (),
    run_name: str | None = None,
    client: str | None = None,
    progress: Callable[[str], None] = print,
    extra_plugins: Iterable[tuple[str, object]] = (),
    phases: Sequence[Phase] = PHASES,
    before_timed: Callable[[str], None] | None = None,
    estimate: bool = False,
) -> RunResult:
    """Run the named workloads once on the configured target: the runbook's "One run".

    The run goes to ``<results>/<revision>/<run_name or next free runN>``. Raises a typed
    error when a gate or step fails; the run directory is then moved aside as ``-incomplete``.
    ``phases=("generate",)`` stops after generation and leaves the run ``generated``, for
    :func:`score_runs` to score with other runs on one scoring server start. ``before_timed``
    is called with a step's name before each timed window opens (its server READY): a duet
    A/B's barrier. ``estimate`` (``invoke run``): the lines carry what is left of the run, phase
    by phase, from this revision folder's earlier complete runs of the same workloads.
    """
    manager, registry, chosen, opts, target_env, slot = _resolve(settings, workloads, options, client, extra_plugins)
    revision = layout.revision_dir(settings.run.results_root, target_env.folder)
    try:
        for moved in ownership.reclaim_abandoned(revision):
            progress(f"moved aside {moved.name}: its omnibench process died while it was running" if "-incomplete" in
                     moved.name else f"{moved.name}: its omnibench process died while scoring it; it is generated again")
        run_dir = ownership.claim_run_dir(revision, run_name)
    except OSError as exc:
        raise storage_error(f"claiming a run directory in {revision}", exc) from exc
    try:
        plan = _plan(registry, settings, chosen, opts, target_env, slot, run_dir)
        # the checkout's era takes every server setting, flag and keyword the plan passes, before any server starts
        check_servers(plan.steps, target_env, slot.port)
        capabilities.check_plan(plan.steps, target_env, settings.run.results_root, progress=progress)
    except BaseException:
        run_dir.rmdir()  # planning failed: nothing ran, release the claimed name
        raise
    workload_names = [w.name for w in chosen] if estimate else None
    with _run_stream(progress, revision, workload_names, phases) as beat:  # never silent for long
        runner = Runner(plan, progress=beat, on_start=manager.notify_run_start, before_timed=before_timed)
        try:
            return runner.execute(phases)
        finally:
            if runner.result is not None and runner.result.status is not RunStatus.GENERATED:  # None: RUN_READY failed
                for problem in manager.notify_run_finish(runner.info, runner.result):
                    beat(f"warning: a run-finish hook failed: {problem}")


def score_runs(
    settings: Settings,
    workloads: Sequence[str],
    run_dirs: Sequence[Path],
    *,
    options: Sequence[str] = (),
    client: str | None = None,
    progress: Callable[[str], None] = print,
    extra_plugins: Iterable[tuple[str, object]] = (),
    quality: bool = True,
) -> list[RunResult]:
    """Score and collect ``generated`` runs (made by :func:`run` with ``phases=("generate",)``)
    together: each scoring server starts once for all of them (deferred scoring). With
    ``quality`` False they are collected without scoring (complete, the generation's metrics
    only: rounds a speed question does not score); no scoring server starts.

    The runs must have been made with the same workloads, options and settings as given here.
    Returns one result per run that ended (complete, incomplete or failed), in order.
    """
    manager, registry, chosen, opts, target_env, slot = _resolve(settings, workloads, options, client, extra_plugins)
    plans = [_plan(registry, settings, chosen, opts, target_env, slot, Path(d)) for d in run_dirs]
    for plan in plans[:1] if quality else ():  # the same steps for every run: one check (unscored: none run)
        check_servers(plan.steps, target_env, slot.port)
        capabilities.check_plan(plan.steps, target_env, settings.run.results_root, progress=progress)
    with beating(progress) as beat:
        runners = [Runner(plan, progress=beat, on_start=manager.notify_run_start) for plan in plans]
        try:
            return score_together(runners, quality)
        finally:
            for runner in runners:
                if runner.result is not None and runner.result.status is not RunStatus.GENERATED:
                    for problem in manager.notify_run_finish(runner.info, runner.result):
                        beat(f"warning: a run-finish hook failed: {problem}")


def check_supported(settings: Settings, workloads: Sequence[str], *, options: Sequence[str] = (),
                    client: str | None = None, progress: Callable[[str], None] = print,
                    extra_plugins: Iterable[tuple[str, object]] = ()) -> None:
    """Raise :class:`~omnibench_core.errors.UnsupportedOption` when the configured checkout's era
    lacks a flag or keyword these workloads' steps pass (the capability probe, cached per commit);
    nothing is started and no run directory is made. A campaign asks this before its first run."""
    _, registry, chosen, opts, target_env, slot = _resolve(settings, workloads, options, client, extra_plugins)
    revision = layout.revision_dir(settings.run.results_root, target_env.folder)
    never_made = revision / "run-capability-probe"  # planning only builds argv lists: nothing is written
    steps = {w.name: plan_steps(registry, w, RunContext(never_made, w.name, slot.endpoint, opts[w.name], target_env,
                                                         settings.run)) for w in chosen}
    check_servers(steps, target_env, slot.port)
    capabilities.check_plan(steps, target_env, settings.run.results_root, progress=progress)


def check_servers(steps: Mapping[str, Sequence[Step]], target_env: TargetEnv, port: int) -> None:
    """Build every server's argv the planned ``steps`` start, so a setting the target refuses (one
    the checkout's serve era cannot take: :class:`~omnibench_core.errors.UnsupportedOption`) is
    refused before any server starts, not when its step comes."""
    for spec in dict.fromkeys(s.server for planned in steps.values() for s in planned if s.server is not None):
        if spec is not None and not spec.argv:
            target_env.serve_argv(spec, port)


def _resolve(settings: Settings, workloads: Sequence[str], options: Sequence[str], client: str | None,
             extra_plugins: Iterable[tuple[str, object]]
             ) -> tuple[PluginManager, Registry, list[Workload], dict[str, dict[str, OptionValue]], TargetEnv, Slot]:
    """The plugins, the chosen workloads with their checked options, the prepared target and the slot."""
    if not workloads:
        raise SettingsError("no workload given", hint="pass --workload NAME (see `invoke plugins`)")
    if len(set(workloads)) != len(workloads):
        raise SettingsError("a workload is named twice", evidence={"workloads": ", ".join(workloads)})
    manager, registry = plugin_manager.load(extra_plugins)
    target = registry.get("target", settings.run.target)
    chosen: list[Workload] = [registry.get("workload", name) for name in workloads]
    for w in chosen:
        if w.targets and settings.run.target not in w.targets:
            raise SettingsError(f"workload {w.name!r} does not run on target {settings.run.target!r}",
                                hint=f"use --target {' or '.join(w.targets)}")
    # Every option is checked before the target is prepared and before the run directory exists:
    # a bad value must never start a server or leave a run behind.
    opts = parse_options(options, chosen, client)
    target_env = target.prepare(settings)
    # CPUs not on this host are refused here, before a run folder or a program exists
    slot = Slot(settings.run.port, gpus=target_env.gpus, cpus=check_cpus_here(settings.run.cpu_list()))
    return manager, registry, chosen, opts, target_env, slot


def _plan(registry: Registry, settings: Settings, chosen: Sequence[Workload], opts: dict[str, dict[str, OptionValue]],
          target_env: TargetEnv, slot: Slot, run_dir: Path) -> RunPlan:
    steps = {w.name: plan_steps(registry, w, RunContext(run_dir, w.name, slot.endpoint, opts[w.name], target_env,
                                                         settings.run)) for w in chosen}
    plugin_dists = {r.provider.distribution for t in ("workload", "target", "scorer", "check")
                    for r in registry.table(t).values() if r.provider.distribution}
    gpu_tool = settings.tools.nvidia_smi if target_env.facts.uses_gpu else ""
    return RunPlan(run_dir=run_dir, settings=settings.run, tools=settings.tools, target=target_env, slot=slot, workloads=tuple(chosen),
                   steps=steps, options=opts, checks=run_checks(registry, chosen),
                   environment=environment.capture(gpu_tool, sorted(plugin_dists),
                                                   call_timeout(settings.run.gpu_free_timeout_s),
                                                   target_python=target_env.python if target_env.facts.own_clients
                                                   else ""))



def plan_steps(registry: Registry, workload: Workload, ctx: RunContext) -> list[Step]:
    """The workload's own steps, then those of each scorer it uses on this target."""
    steps = list(workload.plan(ctx))
    for use in workload.scorer_uses():
        if ctx.target.facts.own_clients and not use.on_own_clients:
            continue  # the target scores with its own tools; the workload planned them
        steps += list(registry.get("scorer", use.scorer).plan(replace(ctx, params=use.params)))
    return steps


def run_checks(registry: Registry, workloads: Sequence[Workload]) -> tuple[RunCheck, ...]:
    """Every run-wide check the workloads name, once each, in first-named order."""
    names = dict.fromkeys(name for w in workloads for name in w.checks)
    return tuple(registry.get("check", name) for name in names)


def prepare_target(settings: Settings) -> TargetEnv:
    """The configured target, prepared (its checks run, its revision found)."""
    _, registry = plugin_manager.load()
    env: TargetEnv = registry.get("target", settings.run.target).prepare(settings)
    return env


def revision_dir(settings: Settings) -> Path:
    """``<results>/<revision>`` of the configured target (where its runs go)."""
    return layout.revision_dir(settings.run.results_root, prepare_target(settings).folder)


def check_clean(settings: Settings, allow_dirty: bool, command: str) -> None:
    """Refuse ``command`` (``matrix``, ``bisect``, ``ab``, ``sweep``) on a target measuring a
    checkout with uncommitted edits, unless ``allow_dirty``: its numbers would be filed under a
    commit whose code they did not measure. With ``allow_dirty`` the runs go to the dirty tree's own
    folder (``<commit>-dirty-<digest>``) and record the digest and files."""
    _, registry = plugin_manager.load()
    if allow_dirty or not registry.get("target", settings.run.target).facts.from_checkout:
        return
    checkout = Path(settings.run.checkout).expanduser()
    state = tree_state(checkout, checkout_packages(checkout), settings.tools.git)
    if state is not None and state.dirty:
        raise SettingsError(f"the checkout {checkout} has uncommitted changes; `invoke {command}` measures "
                            f"committed code: {state.listed()}",
                            evidence={"checkout": str(checkout), "changed files": state.listed()},
                            hint="commit or stash them (git stash -u), or pass --allow-dirty to measure the tree as "
                                 "it is (its runs go to <commit>-dirty-<digest> and record the files)")


def dirty_files(settings: Settings) -> str:
    """The configured target's uncommitted files, listed for a message ("" when its tree is clean)."""
    return listed(prepare_target(settings).dirty_files)


def diagnose(settings: Settings) -> list[Check]:
    """``invoke doctor``: every prerequisite, marked not needed where the configured target's facts
    say it does not use it (the local target needs no GPU, container or checkout)."""
    _, registry = plugin_manager.load()
    target = registry.get("target", settings.run.target)
    return doctor.diagnose(settings, gpu_host=target.facts.uses_gpu, checkout=target.facts.own_clients,
                           why_not=f"not needed for the {target.name} target")


@contextlib.contextmanager
def _run_stream(progress: Callable[[str], None], revision: Path, workloads: Sequence[str] | None,
                phases: Sequence[Phase]) -> Iterator[Callable[[str], None]]:
    """A run's stream: a study's own (it beats and estimates already), one that beats (a caller
    that asks no estimate: an A/B side's worker, whose driver estimates), or for ``invoke run``
    (``workloads`` given) one that beats and carries the run's estimate from this revision
    folder's earlier runs of those workloads."""
    if isinstance(progress, Heartbeat) or workloads is None:
        with beating(progress) as beat:
            yield beat
        return
    eta = RunEta(progress, phase_history(revision, workloads), [p for p in PHASES if p in phases])
    with eta:
        eta(eta.opening())
        yield eta
