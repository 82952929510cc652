"""Executes a planned run: gates, servers, steps, then collection; an incomplete run is moved aside.

The runner gets everything it needs as arguments (a :class:`RunPlan` of records, settings and a
:class:`~omnibench_core.records.Slot`, plus callbacks) and returns a
:class:`~omnibench_core.records.RunResult`; it never looks plugins up itself, so a campaign or a
matrix can drive many runners, each on its own slot.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ..errors import (
    GateError,
    OmnibenchError,
    RunInterrupted,
    RunNotReady,
    SettingsError,
    StepFailed,
    StorageError,
    Terminated,
    WrongRevision,
    storage_error,
)
from ..heartbeat import stamp
from ..process.gpu import call_timeout
from ..process.ports import port_holder, port_in_use
from ..process.processes import GroupProcess, build_env, start_group
from ..process.strays import find_strays, stop_strays
from ..records import (
    PHASES,
    RUN_PHASES,
    Command,
    Phase,
    RunCheck,
    RunInfo,
    RunResult,
    ServeSpec,
    Slot,
    Step,
    TargetEnv,
    Workload,
)
from ..settings import RunSettings, ToolSettings, parse_percentiles
from ..statuses import GateStatus, RunStatus, StepStatus
from ..store import manifest as manifest_file
from ..store.manifest import Manifest, RunHeader, now_iso
from ..store.names import COMMIT_NAME, DIRTY_NAME
from ..store.run_entries import OutputFile, ServerEntry, StepEntry
from ..telemetry import hostload
from ..telemetry.run_summary import StepWindow, server_summary, write_run_telemetry
from ..telemetry.sampler import Sampler
from . import gates, ownership, rev_ok
from .collection import collect_run, with_percentiles, with_server_ready, write_metrics
from .eta import RunEta
from .layout import move_aside
from .planning import Group, PlannedStep, order_steps
from .served_model import MODELS_PATH, read_served
from .step_exec import StepScope, run_step, step_log_path

Progress = Callable[[str], None]


@dataclass(frozen=True)
class RunPlan:
    """Everything the runner needs for one run, resolved from the registry by the caller."""

    run_dir: Path
    settings: RunSettings  # the run section only
    tools: ToolSettings
    target: TargetEnv
    slot: Slot
    workloads: tuple[Workload, ...]
    steps: Mapping[str, Sequence[Step]]  # by workload, scorer steps included
    options: Mapping[str, Mapping[str, Any]]  # by workload
    environment: Mapping[str, Any]
    checks: tuple[RunCheck, ...] = ()


@contextlib.contextmanager
def sigterm_as_exception() -> Iterator[None]:
    """Turn SIGTERM into :class:`Terminated` so every ``finally`` (server stops) runs."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: object) -> None:
        raise Terminated()

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def interrupted_message(exc: BaseException) -> str:
    """What an interrupt outside a run says: which signal, and that repeating the command is safe."""
    why = "SIGTERM" if isinstance(exc, Terminated) else "Ctrl-C (SIGINT)"
    return (f"interrupted by {why}; reports and campaign files are written whole or not at all, "
            "so the same command can be repeated")


