"""The scale layer's front door, called by ``invoke matrix`` and ``invoke bisect``."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from .. import defaults
from ..errors import SettingsError
from ..registry import manager as plugin_manager
from ..settings import Settings
from ..setup.cpus import Topology, read_topology
from ..sweep.points import at_point, parse_point_metric
from . import bisect as bisect_mod
from . import revisions
from .engine import Engine
from .local import LocalEngine
from .matrix import MatrixResult, MatrixSpec, parse_sweep, run_matrix
from .slots import HostSlot, parse_gpu_ids, plan_slots
from .transport import DEFAULT_TRANSPORT

Progress = Callable[[str], None]
ENGINES: tuple[str, ...] = ("local", "ray")


def uses_gpu(settings: Settings) -> bool:
    """Whether the configured target's servers use GPUs (its ``TargetFacts``): slots get GPUs and
    SLOT_FREE asks nvidia-smi only then."""
    _, registry = plugin_manager.load()
    return registry.get("target", settings.run.target).facts.uses_gpu


def host_slots(settings: Settings, slots: str, slot_per: str, slot_cpus: str, progress: Progress = print
               ) -> list[HostSlot]:
    """This host's slots from ``--slots`` (GPU ids; default the ``gpus`` setting; on a target whose
    servers use no GPU each id names a slot of a port and CPUs only); each slot's note is said once."""
    ids = parse_gpu_ids(slots or settings.run.gpus)
    h = settings.host

    def topo() -> Topology:
        return read_topology(lscpu=settings.tools.lscpu, nvidia_smi=settings.tools.nvidia_smi, sysfs=h.sysfs)

    skip = tuple(int(c) for c in h.skip_cores.split(",") if c.strip())
    planned = plan_slots(ids, settings.run.port, per=slot_per, cpus=slot_cpus, topology=topo,
                         cores_per_gpu=h.cores_per_gpu, skip_cores=skip, uses_gpu=uses_gpu(settings))
    for slot in planned:
        if slot.note:
            progress(f"note: {slot.label}: {slot.note}")
    return planned


def make_engine(settings: Settings, *, engine: str = "local", slots: str = "", slot_per: str = "pair",
                slot_cpus: str = "rule", address: str = "auto", results_transport: str = DEFAULT_TRANSPORT, checkout_url: str = "",
                progress: Progress = print) -> Engine:
    """The local engine over ``slots`` (GPU ids of this host; default the ``gpus`` setting; on a
    target whose servers use no GPU, each id names a slot of a port and CPUs only), or the Ray
    engine on the cluster at ``address``, its results moved by ``results_transport`` and its
    nodes' checkouts cloned from ``checkout_url`` (default the checkout's path). Each slot's note
    is said once, here."""
    if engine == "local":
        return LocalEngine(host_slots(settings, slots, slot_per, slot_cpus, progress), progress=progress)
    if engine == "ray":
        from .ray_engine import RayEngine
        return RayEngine(address, settings.run.port, settings.run.results_root, per=slot_per, cpu_mode=slot_cpus,
                         progress=progress, transport=results_transport, checkout_url=checkout_url,
                         # absolute: the receiver actor's working folder is Ray's, not the user's
                         checkout=str(Path(settings.run.checkout).expanduser().resolve()) if settings.run.checkout else "")
    raise SettingsError(f"unknown --engine {engine!r}", hint=f"use {' or '.join(ENGINES)}")


def resolve_revisions(settings: Settings, spec: str) -> tuple[str, ...]:
    """The revisions to measure: commits of the checkout (target sglang-omni), or the local
    target's own (which has one revision, omnibench's commit)."""
    if settings.run.target == "local":
        if spec.strip():
            raise SettingsError("the local target measures omnibench's own commit; --revisions does not apply",
                                hint="use --target sglang-omni --checkout PATH to measure commits of a checkout")
        return ("",)
    return tuple(revisions.resolve(Path(settings.run.checkout).expanduser(), spec, settings.tools.git))


def matrix(settings: Settings, *, revisions_spec: str, workloads: Sequence[str], sweep: Sequence[str] = (),
           options: Sequence[str] = (), runs: int = defaults.RUNS, client: str | None = None,
           engine: Engine, resume: bool = False, threshold: float = defaults.MIN_EFFECT,
           progress: Progress = print) -> MatrixResult:
    """``invoke matrix``: every revision x option set one campaign; the table and compares."""
    if not workloads:
        raise SettingsError("no workload given", hint="pass --workload NAME (see `invoke plugins`)")
    spec = MatrixSpec(resolve_revisions(settings, revisions_spec), tuple(workloads), tuple(parse_sweep(sweep)),
                      tuple(options), runs, client)
    try:
        return run_matrix(settings, spec, engine, resume=resume, threshold=threshold, progress=progress)
    finally:
        engine.close()


def bisect(settings: Settings, *, good: str, bad: str, metric: str, workloads: Sequence[str], engine: Engine,
           threshold: float = defaults.MIN_EFFECT, runs: int = defaults.RUNS, options: Sequence[str] = (),
           client: str | None = None, progress: Progress = print) -> bisect_mod.BisectResult:
    """``invoke bisect``: the first commit after ``good`` up to ``bad`` that is worse on ``metric``
    (a metric at a load point, ``seedtts@c16.throughput_qps``, measured with the point's options)."""
    if settings.run.target == "local":
        raise SettingsError("bisect needs commits of a checkout", hint="use --target sglang-omni --checkout PATH")
    point = parse_point_metric(metric)  # seedtts@c16.throughput_qps: the metric at the point's options
    if point is not None:
        point.check_measured(workloads, "this bisect")
        options, metric = at_point(options, point), point.metric
    commits = revisions.commits_between(Path(settings.run.checkout).expanduser(), good, bad, settings.tools.git)
    try:
        return bisect_mod.bisect(settings, commits, workloads=workloads, metric=metric, engine=engine,
                                 threshold=threshold, runs=runs, options=options, client=client, progress=progress)
    finally:
        engine.close()
