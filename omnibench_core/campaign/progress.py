"""Campaign progress: every line says run k of N, the step, the elapsed time and an estimate of
what is left (from the durations of the campaign's earlier runs); no step stays silent for more
than ``quiet_s`` (a heartbeat repeats the last step)."""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Callable, Sequence


def fmt_seconds(seconds: float) -> str:
    """``42s``, ``3m05s``, ``1h02m``."""
    seconds = max(0, int(round(seconds)))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


def estimate_left(durations: Sequence[float], runs_left: int, current_s: float) -> str:
    """What is left: the mean of earlier runs' durations times the runs left, less the current run's time."""
    if not durations:
        return "estimate after the first run"
    return f"~{fmt_seconds(max(0.0, statistics.mean(durations) * runs_left - current_s))} left"


class CampaignProgress:
    """Wraps the user's progress callback with the campaign's position and a heartbeat."""

    def __init__(self, emit: Callable[[str], None], total: int, durations: Sequence[float] = (), quiet_s: float = 10.0):
        self.emit, self.total, self.durations = emit, total, list(durations)
        self.quiet_s = quiet_s
        self.t0 = time.monotonic()
        self.k, self.label, self.run_t0, self.last = 0, "", self.t0, ""
        self._last_at = self.t0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start_run(self, k: int, label: str) -> None:
        """Run ``k`` (1-based, of ``total``) begins; ``label`` says which (``run0 warm-up``...)."""
        self.k, self.label, self.run_t0 = k, label, time.monotonic()

    def end_run(self, seconds: float) -> None:
        """A run ended; its duration feeds the estimate."""
        self.durations.append(seconds)

    def phase(self, label: str) -> None:
        """A campaign-wide phase (deferred scoring) instead of one run."""
        self.k, self.label, self.run_t0 = 0, label, time.monotonic()

    def prefix(self) -> str:
        now = time.monotonic()
        where = f"run {self.k} of {self.total} ({self.label})" if self.k else self.label
        left = self.total - self.k + 1 if self.k else 0
        estimate = estimate_left(self.durations, left, now - self.run_t0) if self.k else "estimate: scoring"
        return f"[{where} | {fmt_seconds(now - self.t0)} elapsed | {estimate}]"

    def __call__(self, message: str) -> None:
        with self._lock:
            self.last = message
            self._last_at = time.monotonic()
            self.emit(f"{self.prefix()} {message}")

    def say(self, message: str) -> None:
        """A campaign line (not from a run)."""
        self(message)

    # -- heartbeat -------------------------------------------------------------------------
    def __enter__(self) -> CampaignProgress:
        self._thread = threading.Thread(target=self._beat, name="campaign-heartbeat", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2)

    def _beat(self) -> None:
        while not self._stop.wait(0.5):
            with self._lock:
                silent = time.monotonic() - self._last_at
                if silent < self.quiet_s or not self.last:
                    continue
                last = self.last.split("] ", 1)[-1]
                self._last_at = time.monotonic()
                try:
                    self.emit(f"{self.prefix()} still busy ({fmt_seconds(silent)} since: {last})")
                except Exception:  # a reader that went away: the heartbeat stops, the campaign goes on
                    return
