"""``measure``: one campaign, resumed by the same command. run0 (the warm-up) once, then the
measured runs; a run that misses a gate or a coverage rule (the run layer moves it aside) is tried
again up to ``retries`` times; with deferred scoring every run is generated first and one start of
each scoring server scores them all."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from .. import api
from ..errors import OmnibenchError, RunInterrupted, RunNotReady, SettingsError, WrongRevision
from ..identity import recorded_settings
from ..process.cpus import check_cpus_here
from ..records import PHASES, UNSCORED, Phase, ScorePolicy
from ..run import ownership
from ..settings import Settings
from ..setup.tree_state import dirty_base
from ..statuses import AttemptStatus, CampaignStatus, RunStatus
from ..store import manifest as manifest_file
from ..store.durations import phase_history
from ..store.names import check_name, lock_path, under_root
from . import campaign_file, record
from .attempt import reclaim, run_attempt, score_generated
from .progress import NO_LATER, CampaignProgress, Later, scoring_history, scoring_start_seconds
from .record import Asked, Attempt, Campaign
from .summary import environment_of

# Attempts whose run is done for now: complete, or generated and waiting for deferred scoring.
DONE = (AttemptStatus.COMPLETE, AttemptStatus.GENERATED)


class CampaignStopped(OmnibenchError):
    """A slot of the campaign missed its gates or coverage more often than ``--retries`` allows."""


class RevisionMoved(CampaignStopped):
    """The target's revision changed while the campaign measured (a commit, a checkout, a rebase):
    its next run would measure other code, in another revision folder than the campaign's."""


def revision_moved(was: Path, now: Path, what: str, where: Path, files: str = "") -> RevisionMoved:
    """The error for ``what`` (``campaign 'x'``, ``sweep 'y'``), recorded at ``where``, begun on
    revision folder ``was`` when the target's runs would now go to ``now``; ``files``: the
    uncommitted files the tree has now, when only they moved it."""
    base_was, base_now = (dirty_base(p.name) for p in (was, now))
    if base_was == base_now:  # the commit is the same: uncommitted edits moved it
        return RevisionMoved(
            f"the checkout's uncommitted files changed while {what} measured ({was.name} -> {now.name}); its runs "
            "would measure other code" + (f": {files}" if files else ": the tree is clean again"),
            evidence={"record": str(where), "measured revision": was.name, "revision now": now.name,
                      "changed files now": files or "none"},
            hint=f"to finish it, put the files back as they were (its runs are kept in {was.name}) and repeat the "
                 "command; to measure the edit, commit it (or repeat it as it is: it starts anew in "
                 f"{now.name})")
    return RevisionMoved(
        f"the target's revision moved from {was.name} to {now.name} while {what} measured; its runs would "
        f"measure other code",
        evidence={"record": str(where), "measured revision": was.name, "revision now": now.name},
        hint=f"to finish it, go back to {base_was.rsplit('-', 1)[-1]} (git checkout) and repeat the command: its "
             f"runs are kept; to measure the new code, repeat it where you are: it starts anew in {now.name}")


@dataclass(frozen=True)
class Outcome:
    """Where a campaign stands after ``measure``."""

    path: Path
    campaign: Campaign


def asked_from(settings: Settings, workloads: Sequence[str], options: Sequence[str], client: str | None,
               runs: int, retries: int, scoring: str, score: ScorePolicy = ScorePolicy.EVERY_ROUND) -> Asked:
    """The campaign's request, checked. ``score``: which runs are scored for quality (every one
    for ``invoke measure``; a sweep point's last, by default)."""
    if runs < 2:
        raise SettingsError("--runs must be at least 2 for a spread", hint="the runbook uses 3")
    if retries < 0:
        raise SettingsError("--retries cannot be negative", hint="0 stops at the first miss")
    if scoring not in record.SCORINGS:
        raise SettingsError(f"unknown --scoring {scoring!r}", hint=f"use {' or '.join(record.SCORINGS)}")
    if not workloads:
        raise SettingsError("no workload given", hint="pass --workload NAME (see `invoke plugins`)")
    return Asked(tuple(workloads), record.sorted_options(options), client, recorded_settings(settings), runs, retries,
                 scoring, score)


class CampaignBusy(OmnibenchError):
    """Another live omnibench process is measuring this campaign (it holds the campaign lock)."""


