"""Results shipped home: a campaign on a node that cannot see the driver's results root writes
under a node-local folder, and each run (then the campaign file) travels to the driver as the
bytes of a tar, where :class:`Receiver` writes it into the results root atomically.

- ``pack`` / ``unpack``: folders of a results root as tar bytes, and back (members checked
  with tarfile's ``data`` filter: no absolute paths, no links out of the folder).
- :class:`Receiver`: the driver's side (a Ray actor pinned to the driver's node; plain Python
  here). A run is unpacked under a temporary name and renamed into place, so a half-copied run
  never appears. Two campaigns of one revision on two nodes both number their runs from the
  same free ``runN``; a run whose name the driver already holds gets the next free one, and the
  campaign file the same task sends after it names the run as the driver does.
- :class:`Shipper`: the task's side; every ``interval_s`` it reads the node-local campaign file
  and sends each run that became complete (or generated, for deferred scoring) together with the
  campaign file itself, in one call: the driver writes the runs, then the file, so its campaign
  never names a run it does not have, and a node that goes between two calls cannot leave a run
  home that the driver's campaign does not count (a resumed campaign would measure it again).
- :func:`seed`: the driver's copy of a campaign (its file and the runs it counts), which a task
  asks the receiver for and unpacks before it starts, so ``--resume`` continues from the
  driver's copy on any node: the campaign the local engine would resume, found by the same
  function (:func:`.campaign_file.path_for`, an older omnibench's name for it included).

Campaign files are read and written by their owner, :mod:`omnibench_core.campaign.campaign_file`,
on both ends: a file a node sends that the driver cannot trust is a typed error naming the task
and the field, never written.

The names around the tars are a node's word too, and checked before anything of a call is
written (:meth:`Receiver.check`): the folder and each run one plain entry
(:func:`.store.names.check_name`), the campaign file ``<folder>/campaigns/<name>.json`` and
nothing else, every path under the results root (:func:`.store.names.under_root`); a run whose
name the driver holds complete is never replaced, ``seeded`` is believed only for a run the
driver's :meth:`Receiver.seed` handed out, and a run must arrive as a folder. A refusal is a
:class:`ShipRefused` naming the task, the name and why.
"""

from __future__ import annotations

import hashlib
import io
import os
import secrets
import shutil
import sys
import tarfile
import tempfile
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from .. import defaults
from ..campaign import campaign_file
from ..campaign.record import Campaign
from ..errors import OmnibenchError, RunFileError, storage_error
from ..identity import Identity
from ..statuses import AttemptStatus, CampaignStatus
from ..store import manifest as manifest_file
from ..store.manifest import run_status
from ..store.names import CAMPAIGNS, RECORD_SUFFIX, check_name, under_root

TRANSPORTS = defaults.TRANSPORTS
DEFAULT_TRANSPORT = defaults.TRANSPORT  # ship only from nodes that do not see the driver's results root
SHIPPED = (AttemptStatus.COMPLETE, AttemptStatus.GENERATED)  # a run in one of these states is worth keeping at the driver
NODE_ROOT_ENV = "OMNIBENCH_NODE_ROOT"  # a node's own folder for its campaigns, worktrees and checkouts


def node_root(environ: Mapping[str, str] = os.environ) -> Path:
    """This node's folder: ``$OMNIBENCH_NODE_ROOT``, else ``omnibench-node-<uid>`` in the temp dir."""
    configured = environ.get(NODE_ROOT_ENV, "")
    return Path(configured) if configured else Path(tempfile.gettempdir()) / f"omnibench-node-{os.getuid()}"


def pack(base: Path, rels: Iterable[str]) -> bytes:
    """``base/rel`` for each ``rel`` (a file or a folder) in an uncompressed tar, named by ``rel``."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for rel in rels:
            tar.add(base / rel, arcname=rel)
    return buffer.getvalue()


def unpack(data: bytes, dest: Path) -> None:
    """Unpack ``pack``'s bytes under ``dest`` (made if missing)."""
    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(data), mode="r") as tar:
        tar.extractall(dest, filter="data")


def campaign_runs(revision: Path, campaign: Campaign) -> dict[str, AttemptStatus]:
    """The runs a campaign counts (run -> status): attempts complete or generated whose run's
    manifest says so too."""
    return {a.run: a.status for a in campaign.attempts
            if a.run and a.status in SHIPPED and run_status(revision / a.run) == a.status}


