"""One campaign on a node that does not see the driver's results root (``--results-transport
ray``): what runs where.

On the node: its own bare clone of the checkout (:mod:`.node_checkout`), worktrees and venvs
under ``<node folder>/worktrees`` (deps-hash reuse per node), and the campaign under a fresh
``<node folder>/tasks/<id>/results``, into which the driver's copy of the campaign was unpacked
first (so a resumed campaign continues from what the driver has). Each run goes home as it
completes (:class:`.transport.Shipper`); the outcome names the driver's files. The node's
folder goes only once the shipper confirms the driver holds the node's last campaign file
(:meth:`.transport.Shipper.home_is_current`); else it stays, and the outcome says where. A node
that dies loses only the run it had not finished.
"""

from __future__ import annotations

import secrets
import shutil
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Protocol

from ..campaign import campaign_file
from ..errors import OmnibenchError, storage_error
from ..identity import Identity
from ..settings import Settings
from ..statuses import JobStatus
from .jobs import CampaignOutcome
from .matrix import folder_of
from .node_checkout import node_checkout
from .transport import Seed, Shipped, ShippedRun, Shipper, campaign_runs, node_root, retarget, unpack
from .worker import WorkerSpec, execute


class Home(Protocol):
    """The driver's end of the transport (:class:`.transport.Receiver`, or a handle to it)."""

    def ship(self, task: str, folder: str, runs: list[ShippedRun], rel: str, campaign: bytes | None,
             checkout: str | None) -> Shipped:
        """Write runs, then the campaign file (when sent), in one call; their names at the driver."""
        ...

    def seed(self, folder: str, identity: Identity, name: str | None = None) -> Seed:
        """The driver's copy of the campaign of ``identity`` (its data b"" when it has none), under
        ``name`` when the job has its own (``CampaignJob.campaign_name``)."""
        ...


def places(spec: WorkerSpec, results: Path) -> tuple[str, Identity]:
    """The job's revision folder (its name) and what its campaign measures, under a results root."""
    settings = Settings.from_mapping({**spec.settings, "results": str(results)})
    return folder_of(settings, spec.job).name, spec.job.identity(settings)


def _revision_checkout(spec: WorkerSpec) -> bool:
    return bool(spec.job.revision) and Settings.from_mapping(spec.settings).run.target != "local"


def _start_from_home(home: Home, results: Path, folder: str, identity: Identity, node_tree: str | None,
                     name: str | None = None) -> tuple[str, dict[str, str] | None]:
    """Unpack the driver's copy of the campaign into ``results`` (its worktree set to this
    node's): the campaign file's path (under the name the driver holds it by, which the campaign
    layer here then continues) and the runs it counts, or None when the driver has no campaign yet."""
    found = home.seed(folder, identity, name)
    if not found.data:
        return found.rel, None
    path = results / found.rel
    try:
        unpack(found.data, results)
    except OSError as exc:
        raise storage_error("unpacking the driver's copy of the campaign on this node", exc) from exc
    campaign = campaign_file.save(path, retarget(campaign_file.load(path), node_tree), stamp=False)
    return found.rel, dict(campaign_runs(results / folder, campaign))


def run_shipped(spec: WorkerSpec, home: Home, source: str, *, node: str = "",
                progress: Callable[[str], None] = print) -> CampaignOutcome:
    """Run ``spec``'s campaign under this node's folder, starting from the driver's copy and
    sending each run home; the outcome names the driver's campaign file and runs."""
    job, base = spec.job, Settings.from_mapping(spec.settings)
    root = node_root()
    task = f"{job.short}-{secrets.token_hex(6)}"
    results = root / "tasks" / task / "results"
    folder, identity = places(spec, results)
    settings = {**spec.settings, "results": str(results)}
    home_tree = node_tree = None
    if _revision_checkout(spec):
        try:
            settings["checkout"] = str(node_checkout(source, root, job.revision, node=node, git=base.tools.git))
        except OmnibenchError as exc:
            return CampaignOutcome(job.key, JobStatus.FAILED, slot=spec.slot.as_dict(), error=str(exc))
        home_tree, node_tree = str(Path(spec.worktrees) / job.revision), str(root / "worktrees" / job.revision)
    try:
        rel, seeded = _start_from_home(home, results, folder, identity, node_tree, job.campaign_name(base))
    except OmnibenchError as exc:
        return CampaignOutcome(job.key, JobStatus.FAILED, slot=spec.slot.as_dict(), error=str(exc))
    if seeded is not None:
        progress(f"continuing from the driver's copy: {', '.join(sorted(seeded)) or 'no run'} kept")
    local = WorkerSpec(job, spec.slot, settings, str(root / "worktrees"), spec.slot_timeout_s)
    shipper = Shipper(results, folder, rel, lambda runs, data: home.ship(task, folder, runs, rel, data, home_tree),
                      seeded=seeded or {})
    kept = f"the campaign stays on node {node or '(this one)'} in {results.parent}"
    try:
        with shipper:
            outcome = execute(local, progress=progress)
    except OmnibenchError as exc:  # the last flush could not reach the driver or write there
        return CampaignOutcome(job.key, JobStatus.FAILED, slot=spec.slot.as_dict(),
                               error=f"results not shipped home ({kept}): {exc}")
    if not shipper.home_is_current():
        lost = f"the driver does not hold this node's last campaign file: {kept}"
        progress(lost)
        if outcome.status is JobStatus.COMPLETE:  # the driver's copy is not the campaign that completed
            return CampaignOutcome(job.key, JobStatus.FAILED, slot=spec.slot.as_dict(), seconds=outcome.seconds,
                                   error=f"{lost}; repeat the command with --resume")
        return replace(outcome, error="; ".join(e for e in (outcome.error, lost) if e))
    if outcome.status is not JobStatus.COMPLETE:
        return outcome
    if not any((results / folder).glob("run*-incomplete*")):  # a run moved aside stays here, as evidence
        shutil.rmtree(results.parent, ignore_errors=True)  # everything that counts is at the driver now
    home_folder = Path(spec.settings["results"]) / folder
    return replace(outcome, campaign=shipper.home_campaign, folder=str(home_folder),
                   runs=tuple(shipper.names.get(r, r) for r in outcome.runs))