def measure(settings: Settings, asked: Asked, *, name: str | None = None,
            progress: Callable[[str], None] = print, expect: tuple[Path, str, Path] | None = None,
            later: Later = NO_LATER) -> Outcome:
    """Run (or continue) the campaign; raises CampaignStopped, RunInterrupted, CampaignBusy,
    StorageError or a setup error. ``expect`` (revision folder, what, record): a caller measuring
    several campaigns of one revision (a sweep) has :class:`RevisionMoved` raised when the target's
    revision is no longer that one. ``later``: work after this campaign in the same command (a
    sweep's later points), part of every estimate line.

    The campaign is locked for the whole measurement: a second command for it at once (on
    another port, say) is refused, naming the holder; a dead holder's lock is taken over.
    """
    check_cpus_here(settings.run.cpu_list())  # CPUs not on this host: refused before the campaign file is made
    # an option the checkout's era lacks is refused before the campaign file or any server exists
    api.check_supported(settings, asked.workloads, options=asked.options, client=asked.client, progress=progress)
    revision = api.revision_dir(settings)
    if expect is not None and revision != expect[0]:
        raise revision_moved(expect[0], revision, expect[1], expect[2], api.dirty_files(settings))
    if name is not None:
        check_name(name, "campaign name")  # a given name: one folder entry (the flag checked it too)
    name = name or campaign_file.name_for(revision, asked.identity())
    path = under_root(settings.run.results_root, campaign_file.campaign_path(revision, name), "campaign file")
    with contextlib.ExitStack() as stack:
        stack.enter_context(_campaign_lock(path))
        if path.exists():
            campaign = campaign_file.load(path)
            record.check_same(campaign, asked)
            if campaign.asked.score is not asked.score and any(a.run for a in campaign.attempts):
                raise SettingsError(f"campaign {name!r} began with --score {campaign.asked.score.value}; this command "
                                    f"asks --score {asked.score.value}, which would leave its runs scored by two rules",
                                    evidence={"campaign": str(path)},
                                    hint=f"repeat it with --score {campaign.asked.score.value}, or pass --name for a "
                                         "new campaign")
            campaign = replace(campaign, asked=asked, status=CampaignStatus.RUNNING, reason="", attempts=tuple(
                _dead(a) if a.status == AttemptStatus.RUNNING else a for a in campaign.attempts))
        else:
            campaign = Campaign(name=name, revision=revision.name, asked=asked)
        reclaim([revision], progress)
        campaign = campaign_file.save(path, campaign)
        driver = _Driver(settings, path, campaign, progress, later)
        return Outcome(path, driver.go())


def _dead(attempt: Attempt) -> Attempt:
    """An attempt left "running" in a campaign whose lock was free: its process died (kill -9)."""
    return replace(attempt, status=AttemptStatus.INTERRUPTED,
                   error=attempt.error or "its omnibench process died while it ran (the campaign lock was free)")


@contextlib.contextmanager
def _campaign_lock(path: Path) -> Iterator[Path]:
    """Hold the campaign's lock, ``campaigns/<name>.lock`` beside its file; a results folder that
    cannot hold it is a StorageError."""
    lock = lock_path(path)

    def refuse(holder: str) -> Exception:
        return CampaignBusy(f"campaign {path.stem!r} is being measured by another omnibench process",
                            evidence={"held by": holder, "lock": str(lock)},
                            hint="wait for it to end (the same command then resumes the campaign), "
                                 "or pass --name for another campaign")

    with ownership.measurement_lock(lock, refuse, "campaign"):
        yield lock