class Runner:
    """Runs one :class:`RunPlan`. Use :meth:`execute`."""

    def __init__(self, plan: RunPlan, *, progress: Progress = print,
                 on_start: Callable[[RunInfo], None] = lambda info: None,
                 before_timed: Callable[[str], None] | None = None,
                 resolve: rev_ok.Resolver = rev_ok.resolve_modules, proc: Path = Path("/proc"),
                 allowed_dirty: frozenset[str] = frozenset()):
        self.plan = plan
        # REV_OK's probes: where a python imports the package from, and /proc (injectable for tests)
        self.resolve, self.proc = resolve, proc
        # files of the checkout REV_OK lets differ from HEAD (a dirty checkout's recorded files)
        self.allowed_dirty = allowed_dirty
        self.progress = progress
        self.on_start = on_start
        # Called with the step's name once its server is READY, before a timed window opens: a
        # duet A/B holds both sides there, so their timed windows overlap.
        self.before_timed = before_timed
        self.run_dir = plan.run_dir
        self.info = RunInfo(plan.run_dir, plan.target.target, tuple(w.name for w in plan.workloads),
                            plan.target.revision)
        self._t0 = time.monotonic()
        self._current = ""  # the step running now, for "server died during step X"
        self._left_running: list[str] = []  # servers a stop could not end
        self._windows: list[StepWindow] = []  # the steps run on the current server, for telemetry
        self._sampler_now: Sampler | None = None
        self.scope = StepScope(plan.run_dir, plan.slot.endpoint, plan.target, plan.slot.cpus,
                               plan.settings.stop_grace_s)
        self.manifest: Manifest | None = None
        self.result: RunResult | None = None  # set once the run ended, failed or not

    # -- progress --------------------------------------------------------------------------
    def say(self, message: str) -> None:
        """Emit a progress line with the run's elapsed time.

        A reader that went away (``invoke run | head``) must not fail the run: progress stops.
        """
        try:
            self.progress(f"{stamp(time.monotonic() - self._t0)} {message}")
        except (BrokenPipeError, ValueError):  # ValueError: write to a closed file
            self.progress = _quiet

    # -- the run ---------------------------------------------------------------------------
    def execute(self, phases: Sequence[Phase] = PHASES) -> RunResult:
        """Run every gate and step; collect; move an incomplete run aside.

        ``plan.run_dir`` is the empty directory this run claimed (:func:`ownership.claim_run_dir`).
        Holds the slot's port lock for the whole run. Raises a typed error (GateError,
        StepFailed, RunInterrupted, StorageError...) whose ``outcomes`` hold the run's
        :class:`~omnibench_core.records.RunOutcome` (the ``-incomplete`` folder it was moved to).

        ``phases=("generate",)`` stops after the generate phase: the run is left ``generated``
        (not moved aside) for :func:`score_together` to score later. ``("generate", "collect")``
        skips the score phase: the run is complete with the generation's metrics only (a round a
        speed question does not score).
        """
        plan = self.plan
        if tuple(phases) not in RUN_PHASES:
            raise SettingsError(f"cannot run the phases {', '.join(phases)}",
                                hint="a new run does every phase, generate alone (its scoring comes later), or "
                                     "generate and collect (no scoring)")
        try:
            groups = [g for g in order_steps(plan.steps) if g.phase in phases]
            with ownership.port_lock(plan.slot.port, run_dir=self.run_dir):
                ready = gates.check_run_ready(self.run_dir, plan.slot.port, claimed=True)
                self._start_manifest(ready)
                return self._run(groups, collect="collect" in phases, scored="score" in phases)
        except RunNotReady:
            _remove_if_empty(self.run_dir)  # nothing ran: release the claimed name
            raise
        except StorageError:
            if self.manifest is None:
                _remove_if_empty(self.run_dir)
            raise

    def _start_manifest(self, ready: gates.GateRecord) -> None:
        plan = self.plan
        try:
            self._write_run_files()
            self.manifest = Manifest(self.run_dir, RunHeader(
                run=self.run_dir.name, owner=ownership.Owner.me().as_record(), target=plan.target.target,
                revision=plan.target.revision, dirty=bool(plan.target.dirty.strip()),
                target_details=plan.target.details, workloads=tuple(w.name for w in plan.workloads),
                options=plan.options, slot_port=plan.slot.port, slot_gpus=tuple(plan.slot.gpus),
                slot_cpus=tuple(plan.slot.cpus),
                settings={k: str(v) for k, v in {**vars(plan.settings), **vars(plan.tools)}.items()},
                environment=plan.environment))
            self.manifest.gate(ready)
        except OSError as exc:
            error = storage_error("creating the run directory's files", exc)
            if self.manifest is not None:
                self._fail(RunStatus.FAILED, error)
            raise error from exc
        self.say(f"RUN_READY {self.run_dir}")

    def _run(self, groups: list[Group], collect: bool = True, scored: bool = True) -> RunResult:
        try:
            with sigterm_as_exception(), self._failures_recorded():
                self.on_start(self.info)
                self._rev_ok_clients(groups)
                for group in groups:
                    self._run_group(group)
                return self._collect(scored) if collect else self._generated()
        except (KeyboardInterrupt, Terminated) as exc:
            err = self._interrupted(exc)
            self._fail(RunStatus.INTERRUPTED, err)
            raise err from None

    def _interrupted(self, exc: BaseException) -> RunInterrupted:
        why = "SIGTERM" if isinstance(exc, Terminated) else "Ctrl-C (SIGINT)"
        stopped = "every server omnibench started was stopped" if not self._left_running else \
            f"servers still running: {', '.join(self._left_running)}"
        return RunInterrupted(f"the run was interrupted by {why}; {stopped}")

    @contextlib.contextmanager
    def _failures_recorded(self) -> Iterator[None]:
        """A failure inside fails the run (recorded, moved aside) and is raised as a typed error."""
        try:
            yield
        except OmnibenchError as exc:
            self._fail(RunStatus.FAILED, exc)
            raise
        except OSError as exc:
            storage = storage_error(f"running {self._current or 'the run'}", exc)
            self._fail(RunStatus.FAILED, storage)
            raise storage from exc
        except Exception as exc:
            err = OmnibenchError(f"the run failed: {type(exc).__name__}: {exc}",
                                 hint="this is likely a bug in a plugin or in omnibench; see the manifest")
            self._fail(RunStatus.FAILED, err)
            raise err from exc

    def _generated(self) -> RunResult:
        assert self.manifest is not None
        self.manifest.finish(RunStatus.GENERATED)
        self.say("RUN_GENERATED: generation done; scoring and collection come later")
        self.result = RunResult(self.run_dir, False, RunStatus.GENERATED, {}, (), (), self.manifest.path,
                                run=self.plan.run_dir.name)
        return self.result

    def _reopen(self, phases: tuple[str, ...]) -> None:
        """Continue a ``generated`` run: its manifest, now owned by this process."""
        try:
            status = manifest_file.read(self.run_dir).status
        except OmnibenchError as exc:
            raise RunNotReady(f"cannot read the manifest of {self.run_dir}: {exc.message}",
                              hint="only a run made with phases=('generate',) can be scored later") from exc
        if status is not RunStatus.GENERATED:
            raise RunNotReady(f"{self.run_dir.name} is {status}, not generated, so it cannot be scored now",
                              evidence={"run": str(self.run_dir)},
                              hint="score only runs left generated; a complete run is not scored again")
        self.manifest = Manifest.reopen(self.run_dir, ownership.Owner.me().as_record(), phases)
        name, outer = self.run_dir.name, self.progress
        self.progress = lambda message: outer(f"{name} {message}")  # several runs speak in turn now
        self.say(f"{self.run_dir.name}: continuing with {' and '.join(phases)}")

    def _pause(self, error: RunInterrupted) -> None:
        """An interrupt during later phases: the run stays ``generated``, resumable, its done steps kept."""
        assert self.manifest is not None
        self.manifest.finish(RunStatus.GENERATED, interrupted=error.message)
        self.result = RunResult(self.run_dir, False, RunStatus.GENERATED, {}, (), (), self.manifest.path,
                                error=error.message, run=self.plan.run_dir.name)
        self.say(f"{self.run_dir.name}: left generated (resumable): {error.message}")

    def _write_run_files(self) -> None:
        (self.run_dir / COMMIT_NAME).write_text(self.plan.target.revision + "\n")
        (self.run_dir / DIRTY_NAME).write_text(self.plan.target.dirty)
        for workload in self.plan.workloads:
            (self.run_dir / workload.name).mkdir(exist_ok=True)

    def _move_aside(self) -> Path:
        """Move the run to ``-incomplete``; the manifest and later messages follow it."""
        assert self.manifest is not None
        moved = move_aside(self.run_dir)
        self.manifest.run_dir = self.run_dir = moved
        self.scope = replace(self.scope, run_dir=moved)
        return moved

    def _fail(self, status: RunStatus, error: OmnibenchError) -> None:
        """Record the failure (failed or interrupted) and move the run aside; the run's outcome is
        attached to ``error``. A second failure while doing so (a full disk, say) is added to the
        first error's evidence; it never replaces it."""
        assert self.manifest is not None
        try:
            self._write_telemetry()  # what the GPUs did up to the failure is evidence too
        except OSError:
            pass
        try:
            if isinstance(error, GateError):
                self.manifest.gate_failed(error.gate, error)
        except OSError as exc:
            error.evidence["manifest not updated"] = f"{type(exc).__name__}: {exc}"
        moved: Path | None = None
        try:
            moved = self._move_aside()
            _follow_move(error, self.plan.run_dir, moved)
            error.evidence["run moved to"] = str(moved)  # for the reader of the terminal; callers read outcomes
        except OSError as exc:
            error.evidence["run not moved aside"] = f"{type(exc).__name__}: {exc}; it stays at {self.run_dir}"
        try:
            self.manifest.finish(status, error)
        except OSError as exc:
            error.evidence["manifest not finished"] = f"{type(exc).__name__}: {exc}"
        self.result = RunResult(self.run_dir, False, status, {}, (), (), self.manifest.path, error=error.message,
                                run=self.plan.run_dir.name, moved_to=moved)
        error.outcomes = (self.result.outcome,)
        self.say(f"run {status}: {moved or self.run_dir}")

    # -- groups and servers ----------------------------------------------------------------
    def _pending(self, group: Group) -> list[PlannedStep]:
        """The group's steps not yet done by this run; the done ones are recorded as skipped."""
        pending = [p for p in group.steps if not self._done_by_this_run(p.workload, p.step)]
        for p in group.steps:
            if p not in pending:
                self._record_skipped(p.workload, p.step)
        return pending

    def _run_group(self, group: Group) -> None:
        pending = self._pending(group)
        if not pending:
            return
        if isinstance(self.progress, RunEta):  # `invoke run`'s estimate goes phase by phase
            self.progress.phase_begins(group.phase)
        if group.server is None:
            for p in pending:
                self._run_one(p.workload, p.step)
            return
        with self._server(group):
            for p in pending:
                self._run_one(p.workload, p.step)

    @contextlib.contextmanager
    def _server(self, group: Group, shared_with: Sequence[str] = ()) -> Iterator[None]:
        plan, spec = self.plan, group.server
        assert spec is not None and self.manifest is not None
        argv = list(spec.argv) or plan.target.serve_argv(spec, plan.slot.port)
        if port_in_use(plan.slot.port):  # e.g. a server of an earlier group that outlived its stop
            raise RunNotReady(f"port {plan.slot.port} is in use before starting the {spec.label} server",
                              evidence={"held by": port_holder(plan.slot.port) or "unknown process"},
                              hint="stop the process that holds the port, then repeat the run")
        log_path = self._server_log(spec.label)
        env = build_env(os.environ, {**plan.target.env, "SGLANG_OMNI_STRICT_PORT": "1"}, plan.target.unset)
        self.say(f"{spec.label}: starting server (log {log_path.relative_to(self.run_dir)})")
        entry = ServerEntry(spec.label, group.phase, tuple(argv), plan.slot.port, str(log_path.relative_to(self.run_dir)),
                            tuple(plan.slot.cpus), started=now_iso(), shared_with=tuple(shared_with),
                            workloads=tuple(dict.fromkeys(p.workload for p in group.steps)))
        proc = None
        sampler = self._sampler_now = self._sampler(log_path.stem)
        self._windows = []
        try:  # the start is inside the cleanup scope: a failed manifest write cannot orphan it
            started = time.time()
            if sampler is not None:
                sampler.start()
            spawned = time.monotonic()
            proc = start_group(argv, log_path=log_path, env=env, cwd=plan.target.cwd, cpus=plan.slot.cpus,
                               orphan_grace_s=plan.settings.stop_grace_s)
            entry.pid, entry.pgid, entry.tree_token = proc.pid, proc.pgid, proc.token
            self.manifest.server(entry)
            ready = gates.wait_ready(proc, plan.slot.endpoint.health_url, timeout_s=plan.settings.ready_timeout_s,
                                     interval_s=plan.settings.health_interval_s, port=plan.slot.port)
            entry.ready, entry.ready_s = now_iso(), round(time.monotonic() - spawned, 3)
            entry.served = read_served(plan.slot.endpoint.url(MODELS_PATH))  # the fingerprint, before any window
            self.manifest.gate(ready, spec.label)
            self.say(f"{spec.label}: READY after {ready.seconds:.1f} s")
            if not spec.argv:  # the target's own server: it must run this revision's code
                self._rev_ok_server(proc, argv, env, spec.label)
            yield
        finally:
            if proc is not None:
                self._stop_server(proc, entry)
            if sampler is not None:
                self._sampler_now = None
                entry.telemetry = server_summary(sampler.stop(), plan.slot.gpus, started, time.time(),
                                                    self._windows)
        # GPU_FREE only after a clean group: after a failure the run is already incomplete and
        # the original error is what the user needs to see.
        free = gates.wait_gpu_free(plan.slot.gpus, threshold_mib=plan.settings.gpu_free_mib,
                                   timeout_s=plan.settings.gpu_free_timeout_s,
                                   interval_s=plan.settings.gpu_poll_interval_s,
                                   nvidia_smi=plan.tools.nvidia_smi, progress=self.say)
        self.manifest.gate(free, spec.label)
        if free.status == GateStatus.PASSED:
            self.say(f"{spec.label}: GPU_FREE after {free.seconds:.1f} s")

    # -- REV_OK ----------------------------------------------------------------------------
    def _rev_ok(self, launches: Sequence[rev_ok.Launch], context: str) -> None:
        """REV_OK over ``launches`` (recorded; a mismatch raises WrongRevision, failing the run)."""
        assert self.manifest is not None
        target = self.plan.target
        t0 = time.monotonic()
        record = rev_ok.check_rev_ok(launches, target.facts.package, target.cwd or "", target.revision,
                                     allowed_dirty=self.allowed_dirty | frozenset(target.dirty_files),
                                     resolve=self.resolve, git=self.plan.tools.git)
        self.manifest.gate(replace(record, seconds=time.monotonic() - t0), context)
        self.say(f"{context}: REV_OK ({target.facts.package} from {target.cwd} at {target.revision[:12]})")

    def _rev_ok_clients(self, groups: Sequence[Group]) -> None:
        """REV_OK for the clients, before any server starts: every step that runs the target's
        python imports the package from the worktree. Where the run starts nothing of the
        checkout's, or the target names no package, the gate says it does not apply."""
        assert self.manifest is not None
        target = self.plan.target
        servers = [g for g in groups if g.server is not None and not g.server.argv]
        commands = [p.step.run for g in groups for p in g.steps
                    if isinstance(p.step.run, Command) and p.step.run.argv and p.step.run.argv[0] == target.python]
        if not target.facts.package:
            if target.cwd and (servers or commands):
                self.manifest.gate(rev_ok.not_applicable(
                    "the checkout declares no `sgl-omni` console script in pyproject.toml, so no package to find"), "run")
            return
        if not servers and not commands:
            self.manifest.gate(rev_ok.not_applicable("no server or client of this run runs the checkout's code"), "run")
            return
        if commands:
            launches = [rev_ok.command_launch("client", c.argv, build_env(os.environ, {**target.env, **c.env}, target.unset),
                                              c.cwd or target.cwd or os.getcwd()) for c in commands]
            self._rev_ok(launches, "clients")

    def _rev_ok_server(self, proc: GroupProcess, argv: Sequence[str], env: Mapping[str, str], label: str) -> None:
        """REV_OK for a READY server of the target: its launch (the console script) and the
        process that serves import the package from the worktree."""
        target = self.plan.target
        if not target.facts.package:
            return
        running = rev_ok.process_launch(proc.pid, self.proc)
        launch_env = running.env if running is not None else env
        launch = rev_ok.script_launch(argv, launch_env, target.cwd or os.getcwd())
        launches = [x for x in (launch, running) if x is not None]
        if not launches:
            raise WrongRevision(f"REV_OK cannot tell which code the {label} server runs",
                                evidence={"server argv": " ".join(argv)[:300], "pid": str(proc.pid)},
                                hint=f"its /proc/{proc.pid} cannot be read and {argv[0]} is no python script")
        self._rev_ok(launches, label)

    def _mark(self) -> float:
        """Now, as a window edge: with a telemetry sampler running, a full sample is taken."""
        return self._sampler_now.mark() if self._sampler_now is not None else time.time()

    def _sampler(self, name: str) -> Sampler | None:
        """A GPU telemetry sampler for a server, where the target uses GPUs (else None)."""
        plan = self.plan
        if not (plan.target.facts.uses_gpu and plan.slot.gpus):
            return None
        return Sampler(plan.slot.gpus, self.run_dir / "telemetry" / f"{name}.csv",
                       interval_s=plan.settings.telemetry_interval_s, nvml_module=plan.tools.nvml_module)

    def _stop_server(self, proc: GroupProcess, entry: ServerEntry) -> None:
        """Stop the server's whole tree, find what it left (by tree, port and GPU), and record
        what actually happened. A signal during the stop only shortens the grace; once the stop
        is done and recorded, it interrupts the run as it would have."""
        assert self.manifest is not None
        label, grace = entry.label, self.plan.settings.stop_grace_s
        if proc.exited() is not None and entry.ready:
            entry.died = f"during step {self._current}" if self._current else "between steps"
            self.say(f"{label}: the server had exited ({entry.died}) with code {proc.popen.returncode}")
        else:
            self.say(f"{label}: stopping the server (SIGTERM, then SIGKILL after at most {grace:g} s; "
                     "a second Ctrl-C cuts the wait short)")
        record = proc.stop_tree(grace)
        entry.stopped, entry.stop, entry.stop_record, entry.exit_code = now_iso(), record.how, record.as_dict(), record.exit_code
        scan = find_strays(proc, port=self.plan.slot.port, gpus=self.plan.slot.gpus,
                           nvidia_smi=self.plan.tools.nvidia_smi, gpu_timeout_s=call_timeout(self.plan.settings.gpu_free_timeout_s))
        left = list(record.leftover)
        if scan.strays or scan.notes:  # a note: what could not be looked at (a hung nvidia-smi, say)
            entry.strays = scan.as_dict()
            if scan.ours:
                stray_stop = stop_strays(scan.ours, grace)
                entry.strays_stop = stray_stop.as_dict()
                left += stray_stop.leftover
        if left:
            self._left_running.append(f"{label} (pids {', '.join(map(str, sorted(set(left))))})")
        try:
            self.manifest.save()
        except OSError:
            pass  # the error that ends the run reports the disk; the stop itself is done
        self.say(f"{label}: server {record.describe()}")
        foreign = [s for s in scan.strays if not s.ours]
        if foreign:
            self.say(f"{label}: not ours, left alone: " + "; ".join(f"pid {s.pid} ({', '.join(s.reasons)})"
                                                                  for s in foreign))
        if record.shortened_by in ("SIGINT", "SIGTERM") and sys.exc_info()[0] is None:
            # The signal arrived while nothing else was unwinding: it still means "stop the run".
            raise KeyboardInterrupt if record.shortened_by == "SIGINT" else Terminated()

    def _server_log(self, label: str) -> Path:
        path, n = self.run_dir / f"{label}.log", 2
        while path.exists():  # a second start of the same label keeps the first log
            path, n = self.run_dir / f"{label}.{n}.log", n + 1
        return path

    # -- steps -----------------------------------------------------------------------------
    def _done_by_this_run(self, workload: str, step: Step) -> bool:
        """True when this run's manifest records the step done and its outputs are unchanged.

        A file found on disk proves nothing: only outputs this run wrote, with the sizes and
        hashes it recorded, let a step be skipped.
        """
        assert self.manifest is not None
        key = f"{workload}.{step.name}"
        done = [s for s in self.manifest.steps if s.step == key and s.status is StepStatus.OK]
        if not done or not step.outputs:
            return False
        return done[-1].outputs == output_records(self.run_dir, step.outputs)

    def _record_skipped(self, workload: str, step: Step) -> None:
        assert self.manifest is not None
        self.manifest.step(StepEntry(f"{workload}.{step.name}", step.phase, StepStatus.SKIPPED,
                                     reason="this run wrote its outputs already (sizes and hashes match)"))

    def _run_one(self, workload: str, step: Step) -> None:
        assert self.manifest is not None
        log = step_log_path(self.run_dir, workload, step)
        entry = self.manifest.step(StepEntry(
            f"{workload}.{step.name}", step.phase, StepStatus.RUNNING, server=step.server.label if step.server else None,
            command=tuple(step.run.argv) if hasattr(step.run, "argv") else getattr(step.run, "__qualname__", "callable"),
            started=now_iso(), log=str(log.relative_to(self.run_dir))))
        self.say(f"{workload}.{step.name}: running")
        t0 = time.monotonic()
        self._current = f"{workload}.{step.name}"
        timed = step.phase == "generate" and step.server is not None
        load: hostload.LoadWindow | None = None
        began = time.time()
        try:
            if timed and self.before_timed is not None:
                self.say(f"{workload}.{step.name}: waiting for the partner's server (duet)")
                self.before_timed(self._current)
            # The noise guard: how much of the slot's CPU went to other processes in a timed window.
            load = hostload.LoadWindow(self._current, self.plan.slot.cpus, self.plan.settings.noise_max_foreign) \
                if timed else None
            began = self._mark()
            code = run_step(step, workload, self.scope, self.plan.options.get(workload, {}),
                            progress=lambda msg: self.say(f"{workload}.{step.name}: {msg}"),
                            on_spawn=lambda pgid: self._spawned(entry, pgid))
        except StepFailed as exc:
            entry.status, entry.ended, entry.error = StepStatus.FAILED, now_iso(), exc.as_record()
            self.manifest.save()
            raise
        except BaseException:
            entry.status, entry.ended = StepStatus.INTERRUPTED, now_iso()
            self.manifest.save()
            raise
        finally:
            self._current = ""
            ended = self._mark()
            self._windows.append(StepWindow(f"{workload}.{step.name}", began, ended, timed=timed))
            if load is not None:
                sampler = self._sampler_now
                tenants = sampler.tenants_between(began, ended) if sampler is not None else []
                self._record_load(entry, load, [t.describe() for t in tenants if t.computing],
                                  [t.describe() for t in tenants if not t.computing])
        entry.status, entry.ended, entry.exit_code = StepStatus.OK, now_iso(), code
        entry.outputs = output_records(self.run_dir, step.outputs)
        self.manifest.save()
        self.say(f"{workload}.{step.name}: ok in {time.monotonic() - t0:.1f} s")

    def _record_load(self, entry: StepEntry, window: hostload.LoadWindow, gpu_tenants: Sequence[str] = (),
                     gpu_present: Sequence[str] = ()) -> None:
        load = window.close(gpu_tenants, gpu_present)
        if load is None:  # /proc could not be read: the guard says so rather than failing the step
            entry.host_load = {"available": False, "reason": window.unavailable}
            return
        entry.host_load = load.as_record()
        if load.noisy:
            self.say(f"noisy window: {load.describe()}")
        elif load.gpu_present:  # named, but the window is kept: it held memory, it did not compute
            self.say(f"{load.window}: another process held memory on the slot's GPUs, idle (not noise): "
                     + "; ".join(load.gpu_present))

    def _spawned(self, entry: StepEntry, pgid: int) -> None:
        assert self.manifest is not None
        entry.pgid = pgid
        self.manifest.save()

    # -- collection ------------------------------------------------------------------------
    def _write_telemetry(self) -> None:
        assert self.manifest is not None
        uses_gpu = self.plan.target.facts.uses_gpu and bool(self.plan.slot.gpus)
        write_run_telemetry(self.run_dir, self.manifest.servers, applies=uses_gpu,
                            reason="" if uses_gpu else f"the {self.plan.target.target} target uses no GPU")

    def _collect(self, scored: bool = True) -> RunResult:
        assert self.manifest is not None
        plan = self.plan
        collection = with_server_ready(collect_run(self.run_dir, plan.workloads, plan.options, plan.checks, scored),
                                       self.manifest.servers)
        collection = with_percentiles(collection, parse_percentiles(plan.settings.percentiles))
        write_metrics(self.run_dir, collection, plan.target.target)
        self._write_telemetry()
        self.manifest.coverage(collection.rules)
        moved: Path | None = None
        if collection.complete:
            self.say("RUN_COMPLETE" + ("" if scored else " (not scored: the generation's metrics only)"))
            if scored:
                self.manifest.finish(RunStatus.COMPLETE)
            else:
                self.manifest.finish(RunStatus.COMPLETE, scored=False)
        else:
            for rule in collection.broken:
                self.say(f"coverage rule broken: {rule.name}: {rule.detail}")
            moved = self._move_aside()
            self.manifest.finish(RunStatus.INCOMPLETE)
            self.say(f"RUN_INCOMPLETE: moved to {moved}")
        self.result = RunResult(self.run_dir, collection.complete,
                                RunStatus.COMPLETE if collection.complete else RunStatus.INCOMPLETE,
                                collection.metrics, collection.rates, collection.broken, self.manifest.path,
                                notes=collection.notes, run=self.plan.run_dir.name, moved_to=moved,
                                thin={p.metric: p.as_record() for p in collection.thin})
        return self.result


