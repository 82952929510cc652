"""The results store, ``<results>/history.sqlite``: every complete campaign indexed (revision,
commit time and first parent, workloads, options, target, environment facts, each run's metrics)
and every bisect's named commit. The run directories stay the truth: a rebuild
(:mod:`.rebuild`) makes the database again from them, so deleting it loses nothing.

The standard library's ``sqlite3`` in WAL mode with a busy timeout: two writers at once (two
campaigns completing together) take turns. Every connection holds the store lock shared
(:mod:`.locks`), so a rebuild's swap never happens under an open one. The schema version is
``PRAGMA user_version``; a database of a newer omnibench, or one that is not a database, is a
:class:`HistoryStoreError` that names the file and says ``invoke history --rebuild``. A results
root this process cannot write is read as it is (SQLite's ``immutable``: nothing can change it).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import re
import sqlite3
import urllib.parse
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ..ab import experiment_file as experiment_files_io
from ..campaign import campaign_file as campaign_files_io
from ..campaign.summary import RunSetStats, campaign_stats, environment_of, stats_of
from ..defaults import GIT_OUTPUT_BYTES, GIT_S
from ..errors import OmnibenchError
from ..identity import planted
from ..jsonio import read_json
from ..process.capture import Ending, capture
from ..scale.revisions import WORKTREES
from ..statuses import CampaignStatus, ExperimentStatus
from ..store.names import AB_FOLDER, BISECTS, CAMPAIGNS, RECORD_SUFFIX
from .locks import BUSY_TIMEOUT_S, store_lock, writable

DB_NAME = "history.sqlite"
SCHEMA_VERSION = 2  # 2: campaigns.ancestry (the first-parent line stored when indexed)
# How many first-parent ancestors a campaign's row keeps: without a --checkout, two measured
# commits further apart than this have no known order (docs/history.md).
ANCESTRY_DEPTH = 1000
DISK_FULL_BYTES = 1 << 20  # less free than this and SQLite's "disk I/O error" is the disk, not the file
REBUILD_HINT = "run `invoke history --rebuild`: it makes the database again from the run directories"

_SCHEMA = """
CREATE TABLE campaigns (
    file TEXT PRIMARY KEY,           -- the campaign file, relative to the results root
    kind TEXT NOT NULL,              -- campaign, or ab (one side of an A/B experiment: file#A)
    folder TEXT NOT NULL,            -- the revision folder's name
    revision TEXT NOT NULL,          -- the full commit ('' when unknown)
    commit_time TEXT NOT NULL,       -- ISO 8601 committer time ('' when unknown)
    first_parent TEXT NOT NULL,
    subject TEXT NOT NULL,
    workloads TEXT NOT NULL,         -- JSON list
    options TEXT NOT NULL,           -- JSON list, sorted
    client TEXT NOT NULL,
    target TEXT NOT NULL,
    settings TEXT NOT NULL,          -- JSON list of [key, value]: the planted delays (another measurement)
    environment TEXT NOT NULL,       -- JSON object of facts: name -> value
    report TEXT,                     -- report.md relative to the results root, if one exists
    completed TEXT NOT NULL,
    indexed TEXT NOT NULL,
    ancestry TEXT NOT NULL DEFAULT '[]'  -- JSON list: first-parent ancestors, newest first (schema 2)
);
CREATE INDEX campaigns_revision ON campaigns (revision);
CREATE TABLE runs (
    file TEXT NOT NULL REFERENCES campaigns (file) ON DELETE CASCADE,
    run TEXT NOT NULL,
    metric TEXT NOT NULL,
    value REAL NOT NULL,
    PRIMARY KEY (file, run, metric)
);
CREATE INDEX runs_metric ON runs (metric);
CREATE TABLE bisects (
    file TEXT PRIMARY KEY,           -- <results>/bisects/... .json, relative
    series TEXT NOT NULL,            -- JSON of the good end's identity (workloads, options, client, target, settings)
    metric TEXT NOT NULL,
    good TEXT NOT NULL,
    bad TEXT NOT NULL,
    first_bad TEXT NOT NULL,
    indexed TEXT NOT NULL
);
"""


class HistoryStoreError(OmnibenchError):
    """The history database cannot be used: not a database (corrupt), or of a newer schema."""


@dataclass(frozen=True)
class Identity:
    """What a series measures, apart from the metric and the commit."""

    workloads: tuple[str, ...]
    options: tuple[str, ...]
    client: str
    target: str
    settings: tuple[tuple[str, str], ...] = ()  # identity.planted(): a planted delay is another series

    def key(self) -> str:
        """A stable JSON form (the bisects table's ``series``)."""
        return json.dumps([list(self.workloads), list(self.options), self.client, self.target,
                           [list(kv) for kv in self.settings]])


@dataclass(frozen=True)
class IndexedCampaign:
    """One complete campaign as the store holds it."""

    file: str
    folder: str
    revision: str
    identity: Identity
    environment: Mapping[str, str]
    runs: Mapping[str, Mapping[str, float]]  # run -> metric -> value (finite numbers only)
    completed: str
    report: str | None = None
    commit_time: str = ""
    first_parent: str = ""
    subject: str = ""
    kind: str = "campaign"
    ancestry: tuple[str, ...] = ()  # first-parent ancestors, newest first (empty: unknown)


@dataclass(frozen=True)
class Bisected:
    """A bisect's named commit, for the series it ran on."""

    file: str
    series: str
    metric: str
    good: str
    bad: str
    first_bad: str


@dataclass
class Store:
    """An open database; use :func:`opened`."""

    path: Path
    db: sqlite3.Connection

    def add(self, c: IndexedCampaign) -> None:
        """Index (or index again) one campaign, in one transaction."""
        now = _now()
        with _guarded(self.path), self.db:
            self.db.execute("DELETE FROM runs WHERE file = ?", (c.file,))
            self.db.execute(
                "INSERT OR REPLACE INTO campaigns VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (c.file, c.kind, c.folder, c.revision, c.commit_time, c.first_parent, c.subject,
                 json.dumps(list(c.identity.workloads)), json.dumps(list(c.identity.options)), c.identity.client,
                 c.identity.target, json.dumps([list(kv) for kv in c.identity.settings]),
                 json.dumps(dict(c.environment), sort_keys=True), c.report, c.completed, now,
                 json.dumps(list(c.ancestry))))
            self.db.executemany("INSERT INTO runs VALUES (?,?,?,?)",
                                [(c.file, run, m, v) for run, ms in c.runs.items() for m, v in ms.items()])

    def forget(self, source: str) -> None:
        """Drop what one source file (relative to the results root) put in: a campaign file, an
        A/B experiment's sides (``file#A``, ``file#B``) or a bisect file."""
        with _guarded(self.path), self.db:
            self.db.execute("DELETE FROM campaigns WHERE file = ? OR substr(file, 1, ?) = ?",
                            (source, len(source) + 1, source + "#"))
            self.db.execute("DELETE FROM bisects WHERE file = ?", (source,))

    def counts(self) -> tuple[int, int]:
        """(campaigns, bisects) held."""
        with _guarded(self.path):
            return (self.db.execute("SELECT count(*) FROM campaigns").fetchone()[0],
                    self.db.execute("SELECT count(*) FROM bisects").fetchone()[0])

    def add_bisect(self, b: Bisected) -> None:
        """Record the commit a bisect named."""
        with _guarded(self.path), self.db:
            self.db.execute("INSERT OR REPLACE INTO bisects VALUES (?,?,?,?,?,?,?)",
                            (b.file, b.series, b.metric, b.good, b.bad, b.first_bad, _now()))

    def campaigns(self) -> list[IndexedCampaign]:
        """Every indexed campaign with its runs."""
        with _guarded(self.path):
            rows = self.db.execute("SELECT file, folder, revision, workloads, options, client, target, environment, "
                                   "completed, report, commit_time, first_parent, subject, kind, settings, ancestry "
                                   "FROM campaigns ORDER BY file").fetchall()
            values: dict[str, dict[str, dict[str, float]]] = {}
            for file, run, metric, value in self.db.execute("SELECT file, run, metric, value FROM runs ORDER BY file, run"):
                values.setdefault(file, {}).setdefault(run, {})[metric] = value
        return [IndexedCampaign(r[0], r[1], r[2], Identity(tuple(json.loads(r[3])), tuple(json.loads(r[4])), r[5], r[6],
                                                                tuple((k, v) for k, v in json.loads(r[14]))),
                                json.loads(r[7]), values.get(r[0], {}), r[8], r[9], r[10], r[11], r[12], r[13],
                                tuple(json.loads(r[15])))
                for r in rows]

    def bisects(self) -> list[Bisected]:
        """Every bisect recorded."""
        with _guarded(self.path):
            rows = self.db.execute("SELECT file, series, metric, good, bad, first_bad FROM bisects ORDER BY indexed").fetchall()
        return [Bisected(*r) for r in rows]


def db_path(results: Path) -> Path:
    """``<results>/history.sqlite``."""
    return results / DB_NAME


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def _unusable(path: Path, problem: str, exc: Exception | None = None) -> HistoryStoreError:
    evidence = {"file": str(path)}
    if exc is not None:
        evidence["error"] = f"{type(exc).__name__}: {exc}"
    return HistoryStoreError(f"the history database {path} {problem}", evidence=evidence, hint=REBUILD_HINT)


@contextlib.contextmanager
def _guarded(path: Path) -> Iterator[None]:
    """sqlite's errors as a HistoryStoreError naming the file."""
    try:
        yield
    except sqlite3.OperationalError as exc:
        if "locked" in str(exc) or "busy" in str(exc):  # the busy timeout ran out: not a corrupt file
            raise HistoryStoreError(f"the history database {path} stayed locked for {BUSY_TIMEOUT_S:.0f} s",
                                    evidence={"file": str(path), "error": str(exc)},
                                    hint="another omnibench holds it: try again when it ends") from exc
        if "full" in str(exc) or (_DISK_SYMPTOMS.search(str(exc)) and _disk_full(path)):  # SQLITE_FULL, or a -shm not made
            raise HistoryStoreError(f"the disk of the history database {path} is full",
                                    evidence={"file": str(path), "error": str(exc)},
                                    hint="free some space (df -h, df -i), then try again") from exc
        if "readonly" in str(exc):
            raise HistoryStoreError(f"the history database {path} is read-only to this process",
                                    evidence={"file": str(path), "error": str(exc)},
                                    hint="make it writable (ls -l), or read a writable copy with --results") from exc
        raise _unusable(path, "cannot be read (is it corrupt?)", exc) from exc
    except sqlite3.DatabaseError as exc:
        raise _unusable(path, "cannot be read (is it corrupt?)", exc) from exc


# what SQLite says when it could not write or make a file: only then can a nearly full disk be the cause
_DISK_SYMPTOMS = re.compile(r"disk I/O error|unable to open database file")


def _disk_full(path: Path) -> bool:
    """Whether the folder of ``path`` has (almost) no space or inodes left."""
    try:
        st = os.statvfs(path.parent)
    except OSError:
        return False
    return st.f_bavail * st.f_frsize < DISK_FULL_BYTES or (st.f_files > 0 and st.f_favail == 0)


def present(path: Path) -> bool:
    """Whether ``path`` is a database file worth opening: a 0-byte one (cut short by a full disk,
    or truncated) holds nothing and is made again, as a missing one is."""
    try:
        return path.is_file() and path.stat().st_size > 0
    except OSError:
        return False


@contextlib.contextmanager
def opened(results: Path) -> Iterator[Store]:
    """The store of ``results`` (it must exist: :func:`.rebuild.ensure` makes a missing one),
    held shared against a rebuild's swap; a newer or corrupt one is a HistoryStoreError."""
    path = db_path(results)
    with store_lock(results):
        if not present(path):
            raise HistoryStoreError(f"no history database at {path}", evidence={"results": str(results)},
                                    hint="measure a campaign (invoke measure / matrix), or `invoke history --rebuild`")
        with connected(path, readonly=not writable(results)) as store:
            yield store


@contextlib.contextmanager
def connected(path: Path, *, readonly: bool = False, create: bool = False) -> Iterator[Store]:
    """A connection to the database file ``path`` (no store lock: :func:`opened` is the public
    door, a rebuild's own new file needs none); ``create`` makes the schema in an empty file,
    ``readonly`` opens it as immutable (a results root this process cannot write)."""
    try:
        if readonly:  # immutable: no -shm can be made; but a WAL that holds commits must be read
            wal = Path(f"{path}-wal")
            flag = "" if wal.is_file() and wal.stat().st_size else "&immutable=1"
            db = sqlite3.connect(f"file:{urllib.parse.quote(str(path))}?mode=ro{flag}", uri=True,
                                 timeout=BUSY_TIMEOUT_S)
        else:
            db = sqlite3.connect(path, timeout=BUSY_TIMEOUT_S, isolation_level="DEFERRED")
    except sqlite3.Error as exc:
        raise _unusable(path, "cannot be opened", exc) from exc
    try:
        with _guarded(path):
            db.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
            if not readonly:
                db.execute("PRAGMA journal_mode = WAL")
                db.execute("PRAGMA foreign_keys = ON")
            _migrate(path, db, create=create, readonly=readonly)
        yield Store(path, db)
    finally:
        db.close()


def _migrate(path: Path, db: sqlite3.Connection, *, create: bool, readonly: bool = False) -> None:
    """Make the schema in a new database (``create``); bring schema 1 to 2 (a column added, old
    rows' ancestry unknown); refuse a newer one, or one without a schema."""
    version = db.execute("PRAGMA user_version").fetchone()[0]
    if version > SCHEMA_VERSION:
        raise HistoryStoreError(f"the history database {path} has schema {version}; this omnibench reads "
                                f"schema {SCHEMA_VERSION} (it was written by a newer omnibench)",
                                evidence={"file": str(path), "schema": str(version)},
                                hint="use the newer omnibench, or " + REBUILD_HINT)
    if version == SCHEMA_VERSION:
        return
    if version == 1 and not readonly:  # schema 1 lacks the stored first-parent line: old rows read as unknown
        with db:
            db.execute("ALTER TABLE campaigns ADD COLUMN ancestry TEXT NOT NULL DEFAULT '[]'")
            db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        return
    if version == 1:
        raise HistoryStoreError(f"the history database {path} has schema 1 and this process cannot upgrade it "
                                "(the results root is read-only)", evidence={"file": str(path), "schema": "1"},
                                hint="run `invoke history` once where the results root is writable, or "
                                     + REBUILD_HINT + " in a writable copy")
    if not create or db.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]:
        raise _unusable(path, "holds no omnibench schema (not omnibench's, or never finished)")
    with db:
        for statement in _SCHEMA.split(";"):
            if statement.strip():
                db.execute(statement)
        db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")


