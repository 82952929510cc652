"""A duet round: both sides' runs at the same time, one per slot, each in its side's worker
process; their timed windows are released together once both servers are READY (a barrier per
timed step), so whatever else the host does hits both sides alike.

The two workers are started once per experiment (:class:`Duet`) and run every round's run of
their side: a fresh interpreter and omnibench's imports cost a second a round on an idle 16-core
host (benchmarks/results/2026-12-02-verdict-cost-h200), paid inside the round's wall time, where
sequential's runs start in the driver's own process. A worker that died is started again for the
next round. An idle worker waits on its standard input and uses no CPU, so it never counts as
noise in the other side's timed window.

Ctrl-C or SIGTERM of the driver goes to both workers once (each stops its servers and moves its
run aside), then the interrupt is raised here. A worker that ends its run early (a failed gate)
releases its partner, whose later windows then run alone; the attempt says so.

A worker is watched while it has a run: it writes a byte to a heartbeat pipe every quarter of
``silence_s`` (the ``worker_silence_s`` setting; 0 turns the watch off). One that gives no sign of life for ``silence_s``
(stopped by SIGSTOP, hung holding the interpreter, swapped out) is named, killed (SIGKILL reaches a
stopped process; its servers' watchdogs see their owner gone and stop them) and its run is lost, as
a killed worker's is: the attempt fails (a retry spent) and the next round starts another worker.
A worker whose run waits on a server is not silent: the run's own deadlines (READY's, the barrier's
``wait_s``) hold that.
"""

from __future__ import annotations

import json
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
from ..run.runner import sigterm_as_exception
from ..settings import RunSettings
from ..statuses import SideStatus
from ..telemetry.hostload import ROOT_VAR
from . import experiment_file
from .record import SideReport
from .spec import BARRIER, DONE, HEARTBEAT_VAR, PARENT_VAR, SERVE, Spec, heartbeat_every

SILENCE_S = RunSettings.worker_silence_s  # the setting's default, defined there


@dataclass
class _Worker:
    side: str
    proc: subprocess.Popen[str]
    label: str = ""  # the progress prefix of its current run (the slot changes every round)
    out: Path | None = None  # its current run's report
    busy: bool = False  # a run handed to it has not reported yet
    waiting: str = ""  # the step it waits at, "" when running
    since: float = 0.0  # when it began to wait
    steps: list[str] = field(default_factory=list)  # the timed steps it was released into
    alone: bool = False  # released into a step without its partner
    reader: threading.Thread | None = None
    beats: int = -1  # the read end of its heartbeat pipe (-1: none)
    heard: float = 0.0  # when the driver last found a sign of life in it
    silenced: str = ""  # why it was killed for silence ("" while it answers)

    def running(self) -> bool:
        """Its run has not reported, and its process lives."""
        return self.busy and self.proc.poll() is None


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


