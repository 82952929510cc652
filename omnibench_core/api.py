"""The library's front door: what the Invoke tasks call. Everything returns data."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from . import environment, plugin_manager
from .errors import OmnibenchError, SettingsError
from .layout import next_run_name
from .records import RunContext, RunResult, Step, Workload
from .runner import Runner, RunPlan
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
    for kind in ("workload", "target", "scorer", "ci-stage"):
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
) -> RunResult:
    """Run the named workloads once on the configured target: the runbook's "One run".

    The run goes to ``<results>/<revision>/<run_name or next free runN>``. Raises a typed
    error when a gate or step fails; the run directory is then moved aside as ``-incomplete``.
    """
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
    revision_dir = settings.results_root / target_env.folder
    run_dir = revision_dir / (run_name or next_run_name(revision_dir))
    steps: dict[str, list[Step]] = {}
    for w in chosen:
        ctx = RunContext(run_dir, w.name, settings.port, opts[w.name], target_env, settings)
        steps[w.name] = list(w.plan(ctx))
        for scorer_name in w.scorers:
            steps[w.name] += list(registry.get("scorer", scorer_name).plan(ctx))
    plugin_dists = {r.provider.distribution for t in ("workload", "target", "scorer")
                    for r in registry.table(t).values() if r.provider.distribution}
    plan = RunPlan(run_dir=run_dir, settings=settings, target=target_env, workloads=tuple(chosen), steps=steps,
                   options=opts, environment=environment.capture(settings.nvidia_smi, sorted(plugin_dists)))
    runner = Runner(plan, progress=progress, on_start=manager.notify_run_start)
    try:
        return runner.execute()
    finally:
        if runner.result is not None:  # None: RUN_READY failed, the run never started
            for problem in manager.notify_run_finish(runner.info, runner.result):
                progress(f"warning: a run-finish hook failed: {problem}")



def revision_dir(settings: Settings) -> Path:
    """``<results>/<revision>`` of the configured target (where its runs go)."""
    manager, registry = plugin_manager.load()
    return settings.results_root / registry.get("target", settings.target).prepare(settings).folder


def report(settings: Settings, runs: Sequence[str] = ()) -> tuple[Path, list[MetricSpread]]:
    """Mean and spread of ``runs`` (default: every complete ``runN`` but ``run0``, the warm-up)."""
    folder = revision_dir(settings)
    names = list(runs) or sorted((p.name for p in folder.glob("run*") if re.fullmatch(r"run[1-9]\d*", p.name)),
                                 key=lambda n: int(n[3:]))
    run_dirs = [folder / name for name in names]
    spreads = summarize_runs(run_dirs)
    return write_report(folder / "report.json", run_dirs, spreads), spreads


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
    return report(settings, done)
