"""The history database made again from the run directories (``invoke history --rebuild``, and
a missing or 0-byte one on first use), without a moment where it is half-built:

1. under the rebuild lock (:mod:`.locks`; a second rebuild waits for the first), every source
   file (campaign files, A/B experiment files, bisect files) is read into a new database beside
   the old one, ``.history.sqlite.PID.partial``, noting each file's signature as it was read;
2. the sources are listed again and each one that is new or changed since (a campaign that
   completed while the rebuild ran, whose own indexing went into the old database) is read
   again: a few times without a lock, then once more under the store lock held exclusive (no
   connection is open); then the new file is renamed over the old one (after the old one's
   ``-wal``/``-shm``, which would be replayed into it).

Readers and writers keep using the old database through step 1 and wait only for step 2.
"""

from __future__ import annotations

import contextlib
import enum
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import OmnibenchError, storage_error
from . import store as st
from .locks import BUSY_TIMEOUT_S, rebuild_lock, store_lock, writable

REBUILD_WAIT_S = 1800.0  # a second rebuild waits this long for the first (a results root of thousands of campaigns)
CATCH_UP_ROUNDS = 3  # looks for sources changed meanwhile before the swap's lock is taken
Signature = tuple[int, int, int]  # (inode, mtime ns, size): an atomic rewrite is a new inode


class SourceKind(enum.Enum):
    """What a source file of the store is."""

    CAMPAIGN = "campaign"  # <results>/<revision>/campaigns/*.json
    EXPERIMENT = "ab"  # <results>/ab/*.json
    BISECT = "bisect"  # <results>/bisects/*.json


@dataclass(frozen=True)
class Rebuilt:
    """What :func:`rebuild` indexed, each source file it could not trust (file: why), and how many
    sources completed or changed while it ran (read again before the swap)."""

    campaigns: int
    bisects: int
    skipped: tuple[str, ...] = ()
    caught_up: int = 0


def sources(results: Path) -> list[tuple[SourceKind, Path]]:
    """Every file the store is made from, with its kind."""
    return ([(SourceKind.CAMPAIGN, p) for p in st.campaign_files(results)]
            + [(SourceKind.EXPERIMENT, p) for p in st.experiment_files(results)]
            + [(SourceKind.BISECT, p) for p in st.bisect_files(results)])


def _signature(path: Path) -> Signature | None:
    try:
        s = path.stat()
    except OSError:
        return None
    return s.st_ino, s.st_mtime_ns, s.st_size


@dataclass
class _Build:
    """One rebuild's reading of the sources into its new database."""

    results: Path
    git: str
    checkouts: tuple[str, ...] = ()  # where else a campaign's commit is looked up (a Ray-shipped one's)
    seen: dict[Path, Signature | None] = field(default_factory=dict)
    skipped: dict[Path, str] = field(default_factory=dict)

    def take(self, store: st.Store, kind: SourceKind, path: Path) -> None:
        """Read one source into ``store`` (replacing what it put there before); its signature is
        taken first, so a change during the read shows at the second look."""
        self.seen[path] = _signature(path)
        rel = str(path.relative_to(self.results))
        try:
            if kind is SourceKind.BISECT:
                found = st.read_bisect(self.results, path)
                store.forget(rel)
                if found is not None:
                    store.add_bisect(found)
            else:
                points = (st.experiment_points(self.results, path, git=self.git) if kind is SourceKind.EXPERIMENT else
                          [p for p in [st.campaign_point(self.results, path, git=self.git, checkouts=self.checkouts)]
                           if p is not None])
                store.forget(rel)
                for point in points:
                    store.add(point)
            self.skipped.pop(path, None)
        except st.HistoryStoreError:
            raise
        except OmnibenchError as exc:  # record.load and the run readers name the file and field
            store.forget(rel)
            self.skipped[path] = f"{rel}: {exc.message}"
        except OSError as exc:  # gone (or unreadable) since it was listed: the second look forgets a gone one
            store.forget(rel)
            self.skipped[path] = f"{rel}: {exc.strerror or exc}"

    def catch_up(self, store: st.Store) -> int:
        """Read again every source that is new or changed since it was read, forget every one that
        is gone; how many there were."""
        now = sources(self.results)
        changed = [(kind, p) for kind, p in now if p not in self.seen or self.seen[p] != _signature(p)]
        for kind, p in changed:
            self.take(store, kind, p)
        gone = set(self.seen) - {p for _, p in now}
        for p in gone:
            store.forget(str(p.relative_to(self.results)))
            self.seen.pop(p)
            self.skipped.pop(p, None)
        return len(changed) + len(gone)