def output_records(run_dir: Path, outputs: Sequence[str]) -> dict[str, OutputFile | None]:
    """Size and SHA-256 of each output file (None for a missing one), for the manifest."""
    records: dict[str, OutputFile | None] = {}
    for rel in outputs:
        path = run_dir / rel
        try:
            records[rel] = OutputFile(path.stat().st_size, hashlib.sha256(path.read_bytes()).hexdigest())
        except OSError:
            records[rel] = None
    return records


def _quiet(message: str) -> None:
    """Progress after the terminal's reader left."""


def _remove_if_empty(path: Path) -> None:
    """Remove a claimed run folder nothing ran in, and its revision folder when that is left empty
    (a refused first run leaves no empty ``results/local-<commit>``; a run claiming there at that
    moment makes it again: :func:`.ownership.claim_run_dir`)."""
    for folder in (path, path.parent):
        try:
            folder.rmdir()
        except OSError:
            return


def _follow_move(error: OmnibenchError, old: Path, new: Path) -> None:
    """Paths in the evidence that pointed into the run directory point into its new place."""
    for key, value in error.evidence.items():
        if isinstance(value, str) and value.startswith(str(old)):
            error.evidence[key] = str(new) + value[len(str(old)):]


def score_together(runners: Sequence[Runner], quality: bool = True) -> list[RunResult]:
    """The score and collect phases of several ``generated`` runs, one start per scoring server;
    with ``quality`` False the collect phase alone (the runs complete unscored, no server starts).

    Each runner's plan is its run's (re-planned on the run directory); all share one port.
    Scoring steps with equal :class:`ServeSpec` across the runs share one server start: the first
    run's folder holds its log and its manifest the start (``shared_with``); the others record a
    server entry ``started_in`` that run. Serverless scoring and collection then run per run.
    A run whose step fails is failed and moved aside alone; the others go on. Ctrl-C or SIGTERM
    leaves every unfinished run ``generated`` (done steps kept) and raises RunInterrupted, whose
    ``outcomes`` say where every run that was reopened is now (failed and moved, or generated).
    """
    if not runners:
        return []
    ports = {r.plan.slot.port for r in runners}
    if len(ports) != 1:
        raise SettingsError("runs scored together must share one port", evidence={"ports": sorted(ports)})
    with ownership.port_lock(ports.pop(), run_dir=runners[0].run_dir), sigterm_as_exception():
        opened: list[Runner] = []
        try:
            for runner in runners:
                runner._reopen(("score", "collect") if quality else ("collect",))
                opened.append(runner)
            if quality:
                _score_shared(opened)
            for runner in opened:
                if runner.result is None:
                    with contextlib.suppress(OmnibenchError), runner._failures_recorded():
                        for group in order_steps(runner.plan.steps):
                            if group.phase == "collect" or (quality and group.phase == "score" and not group.server):
                                runner._run_group(group)
                        runner._collect(quality)
        except (KeyboardInterrupt, Terminated) as exc:
            err = opened[0]._interrupted(exc) if opened else RunInterrupted("interrupted before scoring began")
            for runner in opened:
                if runner.result is None:
                    runner._pause(err)
            err.outcomes = tuple(r.result.outcome for r in opened if r.result is not None)
            raise err from None
    return [r.result for r in runners if r.result is not None]