class _Driver:
    def __init__(self, settings: Settings, path: Path, campaign: Campaign, progress: Callable[[str], None],
                 later: Later = NO_LATER):
        self.settings, self.path, self.campaign = settings, path, campaign
        self.revision = path.parent.parent
        durations = [a.seconds for a in campaign.attempts if a.status in DONE and a.seconds]
        # Deferred scoring comes after every run's generation: its estimate is what scoring took
        # in this revision folder before (an earlier `invoke run` or campaign of these workloads).
        per_run = scoring_history(self.revision, campaign.asked.workloads) if campaign.asked.scoring == "deferred" \
            else None
        # a history run started its scoring servers for itself; deferred scoring starts them once
        start = (scoring_history(self.revision, campaign.asked.workloads, scoring_start_seconds) or 0.0) \
            if per_run is not None else 0.0
        # Before a run of this campaign ended, the first estimate is the revision folder's history
        history = phase_history(self.revision, campaign.asked.workloads)
        prior = None if history is None else \
            history.total(("generate",) if campaign.asked.scoring == "deferred" else None)
        self.progress = CampaignProgress(progress, campaign.slots, durations,
                                         scoring_per_run_s=None if per_run is None else per_run - start,
                                         scoring_start_s=start, prior_run_s=prior or None, later=later)

    # -- bookkeeping -----------------------------------------------------------------------
    def save(self, attempt: Attempt | None = None, **changes: Any) -> None:
        if attempt is not None:
            self.campaign = self.campaign.with_attempt(attempt)
        self.campaign = campaign_file.save(self.path, replace(self.campaign, **changes))

    def _run_status(self, attempt: Attempt) -> RunStatus | None:
        """What the run's own manifest says now (None when the run is gone or unreadable)."""
        return manifest_file.run_status(self.revision / attempt.run)

    def _done(self, slot: int) -> bool:
        last = self.campaign.latest(slot)
        if last is None or not last.run:
            return False
        wanted = DONE if self.campaign.asked.scoring == "deferred" else (AttemptStatus.COMPLETE,)
        return last.status in wanted and self._run_status(last) == last.status

    # -- the campaign ----------------------------------------------------------------------
    def go(self) -> Campaign:
        c = self.campaign
        with self.progress:
            self.progress.say(f"campaign {c.name}: run0 (warm-up) + {c.asked.runs} runs of "
                              f"{', '.join(c.asked.workloads)}, {c.asked.scoring} scoring, up to {c.asked.retries} "
                              f"retries a run; file {self.path}")
            try:
                if c.asked.scoring == "per-run" and self._pending_generated():
                    # Left generated by deferred scoring before (Ctrl-C, kill): scored now, together,
                    # rather than measured again; later runs follow --scoring per-run.
                    self.progress.say("runs left generated by deferred scoring are scored first; "
                                      "the campaign then goes on with per-run scoring")
                    self._score_generated()
                while True:
                    for slot in range(c.slots):
                        self._fill(slot)
                    if self.campaign.asked.scoring == "deferred":
                        self._score_generated()
                    if all(self._complete(s) for s in range(c.slots)):
                        break
            except RunInterrupted as exc:
                self.save(status=CampaignStatus.INTERRUPTED, reason=exc.message)
                self.progress.say(f"campaign interrupted; the same command resumes it ({self.path})")
                raise
            except (CampaignStopped, RunNotReady, WrongRevision) as exc:  # a retry would miss the same way
                self.save(status=CampaignStatus.STOPPED, reason=exc.message)
                raise
            self.save(status=CampaignStatus.COMPLETE, reason="")
            self.progress.say(f"campaign complete: {len(self.campaign.measured())} measured runs, "
                              f"{self.campaign.server_starts} server starts in all")
        return self.campaign

    def _complete(self, slot: int) -> bool:
        last = self.campaign.latest(slot)
        return last is not None and last.status == AttemptStatus.COMPLETE and self._run_status(last) == RunStatus.COMPLETE

    def _fill(self, slot: int) -> None:
        """Make ``slot`` done (complete, or generated for deferred scoring), retrying misses."""
        c = self.campaign
        label = "run0 warm-up, discarded" if slot == 0 else f"measured run {slot} of {c.asked.runs}"
        while not self._done(slot):
            last = c.latest(slot)
            if last is not None and last.status in DONE:  # its run vanished or changed
                self.progress.say(f"{last.run} of slot {slot} is no longer {last.status}; it is done again")
            if self.campaign.failures(slot) > c.asked.retries:
                errors = [f"{a.run or '-'}: {a.status}: {a.error}" for a in self.campaign.attempts if a.slot == slot]
                raise CampaignStopped(f"slot {slot} ({label}) missed its gates or coverage "
                                      f"{self.campaign.failures(slot)} times; --retries {c.asked.retries} is spent",
                                      evidence={"attempts": "\n".join(errors), "campaign": str(self.path)},
                                      hint="fix the cause, then repeat the command (or raise --retries): "
                                           "complete runs are kept")
            self._attempt(slot, label)

    def _attempt(self, slot: int, label: str) -> None:
        c = self.campaign
        tries = self.campaign.failures(slot)
        to_score = sum(not self._complete(s) and c.asked.scores(s) for s in range(c.slots)) \
            if c.asked.scoring == "deferred" else 0
        self.progress.start_run(slot + 1, label + (f", retry {tries}" if tries else ""), to_score)
        phases: tuple[Phase, ...] = ("generate",) if c.asked.scoring == "deferred" else \
            PHASES if c.asked.scores(slot) else UNSCORED
        self._check_revision(api.revision_dir(self.settings))
        attempt = Attempt(slot, "", AttemptStatus.RUNNING, record.now_iso())
        try:
            result = run_attempt(self.settings, c.asked.workloads, options=c.asked.options, client=c.asked.client,
                                 phases=phases, progress=self.progress, label=label,
                                 record=lambda ended: self.save(replace(attempt, **ended.changes())))
        except WrongRevision:  # REV_OK saw the tree move under the run: the move, not a retry's worth
            self._moved_during(slot, attempt)
            raise
        if result is not None and result.run_dir.parent != self.revision:  # it moved while the run started
            # not this campaign's run: a name that means another run in the campaign's folder is dropped
            self.save(replace(self.campaign.latest(slot) or attempt, run="", status=AttemptStatus.INTERRUPTED,
                              error=f"measured {result.run_dir.parent.name}, not the campaign's "
                                    f"{self.revision.name}: kept there as {result.run_dir.name}"))
            self._check_revision(result.run_dir.parent)
        self._moved_during(slot, attempt)
        if result is not None and slot == 0 and not self.campaign.environment:
            self.save(environment=environment_of(result.run_dir))

    def _check_revision(self, now: Path) -> None:
        """Stop with :class:`RevisionMoved` when the runs would now go to ``now``, not the campaign's
        revision folder: a campaign measures one revision's code, and its runs are found by name in
        its own folder (measured elsewhere, they were never found, and it measured on forever)."""
        if now != self.revision:
            raise revision_moved(self.revision, now, f"campaign {self.campaign.name!r}", self.path,
                                 api.dirty_files(self.settings))

    def _moved_during(self, slot: int, attempt: Attempt) -> None:
        """After a run (or its REV_OK failure): if the revision moved meanwhile, servers started after
        the move may have served the new code, so the run is not counted (interrupted: no retry
        spent) and the campaign stops."""
        now = api.revision_dir(self.settings)
        if now != self.revision:
            latest = self.campaign.latest(slot)
            if latest is not None and latest.started == attempt.started:
                self.save(replace(latest, status=AttemptStatus.INTERRUPTED,
                                  error=f"the target's revision moved to {now.name} during this run: not counted"))
            self._check_revision(now)

    def _score_generated(self) -> None:
        """Deferred scoring: every generated run ``--score`` scores, on one start of each scoring
        server; the others (a sweep point's runs but its last) finished without scoring."""
        c = self.campaign
        pending = self._pending_generated()
        if not pending:
            return
        self._check_revision(api.revision_dir(self.settings))  # scoring servers import the tree's code too
        unscored = [a for a in pending if not c.asked.scores(a.slot)]
        if unscored:
            where = "no run" if c.asked.score is ScorePolicy.NONE else "the last run"
            self.progress.say(f"{', '.join(a.run for a in unscored)} finished without scoring "
                              f"(--score {c.asked.score.value}: quality is scored on {where})")
            self._finish(unscored, quality=False)
        scored = [a for a in pending if c.asked.scores(a.slot)]
        if not scored:
            return
        self.progress.phase(f"scoring {len(scored)} generated runs together", len(scored))
        self.progress.say(f"scoring {', '.join(a.run for a in scored)} with one start of each scoring server")
        t0 = time.monotonic()
        count = self._finish(scored, quality=True)
        self.progress.scored(time.monotonic() - t0, count)

    def _finish(self, pending: list[Attempt], quality: bool) -> int:
        """Score (or with ``quality`` False, collect unscored) the generated runs of ``pending``."""
        c = self.campaign
        by_dir = {self.revision / a.run: a for a in pending}
        return score_generated(self.settings, c.asked.workloads, list(by_dir), options=c.asked.options,
                               client=c.asked.client, progress=self.progress,
                               record=lambda run_dir, done: self.save(replace(by_dir[run_dir], **done.changes())),
                               quality=quality)

    def _pending_generated(self) -> list[Attempt]:
        """The latest attempt of each slot whose run is left generated (to be scored)."""
        latest = [self.campaign.latest(s) for s in range(self.campaign.slots)]
        return [a for a in latest if a is not None and a.status == AttemptStatus.GENERATED
                and self._run_status(a) == RunStatus.GENERATED]