# -- reading the run directories -----------------------------------------------------------

def environment_facts(environment: Mapping[str, Any]) -> dict[str, str]:
    """The facts that make a new baseline, flat: ``gpu model``, ``gpu driver``, ``model REPO``
    (its pinned revision), ``package NAME`` (its version). Where the environment has none of a
    kind, that kind is left out."""
    facts: dict[str, str] = {}
    gpus = environment.get("gpus")
    if isinstance(gpus, list) and gpus:
        for key, field_name in (("gpu model", "name"), ("gpu driver", "driver_version")):
            facts[key] = ", ".join(sorted({str(g.get(field_name, "")) for g in gpus if isinstance(g, dict)}))
    for repo, rev in sorted((environment.get("model_revisions") or {}).items()):
        facts[f"model {repo}"] = str(rev)
    for name, version in sorted((environment.get("packages") or {}).items()):
        facts[f"package {name}"] = str(version)
    return facts


def _report_of(results: Path, campaign_file: Path, name: str) -> str | None:
    reports = sorted((campaign_file.parent / name).glob("report*.md"), key=lambda p: p.stat().st_mtime)
    return str(reports[-1].relative_to(results)) if reports else None


def _runs_of(stats: RunSetStats) -> dict[str, dict[str, float]]:
    """Run -> metric -> value, for every metric whose values are all finite numbers."""
    runs: dict[str, dict[str, float]] = {}
    for m in stats.metrics:
        for run, value in ([] if m.problem else m.values.items()):
            runs.setdefault(run, {})[m.name] = float(value)
    return runs


