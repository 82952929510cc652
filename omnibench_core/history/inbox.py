"""What the history is told: a campaign measured (once its report exists, so the site links the
report), an A/B experiment's sides, a bisect's named commit. The measuring layers import nothing of
the history: they call the plugin hooks its built-in plugin implements (:mod:`.hooks`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from ..errors import OmnibenchError
from ..settings import Settings
from . import store as st
from .rebuild import ensure

Progress = Callable[[str], None]

def campaign_done(settings: Settings, campaign_file: Path, progress: Progress = print) -> bool:
    """Tell the history of a measured campaign (after its report, where one is made): indexed when
    complete; a store that cannot take it is said, never a failed command (the run directories stay
    the truth: ``invoke history --rebuild``). True when it was indexed."""
    try:
        return index_campaign(settings.run.results_root, campaign_file, git=settings.tools.git)
    except OmnibenchError as exc:
        progress(f"note: the campaign is not in the history database: {exc.message} ({exc.hint})")
        return False


def experiment_done(settings: Settings, experiment_file: Path, progress: Progress = print) -> int:
    """Tell the history of a complete A/B experiment, after its result is written: the sides that
    measured a commit are indexed; a store that cannot take them is said, never a failed command."""
    try:
        return index_experiment(settings.run.results_root, experiment_file, git=settings.tools.git)
    except OmnibenchError as exc:
        progress(f"note: the experiment is not in the history database: {exc.message} ({exc.hint})")
        return 0


def index_campaign(results: Path, campaign_file: Path, *, git: str = "git", checkouts: Sequence[str] = (),
                   make_missing: bool = True) -> bool:
    """Index one campaign file (when complete); True when it was. A missing database is made
    from every campaign file first (this one among them), never a store of this campaign alone;
    with ``make_missing`` false it is left missing instead (False: the next query makes it).
    ``checkouts``: where else its commit is looked up (see :func:`.store.campaign_point`)."""
    if not make_missing and not st.present(st.db_path(results)):
        return False
    found = st.campaign_point(results, campaign_file, git=git, checkouts=checkouts)  # git runs before the store is opened
    if found is None:
        return False
    ensure(results, git=git, checkouts=checkouts)
    with st.opened(results) as store:
        store.add(found)
    return True


def index_experiment(results: Path, experiment_file: Path, *, git: str = "git") -> int:
    """Index a complete A/B experiment's sides (see :func:`.store.read_experiment`); how many were."""
    sides = st.experiment_points(results, experiment_file, git=git)  # git runs before the store is opened
    ensure(results, git=git)
    with st.opened(results) as store:
        for side in sides:
            store.add(side)
    return len(sides)


def index_bisect(results: Path, bisect_file: Path, *, git: str = "git") -> st.Bisected | None:
    """Record the commit a bisect file names (see :func:`.store.read_bisect`); None when it cannot be read."""
    found = st.read_bisect(results, bisect_file)
    if found is None:
        return None
    ensure(results, git=git)
    with st.opened(results) as store:
        store.add_bisect(found)
    return found
