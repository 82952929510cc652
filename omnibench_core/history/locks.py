"""The history store's two ``flock`` locks, beside the database in the results root (the kernel
drops a lock when its holder dies, even by SIGKILL, so a killed omnibench never leaves one held):

- ``.history.lock``: every connection to ``history.sqlite`` holds it shared; a rebuild holds it
  exclusive only for the moment it swaps the new database in. So no connection ever spans the
  swap: one opened before it reads the old file to its end, one opened after it the new one.
- ``.history-rebuild.lock``: held by one rebuild at a time for its whole run; the file names the
  holder. A second rebuild waits for it (and says whom it waits for).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Callable, Iterator
from pathlib import Path

from ..errors import OmnibenchError, storage_error
from ..run.ownership import holder_line, take_flock

BUSY_TIMEOUT_S = 60.0  # a reader or writer waits this long for the store (its lock, then SQLite's)

STORE_LOCK = ".history.lock"
REBUILD_LOCK = ".history-rebuild.lock"


class HistoryLockTimeout(OmnibenchError):
    """A history lock stayed held longer than the caller waits."""


def writable(results: Path) -> bool:
    """Whether this process may make files in ``results`` (False on a read-only mount, or a root
    without write access; a missing root counts as writable: it is made)."""
    return not results.exists() or os.access(results, os.W_OK | os.X_OK)


@contextlib.contextmanager
def store_lock(results: Path, *, exclusive: bool = False, timeout_s: float = BUSY_TIMEOUT_S) -> Iterator[None]:
    """Hold ``.history.lock`` shared (any connection) or exclusive (a rebuild's swap). A results
    root this process cannot write is not locked: nothing can swap a database there."""
    if not writable(results):
        yield
        return
    path = results / STORE_LOCK
    fd = _open(path)
    try:
        if not take_flock(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH, timeout_s):
            raise HistoryLockTimeout(f"the history database in {results} stayed locked for {timeout_s:.0f} s",
                                     evidence={"lock": str(path)},
                                     hint="a rebuild or a long query holds it: try again when it ends")
        yield
    finally:
        os.close(fd)  # closing drops the lock


@contextlib.contextmanager
def rebuild_lock(results: Path, *, timeout_s: float, progress: Callable[[str], None]) -> Iterator[None]:
    """Hold ``.history-rebuild.lock`` for a whole rebuild, writing the holder into it; while
    another rebuild holds it, say so through ``progress`` once and wait (up to ``timeout_s``)."""
    path = results / REBUILD_LOCK
    fd = _open(path)
    try:
        def waiting() -> None:
            progress(f"waiting for another rebuild of the history database: {_holder(path)}")

        if not take_flock(fd, fcntl.LOCK_EX, timeout_s, waiting):
            raise HistoryLockTimeout(f"another rebuild of the history database in {results} ran longer than "
                                     f"{timeout_s:.0f} s", evidence={"held by": _holder(path), "lock": str(path)},
                                     hint="wait for it to end (or stop that process), then run "
                                          "`invoke history --rebuild` again")
        os.ftruncate(fd, 0)
        os.pwrite(fd, (holder_line() + "\n").encode(), 0)
        yield
    finally:
        os.close(fd)


def _open(path: Path) -> int:
    """The lock file, made when missing; one that cannot be (a folder in its place) is a StorageError."""
    try:
        return os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        raise storage_error(f"opening the history database's lock {path}", exc) from exc


def _holder(path: Path) -> str:
    try:
        return path.read_text().strip() or "unknown"
    except OSError:
        return "unknown"