def read_campaign(results: Path, campaign_file: Path) -> IndexedCampaign | None:
    """A campaign file and its measured runs as the store indexes them; None when the campaign is
    not complete. The one place the store reads run files (through the campaign readers)."""
    c = campaign_files_io.load(campaign_file)
    if c.status is not CampaignStatus.COMPLETE:
        return None
    _, stats = campaign_stats(campaign_file)
    runs = _runs_of(stats)
    env = dict(c.environment)
    identity = Identity(tuple(c.asked.workloads), tuple(c.asked.options), c.asked.client or "",
                        str(c.asked.settings.get("target", env.get("target") or "")), planted(c.asked.settings))
    return IndexedCampaign(str(campaign_file.relative_to(results)), c.revision, str(env.get("revision") or ""),
                           identity, environment_facts(env), runs, c.updated,
                           _report_of(results, campaign_file, c.name))


def read_experiment(results: Path, experiment_file: Path) -> list[IndexedCampaign]:
    """A complete A/B experiment's sides as the store indexes them: each side that measured a
    revision of the checkout with no settings of its own is one point of that commit (a side that
    changed a setting measured a setup, not a commit, and is left out). The A/B reader twin of
    :func:`read_campaign`."""
    e = experiment_files_io.load(experiment_file)
    if e.status is not ExperimentStatus.COMPLETE:
        return []
    shared = dict(e.identity.settings)
    out = []
    for side in (e.identity.a, e.identity.b):
        measured = e.measured(side.label)
        if not side.revision or side.sets or len(measured) < 2:
            continue
        dirs = [results / a.revision / a.run for _, a in sorted(measured.items())]
        runs = _runs_of(stats_of(f"{e.name} side {side.label}", dirs))
        env = environment_of(dirs[0])
        identity = Identity(tuple(e.identity.workloads), tuple(side.options), e.identity.client or "",
                            str(shared.get("target", env.get("target") or "")), planted(shared))
        out.append(IndexedCampaign(f"{experiment_file.relative_to(results)}#{side.label}", dirs[0].parent.name,
                                   side.revision, identity, environment_facts(env), runs, e.updated, kind="ab"))
    return out


