"""The built-in engines, registered as omnibench's plugin ``engines`` through the same hook a
third-party engine uses (``omnibench_engines``; docs/engines.md): ``local`` (this host's slots side
by side, a subprocess per campaign) and ``ray`` (one Ray task per campaign on an existing cluster).
The engines' modules are imported when one is made, so loading the plugins costs none of them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..defaults import TRANSPORT, TRANSPORTS
from ..hooks.specs import hookimpl
from ..records import EngineKind, EngineRequest, Option


def _local(request: EngineRequest) -> Any:
    from .engine import host_slots
    from .local import LocalEngine

    return LocalEngine(host_slots(request), progress=request.progress)


def _ray(request: EngineRequest) -> Any:
    from .ray_engine import RayEngine  # Ray is an optional extra: imported only when chosen

    settings, opts = request.settings, request.options
    checkout = settings.run.checkout
    return RayEngine(str(opts["address"]), settings.run.port, settings.run.results_root, per=request.slot_per,
                     cpu_mode=request.slot_cpus, progress=request.progress, transport=str(opts["results_transport"]),
                     checkout_url=str(opts["checkout_url"]),
                     # absolute: the receiver actor's working folder is Ray's, not the user's
                     checkout=str(Path(checkout).expanduser().resolve()) if checkout else "")


@hookimpl
def omnibench_engines() -> list[EngineKind]:
    """The local and Ray engines."""
    return [
        EngineKind("local", "this host's slots side by side, one subprocess per campaign", _local),
        EngineKind("ray", "one Ray task per campaign on an existing cluster (pip install -e '.[ray]')", _ray, options=(
            Option("address", str, "auto", "Ray cluster address (auto: the cluster `ray start` made on this host)"),
            Option("results_transport", str, TRANSPORT, "auto (ship results home from the nodes that do not see "
                   "the results root), ray (ship from every node) or shared (a shared file system)",
                   choices=TRANSPORTS),
            Option("checkout_url", str, "", "the git URL (or path) each node clones the checkout from "
                   "(default the checkout)"),
        )),
    ]