def _score_shared(runners: Sequence[Runner]) -> None:
    """Each scoring server spec started once for every run that has pending steps on it."""
    by_spec: dict[ServeSpec, list[tuple[Runner, Group]]] = {}
    for runner in runners:
        for group in order_steps(runner.plan.steps):
            if group.phase == "score" and group.server is not None:
                by_spec.setdefault(group.server, []).append((runner, group))
    for spec, members in by_spec.items():
        live = [(r, r._pending(g)) for r, g in members if r.result is None]
        live = [(r, pending) for r, pending in live if pending]
        if not live:
            continue
        host = live[0][0]
        group = Group("score", spec, tuple(p for _, pending in live for p in pending))
        try:
            with host._server(group, shared_with=[r.run_dir.name for r, _ in live[1:]]):
                for runner, pending in live:
                    if runner is not host:
                        assert runner.manifest is not None
                        runner.manifest.server(ServerEntry(spec.label, "score", started_in=host.run_dir.name,
                                                           at=now_iso()))
                    with contextlib.suppress(OmnibenchError), runner._failures_recorded():
                        for p in pending:
                            runner._run_one(p.workload, p.step)
        except OmnibenchError as exc:  # the shared server did not start, died or left the GPU busy
            for runner, _ in live:
                if runner.result is None:
                    runner._fail(RunStatus.FAILED, type(exc)(exc.message, hint=exc.hint, evidence=dict(exc.evidence)))