def experiment_points(results: Path, experiment_file: Path, *, git: str = "git") -> list[IndexedCampaign]:
    """:func:`read_experiment`'s sides with their commits' facts, from the side's own worktree (as
    matrix makes one), else the experiment's shared checkout."""
    shared = [v for k, v in experiment_files_io.load(experiment_file).identity.settings if k == "checkout"]
    return [_with_commit(side, [str(results / WORKTREES / side.revision), *shared], git)
            for side in read_experiment(results, experiment_file)]


def commit_facts(checkout: Path | str, revision: str, git: str = "git") -> tuple[str, str, str]:
    """(committer time, first parent, subject) of ``revision`` in ``checkout``; empty strings
    where git cannot tell (the checkout is gone, say)."""
    if not revision or not Path(checkout).is_dir():
        return "", "", ""
    done = capture([git, "-C", str(checkout), "show", "-s", "--format=%cI%x1f%P%x1f%s", "--end-of-options",
                    revision], GIT_S)  # one deadline; nothing git started left running
    if done.ending is not Ending.EXITED:
        return "", "", ""
    parts = done.stdout.strip().split("\x1f")
    if done.returncode != 0 or len(parts) != 3:
        return "", "", ""
    return parts[0], (parts[1].split() or [""])[0], parts[2]


