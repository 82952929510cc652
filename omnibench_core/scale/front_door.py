"""The scale layer's front door, called by ``invoke matrix`` and ``invoke bisect``."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import cast

from .. import api, defaults
from ..errors import PluginError, SettingsError
from ..records import EngineKind, EngineRequest, ScorePolicy
from ..records import options as engine_options
from ..registry import manager as plugin_manager
from ..settings import Settings
from ..sweep.points import at_point, parse_point_metric
from . import bisect as bisect_mod
from . import revisions
from .engine import ENGINE_METHODS, Engine
from .matrix import MatrixResult, MatrixSpec, check_size, parse_sweep, run_matrix
from .transport import DEFAULT_TRANSPORT

Progress = Callable[[str], None]


def engine_names() -> tuple[str, ...]:
    """The engines the plugins register (``--engine``'s words; built in: local and ray)."""
    _, registry = plugin_manager.load()
    return tuple(sorted(registry.table("engine")))


# The Ray engine's options that have flags of their own (``--address`` and the others), with the
# flag's default: a flag left at it says nothing.
RAY_FLAGS = {"address": "auto", "results_transport": DEFAULT_TRANSPORT, "checkout_url": ""}


def ray_flag_options(engine: str, given: Mapping[str, str]) -> list[str]:
    """The ``KEY=VALUE`` engine options the Ray engine's own flags (``--address``,
    ``--results-transport``, ``--checkout-url``) stand for; refused for another engine."""
    pairs = [f"{key}={value}" for key, value in given.items() if value != RAY_FLAGS[key]]
    if pairs and engine != "ray":
        flags = ", ".join("--" + p.split("=", 1)[0].replace("_", "-") for p in pairs)
        raise SettingsError(f"{flags} applies to the ray engine, not --engine {engine}",
                            hint="drop it, or pass --engine ray (an engine's own options: --engine-opt KEY=VALUE)")
    return pairs


def make_engine(settings: Settings, *, engine: str = "local", slots: str = "", slot_per: str = "pair",
                slot_cpus: str = "rule", engine_opts: Sequence[str] = (), progress: Progress = print) -> Engine:
    """The engine a plugin registers as ``engine`` (built in: ``local``, this host's slots from
    ``--slots``; ``ray``, an existing cluster), made with its options ``engine_opts`` (``KEY=VALUE``,
    checked against its schema first). Each slot's note is said once."""
    _, registry = plugin_manager.load()
    table = registry.table("engine")
    if engine not in table:
        raise SettingsError(f"unknown --engine {engine!r}",
                            hint=f"use {' or '.join(sorted(table))} (`invoke plugins` lists the engines)")
    kind: EngineKind = table[engine].record
    options = engine_options.parse_pairs(engine, kind.options, engine_opts, "--engine-opt")
    made = kind.make(EngineRequest(settings, slots, slot_per, slot_cpus, options, progress))
    lacking = [name for name in ENGINE_METHODS if not callable(getattr(made, name, None))]
    if lacking:
        raise PluginError(f"engine {engine!r} ({table[engine].provider}) made a {type(made).__name__} without "
                          f"{', '.join(lacking)}", hint="an engine has the methods of omnibench_core.scale.engine.Engine")
    return cast(Engine, made)


def resolve_revisions(settings: Settings, spec: str) -> tuple[str, ...]:
    """The revisions to measure: commits of the checkout (target sglang-omni), or the local
    target's own (which has one revision, omnibench's commit)."""
    if settings.run.target == "local":
        if spec.strip():
            raise SettingsError("the local target measures omnibench's own commit; --revisions does not apply",
                                hint="use --target sglang-omni --checkout PATH to measure commits of a checkout")
        return ("",)
    return tuple(revisions.resolve(Path(settings.run.checkout).expanduser(), spec, settings.tools.git))


def campaign_score(workloads: Sequence[str], score: str | None, metric: str = "") -> ScorePolicy:
    """Which runs a scale command's campaigns score (``--score``): every one unless asked, as
    ``invoke measure`` (then its campaigns are measure's, and each can take the other's); ``none``
    or ``last`` for a speed question, refused where ``metric`` is a quality one (made only by
    scoring) or a workload cannot finish a run unscored (:func:`omnibench_core.api.score_policy`)."""
    point = parse_point_metric(metric) if metric else None
    metric = point.metric if point is not None else metric
    asked = api.score_word(score)
    if asked is None:
        return ScorePolicy.EVERY_ROUND
    return api.score_policy(workloads, asked, [metric] if metric else [], flag="--metric")


def matrix(settings: Settings, *, revisions_spec: str, workloads: Sequence[str], sweep: Sequence[str] = (),
           options: Sequence[str] = (), runs: int = defaults.RUNS, client: str | None = None,
           engine: Engine, resume: bool = False, threshold: float = defaults.MIN_EFFECT,
           score: str | None = None, progress: Progress = print) -> MatrixResult:
    """``invoke matrix``: every revision x option set one campaign; the table and compares.
    ``score`` (``--score``; None: every run, as ``invoke measure``): which runs are scored."""
    if not workloads:
        raise SettingsError("no workload given", hint="pass --workload NAME (see `invoke plugins`)")
    policy = campaign_score(workloads, score)
    option_sets = tuple(parse_sweep(sweep))
    revisions = resolve_revisions(settings, revisions_spec)
    check_size(len(revisions) * len(option_sets), "the revisions x option sets")
    spec = MatrixSpec(revisions, tuple(workloads), option_sets, tuple(options), runs, client, engine=engine.name,
                      score=policy)
    try:
        return run_matrix(settings, spec, engine, resume=resume, threshold=threshold, progress=progress)
    finally:
        engine.close()


def bisect(settings: Settings, *, good: str, bad: str, metric: str, workloads: Sequence[str], engine: Engine,
           threshold: float = defaults.MIN_EFFECT, runs: int = defaults.RUNS, options: Sequence[str] = (),
           client: str | None = None, score: str | None = None,
           progress: Progress = print) -> bisect_mod.BisectResult:
    """``invoke bisect``: the first commit after ``good`` up to ``bad`` that is worse on ``metric``
    (a metric at a load point, ``seedtts@c16.throughput_qps``, measured with the point's options).
    ``score`` (``--score``; None: every run): which runs are scored; a quality ``metric`` needs every one."""
    policy = campaign_score(workloads, score, metric)
    if settings.run.target == "local":
        raise SettingsError("bisect needs commits of a checkout", hint="use --target sglang-omni --checkout PATH")
    point = parse_point_metric(metric)  # seedtts@c16.throughput_qps: the metric at the point's options
    if point is not None:
        point.check_measured(workloads, "this bisect")
        options, metric = at_point(options, point), point.metric
    commits = revisions.commits_between(Path(settings.run.checkout).expanduser(), good, bad, settings.tools.git)
    try:
        return bisect_mod.bisect(settings, commits, workloads=workloads, metric=metric, engine=engine,
                                 threshold=threshold, runs=runs, options=options, client=client, progress=progress,
                                 score=policy)
    finally:
        engine.close()