class Duet:
    """Both sides' worker processes for one experiment: ``with Duet(progress=...) as d:
    d.run_pair(...)`` once a round; leaving the block ends them (end of input, then signals)."""

    def __init__(self, *, progress: Callable[[str], None], python: str = sys.executable, grace_s: float = 60.0,
                 shared_cpus: bool = False, silence_s: float = SILENCE_S):
        self._progress, self._python, self._grace_s, self._silence_s = progress, python, grace_s, silence_s
        self._shared_cpus = shared_cpus  # the two slots' CPU sets overlap: see worker_env
        self._workers: dict[str, _Worker] = {}
        self._tmp = tempfile.TemporaryDirectory(prefix="omnibench-duet-")

    def __enter__(self) -> Duet:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def run_pair(self, specs: Mapping[str, Spec], *, labels: Mapping[str, str], wait_s: float = 1860.0) -> PairOutcome:
        """Run the sides' specs at once and wait for both. On Ctrl-C or SIGTERM each worker gets one
        SIGINT (it stops its servers and moves its run aside) and the outcomes say so. A side that
        waits at the barrier longer than ``wait_s`` (its partner's server never got READY, and did not
        fail either) is released alone."""
        workers: list[_Worker] = []
        interrupted = False
        with sigterm_as_exception():
            try:
                for side, spec in specs.items():
                    workers.append(self._hand(side, spec, labels[side]))
                _barrier_loop(workers, self._progress, wait_s, idle=[w for side, w in self._workers.items()
                                                                     if side not in specs], silence_s=self._silence_s)
            except (KeyboardInterrupt, Terminated):
                interrupted = True
                _stop(list(self._workers.values()), self._grace_s)
            except BaseException:  # e.g. the second worker could not start: the first's run stops now
                _stop(list(self._workers.values()), self._grace_s)
                raise
        return PairOutcome({w.side: _outcome(w) for w in workers}, interrupted)

    def close(self) -> None:
        """End every worker: end of input (an idle one exits), then SIGINT, SIGTERM, SIGKILL."""
        try:
            for w in self._workers.values():
                _tell(w, None)
            _stop(list(self._workers.values()), self._grace_s, first_wait_s=self._grace_s)
            for w in self._workers.values():
                if w.reader is not None:
                    w.reader.join(timeout=5)
        finally:  # a Ctrl-C in here still leaves no folder behind (the workers end with the driver)
            for w in self._workers.values():
                _close_beats(w)
            self._workers.clear()
            self._tmp.cleanup()

    def _hand(self, side: str, spec: Spec, label: str) -> _Worker:
        """The side's worker (started now if it has none, or its last one died), given the run."""
        worker = self._workers.get(side)
        if worker is not None and worker.proc.poll() is not None:
            self._progress(f"duet: side {side}'s worker had ended (exit {worker.proc.returncode}); starting another")
        if worker is None or worker.proc.poll() is not None:
            if worker is not None:
                _close_beats(worker)
            worker = self._workers[side] = self._start(side)
        out = Path(self._tmp.name) / f"{side}.out.json"
        out.unlink(missing_ok=True)  # a report left by the side's previous round is never read as this one's
        worker.label, worker.out, worker.busy, worker.heard = label, out, True, time.monotonic()
        worker.waiting, worker.steps, worker.alone = "", [], False
        _tell(worker, json.dumps({"spec": spec.as_dict(), "out": str(out)}))
        return worker

    def _start(self, side: str) -> _Worker:
        # The worker sets its own parent-death signal (a preexec_fn here would run in a forked child of
        # a threaded process); it is told the driver's pid to check, and whose tree the run's CPU is.
        beats, beat_end = os.pipe()
        env = {**worker_env(os.environ, os.getpid(), shared_cpus=self._shared_cpus),
               HEARTBEAT_VAR: f"{beat_end}:{heartbeat_every(self._silence_s):g}"}
        try:
            proc = subprocess.Popen([self._python, "-m", "omnibench_core.ab.worker", SERVE],
                                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                    start_new_session=True, env=env,  # the driver alone forwards Ctrl-C, once
                                    pass_fds=(beat_end,))
        except BaseException:
            os.close(beats)
            raise
        finally:
            os.close(beat_end)  # the worker holds the write end alone
        os.set_blocking(beats, False)
        worker = _Worker(side, proc, beats=beats, heard=time.monotonic())
        progress = self._progress

        def forward() -> None:
            assert proc.stdout is not None
            for line in proc.stdout:
                line = line.rstrip("\n")
                if line.startswith(BARRIER):
                    worker.since, worker.waiting = time.monotonic(), line[len(BARRIER):]
                    continue
                if line == DONE:
                    worker.busy = False
                    continue
                try:
                    progress(f"[{worker.label}] {line}")
                except (BrokenPipeError, ValueError):
                    pass

        worker.reader = threading.Thread(target=forward, daemon=True, name=f"duet-{side}")
        worker.reader.start()
        return worker


def slots_share_cpus(a: Sequence[int], b: Sequence[int]) -> bool:
    """Whether two slots' CPU sets overlap; an empty set is every CPU the process may use."""
    return not a or not b or bool(set(a) & set(b))


def worker_env(base: Mapping[str, str], driver_pid: int, *, shared_cpus: bool) -> dict[str, str]:
    """A side's worker's environment: the driver's pid to watch, and whose process tree is the
    side's own CPU time for the noise guard. On disjoint slots, the worker's own tree (its runs'
    servers and clients) and nothing else, so the partner's CPU time, spent on the other slot's
    CPUs, is never subtracted from this slot's busy time (that hid a hog on one slot). On slots
    that share CPUs, the whole duet's tree (``ROOT_VAR``: the driver's): there the partner runs on
    this slot's CPUs by design and is not another process."""
    env = {k: v for k, v in base.items() if k != ROOT_VAR}
    env[PARENT_VAR] = str(driver_pid)
    if shared_cpus:
        env[ROOT_VAR] = str(driver_pid)
    return env


