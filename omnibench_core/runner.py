"""Executes a planned run: gates, servers, steps, then collection; an incomplete run is moved aside.

The runner gets everything it needs as arguments (a :class:`RunPlan` of records, settings and a
:class:`~omnibench_core.records.Slot`, plus callbacks) and returns a
:class:`~omnibench_core.records.RunResult`; it never looks plugins up itself, so a campaign or a
matrix can drive many runners, each on its own slot.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from . import gates
from .collection import collect_run, write_metrics
from .errors import GateError, OmnibenchError, RunInterrupted, RunNotReady, StepFailed, Terminated
from .layout import move_aside
from .manifest import Manifest, now_iso
from .planning import Group, order_steps
from .ports import port_holder, port_in_use
from .processes import build_env, start_group
from .records import RunCheck, RunInfo, RunResult, Slot, Step, TargetEnv, Workload
from .settings import RunSettings, ToolSettings
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

    @property
    def port(self) -> int:
        """The port every server of the run uses."""
        return self.slot.port


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


class Runner:
    """Runs one :class:`RunPlan`. Use :meth:`execute`."""

    def __init__(self, plan: RunPlan, *, progress: Progress = print,
                 on_start: Callable[[RunInfo], None] = lambda info: None):
        self.plan = plan
        self.progress = progress
        self.on_start = on_start
        self.run_dir = plan.run_dir
        self.info = RunInfo(plan.run_dir, plan.target.target, tuple(w.name for w in plan.workloads),
                            plan.target.revision)
        self._t0 = time.monotonic()
        self.scope = StepScope(plan.run_dir, plan.slot.endpoint, plan.target, plan.slot.cpus,
                               plan.settings.stop_grace_s)
        self.manifest: Manifest | None = None
        self.result: RunResult | None = None  # set once the run ended, failed or not

    # -- progress --------------------------------------------------------------------------
    def say(self, message: str) -> None:
        """Emit a progress line with the run's elapsed time."""
        self.progress(f"[{time.monotonic() - self._t0:7.1f}s] {message}")

    # -- the run ---------------------------------------------------------------------------
    def execute(self) -> RunResult:
        """Run every gate and step; collect; move an incomplete run aside.

        Raises a typed error (GateError, StepFailed, RunInterrupted...) whose evidence names the
        ``-incomplete`` directory the run was moved to.
        """
        plan = self.plan
        groups = order_steps(plan.steps)
        ready = gates.check_run_ready(self.run_dir, plan.port)
        self._create_run_dir()
        manifest = self.manifest = Manifest(self.run_dir, {
            "run": self.run_dir.name,
            "target": plan.target.target,
            "revision": plan.target.revision,
            "dirty": bool(plan.target.dirty.strip()),
            "target_details": dict(plan.target.details),
            "workloads": [w.name for w in plan.workloads],
            "options": {k: dict(v) for k, v in plan.options.items()},
            "slot": {"port": plan.slot.port, "gpus": list(plan.slot.gpus), "cpus": list(plan.slot.cpus)},
            "settings": {k: str(v) for k, v in {**vars(plan.settings), **vars(plan.tools)}.items()},
            "environment": dict(plan.environment),
        })
        manifest.gate(ready)
        self.say(f"RUN_READY {self.run_dir}")
        try:
            with sigterm_as_exception():
                self.on_start(self.info)
                for group in groups:
                    self._run_group(group)
                return self._collect()
        except (KeyboardInterrupt, Terminated) as exc:
            why = "SIGTERM" if isinstance(exc, Terminated) else "Ctrl-C (SIGINT)"
            err = RunInterrupted(f"the run was interrupted by {why}; every server omnibench started was stopped")
            self._fail("interrupted", err)
            raise err from None
        except OmnibenchError as exc:
            self._fail("failed", exc)
            raise
        except Exception as exc:
            err = OmnibenchError(f"the run failed: {type(exc).__name__}: {exc}",
                                 hint="this is likely a bug in a plugin or in omnibench; see the manifest")
            self._fail("failed", err)
            raise err from exc

    def _create_run_dir(self) -> None:
        self.run_dir.mkdir(parents=True)
        (self.run_dir / "commit.txt").write_text(self.plan.target.revision + "\n")
        (self.run_dir / "dirty.txt").write_text(self.plan.target.dirty)
        for workload in self.plan.workloads:
            (self.run_dir / workload.name).mkdir(exist_ok=True)

    def _move_aside(self) -> Path:
        """Move the run to ``-incomplete``; the manifest and later messages follow it."""
        assert self.manifest is not None
        moved = move_aside(self.run_dir)
        self.manifest.run_dir = self.run_dir = moved
        self.scope = replace(self.scope, run_dir=moved)
        return moved

    def _fail(self, status: str, error: OmnibenchError) -> None:
        assert self.manifest is not None
        if isinstance(error, GateError):
            self.manifest.gate_failed(error.gate, error)
        moved = self._move_aside()
        _follow_move(error, self.plan.run_dir, moved)
        error.evidence["run moved to"] = str(moved)
        self.manifest.finish(status, error)
        self.result = RunResult(moved, False, status, {}, (), (), self.manifest.path, error=error.message)
        self.say(f"run {status}: moved to {moved}")

    # -- groups and servers ----------------------------------------------------------------
    def _run_group(self, group: Group) -> None:
        pending = [p for p in group.steps if not p.step.is_done(self.run_dir)]
        for p in group.steps:
            if p not in pending:
                self._record_skipped(p.workload, p.step)
        if not pending:
            return
        if group.server is None:
            for p in pending:
                self._run_one(p.workload, p.step)
            return
        with self._server(group):
            for p in pending:
                self._run_one(p.workload, p.step)

    @contextlib.contextmanager
    def _server(self, group: Group) -> Iterator[None]:
        plan, spec = self.plan, group.server
        assert spec is not None and self.manifest is not None
        argv = list(spec.argv) or plan.target.serve_argv(spec, plan.port)
        if port_in_use(plan.port):  # e.g. a server of an earlier group that outlived its stop
            raise RunNotReady(f"port {plan.port} is in use before starting the {spec.label} server",
                              evidence={"held by": port_holder(plan.port) or "unknown process"},
                              hint="stop the process that holds the port, then repeat the run")
        log_path = self._server_log(spec.label)
        env = build_env(os.environ, {**plan.target.env, "SGLANG_OMNI_STRICT_PORT": "1"}, plan.target.unset)
        self.say(f"{spec.label}: starting server (log {log_path.relative_to(self.run_dir)})")
        proc = start_group(argv, log_path=log_path, env=env, cwd=plan.target.cwd, cpus=plan.slot.cpus)
        entry = self.manifest.server({"label": spec.label, "phase": group.phase, "argv": argv, "pid": proc.pid,
                                      "pgid": proc.pgid, "port": plan.port, "log": str(log_path.relative_to(self.run_dir)),
                                      "cpus": list(plan.slot.cpus), "started": now_iso(),
                                      "ready": None, "stopped": None, "stop": None})
        try:
            ready = gates.wait_ready(proc, plan.slot.endpoint.health_url, timeout_s=plan.settings.ready_timeout_s,
                                     interval_s=plan.settings.health_interval_s)
            entry["ready"] = now_iso()
            self.manifest.gate(ready, spec.label)
            self.say(f"{spec.label}: READY after {ready.seconds:.1f} s")
            yield
        finally:
            how = proc.stop(plan.settings.stop_grace_s)
            entry.update(stopped=now_iso(), stop=how, exit_code=proc.popen.returncode)
            self.manifest.save()
            self.say(f"{spec.label}: server stopped ({how})")
        # GPU_FREE only after a clean group: after a failure the run is already incomplete and
        # the original error is what the user needs to see.
        free = gates.wait_gpu_free(plan.slot.gpus, threshold_mib=plan.settings.gpu_free_mib,
                                   timeout_s=plan.settings.gpu_free_timeout_s,
                                   interval_s=plan.settings.gpu_poll_interval_s,
                                   nvidia_smi=plan.tools.nvidia_smi)
        self.manifest.gate(free, spec.label)
        if free.status == "passed":
            self.say(f"{spec.label}: GPU_FREE after {free.seconds:.1f} s")

    def _server_log(self, label: str) -> Path:
        path, n = self.run_dir / f"{label}.log", 2
        while path.exists():  # a second start of the same label keeps the first log
            path, n = self.run_dir / f"{label}.{n}.log", n + 1
        return path

    # -- steps -----------------------------------------------------------------------------
    def _record_skipped(self, workload: str, step: Step) -> None:
        assert self.manifest is not None
        self.manifest.step({"step": f"{workload}.{step.name}", "phase": step.phase, "status": "skipped",
                            "reason": "its outputs are already complete"})

    def _run_one(self, workload: str, step: Step) -> None:
        assert self.manifest is not None
        log = step_log_path(self.run_dir, workload, step)
        entry = self.manifest.step({
            "step": f"{workload}.{step.name}", "phase": step.phase,
            "server": step.server.label if step.server else None,
            "command": list(step.run.argv) if hasattr(step.run, "argv") else getattr(step.run, "__qualname__", "callable"),
            "status": "running", "started": now_iso(), "ended": None, "exit_code": None,
            "log": str(log.relative_to(self.run_dir)),
        })
        self.say(f"{workload}.{step.name}: running")
        t0 = time.monotonic()
        try:
            code = run_step(step, workload, self.scope, self.plan.options.get(workload, {}),
                            progress=lambda msg: self.say(f"{workload}.{step.name}: {msg}"),
                            on_spawn=lambda pgid: self._spawned(entry, pgid))
        except StepFailed as exc:
            entry.update(status="failed", ended=now_iso(), error=exc.as_record())
            self.manifest.save()
            raise
        except BaseException:
            entry.update(status="interrupted", ended=now_iso())
            self.manifest.save()
            raise
        entry.update(status="ok", ended=now_iso(), exit_code=code)
        self.manifest.save()
        self.say(f"{workload}.{step.name}: ok in {time.monotonic() - t0:.1f} s")

    def _spawned(self, entry: dict[str, Any], pgid: int) -> None:
        assert self.manifest is not None
        entry["pgid"] = pgid
        self.manifest.save()

    # -- collection ------------------------------------------------------------------------
    def _collect(self) -> RunResult:
        assert self.manifest is not None
        plan = self.plan
        collection = collect_run(self.run_dir, plan.workloads, plan.options, plan.checks)
        write_metrics(self.run_dir, collection, plan.target.target)
        self.manifest.data["coverage"] = [{"rule": r.name, "ok": r.ok, "detail": r.detail} for r in collection.rules]
        if collection.complete:
            self.say("RUN_COMPLETE")
            self.manifest.finish("complete")
        else:
            for rule in collection.broken:
                self.say(f"coverage rule broken: {rule.name}: {rule.detail}")
            moved = self._move_aside()
            self.manifest.finish("incomplete")
            self.say(f"RUN_INCOMPLETE: moved to {moved}")
        self.result = RunResult(self.run_dir, collection.complete, "complete" if collection.complete else "incomplete",
                                collection.metrics, collection.rates, collection.broken, self.manifest.path,
                                notes=collection.notes)
        return self.result


def _follow_move(error: OmnibenchError, old: Path, new: Path) -> None:
    """Paths in the evidence that pointed into the run directory point into its new place."""
    for key, value in error.evidence.items():
        if isinstance(value, str) and value.startswith(str(old)):
            error.evidence[key] = str(new) + value[len(str(old)):]
