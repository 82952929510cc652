"""The history as omnibench's built-in plugin ``history``: what it does after a campaign or an
experiment (index it), before a Ray matrix (make the store its receiver adds to) and when a
campaign arrives home from a node. The measuring layers call these hooks through the plugin
manager and import nothing of the history; its modules are imported here only when a hook runs,
so loading the plugins costs none of them."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from pathlib import Path

from ..errors import OmnibenchError
from ..hooks.specs import hookimpl
from ..settings import Settings


@hookimpl
def omnibench_campaign_done(settings: Settings, path: Path, progress: Callable[[str], None]) -> None:
    """Index the measured campaign (when complete); a store that cannot take it is said."""
    from .inbox import campaign_done

    campaign_done(settings, path, progress)


@hookimpl
def omnibench_experiment_done(settings: Settings, path: Path, progress: Callable[[str], None]) -> None:
    """Index the sides of the complete A/B experiment that measured a commit."""
    from .inbox import experiment_done

    experiment_done(settings, path, progress)


@hookimpl
def omnibench_results_opening(results: Path, checkouts: Sequence[str], progress: Callable[[str], None]) -> None:
    """Make the store from the files when it is missing (the receiver only adds to it); one that
    cannot be made costs only the index: that is said, and the matrix goes on."""
    from .rebuild import ensure

    try:
        ensure(results, checkouts=checkouts, progress=progress)
    except OmnibenchError as exc:
        progress(f"history: {exc.message}; campaigns shipped home are indexed by the next "
                 "`invoke history --rebuild`")


@hookimpl
def omnibench_campaign_arrived(results: Path, path: Path, git: str, checkouts: Sequence[str]) -> None:
    """Add the shipped campaign to the store, never a whole rebuild here (every node's next call
    would wait behind it); a store deleted since is made from every file by the next query."""
    from .inbox import index_campaign

    with contextlib.suppress(OmnibenchError):
        index_campaign(results, path, git=git, checkouts=checkouts, make_missing=False)