def _tell(worker: _Worker, line: str | None) -> None:
    """One line to the worker's input (None: end of input); a worker gone is left to its outcome."""
    try:
        assert worker.proc.stdin is not None
        if line is None:
            worker.proc.stdin.close()
        else:
            worker.proc.stdin.write(line + "\n")
            worker.proc.stdin.flush()
    except (BrokenPipeError, OSError, ValueError):
        pass


def _release(worker: _Worker, alone: bool) -> None:
    worker.steps.append(worker.waiting)
    worker.alone = worker.alone or alone
    worker.waiting = ""
    _tell(worker, "go")


def _close_beats(worker: _Worker) -> None:
    if worker.beats >= 0:
        os.close(worker.beats)
        worker.beats = -1


def _listen(worker: _Worker) -> None:
    """Take every sign of life the worker wrote since the last look (its pipe, read without waiting)."""
    while worker.beats >= 0:
        try:
            got = os.read(worker.beats, 4096)
        except BlockingIOError:
            return
        if not got:  # end of file: the worker is gone, which its exit code says
            return
        worker.heard = time.monotonic()


def _silence(worker: _Worker, silence_s: float, progress: Callable[[str], None]) -> None:
    """Kill a worker that gave no sign of life for ``silence_s`` and say so: SIGKILL, which a stopped
    process cannot hold off; its run is lost, as a killed worker's is."""
    worker.silenced = (f"side {worker.side}'s worker (pid {worker.proc.pid}) gave no sign of life for "
                       f"{silence_s:g} s (worker_silence_s): stopped, hung or swapped out; it was killed")
    progress(f"duet: {worker.silenced}")
    worker.proc.kill()
    try:
        worker.proc.wait(timeout=30)
    except subprocess.TimeoutExpired:  # a process SIGKILL does not end (in the kernel, uninterruptible)
        pass
    worker.busy = False


def _barrier_loop(workers: Sequence[_Worker], progress: Callable[[str], None], wait_s: float,
                  idle: Sequence[_Worker] = (), silence_s: float = SILENCE_S) -> None:
    """Release waiting workers: together when both wait at the same step, alone when the other
    has ended its run or has kept it waiting past ``wait_s``; until both runs ended. A worker
    silent for ``silence_s`` is killed (:func:`_silence`). An ``idle`` worker (no run this round)
    that dies is reaped at once: a dead child left unreaped would drop out of the run tree's CPU
    sums mid-window and make that window read noisy."""
    while any(w.running() for w in workers):
        for w in idle:
            w.proc.poll()
        for w in workers:
            if w.running():
                _listen(w)
                if silence_s and time.monotonic() - w.heard > silence_s:  # 0: not watched
                    _silence(w, silence_s, progress)
        live = [w for w in workers if w.running()]
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


def _stop(workers: Sequence[_Worker], grace_s: float, first_wait_s: float = 0.0) -> None:
    """Wait ``first_wait_s`` for the workers to end by themselves, then SIGINT to every one once
    (each stops its servers), then SIGTERM, then SIGKILL."""
    steps: list[tuple[signal.Signals | None, float]] = [(None, first_wait_s)] if first_wait_s else []
    for sig, wait in (*steps, (signal.SIGINT, grace_s), (signal.SIGTERM, grace_s), (signal.SIGKILL, 5.0)):
        alive = [w for w in workers if w.proc.poll() is None]
        for w in alive:
            if sig is not None:
                w.proc.send_signal(sig)
        deadline = time.monotonic() + wait
        while any(w.proc.poll() is None for w in alive) and time.monotonic() < deadline:
            try:
                time.sleep(0.05)
            except (KeyboardInterrupt, Terminated):  # a second Ctrl-C or SIGTERM: the next signal at once
                break


def _outcome(w: _Worker) -> SideOutcome:
    if w.proc.poll() is not None and w.reader is not None:  # its last lines forwarded before its outcome
        w.reader.join(timeout=5)
    assert w.out is not None
    if w.silenced:  # killed for silence: whatever it left is not an outcome
        return SideOutcome(w.side, SideReport(SideStatus.LOST, error=w.silenced), w.alone)
    return SideOutcome(w.side, experiment_file.read_side_report(w.out, w.proc.poll()), w.alone)
