"""Loads plugins, validates what they register, and is the only caller of ``pm.hook``."""

from __future__ import annotations

import functools
import importlib.metadata as md
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pluggy

from ..errors import PluginError
from ..hooks import specs as hookspecs
from ..records import NAME_RE, CiStage, EngineKind, RunCheck, RunInfo, RunResult, Scorer, Target, Workload
from ..records.options import schema_problems
from ..settings import Settings

OWN_DISTRIBUTION = "omnibench"
ENTRY_POINT_GROUP = hookspecs.PROJECT

_KINDS: dict[str, tuple[str, type]] = {
    "workload": ("omnibench_workloads", Workload),
    "target": ("omnibench_targets", Target),
    "scorer": ("omnibench_scorers", Scorer),
    "ci-stage": ("omnibench_ci_stages", CiStage),
    "check": ("omnibench_run_checks", RunCheck),
    "engine": ("omnibench_engines", EngineKind),
}
_REGISTRATION_HOOKS = {hook for hook, _ in _KINDS.values()}
# Notification hooks whose failure is a message, never raised: a collector or the history must not
# hide a run's result or fail a measurement that is already on disk.
_REPORTING_HOOKS = {"omnibench_run_finish", "omnibench_campaign_done", "omnibench_experiment_done",
                    "omnibench_results_opening", "omnibench_campaign_arrived"}


@dataclass(frozen=True)
class Provider:
    """Who registered something: the plugin's name and its distribution (if any)."""

    plugin: str
    distribution: str = ""
    version: str = ""

    def __str__(self) -> str:
        if self.distribution:
            return f"{self.plugin} ({self.distribution} {self.version})"
        return self.plugin


@dataclass(frozen=True)
class Registered:
    """A validated record and who provided it."""

    record: Any
    provider: Provider


@dataclass
class Registry:
    """All workloads, targets, scorers, CI stages, checks and engines by name."""

    workloads: dict[str, Registered] = field(default_factory=dict)
    targets: dict[str, Registered] = field(default_factory=dict)
    scorers: dict[str, Registered] = field(default_factory=dict)
    ci_stages: dict[str, Registered] = field(default_factory=dict)
    checks: dict[str, Registered] = field(default_factory=dict)
    engines: dict[str, Registered] = field(default_factory=dict)

    def table(self, kind: str) -> dict[str, Registered]:
        """The mapping for ``"workload"``, ``"target"``, ``"scorer"``, ``"ci-stage"``, ``"check"`` or ``"engine"``."""
        return {"workload": self.workloads, "target": self.targets, "scorer": self.scorers,
                "ci-stage": self.ci_stages, "check": self.checks, "engine": self.engines}[kind]

    def ordered_ci_stages(self) -> list[CiStage]:
        """The CI stages in run order."""
        return sorted((r.record for r in self.ci_stages.values()), key=lambda s: (s.order, s.name))

    def get(self, kind: str, name: str) -> Any:
        """The record of that kind and name, or a PluginError listing the known names."""
        table = self.table(kind)
        if name not in table:
            known = ", ".join(sorted(table)) or "none"
            raise PluginError(
                f"no {kind} named {name!r}",
                evidence={f"known {kind}s": known},
                hint="run `invoke plugins` to list them; install the plugin that provides it",
            )
        return table[name].record


