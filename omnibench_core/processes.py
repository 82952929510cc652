"""Start programs in their own process group and stop the whole group.

Both servers and client programs run in a new session, so that Ctrl-C on a terminal reaches
omnibench alone, and omnibench stops every process a program spawned (orphaned children that
hold GPU memory are a known failure mode of the servers).
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path


def build_env(base: Mapping[str, str], set_: Mapping[str, str], unset: Sequence[str]) -> dict[str, str]:
    """``base`` with ``unset`` removed and ``set_`` applied, as the runbook's shell block does."""
    env = {k: v for k, v in base.items() if k not in set(unset)}
    env.update({k: str(v) for k, v in set_.items()})
    return env


def log_tail(path: Path, lines: int = 40, max_bytes: int = 64 * 1024) -> str:
    """The last ``lines`` lines of a log file (reads at most ``max_bytes`` from its end)."""
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - max_bytes))
            data = handle.read().decode("utf-8", "replace")
    except OSError as exc:
        return f"(no log: {exc})"
    return "\n".join(data.splitlines()[-lines:]) or "(log is empty)"


def group_members(pgid: int, proc: Path = Path("/proc")) -> list[int]:
    """Pids of the live (non-zombie) processes in group ``pgid``, read from /proc.

    Zombies are left out: they hold no memory or port, and an orphan's zombie waits for
    whatever reaps orphans on this host, which can take seconds in a container.
    """
    members = []
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # The command name (field 2) may contain spaces; fields after it are fixed.
        fields = stat[stat.rindex(")") + 2:].split()
        if fields[0] != "Z" and int(fields[2]) == pgid:
            members.append(int(entry.name))
    return members


def group_alive(pgid: int) -> bool:
    """True while any live process of the group exists."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    if Path("/proc/self/stat").exists():
        return bool(group_members(pgid))
    return True


@dataclass
class GroupProcess:
    """A running program that leads its own process group."""

    argv: tuple[str, ...]
    popen: subprocess.Popen[bytes]
    log_path: Path
    started_at: float

    @property
    def pid(self) -> int:
        """The leader's pid."""
        return self.popen.pid

    @property
    def pgid(self) -> int:
        """The process group id (equal to the leader's pid: it is a session leader)."""
        return self.popen.pid

    def exited(self) -> int | None:
        """The leader's exit code once it exited, else None."""
        return self.popen.poll()

    def stop(self, grace_s: float) -> str:
        """SIGTERM the whole group, wait up to ``grace_s``, then SIGKILL what is left.

        Returns how it ended: ``"exited"`` (nothing left to stop), ``"terminated"`` or
        ``"killed"``.
        """
        self.popen.poll()  # reap the leader if it already exited, so it does not count
        if not group_alive(self.pgid):
            return "exited"
        _signal_group(self.pgid, signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline:
            self.popen.poll()
            if not group_alive(self.pgid):
                return "terminated"
            time.sleep(0.02)
        _signal_group(self.pgid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            self.popen.poll()
            if not group_alive(self.pgid):
                break
            time.sleep(0.02)
        return "killed"


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        pass


def start_group(
    argv: Sequence[str],
    *,
    log_path: Path,
    env: Mapping[str, str],
    cwd: str | None = None,
    cpus: Sequence[int] = (),
) -> GroupProcess:
    """Start ``argv`` in a new session, stdout and stderr to ``log_path``, pinned to ``cpus``."""
    if isinstance(argv, str):
        raise TypeError("argv must be a list of arguments, not a shell string")
    log_path.parent.mkdir(parents=True, exist_ok=True)
    cpu_set = set(cpus)

    def pin() -> None:  # runs in the child before exec: every descendant inherits the mask
        if cpu_set:
            os.sched_setaffinity(0, cpu_set)

    with open(log_path, "ab") as log:
        popen = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=dict(env),
            cwd=cwd,
            start_new_session=True,
            preexec_fn=pin if cpu_set else None,
        )
    return GroupProcess(tuple(argv), popen, log_path, time.time())