def retarget(campaign: Campaign, checkout: str | None, names: Mapping[str, str] | None = None) -> Campaign:
    """``campaign`` with its asked ``checkout`` setting replaced (a revision's worktree is at
    another path on each node, and identity checks compare it) and its runs renamed by ``names``."""
    asked = campaign.asked
    if checkout is not None:
        asked = replace(asked, settings={**asked.settings, "checkout": checkout})
    attempts = tuple(replace(a, run=names[a.run]) if names and a.run in names else a for a in campaign.attempts)
    return replace(campaign, asked=asked, attempts=attempts)


@dataclass(frozen=True)
class Seed:
    """The driver's copy of a campaign for a task: the campaign file's path under the results
    root (the name the driver holds it by, which the task's campaign then keeps) and that file
    with the runs it counts as ``pack`` bytes (b"" when the driver has no campaign yet)."""

    rel: str
    data: bytes = b""


def seed(results: Path, folder: str, identity: Identity, name: str | None = None) -> Seed:
    """The driver's copy of ``identity``'s campaign in ``results/folder``: the file the local
    engine would resume (:func:`.campaign_file.path_for`, or the job's own ``name``: a campaign
    scored less than every run, ``CampaignJob.campaign_name``) and the runs it counts. A file there
    that cannot be trusted is a CampaignFileError, as it is to the local engine; a ``folder`` or
    ``name`` that is not one entry is a BadName (nothing outside the root is packed)."""
    check_name(folder, "revision folder", given=False)
    revision = under_root(results, results / folder, "revision folder")
    if name is not None:
        check_name(name, "campaign name", given=False)
    path = campaign_file.campaign_path(revision, name) if name else campaign_file.path_for(revision, identity)
    rel = path.relative_to(results).as_posix()
    if not path.is_file():
        return Seed(rel)
    runs = sorted(campaign_runs(revision, campaign_file.load(path)))
    return Seed(rel, pack(results, [*(f"{folder}/{run}" for run in runs), rel]))


def digest(data: bytes) -> str:
    """What the receiver says it wrote of a campaign file, and the shipper compares with its own."""
    return hashlib.sha256(data).hexdigest()


@dataclass(frozen=True)
class ShippedRun:
    """One run on its way home: its name on the node, its folder as ``pack`` bytes, and whether
    the driver's copy of the campaign (the seed) already held it under that name."""

    local: str
    data: bytes
    seeded: bool = False


@dataclass(frozen=True)
class Shipped:
    """What the driver wrote for one call: each run's name there (node name -> name there), the
    campaign file's path there and the :func:`digest` of the bytes it wrote it from ("" for
    both when the call sent none)."""

    names: dict[str, str]
    campaign: str
    received: str = ""


class ShipRefused(RunFileError):
    """A node sent a name the driver does not write: a path out of the results root, a folder or
    run that is not one plain entry, a claim on a run the driver holds complete, a run that is not
    a folder. Nothing of the call was written."""


