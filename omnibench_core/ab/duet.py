"""A duet round: both sides' runs at the same time, one per slot, each in its own worker process;
their timed windows are released together once both servers are READY (a barrier per timed
step), so whatever else the host does hits both sides alike.

Ctrl-C or SIGTERM of the driver goes to both workers once (each stops its servers and moves its
run aside), then the interrupt is raised here. A worker that ends early (a failed gate) releases
its partner, whose later windows then run alone; the attempt says so.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import Terminated
from ..jsonio import write_json
from ..run.runner import sigterm_as_exception
from ..store import experiment_file  # the module, not its names: it imports this package's records
from ..telemetry.hostload import ROOT_VAR
from .record import SideReport
from .spec import BARRIER, PARENT_VAR, Spec


@dataclass
class _Worker:
    side: str
    proc: subprocess.Popen[str]
    out: Path
    waiting: str = ""  # the step it waits at, "" when running
    since: float = 0.0  # when it began to wait
    steps: list[str] = field(default_factory=list)  # the timed steps it was released into
    alone: bool = False  # released into a step without its partner
    reader: threading.Thread | None = None


@dataclass(frozen=True)
class SideOutcome:
    """What one side's worker reported, and whether its partner ran beside it all along."""

    side: str
    report: SideReport
    alone: bool


@dataclass(frozen=True)
class PairOutcome:
    """Both sides' outcomes; ``interrupted``: Ctrl-C or SIGTERM reached the driver during the round."""

    sides: Mapping[str, SideOutcome]
    interrupted: bool


def run_pair(specs: Mapping[str, Spec], *, progress: Callable[[str], None], labels: Mapping[str, str],
             python: str = sys.executable, grace_s: float = 60.0, wait_s: float = 1860.0) -> PairOutcome:
    """Run the sides' specs at once and wait for both. On Ctrl-C or SIGTERM each worker gets one
    SIGINT (it stops its servers and moves its run aside) and the outcomes say so. A side that
    waits at the barrier longer than ``wait_s`` (its partner's server never got READY, and did not
    fail either) is released alone."""
    with tempfile.TemporaryDirectory(prefix="omnibench-duet-") as tmp:
        workers: list[_Worker] = []
        interrupted = False
        with sigterm_as_exception():
            try:
                for side, spec in specs.items():
                    workers.append(_start(side, spec, Path(tmp), python, progress, labels[side]))
                _barrier_loop(workers, progress, wait_s)
            except (KeyboardInterrupt, Terminated):
                interrupted = True
                _stop(workers, grace_s)
        return PairOutcome({w.side: _outcome(w) for w in workers}, interrupted)


def _start(side: str, spec: Spec, tmp: Path, python: str, progress: Callable[[str], None], label: str) -> _Worker:
    spec_file, out = tmp / f"{side}.json", tmp / f"{side}.out.json"
    write_json(spec_file, spec.as_dict())
    # The worker sets its own parent-death signal (a preexec_fn here would run in a forked child of
    # a threaded process); it is told the driver's pid to check, and whose tree the run's CPU is.
    env = {**os.environ, PARENT_VAR: str(os.getpid()), ROOT_VAR: str(os.getpid())}
    proc = subprocess.Popen([python, "-m", "omnibench_core.ab.worker", str(spec_file), str(out)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True, env=env)  # the driver alone forwards Ctrl-C, once
    worker = _Worker(side, proc, out)

    def forward() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            line = line.rstrip("\n")
            if line.startswith(BARRIER):
                worker.since, worker.waiting = time.monotonic(), line[len(BARRIER):]
                continue
            try:
                progress(f"[{label}] {line}")
            except (BrokenPipeError, ValueError):
                pass

    worker.reader = threading.Thread(target=forward, daemon=True, name=f"duet-{side}")
    worker.reader.start()
    return worker


def _release(worker: _Worker, alone: bool) -> None:
    worker.steps.append(worker.waiting)
    worker.alone = worker.alone or alone
    worker.waiting = ""
    try:
        assert worker.proc.stdin is not None
        worker.proc.stdin.write("go\n")
        worker.proc.stdin.flush()
    except (BrokenPipeError, OSError):
        pass


def _barrier_loop(workers: Sequence[_Worker], progress: Callable[[str], None], wait_s: float) -> None:
    """Release waiting workers: together when both wait at the same step, alone when the other
    has ended or has kept it waiting past ``wait_s``; until both ended."""
    while any(w.proc.poll() is None for w in workers):
        live = [w for w in workers if w.proc.poll() is None]
        waiting = [w for w in live if w.waiting]
        overdue = [w for w in waiting if time.monotonic() - w.since > wait_s]
        if overdue and len(waiting) < len(live):
            for w in overdue:
                progress(f"duet: side {w.side} waited {wait_s:.0f} s at {w.waiting} for its partner; released alone")
                _release(w, alone=True)
        elif waiting and len(waiting) == len(live):
            steps = {w.waiting for w in waiting}
            together = len(live) == len(workers) and len(steps) == 1
            if not together and len(steps) > 1:
                progress(f"duet: the sides wait at different steps ({', '.join(sorted(steps))}); released apart")
            for w in waiting:
                _release(w, alone=not together)
        time.sleep(0.02)


def _stop(workers: Sequence[_Worker], grace_s: float) -> None:
    """SIGINT to every worker once (each stops its servers), then SIGTERM, then SIGKILL."""
    for sig, wait in ((signal.SIGINT, grace_s), (signal.SIGTERM, grace_s), (signal.SIGKILL, 5.0)):
        alive = [w for w in workers if w.proc.poll() is None]
        for w in alive:
            w.proc.send_signal(sig)
        deadline = time.monotonic() + wait
        while any(w.proc.poll() is None for w in alive) and time.monotonic() < deadline:
            try:
                time.sleep(0.05)
            except (KeyboardInterrupt, Terminated):  # a second Ctrl-C or SIGTERM: the next signal at once
                break


def _outcome(w: _Worker) -> SideOutcome:
    if w.reader is not None:
        w.reader.join(timeout=5)
    return SideOutcome(w.side, experiment_file.read_side_report(w.out, w.proc.returncode), w.alone)
