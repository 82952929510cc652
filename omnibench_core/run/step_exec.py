"""Runs one step: a program in its own process group, or a Python callable, with its own log."""

from __future__ import annotations

import os
import subprocess
import time
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import StepFailed
from ..heartbeat import PROGRESS_PREFIX
from ..process.processes import GroupProcess, build_env, log_tail, start_group
from ..records import Command, Endpoint, Step, StepContext, TargetEnv


@dataclass(frozen=True)
class StepScope:
    """What every step of one run shares: where it writes, which server, how programs start."""

    run_dir: Path
    endpoint: Endpoint
    target: TargetEnv
    cpus: tuple[int, ...] = ()
    stop_grace_s: float = 30.0


# File times come from a coarse kernel clock that can lag time.time_ns() by a tick.
_MTIME_SLACK_NS = 50_000_000


def step_log_path(run_dir: Path, workload: str, step: Step) -> Path:
    """``<run>/logs/<workload>.<step>.log``."""
    return run_dir / "logs" / f"{workload}.{step.name}.log"


def run_step(
    step: Step,
    workload: str,
    scope: StepScope,
    options: Mapping[str, Any],
    progress: Callable[[str], None],
    on_spawn: Callable[[int], None] = lambda pgid: None,
) -> int | None:
    """Run ``step`` of ``workload``; return the program's exit code (None for a callable).

    Raises :class:`StepFailed` with the log tail when the program exits non-zero, times out, the
    callable raises, or an expected output is missing. On Ctrl-C or SIGTERM the program's whole
    group is stopped (``scope.stop_grace_s``) before the interrupt propagates. ``on_spawn`` gets
    a program's pgid.
    """
    run_dir = scope.run_dir
    log_path = step_log_path(run_dir, workload, step)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    where = f"step {workload}.{step.name}"
    exit_code: int | None = None
    started_ns = time.time_ns() - _MTIME_SLACK_NS
    if isinstance(step.run, Command):
        exit_code = _run_command(step, step.run, log_path, scope, where, on_spawn, progress)
    else:
        with open(log_path, "a", encoding="utf-8") as log:
            ctx = StepContext(run_dir=run_dir, workload=workload, endpoint=scope.endpoint, options=options,
                              target=scope.target, log=log, progress=progress)
            try:
                step.run(ctx)
            except Exception as exc:
                log.write(traceback.format_exc())
                log.flush()
                raise StepFailed(
                    f"{where} raised {type(exc).__name__}: {exc}",
                    evidence={"log": str(log_path), "log tail": log_tail(log_path)},
                    hint="read the log; fix the plugin or its input, then repeat the run",
                ) from exc
    missing = [p for p in step.outputs if not (run_dir / p).exists()]
    if missing:
        raise StepFailed(
            f"{where} finished but did not leave {', '.join(missing)}",
            evidence={"run_dir": str(run_dir), "log": str(log_path), "log tail": log_tail(log_path)},
            hint="read the step's log for why the file was not written",
        )
    stale = [p for p in step.outputs if (run_dir / p).stat().st_mtime_ns < started_ns]
    if stale:  # a file that was there before the step (planted, or left over) is not its output
        raise StepFailed(
            f"{where} finished but did not write {', '.join(stale)}: the file is older than the step",
            evidence={"run_dir": str(run_dir), "log": str(log_path), "log tail": log_tail(log_path)},
            hint="the step must write its outputs itself; remove the old files and repeat the run",
        )
    return exit_code


class _ProgressRelay:
    """Passes a program's ``progress: ...`` log lines on to the terminal while it runs."""

    def __init__(self, log_path: Path, progress: Callable[[str], None]):
        self.log_path, self.progress, self.offset, self.partial = log_path, progress, 0, b""

    def poll(self) -> None:
        try:
            with open(self.log_path, "rb") as handle:
                handle.seek(self.offset)
                data = handle.read()
        except OSError:
            return
        self.offset += len(data)
        *lines, self.partial = (self.partial + data).split(b"\n")
        for line in lines:
            text = line.decode("utf-8", "replace").strip()
            if text.startswith(PROGRESS_PREFIX):
                self.progress(text[len(PROGRESS_PREFIX):])


def _wait(proc: GroupProcess, timeout_s: float | None, relay: _ProgressRelay) -> int:
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    while True:
        try:
            return proc.popen.wait(timeout=0.5)
        except subprocess.TimeoutExpired:
            relay.poll()
            if deadline is not None and time.monotonic() >= deadline:
                raise


def _run_command(step: Step, cmd: Command, log_path: Path, scope: StepScope, where: str,
                 on_spawn: Callable[[int], None], progress: Callable[[str], None]) -> int:
    target, grace_s = scope.target, scope.stop_grace_s
    env = build_env(os.environ, {**target.env, **cmd.env}, target.unset)
    proc = start_group(cmd.argv, log_path=log_path, env=env, cwd=cmd.cwd or target.cwd, cpus=scope.cpus)
    relay = _ProgressRelay(log_path, progress)
    try:
        on_spawn(proc.pgid)
        code = _wait(proc, step.timeout_s, relay)
        relay.poll()
    except subprocess.TimeoutExpired:
        proc.stop(grace_s)
        raise StepFailed(
            f"{where} ran longer than its {step.timeout_s:g} s timeout and was stopped",
            evidence={"command": " ".join(cmd.argv), "log": str(log_path), "log tail": log_tail(log_path)},
        ) from None
    except BaseException:
        proc.stop(grace_s)  # Ctrl-C / SIGTERM: leave no client process behind
        raise
    proc.stop(grace_s)  # children the client left running
    if code != 0:
        raise StepFailed(
            f"{where} exited with code {code}",
            evidence={"command": " ".join(cmd.argv), "log": str(log_path), "log tail": log_tail(log_path)},
            hint="read the log tail; fix the cause and repeat the run",
        )
    return code