def first_parents(checkout: Path | str, revision: str, git: str = "git", depth: int = ANCESTRY_DEPTH) -> tuple[str, ...]:
    """Up to ``depth`` first-parent ancestors of ``revision`` in ``checkout``, newest first (its
    parent first); empty where git cannot tell. Stored with the campaign, so that a history
    without ``--checkout`` still knows the order of the commits it measured."""
    if not revision or not Path(checkout).is_dir():
        return ()
    done = capture([git, "-C", str(checkout), "rev-list", "--first-parent", f"--max-count={depth + 1}",
                    "--end-of-options", revision, "--"], GIT_S, max_bytes=GIT_OUTPUT_BYTES)
    if done.ending is not Ending.EXITED:
        return ()
    line = done.stdout.split()
    if done.returncode != 0 or not line or line[0] != revision:
        return ()
    return tuple(line[1:])


def _with_commit(c: IndexedCampaign, checkouts: Sequence[str], git: str) -> IndexedCampaign:
    for checkout in checkouts:
        time_, parent, subject = commit_facts(checkout, c.revision, git)
        if time_:
            return replace(c, commit_time=time_, first_parent=parent, subject=subject,
                           ancestry=first_parents(checkout, c.revision, git))
    return c


def campaign_point(results: Path, campaign_file: Path, *, git: str = "git",
                   checkouts: Sequence[str] = ()) -> IndexedCampaign | None:
    """:func:`read_campaign` with its commit's facts, from the campaign's own checkout (a
    matrix's worktree), the checkout the run recorded, or else one of ``checkouts`` (the
    driver's, for a campaign shipped from a node whose worktree it lacks); None when it is not
    complete."""
    found = read_campaign(results, campaign_file)
    return None if found is None else _with_commit(found, [*_checkouts_of(campaign_file), *checkouts], git)