class Receiver:
    """The driver's end: writes shipped runs and campaign files into ``results`` atomically."""

    def __init__(self, results: str, git: str = "git", checkouts: Sequence[str] = ()):
        self.results = Path(results)
        self.git = git  # for the history index (commit times and first parents)
        # Where the history index looks a shipped campaign's commit up: the checkout the driver
        # passed to the nodes (the campaign itself names worktrees on the nodes).
        self.checkouts = tuple(checkouts)
        self.names: dict[tuple[str, str, str], str] = {}  # (task, folder, name on the node) -> name here
        self.taken: dict[str, set[str]] = {}  # run names given out per folder (not all on disk yet)
        self.seeded: dict[str, set[str]] = {}  # runs handed out by seed() per folder: a node may send them back
        self.stopped = False

    def stop(self) -> None:
        """The driver was interrupted: every task is to stop its campaign."""
        self.stopped = True

    def stopping(self) -> bool:
        """Whether :meth:`stop` was called (each task asks every half second)."""
        return self.stopped

    def seed(self, folder: str, identity: Identity, name: str | None = None) -> Seed:
        """The driver's copy of a campaign (:func:`seed`), asked for by a task that ships its runs;
        the runs it holds are the ones a node may later send back as ``seeded``."""
        found = seed(self.results, folder, identity, name)
        if found.data:
            with tarfile.open(fileobj=io.BytesIO(found.data), mode="r") as tar:
                runs = {m.name.split("/")[1] for m in tar.getmembers() if m.name.count("/") >= 1
                        and m.name.split("/")[1] != CAMPAIGNS}
            self.seeded.setdefault(folder, set()).update(runs)
        return found

    def check(self, task: str, folder: str, runs: Sequence[ShippedRun], rel: str | None) -> Path | None:
        """Refuse (:class:`ShipRefused`) a call whose names could write outside the results root
        or over what the driver holds; the campaign file's path here when ``rel`` is given."""
        def refuse(what: str, given: str, why: str) -> ShipRefused:
            return ShipRefused(f"task {task} sent {what} {given!r}: {why}; nothing of the call was written",
                               evidence={"sent by": f"task {task}", what: given},
                               hint="run the same omnibench on every node as on the driver; a node that sends "
                                    "such names is not one to trust")

        try:
            check_name(folder, "revision folder", given=False)
            revision = under_root(self.results, self.results / folder, "revision folder")
        except OmnibenchError as exc:
            raise refuse("folder", folder, exc.message) from None
        for run in runs:
            try:
                check_name(run.local, "run")
            except OmnibenchError as exc:
                raise refuse("run", run.local, exc.message) from None
            if not _holds_folder(run.data, f"{folder}/{run.local}"):
                raise refuse("run", run.local, "its tar holds no folder of that name (a plain file, a link, or nothing)")
            if (task, folder, run.local) in self.names:
                continue  # the name this task was given: its own run again (scored now, or sent again)
            if run.seeded and run.local not in self.seeded.get(folder, set()):
                raise refuse("run", run.local, "it says the driver's seed held it, and no seed the driver sent did")
            if run.seeded and run_status(revision / run.local) == AttemptStatus.COMPLETE:
                raise refuse("run", run.local, f"the driver holds {folder}/{run.local} complete; it is never replaced")
        if rel is None:
            return None
        parts = rel.split("/")
        stem = parts[-1].removesuffix(RECORD_SUFFIX)
        if (len(parts) != 3 or parts[0] != folder or parts[1] != CAMPAIGNS or not parts[2].endswith(RECORD_SUFFIX)
                or not stem or "\\" in rel):
            raise refuse("campaign file", rel, f"a campaign file is {folder}/{CAMPAIGNS}/NAME{RECORD_SUFFIX}")
        try:
            check_name(stem, "campaign name", given=False)
            return under_root(self.results, self.results / rel, "campaign file")
        except OmnibenchError as exc:
            raise refuse("campaign file", rel, exc.message) from None

    def _name(self, task: str, folder: str, local: str, seeded: bool) -> str:
        key = (task, folder, local)
        if key not in self.names:
            taken = self.taken.setdefault(folder, set())
            revision = self.results / folder
            if seeded or (local not in taken and not (revision / local).exists()):
                name = local
            else:
                name = _free_name(revision, taken)
            taken.add(name)
            self.names[key] = name
        return self.names[key]

    def ship(self, task: str, folder: str, runs: Sequence[ShippedRun], rel: str, campaign: bytes | None,
             checkout: str | None) -> Shipped:
        """Write ``runs`` (each as ``<results>/<folder>/<name>``), then the campaign file when one
        is sent (its runs named as here, its checkout the driver's); the names the runs have here
        and the campaign file's path here ("" when none was sent). A campaign file that cannot be
        trusted is refused before anything of the call is written."""
        path = self.check(task, folder, runs, rel if campaign is not None else None) or self.results / rel
        parsed = None if campaign is None else campaign_file.parse(path, campaign, origin=f"task {task}")
        names = {run.local: self._run(task, folder, run) for run in runs}
        if campaign is None or parsed is None:
            return Shipped(names, "")
        campaign_file.save(path, retarget(parsed, checkout, self.renamed(task, folder)), stamp=False)
        if parsed.status is CampaignStatus.COMPLETE:  # its runs are here already: index it, as locally
            self._index(path)
        return Shipped(names, str(path), digest(campaign))

    def _run(self, task: str, folder: str, shipped: ShippedRun) -> str:
        local = shipped.local
        name = self._name(task, folder, local, shipped.seeded)
        revision = self.results / folder
        incoming = revision / f".incoming-{name}-{secrets.token_hex(4)}"
        try:
            unpack(shipped.data, incoming)
            run = incoming / folder / local
            if run.is_symlink() or not run.is_dir():
                raise ShipRefused(f"task {task} sent run {local!r} as {'nothing' if not run.exists() else 'a plain file'},"
                                  " not a run folder; it was not written", evidence={"sent by": f"task {task}",
                                  "run": local}, hint="run the same omnibench on every node as on the driver")
            if name != local:  # the run's manifest names it
                manifest_file.rename_run(run, name)
            _swap_in(run, revision / name)
        except OSError as exc:
            raise storage_error(f"writing run {name} shipped from a node", exc) from exc
        finally:
            shutil.rmtree(incoming, ignore_errors=True)
        return name

    def _index(self, path: Path) -> None:
        """The complete campaign into the driver's history store; a store that cannot take it
        costs nothing but the index (``invoke history --rebuild`` makes it from the files)."""
        from ..registry import manager as plugin_manager  # the plugins load once, when the first campaign lands

        # quick work only, where every node's next call waits: the driver told the plugins before
        # the matrix (:func:`.ray_engine.make_history`), so the history only adds this one
        for failure in plugin_manager.load()[0].campaign_arrived(self.results, path, self.git, self.checkouts):
            print(f"note: {failure}", file=sys.stderr)  # the driver's log: the campaign itself is written

    def renamed(self, task: str, folder: str) -> dict[str, str]:
        """The names the driver gave ``task``'s runs (node name -> name here)."""
        return {local: name for (t, f, local), name in self.names.items() if t == task and f == folder}


