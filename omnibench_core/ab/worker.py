"""One side's runs of a duet's rounds, in its own process: ``python -m omnibench_core.ab.worker
--serve``.

A process (not a thread) per side, because the run layer turns Ctrl-C and SIGTERM into a clean
stop only in a main thread. It lives for the whole experiment: each line of its standard input is
one run, ``{"spec": SPEC, "out": PATH}``; the run's report goes to PATH, then it says
:data:`DONE`. Before each timed window it says so on its standard output (:data:`BARRIER`, the
step's name) and waits for a line on its standard input: the driver releases both sides together
once both servers are READY. End of input while idle ends it.

While it lives, a thread writes a byte to the driver's heartbeat pipe (:data:`.spec.HEARTBEAT_VAR`),
so a worker that stops being scheduled (SIGSTOP, hung, swapped out) is named by the driver. It
starts before the run layer is imported (:mod:`omnibench_core.api`, imported by :func:`execute`),
so a slow start on a busy host is not taken for silence.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import sys
import threading
import time
from pathlib import Path

from ..errors import GateError, OmnibenchError, RunInterrupted, RunNotReady, StepFailed, Terminated, one_line
from ..process.processes import obey_ctrl_c
from ..records import PHASES, Phase
from ..settings import Settings
from ..statuses import SideStatus
from . import experiment_file
from .record import SideReport
from .spec import BARRIER, DONE, HEARTBEAT_VAR, PARENT_VAR, SERVE, Spec

PR_SET_PDEATHSIG = 1


def wait_for_partner(step: str) -> None:
    """Say this side is READY for ``step`` and wait until the driver releases it; the driver gone
    (end of input) is an interrupt: the run stops its servers and moves itself aside."""
    print(f"{BARRIER}{step}", flush=True)
    if not sys.stdin.readline():
        raise KeyboardInterrupt  # as Ctrl-C: the run layer's own interrupt path stops and moves it


def die_with_driver() -> None:
    """SIGTERM when the driver dies (set here, in the worker, not in a fork of a threaded driver);
    a driver already gone before that is an interrupt."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    except (OSError, AttributeError):  # not Linux: end of input at the barrier still stops the run
        pass
    parent = os.environ.get(PARENT_VAR, "")
    if parent and str(os.getppid()) != parent:
        raise RunInterrupted("the duet's driver was gone before this side started")


def start_heartbeat(value: str | None = None) -> bool:
    """Give a sign of life to the driver's pipe (``FD:SECONDS`` from :data:`.spec.HEARTBEAT_VAR`) from a
    daemon thread until the driver closes it; False when there is none (a worker started by hand)."""
    fd_text, _, every_text = (os.environ.get(HEARTBEAT_VAR, "") if value is None else value).partition(":")
    try:
        fd, every = int(fd_text), float(every_text)
        os.set_inheritable(fd, False)  # the run's servers and clients never hold the driver's pipe
    except (ValueError, OSError):
        return False

    def beat() -> None:
        while True:
            try:
                os.write(fd, b".")
            except OSError:  # the driver is gone (EPIPE): no one to tell
                return
            time.sleep(every)

    threading.Thread(target=beat, daemon=True, name="duet-heartbeat").start()
    return True


def execute(spec: Spec) -> SideReport:
    """The run, and its outcome as a report (status, the runN it claimed, its folder now, error,
    where it was moved)."""
    from .. import api  # the run layer, imported once the heartbeat beats (main)

    phases: tuple[Phase, ...] = tuple(p for p in PHASES if p in spec.phases)
    try:
        result = api.run(Settings.from_mapping(spec.settings), spec.workloads, options=spec.options,
                         client=spec.client, progress=lambda line: print(line, flush=True), phases=phases,
                         before_timed=wait_for_partner)
    except (RunInterrupted, KeyboardInterrupt, Terminated) as exc:
        return _failure(SideStatus.INTERRUPTED, exc)
    except (GateError, StepFailed) as exc:
        return _failure(SideStatus.NOT_READY if isinstance(exc, RunNotReady) else SideStatus.FAILED, exc)
    except OmnibenchError as exc:
        return _failure(SideStatus.ERROR, exc)
    out = result.outcome
    return SideReport(SideStatus(out.status.value), out.run, str(out.run_dir), out.why, str(out.moved_to or ""))


def _failure(status: SideStatus, exc: BaseException) -> SideReport:
    """The report of a run an error ended: the run it claimed and its folder now (its server starts
    are counted from there), if it got one."""
    outcomes = exc.outcomes if isinstance(exc, OmnibenchError) else ()
    error = one_line(exc) if isinstance(exc, OmnibenchError) else str(exc) or type(exc).__name__
    if not outcomes:
        return SideReport(status, error=error)
    out = outcomes[0]
    return SideReport(status, out.run, str(out.run_dir), error, str(out.moved_to or ""))


def serve() -> int:
    """Run each run handed on standard input, one at a time, until end of input (0) or an
    interrupted run (130)."""
    while True:
        line = sys.stdin.readline()
        if not line:
            return 0
        job = json.loads(line)
        report = execute(Spec.from_dict(job["spec"]))
        experiment_file.write_side_report(Path(job["out"]), report)
        print(DONE, flush=True)
        if report.status is SideStatus.INTERRUPTED:  # the driver stops the experiment: no next run
            return 130


def main(argv: list[str] | None = None) -> int:
    """``python -m omnibench_core.ab.worker --serve``."""
    obey_ctrl_c()  # the driver stops a side with SIGINT, even when it was itself started ignoring it
    args = list(sys.argv[1:] if argv is None else argv)
    if args != [SERVE]:
        print(f"usage: python -m omnibench_core.ab.worker {SERVE}  (a duet's driver starts it; one run per input line)",
              file=sys.stderr)
        return 2
    start_heartbeat()
    try:
        die_with_driver()
        return serve()
    except RunInterrupted as exc:  # the driver was gone before the first run: nothing to report to
        print(f"omnibench duet worker: {exc.message}", file=sys.stderr)
        return 130
    except KeyboardInterrupt:  # Ctrl-C while idle: no run to stop
        return 130


if __name__ == "__main__":
    sys.exit(main())
