"""A progress stream that is never silent for long: after ``quiet_s`` without a line, it repeats
the last one ("still busy (12s since: videoamme.generate: questions 3/10 ...)").

One heartbeat per stream: ``invoke run`` gets one around its runner (:func:`beating`), a campaign
is one itself (:class:`~omnibench_core.campaign.progress.CampaignProgress`), and a runner given a
stream that already beats adds none, so several runners scoring together never beat in turn.
"""

from __future__ import annotations

import contextlib
import re
import threading
import time
from collections.abc import Callable, Iterator

PROGRESS_PREFIX = "progress: "  # lines a client prints and the runner relays to the terminal

QUIET_S = 10.0  # the longest silence a user sees (issue 17: the generate step was silent for 39 s)
_STAMP = re.compile(r"^\[[^\]]*\]\s*")


def fmt_seconds(seconds: float) -> str:
    """``42s``, ``3m05s``, ``1h02m``."""
    seconds = max(0, int(round(seconds)))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


def stamp(seconds: float) -> str:
    """A run's time prefix: ``[   12.3s]``."""
    return f"[{seconds:7.1f}s]"


def unstamped(line: str) -> str:
    """A line without its leading ``[...]`` prefixes (a repeat carries a fresh one)."""
    while _STAMP.match(line):
        line = _STAMP.sub("", line, count=1)
    return line


class Heartbeat:
    """Passes lines on to ``emit``; :meth:`beat` repeats the last one after ``quiet_s`` of silence.

    ``clock`` is injectable so the rule is tested without waiting; inside ``with``, a
    :class:`Ticker` calls :meth:`beat` twice a second.
    """

    def __init__(self, emit: Callable[[str], None], *, quiet_s: float = QUIET_S,
                 clock: Callable[[], float] = time.monotonic):
        self.emit, self.quiet_s, self.clock = emit, quiet_s, clock
        self.t0 = self._last_at = self._said_at = clock()  # last emission / last real line
        self.last = ""
        self._lock = threading.Lock()

    def line(self, message: str) -> str:
        """How a message is written (subclasses add a prefix)."""
        return message

    def still(self, silent: float) -> str:
        """The repeat, ``silent`` seconds after the last line it repeats."""
        return f"{stamp(self.clock() - self.t0)} still busy ({fmt_seconds(silent)} since: {unstamped(self.last)})"

    def __call__(self, message: str) -> None:
        with self._lock:
            self.last, self._last_at = message, self.clock()
            self._said_at = self._last_at
            self.emit(self.line(message))

    def beat(self) -> bool:
        """Repeat the last line if the stream has been silent for ``quiet_s``; True if it did."""
        with self._lock:
            now = self.clock()
            if now - self._last_at < self.quiet_s or not self.last:
                return False
            self._last_at = now
            self.emit(self.still(now - self._said_at))
            return True

    def __enter__(self) -> Heartbeat:
        self._ticker = Ticker(self.beat).__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._ticker.__exit__(*exc)


class Ticker:
    """Calls ``tick`` every ``every_s`` on a daemon thread while inside ``with``; an exception in
    ``tick`` (a reader that went away) ends the ticking, never the work it reports on."""

    def __init__(self, tick: Callable[[], object], every_s: float = 0.5):
        self.tick, self.every_s = tick, every_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="progress-ticker", daemon=True)

    def __enter__(self) -> Ticker:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=2)

    def _run(self) -> None:
        while not self._stop.wait(self.every_s):
            try:
                self.tick()
            except Exception:
                return


@contextlib.contextmanager
def beating(progress: Callable[[str], None]) -> Iterator[Callable[[str], None]]:
    """``progress`` with a heartbeat, unless it beats already (a campaign's stream)."""
    if isinstance(progress, Heartbeat):
        yield progress
        return
    with Heartbeat(progress) as beat:
        yield beat


@contextlib.contextmanager
def working(progress: Callable[[str], None], what: str) -> Iterator[Callable[[str], None]]:
    """Say ``what`` starts, then keep ``progress`` beating while inside: a step outside the runs
    (a comparison, a report, the doctor, an A/B's start) is never silent for ``QUIET_S``."""
    with beating(progress) as say:
        say(what)
        yield say