def _holds_folder(data: bytes, name: str) -> bool:
    """Whether ``pack`` bytes hold ``name`` as a folder (not a file, a link or a device)."""
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r") as tar:
            member = tar.getmember(name)
    except (KeyError, tarfile.TarError):
        return False
    return member.isdir()


def _free_name(revision: Path, taken: set[str]) -> str:
    """The lowest ``runN`` neither in ``revision`` nor given out already."""
    used = taken | ({entry.name for entry in revision.iterdir()} if revision.is_dir() else set())
    n = 0
    while f"run{n}" in used:
        n += 1
    return f"run{n}"


def _swap_in(new: Path, dest: Path) -> None:
    """Rename ``new`` to ``dest``; an older ``dest`` (a generated run now scored) is renamed away
    first and removed after, so ``dest`` is always a whole run."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    old = dest.with_name(f".replaced-{dest.name}-{secrets.token_hex(4)}")
    if dest.exists():
        os.rename(dest, old)
    os.rename(new, dest)
    shutil.rmtree(old, ignore_errors=True)


Send = Callable[[list[ShippedRun], "bytes | None"], Shipped]  # runs, then the campaign file (or None), in one call


class Shipper:
    """Sends a node-local campaign's runs and file home as they change (a thread, and a last
    ``flush`` on exit, after Ctrl-C too)."""

    def __init__(self, results: Path, folder: str, campaign_rel: str, send: Send,
                 *, seeded: Mapping[str, str] | None = None, interval_s: float = 0.5):
        self.results, self.folder, self.campaign_rel = results, folder, campaign_rel
        self.send, self.interval_s = send, interval_s
        self.seeded = dict(seeded or {})
        self.sent: dict[str, str] = dict(self.seeded)  # run -> status the driver has
        self.names: dict[str, str] = {r: r for r in self.seeded}
        self.home_campaign = ""
        self._last = b""  # the campaign file's bytes the driver said it wrote last
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True, name="omnibench-shipper")
        self.error: Exception | None = None

    def __enter__(self) -> Shipper:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=60)
        self.flush()

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self.flush()
            except Exception as exc:  # noqa: BLE001 - kept, and raised by the last flush
                self.error = exc

    def _read(self) -> tuple[bytes, Campaign] | None:
        """The node's campaign file as bytes and as read by its owner; None while there is none."""
        path = self.results / self.campaign_rel
        try:
            text = path.read_bytes()
        except OSError:
            return None  # not written yet
        return text, campaign_file.load(path, text)  # written atomically: a reader sees a whole file

    def home_is_current(self) -> bool:
        """Whether the driver holds this node's campaign as it is now: the driver said it wrote
        the node's last campaign file, and every run that file counts went home at its status.
        Only then may the node's copy go. (No campaign file on the node: nothing to lose.)"""
        with self._lock:
            try:
                found = self._read()
            except OmnibenchError:  # the node's own file cannot be read: nothing confirms it is home
                return False
            if found is None:
                return True
            text, campaign = found
            return text == self._last and all(
                self.sent.get(run) == status for run, status in campaign_runs(self.results / self.folder, campaign).items())

    def flush(self) -> None:
        """Send every run that changed since the last flush with the campaign file, if it changed
        (again, until the driver says it wrote these very bytes)."""
        with self._lock:
            found = self._read()
            if found is None:
                return
            text, campaign = found
            revision = self.results / self.folder
            runs, statuses = [], {}
            for run, status in campaign_runs(revision, campaign).items():
                if self.sent.get(run) == status:
                    continue
                data = pack(self.results, [f"{self.folder}/{run}"])
                if run_status(revision / run) != status:
                    # it moved on while packed: the whole flush waits for the next one, since a run
                    # sent without the campaign file that counts it would be measured again on resume
                    return
                runs.append(ShippedRun(run, data, run in self.seeded))
                statuses[run] = status
            sending = text if text != self._last else None
            if not runs and sending is None:
                return
            shipped = self.send(runs, sending)
            self.names.update(shipped.names)
            self.sent.update(statuses)
            if sending is not None and shipped.received == digest(sending):
                self.home_campaign, self._last = shipped.campaign, sending
