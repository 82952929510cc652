"""The local engine: this host's slots side by side, one subprocess per campaign.

A subprocess (not a thread) per campaign, because the run layer turns SIGTERM into a clean stop
only in a main thread, and because Ctrl-C must reach each campaign: the driver forwards SIGINT
to every campaign and waits for their servers to stop. Each subprocess dies with the driver
(``PR_SET_PDEATHSIG=SIGTERM``), and its servers die with it (the watchdog).
"""

from __future__ import annotations

import ctypes
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..jsonio import read_json, write_json
from ..statuses import JobStatus
from .jobs import CampaignOutcome, received_outcome
from .slots import HostSlot
from .worker import WorkerSpec, worker_argv

PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    except (OSError, AttributeError):  # not Linux: the driver's cancel_all is the only stop
        pass


@dataclass
class _Running:
    spec: WorkerSpec
    proc: subprocess.Popen[str]
    out: Path
    reader: threading.Thread


class LocalEngine:
    """Runs campaigns on ``slots`` of this host, each in ``python -m omnibench_core.scale.worker``."""

    name = "local"

    def __init__(self, slots: Sequence[HostSlot], progress: Callable[[str], None] = print,
                 python: str = sys.executable, workdir: Path | None = None):
        self._slots = list(slots)
        self.progress = progress
        self.python = python
        self._tmp = tempfile.TemporaryDirectory(prefix="omnibench-matrix-") if workdir is None else None
        self.workdir = workdir or Path(self._tmp.name)  # type: ignore[union-attr]
        self.running: dict[int, _Running] = {}
        self._n = 0

    def slots(self) -> Sequence[HostSlot]:
        """The slots given."""
        return list(self._slots)

    def start(self, spec: WorkerSpec) -> object:
        """Start the worker subprocess; its output lines go to progress, labelled with the slot."""
        self._n += 1
        job_file, out = self.workdir / f"job{self._n}.json", self.workdir / f"out{self._n}.json"
        write_json(job_file, spec.as_dict())
        proc = subprocess.Popen(worker_argv(job_file, out, self.python),
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True,
                                preexec_fn=_die_with_parent)
        label = f"[slot {spec.slot.index} {spec.job.key}]"

        def forward() -> None:
            assert proc.stdout is not None
            for line in proc.stdout:
                try:
                    self.progress(f"{label} {line.rstrip()}")
                except (BrokenPipeError, ValueError):
                    pass

        reader = threading.Thread(target=forward, daemon=True)
        reader.start()
        self.running[self._n] = _Running(spec, proc, out, reader)
        return self._n

    def _outcome(self, r: _Running) -> CampaignOutcome:
        r.reader.join(timeout=5)
        try:
            return received_outcome(read_json(r.out), r.spec.job.key, r.spec.slot.as_dict())
        except (OSError, ValueError, KeyError):  # killed before it could write: its slot's process was lost
            return CampaignOutcome(r.spec.job.key, JobStatus.LOST, slot=r.spec.slot.as_dict(),
                                   error=f"the campaign's process ended with {r.proc.returncode} and no outcome")

    def wait(self, timeout_s: float) -> list[tuple[object, CampaignOutcome]]:
        """Campaign subprocesses that ended within ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        while True:
            ended = [(h, r) for h, r in self.running.items() if r.proc.poll() is not None]
            if ended or not self.running or time.monotonic() >= deadline:
                break
            time.sleep(0.05)
        done: list[tuple[object, CampaignOutcome]] = []
        for handle, r in ended:
            del self.running[handle]
            done.append((handle, self._outcome(r)))
        return done

    def cancel_all(self, grace_s: float) -> None:
        """SIGINT to every campaign (each stops its servers), then SIGTERM, then SIGKILL."""
        for sig, wait in ((signal.SIGINT, grace_s), (signal.SIGTERM, grace_s), (signal.SIGKILL, 5.0)):
            alive = [r for r in self.running.values() if r.proc.poll() is None]
            for r in alive:
                r.proc.send_signal(sig)
            deadline = time.monotonic() + wait
            while any(r.proc.poll() is None for r in alive) and time.monotonic() < deadline:
                time.sleep(0.05)

    def close(self) -> None:
        """Remove the job files."""
        if self._tmp is not None:
            self._tmp.cleanup()
