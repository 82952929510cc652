"""``invoke publish``'s front door: the history the flags select (:mod:`.query`, the store's
side), rendered as a static site (:mod:`.site`) with every sweep and A/B experiment of the
results root (the flags narrow the history's series only)."""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..errors import OmnibenchError, SettingsError
from ..settings import Settings
from . import site
from .series import History

QUERY = "omnibench_core.history.query"


@dataclass(frozen=True)
class Published:
    """A site written: where, and what it holds."""

    site: Path
    series: int
    regressions: int
    skipped: tuple[str, ...] = ()  # what of the reports was not copied (links out of the results root)
    sweeps: int = 0
    experiments: int = 0


def _query() -> Callable[..., History]:
    """The store's ``history()``, imported when asked for: the site renders a History from anywhere."""
    try:
        query = importlib.import_module(QUERY)
    except ModuleNotFoundError as exc:
        if exc.name != QUERY:
            raise
        raise OmnibenchError("this omnibench has no history store to publish from",
                             evidence={"module": QUERY},
                             hint="install an omnibench with `invoke history` (the store is built from the "
                                  "results root), then run invoke publish again") from None
    history: Callable[..., History] = query.history
    return history


def publish(settings: Settings, out: Path, *, target: str | None = None, workload: str | None = None,
            metric: str | None = None, revisions: str | None = None, checkout: Path | None = None) -> Published:
    """The history of ``settings``' results root (narrowed by the flags) as a site at ``out``."""
    results = settings.run.results_root
    site.refuse_unless_replaceable(Path(os.path.abspath(out)))  # before the query: a wrong --out costs nothing
    if not Path(results).is_dir():  # a mistyped --results made an empty history there and replaced the site
        raise SettingsError(f"no results folder at {results}", evidence={"setting": "omnibench.results"},
                            hint="pass --results where your runs are (the folder `invoke run` printed them under)")
    history = _query()(results, metric=metric, workload=workload, revisions=revisions, target=target,
                       checkout=checkout)
    skipped: list[str] = []
    made = site.render(history, results, out, skipped)
    studies = site.studies_of(results)  # what the site shows of them, counted for the line printed
    return Published(made, len(history.series), len(site.regressions(history, site.pages_of(history))),
                     tuple(skipped), len(studies.sweeps), len(studies.experiments))


def publish_text(done: Published) -> str:
    """What ``invoke publish`` prints."""
    lines = [f"skipped {line}" for line in done.skipped]
    return "\n".join([*lines, f"site: {done.site / 'index.html'} ({done.series} series, {done.regressions} regressions, "
                               f"{done.sweeps} sweeps, {done.experiments} A/B experiments); "
                               "open it from disk, or copy the folder anywhere (the reports are inside it)"])
