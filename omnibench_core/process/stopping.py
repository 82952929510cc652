"""Stop every process of a program: SIGTERM, a grace that can be cut short, SIGKILL; and say what happened.

Used by the watchdog (on the owner's request, or when the owner died) and by the owner itself
when the watchdog is gone. Only the standard library is imported (the watchdog imports this).
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class SignalSent:
    """One round of a signal: which pids got it, and when (seconds after the stop began)."""

    signal: str
    pids: tuple[int, ...]
    at_s: float


@dataclass(frozen=True)
class StopRecord:
    """What a stop actually did, so messages and manifests are written from facts.

    ``how``: ``"exited"`` (nothing was left to stop), ``"terminated"`` (all ended within the grace
    after SIGTERM) or ``"killed"`` (SIGKILL was needed). ``shortened_by`` names what cut the grace
    short (``"SIGINT"``, ``"SIGTERM"``, ``"request"``), else None. ``leftover``: pids still alive
    when the stop gave up (a process in uninterruptible sleep), normally empty.
    """

    how: str
    grace_s: float
    seconds: float = 0.0
    signals: tuple[SignalSent, ...] = ()
    shortened_by: str | None = None
    exit_code: int | None = None
    leftover: tuple[int, ...] = ()
    by: str = "watchdog"  # "watchdog" or "owner" (the watchdog was gone)
    notes: tuple[str, ...] = field(default_factory=tuple)

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready form for manifests and the watchdog's report."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> StopRecord:
        """The inverse of :meth:`as_dict`."""
        data = dict(data)
        data["signals"] = tuple(SignalSent(s["signal"], tuple(s["pids"]), s["at_s"]) for s in data.get("signals", ()))
        data["leftover"] = tuple(data.get("leftover", ()))
        data["notes"] = tuple(data.get("notes", ()))
        return cls(**data)

    def describe(self) -> str:
        """One line for a terminal, e.g. ``killed after 0.4 s (grace 30 s cut short by SIGINT)``."""
        text = f"{self.how} after {self.seconds:.1f} s"
        if self.shortened_by:
            text += f" (grace {self.grace_s:g} s cut short by {self.shortened_by})"
        if self.leftover:
            text += f"; still alive: {', '.join(map(str, self.leftover))}"
        return text


def _group_of(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except (ProcessLookupError, PermissionError):
        return None


def send_once(pids: set[int], pgid: int | None, sig: int, *, kill: Callable[[int, int], None] = os.kill,
              killpg: Callable[[int, int], None] = os.killpg,
              group_of: Callable[[int], int | None] = _group_of) -> tuple[int, ...]:
    """Send ``sig`` to each of ``pids`` once: to group ``pgid`` as one signal (it also reaches a
    member forked after the scan), and by pid to each member outside that group (one that left it,
    a new session). Returns the pids it reached, gone ones left out.

    Never twice to one process: a server whose graceful stop restores the default action on its way
    out (aiohttp's ``run_app`` removes its SIGTERM handler in its cleanup) is killed by a second
    SIGTERM in the middle of that stop, and what it writes last is lost (its log's last lines, a
    coverage data file). On a loaded host the two sends were far enough apart for that to happen."""
    groups = {pid: group_of(pid) for pid in pids}  # before any signal: a member may leave as it stops
    grouped = False
    if pgid is not None:
        try:
            killpg(pgid, sig)
            grouped = True
        except (ProcessLookupError, PermissionError):
            pass
    sent = []
    for pid in sorted(pids):
        if groups[pid] is None:
            continue  # gone before the signal
        if grouped and groups[pid] == pgid:
            sent.append(pid)
            continue
        try:
            kill(pid, sig)
            sent.append(pid)
        except (ProcessLookupError, PermissionError):
            pass
    return tuple(sent)


def stop_members(
    members: Callable[[], set[int]],
    grace_s: float,
    *,
    pgid: int | None = None,
    hurry: Callable[[], str | None] = lambda: None,
    reap: Callable[[], None] = lambda: None,
    exit_code: Callable[[], int | None] = lambda: None,
    poll_s: float = 0.05,
    kill_wait_s: float = 10.0,
    by: str = "watchdog",
) -> StopRecord:
    """Stop the processes ``members()`` returns until it returns none.

    SIGTERM once to each member (through group ``pgid``, else by pid: :func:`send_once`), then up
    to ``grace_s`` for them to end (members that appear meanwhile get SIGTERM too), then SIGKILL,
    repeated until none is left or ``kill_wait_s`` passed. ``hurry()`` is asked during the grace: a
    non-None answer (what asked) ends the grace at once. ``reap()`` collects exited children so they stop counting. The stop
    itself is never abandoned: only the grace is.
    """
    start = time.monotonic()
    signals: list[SignalSent] = []
    shortened: str | None = None

    def at() -> float:
        return round(time.monotonic() - start, 3)

    reap()
    pids = members()
    if not pids:
        return StopRecord("exited", grace_s, at(), exit_code=exit_code(), by=by)
    termed = set(pids)
    signals.append(SignalSent("SIGTERM", send_once(pids, pgid, signal.SIGTERM), at()))
    deadline = start + grace_s
    while True:
        reap()
        pids = members()
        if not pids:
            reap()  # the leader may have become a zombie between the last reap and the scan
            return StopRecord("terminated", grace_s, at(), tuple(signals), exit_code=exit_code(), by=by)
        shortened = hurry()
        if shortened is not None or time.monotonic() >= deadline:
            break
        if pids - termed:  # forked during the grace
            signals.append(SignalSent("SIGTERM", send_once(pids - termed, None, signal.SIGTERM), at()))
            termed |= pids
        time.sleep(poll_s)
    kill_deadline = time.monotonic() + kill_wait_s
    killed: set[int] = set()
    while pids and time.monotonic() < kill_deadline:
        if pids - killed:
            signals.append(SignalSent("SIGKILL", send_once(pids - killed, pgid, signal.SIGKILL), at()))
            killed |= pids
        time.sleep(poll_s)
        reap()
        pids = members()
    reap()
    return StopRecord("killed", grace_s, at(), tuple(signals), shortened, exit_code(), tuple(sorted(pids)), by)