def _checkouts_of(campaign_file: Path) -> list[str]:
    try:
        data = read_json(campaign_file)
    except (OSError, ValueError):
        return []
    settings = (data.get("asked") or {}).get("settings") or {}
    details = (data.get("environment") or {}).get("target_details") or {}
    return [str(p) for p in (settings.get("checkout"), details.get("checkout")) if p]


def read_bisect(results: Path, bisect_file: Path) -> Bisected | None:
    """The commit a bisect file names, for its good end's series; None when the file or the good
    end's campaign cannot be read."""
    try:
        data = read_json(bisect_file)
        good_file = Path(data["campaigns"][data["good"]]["campaign"])
        c = campaign_files_io.load(good_file if good_file.is_absolute() else results / good_file)
        identity = Identity(tuple(c.asked.workloads), tuple(c.asked.options), c.asked.client or "",
                            str(c.asked.settings.get("target", "")), planted(c.asked.settings))
        return Bisected(str(bisect_file.relative_to(results)), identity.key(), str(data["metric"]), str(data["good"]),
                        str(data["bad"]), str(data["first_bad"]))
    except (OSError, ValueError, KeyError, TypeError, OmnibenchError):
        return None


def campaign_files(results: Path) -> list[Path]:
    """Every campaign file under the results root: ``<results>/<revision>/campaigns/*.json``."""
    return sorted(results.glob(f"*/{CAMPAIGNS}/*{RECORD_SUFFIX}"))


def experiment_files(results: Path) -> list[Path]:
    """Every A/B experiment file: ``<results>/ab/*.json``."""
    return sorted((results / AB_FOLDER).glob(f"*{RECORD_SUFFIX}"))


def bisect_files(results: Path) -> list[Path]:
    """Every bisect file: ``<results>/bisects/*.json``."""
    return sorted((results / BISECTS).glob("*.json"))
