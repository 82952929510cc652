"""Who owns a run, and its port: the claim of ``runN``, the port lock, and runs whose owner died.

A run directory is claimed with an exclusive ``mkdir`` (two runs at once never get the same
``runN``); a port is held by an ``flock`` for the whole run (two runs never share a port, and
the kernel drops the lock when the owner dies, even by SIGKILL). The manifest records the owner
(host, pid and the pid's start time, so a reused pid is not mistaken for the owner); a ``runN``
still "running" whose owner is gone is moved aside by the next run on that revision.
"""

from __future__ import annotations

import datetime as dt
import fcntl
import os
import socket
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ..errors import RunFileError, RunNotReady, storage_error
from ..statuses import RunStatus
from ..store import manifest as manifest_file
from ..store.names import check_name, under_root
from .layout import move_aside, next_run_name


@dataclass(frozen=True)
class Owner:
    """The process that runs a run."""

    host: str
    pid: int
    pid_started: int  # the pid's start time in clock ticks since boot (/proc/<pid>/stat field 22)

    @classmethod
    def me(cls) -> Owner:
        """This process."""
        return cls(socket.gethostname(), os.getpid(), pid_start_time(os.getpid()))

    def as_record(self) -> dict[str, Any]:
        """For the manifest."""
        return asdict(self)


def pid_start_time(pid: int, proc: Path = Path("/proc")) -> int:
    """When ``pid`` started (clock ticks since boot), or -1 when there is no such process."""
    try:
        stat = (proc / str(pid) / "stat").read_text()
    except OSError:
        return -1
    return int(stat[stat.rindex(")") + 2:].split()[19])


def owner_alive(record: Any, proc: Path = Path("/proc")) -> bool:
    """False only when the recorded owner is known to be gone: this host, and its pid dead or reused.

    An owner on another host cannot be checked from here, and a manifest without an owner
    record (an older omnibench) tells nothing: both count as alive, so nothing is moved wrongly.
    """
    if not isinstance(record, dict) or record.get("host") != socket.gethostname():
        return True
    pid, started = record.get("pid"), record.get("pid_started")
    if not isinstance(pid, int):
        return True
    now = pid_start_time(pid, proc)
    return now != -1 and now == started


def reclaim_abandoned(revision_dir: Path, proc: Path = Path("/proc")) -> list[Path]:
    """Move aside every ``runN`` of ``revision_dir`` left "running" by an owner that died.

    Its manifest gets status ``abandoned`` and the reason; returns the new paths. A run that was
    ``generated`` and whose later phases (deferred scoring) died with their owner goes back to
    ``generated`` in place (its path is returned as it is): only its scoring is done again.
    """
    moved: list[Path] = []
    if not revision_dir.is_dir():
        return moved
    for run in sorted(revision_dir.glob("run*")):
        if run.name.startswith("run") and run.name[3:].isdigit() and manifest_file.exists(run):
            try:
                manifest = manifest_file.read(run)
            except RunFileError:
                continue
            if manifest.status is not RunStatus.RUNNING or owner_alive(manifest.owner, proc):
                continue
            owner = f"its owner (pid {manifest.owner.get('pid')} on {manifest.owner.get('host')})"
            if manifest.resumes:  # generated, then its later phases died: keep what it generated
                manifest_file.back_to_generated(run, f"{owner} died while scoring it; left generated again")
                moved.append(run)
                continue
            new = move_aside(run)
            manifest_file.abandon(new, f"{owner} died while the run was running; moved aside by a later run")
            moved.append(new)
    return moved


def claim_run_dir(revision_dir: Path, name: str | None = None, attempts: int = 20) -> Path:
    """Create the run directory atomically: ``name``, or the next free ``runN``.

    A named run that exists is a :class:`RunNotReady`; for an automatic name, a run that took
    the same ``runN`` a moment earlier makes this one take the next.
    """
    if name:
        check_name(name, "run name")  # one folder entry of the revision folder, never a path out of it
    for _ in range(attempts):
        revision_dir.mkdir(parents=True, exist_ok=True)  # again each try: a refused run removes an empty one
        run_dir = under_root(revision_dir, revision_dir / (name or next_run_name(revision_dir)), "run folder")
        try:
            run_dir.mkdir()
            return run_dir
        except FileNotFoundError:  # the revision folder was removed between the two mkdirs
            continue
        except FileExistsError:
            if name:
                raise RunNotReady(f"run directory {run_dir} exists already", evidence={"run_dir": str(run_dir)},
                                  hint="omnibench never overwrites a run: pick another --run-name or move "
                                       "that directory") from None
    raise RunNotReady(f"could not claim a run directory in {revision_dir} after {attempts} tries",
                      hint="many runs are starting in this folder at once; repeat the command")


def lock_dir() -> Path:
    """Where port locks live: ``$OMNIBENCH_LOCK_DIR``, else a per-user folder in the temp dir."""
    configured = os.environ.get("OMNIBENCH_LOCK_DIR")
    return Path(configured) if configured else Path(tempfile.gettempdir()) / f"omnibench-locks-{os.getuid()}"


def holder_line(owner: Owner | None = None, purpose: str = "") -> str:
    """``pid N on HOST (pid start T), since ISO[, PURPOSE]`` for a lock file: who holds it (the
    pid's start time tells a reused pid apart), since when, and for what (``run <folder>``)."""
    owner = owner or Owner.me()
    since = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    return f"pid {owner.pid} on {owner.host} (pid start {owner.pid_started}), since {since}" + \
        (f", {purpose}" if purpose else "")