class PluginManager:
    """Wraps a pluggy manager for the ``omnibench`` project."""

    def __init__(self) -> None:
        self._pm = pluggy.PluginManager(hookspecs.PROJECT)
        self._pm.add_hookspecs(hookspecs)
        self._providers: dict[str, Provider] = {}

    def register(self, plugin: object, name: str, provider: Provider | None = None) -> None:
        """Register a plugin object or module under ``name``."""
        if self._pm.has_plugin(name):
            raise PluginError(f"two plugins are named {name!r}", hint="rename one entry point")
        provider = provider or Provider(name)
        self._pm.register(plugin, name=name)
        self._providers[name] = provider
        # Registration hooks may return a list or yield records (conda's style). Each plugin's
        # answer is made a list tagged with its provider here, so the hooks can be called
        # through pluggy (its tracing and wrappers work) and every record stays attributable.
        # A run-finish collector's failure is returned as a message, never raised: it must not
        # hide the run's result or stop the other collectors.
        for caller in self._pm.get_hookcallers(plugin) or []:
            for impl in caller.get_hookimpls():
                if impl.plugin_name != name or impl.hookwrapper or impl.wrapper:
                    continue
                # pluggy declares HookImpl.function Final; rebinding it is the one wrap point pluggy
                # leaves (a wrapper hookimpl would see only the combined answers).
                if caller.name in _REGISTRATION_HOOKS:
                    impl.function = _tagging(impl.function, caller.name, provider)  # type: ignore[misc]
                elif caller.name in _REPORTING_HOOKS:
                    impl.function = _reporting(impl.function, name)  # type: ignore[misc]

    def load_entry_points(self, entry_points: Iterable[md.EntryPoint] | None = None) -> None:
        """Register every ``omnibench`` entry point: omnibench's own first, then the others."""
        eps = list(md.entry_points(group=ENTRY_POINT_GROUP) if entry_points is None else entry_points)
        eps.sort(key=lambda ep: (_dist_name(ep) != OWN_DISTRIBUTION, _dist_name(ep), ep.name))
        if not any(_dist_name(ep) == OWN_DISTRIBUTION for ep in eps):
            raise PluginError(
                "omnibench's built-in plugins are not registered",
                hint="install the project so its entry points exist: python3 -m pip install -e .",
            )
        for ep in eps:
            dist = ep.dist
            provider = Provider(ep.name, dist.metadata["Name"] if dist else "", dist.version if dist else "")
            try:
                plugin = ep.load()
            except Exception as exc:
                raise PluginError(
                    f"plugin {provider} failed to load",
                    evidence={"entry point": f"{ep.name} = {ep.value}", "error": repr(exc)},
                    hint=f"fix or uninstall {provider.distribution or ep.value}",
                ) from exc
            self.register(plugin, ep.name, provider)

    def check(self) -> None:
        """pluggy's check that every hookimpl matches a spec (catches typos in hook names)."""
        try:
            self._pm.check_pending()
        except pluggy.PluginValidationError as exc:
            raise PluginError(
                "a plugin implements a hook omnibench does not define",
                evidence={"error": str(exc)},
                hint="compare the hook names with omnibench_core/hooks/specs.py",
            ) from exc

    def registry(self) -> Registry:
        """Call the registration hooks and validate every record they return."""
        self.check()
        registry = Registry()
        for kind, (hook_name, record_type) in _KINDS.items():
            table = registry.table(kind)
            replacing: dict[str, Registered] = {}
            hook: Callable[..., Any] = getattr(self._pm.hook, hook_name)
            for answer in reversed(hook()):  # pluggy answers last-registered first
                if not isinstance(answer, _Records):
                    raise PluginError(f"a hook wrapper replaced the answers of {hook_name}",
                                      hint="a wrapper of a registration hook must pass the plugins' lists through")
                provider = answer.provider
                for record in answer:
                    _validate(record, record_type, kind, provider)
                    if getattr(record, "replaces", False):
                        if record.name in replacing:
                            raise PluginError(f"two plugins replace the {kind} {record.name!r}",
                                              evidence={"first": str(replacing[record.name].provider),
                                                        "second": str(provider)},
                                              hint="uninstall one of them")
                        replacing[record.name] = Registered(record, provider)
                        continue
                    if record.name in table:
                        other = table[record.name].provider
                        raise PluginError(
                            f"two plugins register a {kind} named {record.name!r}",
                            evidence={"first": str(other), "second": str(provider)},
                            hint="uninstall one of them, or rename the record in one plugin",
                        )
                    table[record.name] = Registered(record, provider)
            for name, reg in replacing.items():  # after every plugin: replacement wins regardless of load order
                if name not in table:
                    raise PluginError(f"plugin {reg.provider} replaces the {kind} {name!r}, which nobody registers",
                                      hint="drop replaces=True to add it as a new one")
                table[name] = reg
        return registry

    def notify_run_start(self, run: RunInfo) -> None:
        """Call ``omnibench_run_start`` on every plugin."""
        self._pm.hook.omnibench_run_start(run=run)

    def notify_run_finish(self, run: RunInfo, result: RunResult) -> list[str]:
        """Call ``omnibench_run_finish`` on every plugin; return the errors, never raise."""
        return [str(e) for e in self._pm.hook.omnibench_run_finish(run=run, result=result)]

    def campaign_done(self, settings: Settings, path: Path, progress: Callable[[str], None]) -> None:
        """Call ``omnibench_campaign_done`` on every plugin (the history indexes the campaign); a
        plugin's failure is said through ``progress``, never raised."""
        _say(self._pm.hook.omnibench_campaign_done(settings=settings, path=path, progress=progress), progress)

    def experiment_done(self, settings: Settings, path: Path, progress: Callable[[str], None]) -> None:
        """Call ``omnibench_experiment_done`` on every plugin; failures said, never raised."""
        _say(self._pm.hook.omnibench_experiment_done(settings=settings, path=path, progress=progress), progress)

    def results_opening(self, results: Path, checkouts: Sequence[str], progress: Callable[[str], None]) -> None:
        """Call ``omnibench_results_opening`` on every plugin; failures said, never raised."""
        _say(self._pm.hook.omnibench_results_opening(results=results, checkouts=checkouts, progress=progress),
             progress)

    def campaign_arrived(self, results: Path, path: Path, git: str, checkouts: Sequence[str]) -> list[str]:
        """Call ``omnibench_campaign_arrived`` on every plugin; return the failures, never raise."""
        return [str(e) for e in self._pm.hook.omnibench_campaign_arrived(results=results, path=path, git=git,
                                                                          checkouts=checkouts) if e]