def _refuse_unwritable(results: Path, what: str) -> None:
    if not writable(results):
        raise st.HistoryStoreError(f"{what}: the results root {results} is not writable by this process",
                                   evidence={"results": str(results), "database": str(st.db_path(results))},
                                   hint="make it writable (a read-only mount? ls -ld), or copy the results root "
                                        "somewhere writable and run `invoke history --rebuild --results COPY`")


def rebuild(results: Path, *, git: str = "git", progress: Callable[[str], None] = lambda _: None,
            only_if_missing: bool = False, checkouts: Sequence[str] = ()) -> Rebuilt | None:
    """Make the database again from the run directories, as the module says; with
    ``only_if_missing``, only when there is none (or a 0-byte one) once the lock is held (None
    when another process made it meanwhile). The old database is replaced whatever state it
    was in; a source file that cannot be trusted is skipped and named. ``checkouts``: where else a
    campaign's commit is looked up (:func:`.store.campaign_point`)."""
    path = st.db_path(results)
    _refuse_unwritable(results, "the history database cannot be rebuilt")
    if path.is_dir() or path.is_symlink():
        raise st.HistoryStoreError(f"{path} is a {'folder' if path.is_dir() else 'symbolic link'}, not the history "
                                   "database; it is not replaced", evidence={"file": str(path)},
                                   hint="move it aside, then run `invoke history --rebuild`")
    try:
        results.mkdir(parents=True, exist_ok=True)
        with rebuild_lock(results, timeout_s=REBUILD_WAIT_S, progress=progress):
            if only_if_missing and st.present(path):
                return None
            for left in results.glob(f".{st.DB_NAME}.*.partial*"):  # a killed rebuild's: the lock is ours
                left.unlink(missing_ok=True)
            partial = results / f".{st.DB_NAME}.{os.getpid()}.partial"
            try:
                return _build_and_swap(results, partial, git, tuple(checkouts))
            finally:
                for suffix in ("", "-wal", "-shm", "-journal"):
                    Path(f"{partial}{suffix}").unlink(missing_ok=True)
    except OSError as exc:
        raise storage_error("rebuilding the history database", exc) from exc


def _build_and_swap(results: Path, partial: Path, git: str, checkouts: tuple[str, ...]) -> Rebuilt:
    path = st.db_path(results)
    build = _Build(results, git, checkouts)
    caught_up = 0
    with st.connected(partial, create=True) as store:
        for kind, source in sources(results):
            build.take(store, kind, source)
        # what changed meanwhile is read again before the lock, where each read (a git show) would
        # keep every reader and writer waiting; the last look under the lock has little left to read
        for _ in range(CATCH_UP_ROUNDS):
            changed = build.catch_up(store)
            caught_up += changed
            if not changed:
                break
    with store_lock(results, exclusive=True, timeout_s=BUSY_TIMEOUT_S):
        with st.connected(partial) as store:  # closed before the rename: its WAL is folded into the file
            caught_up += build.catch_up(store)
            campaigns, bisects = store.counts()
        _fsync(partial)
        for suffix in ("-wal", "-shm"):  # the old file's: no connection has them open now
            Path(f"{path}{suffix}").unlink(missing_ok=True)
        os.replace(partial, path)
        _fsync(results)
    return Rebuilt(campaigns, bisects, tuple(why for _, why in sorted(build.skipped.items())), caught_up)


def _fsync(path: Path) -> None:
    """The file's (or folder's) data on disk before the rename is relied on."""
    fd = os.open(path, os.O_RDONLY)
    try:
        with contextlib.suppress(OSError):  # a file system without fsync on folders
            os.fsync(fd)
    finally:
        os.close(fd)


def ensure(results: Path, *, git: str = "git", progress: Callable[[str], None] = lambda _: None,
           checkouts: Sequence[str] = ()) -> Rebuilt | None:
    """Make the database when it is missing or 0 bytes (the run directories are the truth); None
    when it is there. A results root this process cannot write cannot get one: that is said."""
    if st.present(st.db_path(results)):
        return None
    _refuse_unwritable(results, f"there is no history database at {st.db_path(results)} (or it is empty), "
                                "and none can be made")
    return rebuild(results, git=git, progress=progress, only_if_missing=True, checkouts=checkouts)
