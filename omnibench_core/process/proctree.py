"""Which live processes belong to a program omnibench started, read from /proc.

A program's processes are found four ways, because each way alone misses some: the descendants
of a root pid (the watchdog, a child subreaper, so orphans that called ``setsid`` stay below it),
the program's process group and its session (both equal to the leader's pid), and the processes
whose environment carries the program's token (inherited by every descendant, kept across
``setsid`` and reparenting to init). Only the standard library is imported: the watchdog imports
this module and starts once per program.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

# str paths, not pathlib (the watchdog imports this; see watchdog._fds): ``proc`` is any path-like, a planted one too
PROC = "/proc"
TOKEN_VAR = "OMNIBENCH_TREE"  # space-separated tokens: a nested omnibench adds its own


@dataclass(frozen=True)
class ProcInfo:
    """One process's identity fields from ``/proc/<pid>/stat``; ``start`` is when it started, in
    clock ticks after boot (field 22), 0 where the file does not say."""

    pid: int
    ppid: int
    pgid: int
    sid: int
    state: str
    start: int = 0


def snapshot(proc: str | os.PathLike[str] = PROC) -> dict[int, ProcInfo]:
    """Every live (non-zombie) process, by pid.

    Zombies are left out: they hold no memory or port, and are reaped by their parent (or by the
    watchdog, which is a subreaper).
    """
    found: dict[int, ProcInfo] = {}
    try:
        entries = list(os.scandir(proc))
    except OSError:
        return found
    # a plain string path and one read per process: every capture and watchdog scans the whole
    # table, and pathlib's objects cost as much as the reads (issue 40)
    root = os.fspath(proc)
    for entry in entries:
        if not entry.name.isdigit():
            continue
        info = _parse_stat(int(entry.name), f"{root}/{entry.name}/stat")
        if info is not None and info.state not in ("Z", "X"):
            found[info.pid] = info
    return found


def read_stat(pid: int, proc: str | os.PathLike[str] = PROC) -> ProcInfo | None:
    """``/proc/<pid>/stat`` parsed, or None when the process is gone."""
    return _parse_stat(pid, f"{os.fspath(proc)}/{pid}/stat")


def _parse_stat(pid: int, path: str) -> ProcInfo | None:
    try:
        with open(path, "rb") as f:
            stat = f.read()
    except OSError:
        return None
    # The command name (field 2) may contain spaces and parentheses; the fields after it are fixed.
    fields = stat[stat.rindex(b")") + 2:].split()
    start = int(fields[19]) if len(fields) > 19 else 0
    return ProcInfo(pid, int(fields[1]), int(fields[2]), int(fields[3]), fields[0].decode(), start)


def alive(pid: int, proc: str | os.PathLike[str] = PROC) -> bool:
    """True while ``pid`` exists and is not a zombie."""
    info = read_stat(pid, proc)
    return info is not None and info.state not in ("Z", "X")


def descendants(root: int, snap: dict[int, ProcInfo]) -> set[int]:
    """Pids below ``root`` by ppid links (``root`` itself not included)."""
    children: dict[int, list[int]] = {}
    for info in snap.values():
        children.setdefault(info.ppid, []).append(info.pid)
    found: set[int] = set()
    todo = [root]
    while todo:
        for child in children.get(todo.pop(), ()):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def token_state(pid: int, token: str, proc: str | os.PathLike[str] = PROC) -> bool | None:
    """Whether ``pid`` was started with ``token`` in :data:`TOKEN_VAR`; None while its environment
    cannot be read. A process reads as empty or unreadable while it execs or exits (its memory is
    being replaced or released): not knowing is not "no", so callers ask again rather than keep it."""
    try:
        with open(f"{os.fspath(proc)}/{pid}/environ", "rb") as f:
            data = f.read()
    except OSError:
        return None
    if not data:
        return None
    prefix = TOKEN_VAR.encode() + b"="
    for item in data.split(b"\0"):
        if item.startswith(prefix):
            return token.encode() in item[len(prefix):].split()
    return False


def environ_has_token(pid: int, token: str, proc: str | os.PathLike[str] = PROC) -> bool:
    """True when ``pid`` was started with ``token`` in :data:`TOKEN_VAR` (unreadable counts as no)."""
    return bool(token_state(pid, token, proc))


def add_token(env: dict[str, str], token: str) -> dict[str, str]:
    """``env`` with ``token`` appended to :data:`TOKEN_VAR` (an outer omnibench's token is kept)."""
    tokens = env.get(TOKEN_VAR, "").split()
    return {**env, TOKEN_VAR: " ".join([*tokens, token])}


@dataclass(frozen=True)
class Tree:
    """How to recognise one program's processes: any of these facts makes a process ours."""

    root: int | None = None  # descendants of this pid (the watchdog); the root itself excluded
    pgid: int | None = None  # the program's process group and session (the leader's pid)
    token: str = ""  # carried in the environment of every process the program started
    exclude: frozenset[int] = frozenset()
    # when the program's first process started (ProcInfo.start; 0: unknown): a process that started
    # before it cannot carry the token, so its environment is not read: a scan of 217 processes took
    # 7.0 CPU-ms reading every environment, 3.7 without (benchmarks/bench_proc_scan.py), and a scan
    # ends every git call (some 14,000 in a suite run).
    born: int = 0

    def may_carry_token(self, info: ProcInfo) -> bool:
        """Whether ``info``'s environment is worth reading for the token: there is one, and the
        process did not start before the program (:attr:`born`)."""
        return bool(self.token) and not (info.start and info.start < self.born)

    def members(self, proc: str | os.PathLike[str] = PROC, snap: dict[int, ProcInfo] | None = None,
                cache: dict[int, bool] | None = None) -> set[int]:
        """The live pids that belong to the program now.

        ``cache`` (pid -> carries the token) spares re-reading every process's environment on
        each poll: an environment only changes on exec, and only our processes exec with ours. It
        also keeps a member found once while it exits: its environment reads empty before it is a
        zombie. An environment that could not be read is asked again at the next poll, never cached.
        """
        snap = snapshot(proc) if snap is None else snap
        cache = {} if cache is None else cache
        found = descendants(self.root, snap) if self.root is not None else set()
        for info in snap.values():
            if info.pid in found:
                continue
            if self.pgid is not None and (info.pgid == self.pgid or info.sid == self.pgid):
                found.add(info.pid)
            elif self.may_carry_token(info):
                if info.pid not in cache:
                    state = token_state(info.pid, self.token, proc)
                    if state is None:
                        continue
                    cache[info.pid] = state
                if cache[info.pid]:
                    found.add(info.pid)
        found.discard(os.getpid())  # never ourselves, whatever our environment says
        return found - self.exclude

def cmdline(pid: int, proc: str | os.PathLike[str] = PROC, limit: int = 200) -> str:
    """The command line of ``pid`` for a message, "" when unknown."""
    try:
        with open(f"{os.fspath(proc)}/{pid}/cmdline", "rb") as f:
            raw = f.read()
    except OSError:
        return ""
    return raw.replace(b"\0", b" ").decode("utf-8", "replace").strip()[:limit]