def _say(failures: list[str | None], progress: Callable[[str], None]) -> None:
    for failure in failures:
        if failure:
            progress(f"note: {failure}")


def _dist_name(ep: md.EntryPoint) -> str:
    return (ep.dist.metadata["Name"] if ep.dist else "").lower()


def _reporting(function: Callable[..., Any], plugin_name: str) -> Callable[..., Any]:
    """Wrap a notification hookimpl: an exception becomes its message (None when it succeeded)."""

    @functools.wraps(function)
    def call(*args: Any, **kwargs: Any) -> str | None:
        try:
            function(*args, **kwargs)
        except Exception as exc:
            return f"{plugin_name}: {exc!r}"
        return None

    return call


class _Records(list):  # type: ignore[type-arg]
    """One plugin's answer to a registration hook, with who gave it."""

    def __init__(self, items: Iterable[Any], provider: Provider):
        super().__init__(items)
        self.provider = provider


def _tagging(function: Callable[..., Any], hook_name: str, provider: Provider) -> Callable[..., Any]:
    """Wrap a registration hookimpl: its list or generator becomes a tagged list."""

    @functools.wraps(function)
    def call(*args: Any, **kwargs: Any) -> _Records:
        try:
            returned = function(*args, **kwargs)
            if returned is None:
                return _Records((), provider)
            if isinstance(returned, (list, tuple, Iterator)):
                return _Records(returned, provider)  # a generator runs here, inside the try
        except PluginError:
            raise
        except Exception as exc:
            raise PluginError(
                f"plugin {provider} raised in {hook_name}",
                evidence={"error": repr(exc)},
                hint=f"fix or uninstall {provider.distribution or provider.plugin}",
            ) from exc
        raise PluginError(
            f"plugin {provider} returned {type(returned).__name__} from {hook_name}, not a list",
            hint=f"make {hook_name} return a list of records, or yield them",
        )

    return call


def _validate(record: Any, record_type: type, kind: str, provider: Provider) -> None:
    if not isinstance(record, record_type):
        raise PluginError(
            f"plugin {provider} returned a {type(record).__name__} where a {record_type.__name__} belongs",
            hint=f"return omnibench_core.records.{record_type.__name__} records",
        )
    name = getattr(record, "name", None)
    if not isinstance(name, str) or not NAME_RE.match(name):
        raise PluginError(
            f"plugin {provider} registers a {kind} with the invalid name {name!r}",
            hint="names are lower-case: a letter, then letters, digits, '_', '-' or '.'",
        )
    if isinstance(record, (Workload, EngineKind)):
        problems = schema_problems(record.options)
        if problems:
            raise PluginError(
                f"plugin {provider} registers {kind} {record.name!r} with a broken option schema",
                evidence={"problems": "\n".join(problems)},
                hint="declare options as omnibench_core.records.Option(name, type, default, help, min=..., ...)",
            )


_LOADED: list[tuple[PluginManager, Registry]] = []  # this process's plugins, once loaded


def load(extra_plugins: Iterable[tuple[str, object]] = (), *, fresh: bool = False
         ) -> tuple[PluginManager, Registry]:
    """The plugin manager and registry of this process.

    The entry points are loaded once per process and reused; ``extra_plugins`` (for tests and
    embedding programs) or ``fresh=True`` build a new manager that is not cached.
    """
    extra = list(extra_plugins)
    if _LOADED and not extra and not fresh:
        return _LOADED[0]
    manager = PluginManager()
    manager.load_entry_points()
    for name, plugin in extra:
        manager.register(plugin, name)
    loaded = manager, manager.registry()
    if not extra:
        _LOADED[:] = [loaded]
    return loaded
