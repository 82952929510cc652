"""The library's front door: what the Invoke tasks call. Everything returns data."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from . import environment, layout, ownership, plugin_manager
from .errors import OmnibenchError, SettingsError, storage_error
from .plugin_manager import Registry
from .records import PHASES, Phase, RunCheck, RunContext, RunResult, Slot, Step, TargetEnv, Workload
from .runner import Runner, RunPlan, score_together
from .settings import Settings
from .summary import MetricSpread, summarize_runs, write_report


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
    """Every workload, target and scorer with the plugin and distribution that provides it."""
    _, registry = plugin_manager.load(extra_plugins)
    rows = []
    for kind in ("workload", "target", "scorer", "check", "ci-stage"):
        for name, reg in sorted(registry.table(kind).items()):
            p = reg.provider
            rows.append(PluginRow(kind, name, reg.record.description, p.plugin, p.distribution or "-", p.version or "-"))
    return rows


def parse_options(pairs: Sequence[str], workloads: Sequence[Workload], client: str | None = None
                  ) -> dict[str, dict[str, str]]:
    """Turn ``["seedtts.max_concurrency=8", ...]`` into per-workload options over the defaults.

    ``client`` sets the ``client`` option of every workload that has one (``--client``).
    """
    by_name = {w.name: w for w in workloads}
    options = {w.name: dict(w.options) for w in workloads}
    if client is not None:
        having = [w.name for w in workloads if "client" in w.options]
        if not having:
            raise SettingsError("--client was given but no workload of this run has a client choice")
        for name in having:
            options[name]["client"] = client
    for pair in pairs:
        key, sep, value = pair.partition("=")
        workload, dot, option = key.partition(".")
        if not sep or not dot:
            raise SettingsError(f"cannot read option {pair!r}", hint="write options as WORKLOAD.KEY=VALUE")
        if workload not in by_name:
            raise SettingsError(f"option {pair!r} names workload {workload!r}, which is not in this run",
                                hint=f"workloads in this run: {', '.join(by_name)}")
        if option not in by_name[workload].options:
            known = ", ".join(sorted(by_name[workload].options)) or "none"
            raise SettingsError(f"workload {workload!r} has no option {option!r}", evidence={"known options": known})
        options[workload][option] = value
    return options


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
) -> RunResult:
    """Run the named workloads once on the configured target: the runbook's "One run".

    The run goes to ``<results>/<revision>/<run_name or next free runN>``. Raises a typed
    error when a gate or step fails; the run directory is then moved aside as ``-incomplete``.
    ``phases=("generate",)`` stops after generation and leaves the run ``generated``, for
    :func:`score_runs` to score with other runs on one scoring server start.
    """
    manager, registry, chosen, opts, target_env, slot = _resolve(settings, workloads, options, client, extra_plugins)
    revision = layout.revision_dir(settings.results_root, target_env.folder)
    try:
        for moved in ownership.reclaim_abandoned(revision):
            progress(f"moved aside {moved.name}: its omnibench process died while it was running")
        run_dir = ownership.claim_run_dir(revision, run_name)
    except OSError as exc:
        raise storage_error(f"claiming a run directory in {revision}", exc) from exc
    try:
        plan = _plan(registry, settings, chosen, opts, target_env, slot, run_dir)
    except BaseException:
        run_dir.rmdir()  # planning failed: nothing ran, release the claimed name
        raise
    runner = Runner(plan, progress=progress, on_start=manager.notify_run_start)
    try:
        return runner.execute(phases)
    finally:
        if runner.result is not None and runner.result.status != "generated":  # None: RUN_READY failed
            for problem in manager.notify_run_finish(runner.info, runner.result):
                progress(f"warning: a run-finish hook failed: {problem}")


def score_runs(
    settings: Settings,
    workloads: Sequence[str],
    run_dirs: Sequence[Path],
    *,
    options: Sequence[str] = (),
    client: str | None = None,
    progress: Callable[[str], None] = print,
    extra_plugins: Iterable[tuple[str, object]] = (),
) -> list[RunResult]:
    """Score and collect ``generated`` runs (made by :func:`run` with ``phases=("generate",)``)
    together: each scoring server starts once for all of them (deferred scoring).

    The runs must have been made with the same workloads, options and settings as given here.
    Returns one result per run that ended (complete, incomplete or failed), in order.
    """
    manager, registry, chosen, opts, target_env, slot = _resolve(settings, workloads, options, client, extra_plugins)
    runners = [Runner(_plan(registry, settings, chosen, opts, target_env, slot, Path(d)),
                      progress=progress, on_start=manager.notify_run_start) for d in run_dirs]
    try:
        return score_together(runners)
    finally:
        for runner in runners:
            if runner.result is not None and runner.result.status != "generated":
                for problem in manager.notify_run_finish(runner.info, runner.result):
                    progress(f"warning: a run-finish hook failed: {problem}")


def _resolve(settings: Settings, workloads: Sequence[str], options: Sequence[str], client: str | None,
             extra_plugins: Iterable[tuple[str, object]]):
    """The plugins, the chosen workloads with their checked options, the prepared target and the slot."""
    if not workloads:
        raise SettingsError("no workload given", hint="pass --workload NAME (see `invoke plugins`)")
    if len(set(workloads)) != len(workloads):
        raise SettingsError("a workload is named twice", evidence={"workloads": ", ".join(workloads)})
    manager, registry = plugin_manager.load(extra_plugins)
    target = registry.get("target", settings.target)
    chosen: list[Workload] = [registry.get("workload", name) for name in workloads]
    for w in chosen:
        if w.targets and settings.target not in w.targets:
            raise SettingsError(f"workload {w.name!r} does not run on target {settings.target!r}",
                                hint=f"use --target {' or '.join(w.targets)}")
    opts = parse_options(options, chosen, client)
    target_env = target.prepare(settings)
    slot = Slot(settings.port, gpus=target_env.gpus, cpus=settings.cpu_list())
    return manager, registry, chosen, opts, target_env, slot


def _plan(registry: Registry, settings: Settings, chosen: Sequence[Workload], opts: dict[str, dict[str, str]],
          target_env: TargetEnv, slot: Slot, run_dir: Path) -> RunPlan:
    steps = {w.name: plan_steps(registry, w, RunContext(run_dir, w.name, slot.endpoint, opts[w.name], target_env,
                                                         settings)) for w in chosen}
    plugin_dists = {r.provider.distribution for t in ("workload", "target", "scorer", "check")
                    for r in registry.table(t).values() if r.provider.distribution}
    gpu_tool = settings.nvidia_smi if target_env.facts.uses_gpu else ""
    return RunPlan(run_dir=run_dir, settings=settings, target=target_env, slot=slot, workloads=tuple(chosen),
                   steps=steps, options=opts, checks=run_checks(registry, chosen),
                   environment=environment.capture(gpu_tool, sorted(plugin_dists)))



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
    return registry.get("target", settings.target).prepare(settings)


def revision_dir(settings: Settings) -> Path:
    """``<results>/<revision>`` of the configured target (where its runs go)."""
    return layout.revision_dir(settings.results_root, prepare_target(settings).folder)


def report(settings: Settings, runs: Sequence[str] = (), folder: Path | None = None
           ) -> tuple[Path, list[MetricSpread]]:
    """Mean and spread of ``runs`` (default: every complete ``runN`` but ``run0``, the warm-up).

    ``folder`` is the revision folder (default: the configured target's).
    """
    folder = folder or revision_dir(settings)
    run_dirs = [folder / name for name in (list(runs) or layout.measured_runs(folder))]
    spreads = summarize_runs(run_dirs)
    return write_report(folder / layout.REPORT_NAME, run_dirs, spreads), spreads


def measure(settings: Settings, workloads: Sequence[str], *, runs: int = 3, options: Sequence[str] = (),
            client: str | None = None, progress: Callable[[str], None] = print) -> tuple[Path, list[MetricSpread]]:
    """The runbook's "Measuring accurately": a warm-up run (run0 on a fresh revision), then ``runs``
    measured runs, then their mean and spread. Stops at the first run that is not complete."""
    if runs < 2:
        raise SettingsError("--runs must be at least 2 for a spread", hint="the runbook uses 3")
    done: list[str] = []
    for i in range(runs + 1):
        label = "warm-up run (discarded)" if i == 0 else f"measured run {i}/{runs}"
        progress(f"=== {label}")
        result = run(settings, workloads, options=options, client=client, progress=progress)
        if not result.complete:
            raise OmnibenchError(f"{result.run_dir.name} is incomplete, so the measurement stops",
                                 evidence={"run": str(result.run_dir)}, hint="fix the cause, then run measure again")
        if i > 0:
            done.append(result.run_dir.name)
    return report(settings, done, folder=result.run_dir.parent)