FLOCK_POLL_S = 0.05  # how often a waiter tries a held flock again (flock has no timeout of its own)


def take_flock(fd: int, mode: int, timeout_s: float, waiting: Callable[[], None] = lambda: None) -> bool:
    """flock ``fd`` in ``mode`` (``fcntl.LOCK_EX`` or ``LOCK_SH``) within ``timeout_s``: True once held,
    False when it stayed held elsewhere that long; ``waiting()`` is called once, when it is held elsewhere."""
    deadline, told = time.monotonic() + timeout_s, False
    while True:
        try:
            fcntl.flock(fd, mode | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if not told:
                waiting()
                told = True
            if time.monotonic() >= deadline:
                return False
            time.sleep(FLOCK_POLL_S)


@contextmanager
def measurement_lock(lock: Path, refuse: Callable[[str], Exception], what: str) -> Iterator[Path]:
    """:func:`held_lock` on ``lock`` for a whole measurement (a campaign, an A/B experiment); a
    results folder that cannot hold it is a StorageError about ``what``, not a raw OSError."""
    stack = ExitStack()
    try:
        stack.enter_context(held_lock(lock, refuse))
    except OSError as exc:
        raise storage_error(f"locking the {what}", exc) from exc
    with stack:
        yield lock


@contextmanager
def held_lock(path: Path, refuse: Callable[[str], Exception], purpose: str = "") -> Iterator[Path]:
    """Hold an exclusive ``flock`` on ``path`` while inside; the file names the holder (and
    ``purpose``: what it holds it for).

    A lock held by another live process is ``refuse(holder line)``, raised. The kernel drops
    the lock when its holder dies (even by SIGKILL), so a dead holder's lock is taken over;
    the descriptor is not inherited by children (Python opens files close-on-exec).
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    handle = os.fdopen(os.open(path, os.O_RDWR | os.O_CREAT, 0o644), "r+")
    try:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise refuse(handle.read().strip() or "unknown") from None
        try:  # overwrite, then cut: a full disk keeps the old holder line rather than an empty file
            handle.write(holder_line(purpose=purpose) + "\n")
            handle.flush()
            handle.truncate()
        except OSError:
            if os.fstat(handle.fileno()).st_size == 0:
                path.unlink(missing_ok=True)
            raise
        yield path
    finally:
        handle.close()  # closing drops the lock


def port_lock_path(port: int, folder: Path | None = None) -> Path:
    """The lock file of ``port``: ``port-N.lock`` in :func:`lock_dir`."""
    return (folder or lock_dir()) / f"port-{port}.lock"


@contextmanager
def port_lock(port: int, folder: Path | None = None, run_dir: Path | None = None) -> Iterator[Path]:
    """Hold ``port`` for this run (``run_dir``, named in the lock); a port another omnibench run
    holds is a :class:`RunNotReady` naming the holder: pid, run and the campaign it measures."""
    path = port_lock_path(port, folder)

    def refuse(holder: str) -> Exception:
        return RunNotReady(f"port {port} is held by another omnibench run", evidence={"held by": with_campaign(holder),
                           "lock": str(path)}, hint="wait for that run to end, or pass another --port")

    with held_lock(path, refuse, f"run {run_dir}" if run_dir else ""):
        yield path


def flock_held(path: Path, proc: Path = Path("/proc")) -> bool:
    """Whether some process holds an ``flock`` on ``path`` now, from the kernel's ``/proc/locks``
    (looking takes no lock, so it never refuses the run that is about to take it)."""
    try:
        st = path.stat()
        table = (proc / "locks").read_text()
    except OSError:
        return False
    device = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    # "1: FLOCK  ADVISORY  WRITE 1234 fe:00:5678 0 EOF"; a waiter's line has "->" and holds nothing
    return any(cols[1:2] == ["FLOCK"] and len(cols) > 5 and cols[5] == device
               for cols in (line.split() for line in table.splitlines()))


def port_lock_holder(port: int, folder: Path | None = None, proc: Path = Path("/proc")) -> str:
    """Who holds ``port``'s lock now (its holder line, with the campaign it measures); "" when
    nobody does (a lock file left by a run that ended holds nothing)."""
    path = port_lock_path(port, folder)
    if not flock_held(path, proc):
        return ""
    try:
        holder = path.read_text().strip()
    except OSError:
        holder = ""
    return with_campaign(holder or "unknown", proc)


def with_campaign(holder: str, proc: Path = Path("/proc")) -> str:
    """A port lock's holder line with the campaign its run belongs to, when one is measured by the
    same process (its ``campaigns/<name>.lock`` beside the run, held by that pid)."""
    pid, _, rest = holder.partition(" on ")
    run = rest.rpartition(", run ")[2] if ", run " in rest else ""
    if not pid.startswith("pid ") or not run:
        return holder
    for lock in sorted((Path(run).parent / "campaigns").glob("*.lock")):
        try:
            text = lock.read_text()
        except OSError:
            continue
        if text.startswith(f"{pid} on ") and flock_held(lock, proc):
            return f"{holder}, campaign {lock.stem} ({lock.with_suffix('.json')})"
    return holder
