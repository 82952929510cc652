"""Results shipped home, without Ray: the receiver writes runs atomically and keeps two campaigns'
runs of one revision apart, the shipper sends runs as they complete and the campaign file only
with them in one call (the runs written first), and a seed holds what a resumed task starts from
(under an older omnibench's name too). Campaign files go through their owner: a malformed one
from a node is a typed error; a complete one is indexed with its commit's facts from the driver's
checkout. A node's campaign stays on the node until the driver confirms its last campaign file.
(On a real cluster: tests/test_scale_ray_remote.py.)"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from run_helpers import free_port
from scale_helpers import path_without_nvidia_smi, server_pids

from omnibench_core.campaign import campaign_file
from omnibench_core.campaign.record import Asked, Attempt, Campaign
from omnibench_core.errors import BadName, CampaignFileError
from omnibench_core.history.front_door import run_history
from omnibench_core.history.store import db_path, opened
from omnibench_core.identity import Identity
from omnibench_core.records import ScorePolicy, Slot
from omnibench_core.scale import transport
from omnibench_core.scale.jobs import CampaignJob
from omnibench_core.scale.ray_engine import make_history
from omnibench_core.scale.remote import run_shipped
from omnibench_core.scale.slots import HostSlot
from omnibench_core.scale.transport import (
    Receiver,
    Seed,
    Shipped,
    ShippedRun,
    Shipper,
    digest,
    node_root,
    pack,
    seed,
    unpack,
)
from omnibench_core.scale.worker import WorkerSpec
from omnibench_core.settings import Settings
from omnibench_core.statuses import AttemptStatus, CampaignStatus, JobStatus

REV = "abc1234"
ASKED = Asked(("selftest",), ("selftest.requests=2",), None, {"target": "sglang-omni"}, runs=2)
CAMPAIGN = f"{REV}/campaigns/{ASKED.identity().name()}.json"


def _run(results: Path, name: str, status: str, note: str = "") -> None:
    run = results / REV / name
    run.mkdir(parents=True, exist_ok=True)
    (run / "manifest.json").write_text(json.dumps({"run": name, "status": status}))
    (run / "metrics.json").write_text(json.dumps({"metrics": {"m": 1.0}, "note": note}))


def _campaign(results: Path, attempts: list[tuple[int, str, str]], checkout: str = "/node/wt/abc", *,
              rel: str = CAMPAIGN, status: CampaignStatus = CampaignStatus.RUNNING, **fields: Any) -> Campaign:
    """A campaign file as the campaign layer writes one (through its owner, the store)."""
    path = results / rel
    asked = Asked(ASKED.workloads, ASKED.options, None, {**ASKED.settings, "checkout": checkout}, runs=ASKED.runs)
    return campaign_file.save(path, Campaign(name=path.stem, revision=REV, asked=asked, status=status, attempts=tuple(
        Attempt(s, r, AttemptStatus(st)) for s, r, st in attempts), **fields))


def _ship(receiver: Receiver, task: str, node: Path, run: str, *, campaign: bool = False) -> Shipped:
    data = (node / CAMPAIGN).read_bytes() if campaign else None
    return receiver.ship(task, REV, [ShippedRun(run, pack(node, [f"{REV}/{run}"]))], CAMPAIGN, data, "/home/.worktrees/abc")


def test_the_receiver_keeps_two_campaigns_runs_apart_and_swaps_a_rescored_run_whole(tmp_path):
    home, one, two = tmp_path / "home", tmp_path / "node1", tmp_path / "node2"
    receiver = Receiver(str(home))
    _run(one, "run0", "generated", "first")
    _run(two, "run0", "complete", "other campaign")
    assert _ship(receiver, "t1", one, "run0") == Shipped({"run0": "run0"}, "")
    # the other campaign's task numbered its run run0 too: it gets the next free name, says so, and
    # the campaign file sent with it names the run as the driver does, with the driver's worktree path
    _campaign(two, [(0, "run0", "complete")])
    shipped = _ship(receiver, "t2", two, "run0", campaign=True)
    assert (shipped.names, shipped.campaign) == ({"run0": "run1"}, str(home / CAMPAIGN))
    assert shipped.received == digest((two / CAMPAIGN).read_bytes())  # the driver says which bytes it wrote
    assert json.loads((home / REV / "run1" / "manifest.json").read_text())["run"] == "run1"
    assert json.loads((home / REV / "run1" / "metrics.json").read_text())["note"] == "other campaign"
    written = json.loads((home / CAMPAIGN).read_text())
    assert written["attempts"][0]["run"] == "run1"
    assert written["asked"]["settings"]["checkout"] == "/home/.worktrees/abc"
    # the first task's run, scored now, replaces its generated copy under the same name
    _run(one, "run0", "complete", "scored")
    assert _ship(receiver, "t1", one, "run0").names == {"run0": "run0"}
    assert json.loads((home / REV / "run0" / "manifest.json").read_text())["status"] == "complete"
    assert sorted(p.name for p in (home / REV).iterdir()) == ["campaigns", "run0", "run1"]  # no temporary left


def test_the_shipper_sends_each_run_once_per_status_with_the_campaign_file_that_names_it(tmp_path):
    node, home = tmp_path / "node", tmp_path / "home"
    receiver, calls = Receiver(str(home)), []

    def send(runs: list[ShippedRun], data: bytes | None) -> Shipped:
        calls.append(([r.local for r in runs], json.loads(data)["attempts"][-1]["status"] if data else None))
        return receiver.ship("t", REV, runs, CAMPAIGN, data, "/home/wt")

    shipper = Shipper(node, REV, CAMPAIGN, send)
    shipper.flush()  # no campaign file yet: nothing to send
    _run(node, "run0", "generated")
    _run(node, "run1", "running")
    _campaign(node, [(0, "run0", "generated"), (1, "", "running")])
    shipper.flush()
    shipper.flush()  # nothing changed: nothing sent again
    assert calls == [(["run0"], "running")]
    assert not (home / REV / "run1").exists()  # a run under way stays on the node
    _run(node, "run0", "complete")
    _run(node, "run1", "complete")
    _campaign(node, [(0, "run0", "complete"), (1, "run1", "complete")])
    with shipper:  # the thread, then the last flush on exit
        pass
    assert calls[1:] == [(["run0", "run1"], "complete")]
    assert shipper.home_campaign == str(home / CAMPAIGN)
    assert json.loads((home / REV / "run1" / "manifest.json").read_text())["status"] == "complete"


def test_a_run_that_moves_on_while_packed_holds_the_whole_flush_back(tmp_path, monkeypatch):
    """run1 complete and run2 scored in the instant it is packed: sending run1 alone, without the
    campaign file that counts it, would leave a run home that a resumed campaign measures again."""
    node, home = tmp_path / "node", tmp_path / "home"
    receiver, calls = Receiver(str(home)), []

    def send(runs: list[ShippedRun], data: bytes | None) -> Shipped:
        calls.append([r.local for r in runs])
        return receiver.ship("t", REV, runs, CAMPAIGN, data, "/home/wt")

    _run(node, "run1", "complete")
    _run(node, "run2", "generated")
    _campaign(node, [(1, "run1", "complete"), (2, "run2", "generated")])
    packed = transport.pack

    def pack_then_score_run2(base: Path, rels: list[str]) -> bytes:
        data = packed(base, rels)
        if rels == [f"{REV}/run2"] and not calls:
            _run(node, "run2", "complete")  # the scoring wrote it just after the tar was made
        return data

    monkeypatch.setattr(transport, "pack", pack_then_score_run2)
    shipper = Shipper(node, REV, CAMPAIGN, send)
    shipper.flush()
    assert calls == [] and not (home / REV).exists()  # nothing went: not run1 either
    _campaign(node, [(1, "run1", "complete"), (2, "run2", "complete")])
    shipper.flush()
    assert calls == [["run1", "run2"]] and shipper.home_is_current()


def test_a_run_the_driver_could_not_take_is_sent_again_with_its_campaign_file(tmp_path):
    node, home = tmp_path / "node", tmp_path / "home"
    receiver, refusals = Receiver(str(home)), [1]

    def send(runs: list[ShippedRun], data: bytes | None) -> Shipped:
        if refusals:  # the driver's disk refused once: nothing of this call counts as home
            refusals.pop()
            raise OSError("no space left on device")
        return receiver.ship("t", REV, runs, CAMPAIGN, data, "/home/wt")

    shipper = Shipper(node, REV, CAMPAIGN, send)
    _run(node, "run0", "complete")
    _campaign(node, [(0, "run0", "complete")])
    with pytest.raises(OSError):
        shipper.flush()
    assert shipper.home_campaign == "" and not (home / CAMPAIGN).exists()
    shipper.flush()
    assert shipper.home_campaign == str(home / CAMPAIGN) and (home / REV / "run0" / "manifest.json").is_file()


def test_a_seed_holds_the_campaign_and_only_the_runs_it_counts(tmp_path):
    home, node = tmp_path / "home", tmp_path / "node"
    _run(home, "run0", "complete")
    _run(home, "run1", "failed")  # the campaign says complete, its manifest does not: not counted
    _run(home, "run2", "complete")  # another campaign's run
    _campaign(home, [(0, "run0", "complete"), (1, "run1", "complete")])
    found = seed(home, REV, ASKED.identity())
    assert found.rel == CAMPAIGN
    unpack(found.data, node)
    assert sorted(p.name for p in (node / REV).iterdir()) == ["campaigns", "run0"]


def test_the_node_root_is_the_nodes_setting_or_a_folder_of_its_own(tmp_path):
    assert node_root({"OMNIBENCH_NODE_ROOT": str(tmp_path)}) == tmp_path
    assert node_root({}).name.startswith("omnibench-node-")


def test_a_campaign_file_a_node_sends_is_read_and_written_by_its_owner(tmp_path):
    home, node = tmp_path / "home", tmp_path / "node"
    receiver = Receiver(str(home))
    _run(node, "run0", "complete")
    sent = _campaign(node, [(0, "run0", "complete")], "/node/wt/abc")
    good = json.loads((node / CAMPAIGN).read_text())
    run0 = ShippedRun("run0", pack(node, [f"{REV}/run0"]))

    def refused(data: bytes) -> CampaignFileError:
        with pytest.raises(CampaignFileError) as caught:
            receiver.ship("task-7", REV, [run0], CAMPAIGN, data, "/home/wt")
        assert "task-7" in caught.value.message and caught.value.evidence["sent by"] == "task task-7"
        assert not (home / REV).exists()  # nothing of the call is written: neither the file nor its run
        return caught.value

    assert "JSONDecodeError" in refused(b'{"name": "c", ').message
    assert refused(json.dumps({**good, "format": 2}).encode()).evidence["field"] == "format"
    broken = {**good, "attempts": [{**good["attempts"][0], "status": "done"}]}
    assert refused(json.dumps(broken).encode()).evidence["field"] == "attempts[0].status"
    # a good one is written as the owner writes it: typed, its format said, the node's times kept
    receiver.ship("task-7", REV, [run0], CAMPAIGN, (node / CAMPAIGN).read_bytes(), "/home/wt")
    written = campaign_file.load(home / CAMPAIGN)
    assert written.asked.settings["checkout"] == "/home/wt" and written.updated == sent.updated
    assert written == campaign_file.from_record(home / CAMPAIGN, {**good, "asked": {
        **good["asked"], "settings": {**good["asked"]["settings"], "checkout": "/home/wt"}}})


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout.strip()


def test_a_shipped_complete_campaigns_history_point_has_its_commits_time_and_subject(tmp_path):
    """The campaign names the node's worktree, which the driver does not have: the commit is
    looked up in the checkout the driver passed to the nodes."""
    home, node, checkout = tmp_path / "home", tmp_path / "node", tmp_path / "checkout"
    checkout.mkdir()
    _git(checkout, "init", "-q")
    (checkout / "f").write_text("x")
    _git(checkout, "add", "f")
    _git(checkout, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "the measured change")
    commit, when = _git(checkout, "rev-parse", "HEAD"), _git(checkout, "show", "-s", "--format=%cI", "HEAD")
    for run in ("run0", "run1", "run2"):
        _run(node, run, "complete")
        (node / REV / run / "metrics.json").write_text(json.dumps({"metrics": {"m": 1.0}, "complete": True}))
    node_tree = f"/node/worktrees/{commit}"
    _campaign(node, [(0, "run0", "complete"), (1, "run1", "complete"), (2, "run2", "complete")], node_tree,
              status=CampaignStatus.COMPLETE, environment={"revision": commit, "target_details": {"checkout": node_tree}})
    make_history(home, [str(checkout)], progress=lambda line: None)  # as the Ray engine does before a matrix
    receiver = Receiver(str(home), checkouts=(str(checkout),))
    runs = [ShippedRun(r, pack(node, [f"{REV}/{r}"])) for r in ("run0", "run1", "run2")]
    receiver.ship("t", REV, runs, CAMPAIGN, (node / CAMPAIGN).read_bytes(), str(home / ".worktrees" / commit))
    with opened(home) as store:
        (point,) = store.campaigns()
    assert (point.revision, point.commit_time, point.subject) == (commit, when, "the measured change")
    # a store deleted mid-matrix: the receiver does not rebuild it (every node's next call would
    # wait behind that); the next query makes it from the files, the shipped campaign among them
    db_path(home).unlink()
    receiver.ship("t", REV, [], CAMPAIGN, (node / CAMPAIGN).read_bytes(), str(home / ".worktrees" / commit))
    assert not db_path(home).exists()
    # `invoke history --rebuild` makes the same point again, from the checkout the history follows
    run_history(Settings.of(results=str(home), checkout=str(checkout)), rebuild=True, progress=lambda line: None)
    with opened(home) as store:
        assert store.campaigns() == [point]


def test_a_seed_finds_the_campaign_under_the_name_an_older_omnibench_gave_it(tmp_path):
    home = tmp_path / "home"
    identity = ASKED.identity()
    canonical, legacy = identity.names()
    legacy_rel = f"{REV}/campaigns/{legacy}.json"
    _run(home, "run0", "complete")
    _campaign(home, [(0, "run0", "complete")], rel=legacy_rel)
    found = Receiver(str(home)).seed(REV, identity)
    assert found.rel == legacy_rel  # the one the local engine would resume (campaign.campaign_file.name_for)
    assert _unpacked(found.data, tmp_path / "node") == {legacy_rel, f"{REV}/run0/manifest.json", f"{REV}/run0/metrics.json"}
    # nothing there yet: the name of now, and nothing to unpack
    assert Receiver(str(tmp_path / "empty")).seed(REV, identity).rel == f"{REV}/campaigns/{canonical}.json"
    assert Receiver(str(tmp_path / "empty")).seed(REV, identity).data == b""
    # a job's own name (a campaign scored less than every run): that file, and a name that leaves the
    # revision's campaigns folder is refused before anything is read
    own = Receiver(str(tmp_path / "empty")).seed(REV, identity, f"{canonical}_score-none")
    assert own.rel == f"{REV}/campaigns/{canonical}_score-none.json" and own.data == b""
    with pytest.raises(BadName):
        Receiver(str(home)).seed(REV, identity, "../../x")


def _unpacked(data: bytes, dest: Path) -> set[str]:
    unpack(data, dest)
    return {p.relative_to(dest).as_posix() for p in dest.rglob("*") if p.is_file()}


def test_the_shipper_confirms_the_driver_holds_its_last_campaign_file_only_when_the_driver_said_so(tmp_path):
    node, home = tmp_path / "node", tmp_path / "home"
    receiver, dropping = Receiver(str(home)), []

    def send(runs: list[ShippedRun], data: bytes | None) -> Shipped:
        # a driver that took the runs but not the campaign file (lost on its way, say)
        return receiver.ship("t", REV, runs, CAMPAIGN, None if dropping else data, "/home/wt")

    shipper = Shipper(node, REV, CAMPAIGN, send)
    assert shipper.home_is_current()  # no campaign file on the node yet: nothing to lose
    _run(node, "run0", "complete")
    _campaign(node, [(0, "run0", "complete")])
    shipper.flush()
    assert shipper.home_is_current()
    _campaign(node, [(0, "run0", "complete"), (1, "", "running")])  # the node's file moved on, unsent
    assert not shipper.home_is_current()
    dropping.append(True)
    shipper.flush()
    assert not shipper.home_is_current() and shipper.home_campaign == str(home / CAMPAIGN)
    dropping.clear()
    shipper.flush()
    assert shipper.home_is_current()


class _DriverWithoutTheCampaignFile:
    """The driver's receiver, but the campaign file of every call is lost on its way (the runs arrive)."""

    def __init__(self, receiver: Receiver):
        self.receiver = receiver

    def ship(self, task: str, folder: str, runs: list[ShippedRun], rel: str, campaign: bytes | None,
             checkout: str | None) -> Shipped:
        return self.receiver.ship(task, folder, runs, rel, None, checkout)

    def seed(self, folder: str, identity: Identity, name: str | None = None) -> Seed:
        return self.receiver.seed(folder, identity, name)


@pytest.mark.slow  # a real campaign (the local target's servers)
def test_a_node_removes_its_campaign_only_once_the_driver_holds_its_last_campaign_file(tmp_path, monkeypatch):
    node, home = tmp_path / "node", tmp_path / "home"
    monkeypatch.setenv("OMNIBENCH_NODE_ROOT", str(node))
    monkeypatch.setenv("PATH", path_without_nvidia_smi())
    settings = Settings.of(target="local", results=str(home), port=free_port())
    job = CampaignJob("", ("selftest",), ("selftest.children=0", "selftest.delay=0", "selftest.requests=2"), runs=2)
    spec = WorkerSpec(job, HostSlot(0, Slot(settings.run.port), shared_cpus=True), settings.flat(),
                      str(home / ".worktrees"))
    receiver, lines = Receiver(str(home)), []
    done = run_shipped(spec, receiver, "", progress=lines.append)
    assert done.status is JobStatus.COMPLETE, "\n".join(lines[-30:]) + done.error
    assert Path(done.campaign).is_relative_to(home) and campaign_file.load(Path(done.campaign)).status == "complete"
    assert not list((node / "tasks").iterdir())  # all of it is home: the node's copy went
    # the same campaign again (from the driver's copy: nothing to measure), to a driver that takes
    # the runs but never the campaign file: the node keeps its copy, and the outcome says where
    again = run_shipped(spec, _DriverWithoutTheCampaignFile(receiver), "", progress=lines.append)
    assert again.status is JobStatus.FAILED, again
    assert "the driver does not hold this node's last campaign file" in again.error and "--resume" in again.error
    (kept,) = (node / "tasks").iterdir()
    assert str(kept) in again.error and any(str(kept) in line for line in lines)
    assert campaign_file.load(kept / "results" / Path(done.campaign).relative_to(home)).status == "complete"
    assert not server_pids(tmp_path)


@pytest.mark.slow  # 2 to 6 s in the fast tier (issue 40: that tier within a minute)
def test_a_campaign_scored_less_than_every_run_ships_home_under_its_own_name(tmp_path, monkeypatch):
    """matrix --score none on Ray with shipped results (hostile probe of ef0a995): the driver's copy
    was looked up under measure's name while the node wrote ..._score-none, so the runs never reached
    home (or were credited to measure's campaign beside them) and the outcome still said complete."""
    node, home = tmp_path / "node", tmp_path / "home"
    monkeypatch.setenv("OMNIBENCH_NODE_ROOT", str(node))
    monkeypatch.setenv("PATH", path_without_nvidia_smi())
    settings = Settings.of(target="local", results=str(home), port=free_port())
    options = ("selftest.children=0", "selftest.delay=0", "selftest.requests=2")
    receiver = Receiver(str(home))
    outcomes = {}
    for score in (ScorePolicy.EVERY_ROUND, ScorePolicy.NONE):  # measure's campaign at home first
        job = CampaignJob("", ("selftest",), options, runs=2, score=score)
        spec = WorkerSpec(job, HostSlot(0, Slot(settings.run.port), shared_cpus=True), settings.flat(),
                          str(home / ".worktrees"))
        done = run_shipped(spec, receiver, "", progress=lambda line: None)
        assert done.status is JobStatus.COMPLETE, done.error
        outcomes[score] = done
    every, none = outcomes[ScorePolicy.EVERY_ROUND], outcomes[ScorePolicy.NONE]
    assert Path(none.campaign).stem.endswith("score-none") and Path(none.campaign).is_file()
    assert none.campaign != every.campaign and not set(none.runs) & set(every.runs)
    assert campaign_file.load(Path(none.campaign)).asked.score is ScorePolicy.NONE
    assert all((Path(none.folder) / run / "manifest.json").is_file() for run in none.runs)  # at home, each one
    assert not list((node / "tasks").iterdir()) and not server_pids(tmp_path)


def _refused(call: Any) -> transport.ShipRefused:
    with pytest.raises(transport.ShipRefused) as caught:
        call()
    assert "nothing of the call was written" in caught.value.message and caught.value.evidence["sent by"]
    return caught.value


def _tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_the_receiver_refuses_every_name_that_leads_out_of_the_results_root(tmp_path):
    """Issue 31, item 1: campaign-file paths, folders and run names a node sends, checked before
    anything of the call is written; what lies beside the results root stays as it was."""
    home, node, outside = tmp_path / "results" / "home", tmp_path / "node", tmp_path
    receiver = Receiver(str(home))
    _run(node, "run0", "complete")
    _campaign(node, [(0, "run0", "complete")])
    data = (node / CAMPAIGN).read_bytes()
    run0 = ShippedRun("run0", pack(node, [f"{REV}/run0"]))
    (outside / "X.json").write_text("precious")
    before = _tree(tmp_path)
    for rel in ("../../X.json", str(outside / "X.json"), f"{REV}/../../X.json", f"{REV}/campaigns/../../../X.json",
                f"{REV}/other/c.json", f"{REV}/campaigns/..json", f"{REV}/campaigns/a\nb.json", "../X.json"):
        error = _refused(lambda rel=rel: receiver.ship("t", REV, [run0], rel, data, "/home/wt"))
        assert error.evidence["campaign file"] == rel
    for folder in ("..", "../other", str(outside), "a/b", ""):
        _refused(lambda folder=folder: receiver.ship("t", folder, [run0], CAMPAIGN, None, "/home/wt"))
    for run in ("..", "../../X", str(outside), "a\nb", "."):
        bad = ShippedRun(run, pack(node, [f"{REV}/run0"]))
        assert _refused(lambda bad=bad: receiver.ship("t", REV, [bad], CAMPAIGN, None, "/home/wt")).evidence["run"] == run
    assert _tree(tmp_path) == before and not home.exists()  # nothing written anywhere, the root not made either
    # an absolute folder claimed seeded: refused too, and the folder outside keeps its name
    (outside / "victim").mkdir()
    _refused(lambda: receiver.ship("t", str(outside), [ShippedRun("victim", run0.data, seeded=True)], CAMPAIGN, None, "/w"))
    assert (outside / "victim").is_dir()


def test_a_node_cannot_replace_the_drivers_complete_run_or_ship_a_run_as_a_plain_file(tmp_path):
    home, node = tmp_path / "home", tmp_path / "node"
    receiver = Receiver(str(home))
    _run(home, "run1", "complete", "the driver's own")
    _run(node, "run1", "complete", "the node's")
    claim = ShippedRun("run1", pack(node, [f"{REV}/run1"]), seeded=True)
    assert "no seed the driver sent did" in _refused(lambda: receiver.ship("t", REV, [claim], CAMPAIGN, None, "/w")).message
    # seeded for real (the driver's campaign counts run1), still never replaced: it is complete there
    _campaign(home, [(1, "run1", "complete")])
    receiver.seed(REV, ASKED.identity())
    assert "never replaced" in _refused(lambda: receiver.ship("t", REV, [claim], CAMPAIGN, None, "/w")).message
    assert json.loads((home / REV / "run1" / "metrics.json").read_text())["note"] == "the driver's own"
    # not claimed seeded: the node's run is kept beside it under the next free name
    assert receiver.ship("t", REV, [replace_seeded(claim, False)], CAMPAIGN, None, "/w").names == {"run1": "run0"}
    # a run that arrives as a plain file (or a link) is no run
    (node / REV / "run5").write_text("not a folder")
    plain = ShippedRun("run5", pack(node, [f"{REV}/run5"]))
    assert "no folder of that name" in _refused(lambda: receiver.ship("t2", REV, [plain], CAMPAIGN, None, "/w")).message
    (node / REV / "run6").symlink_to(node / REV / "run1")
    link = ShippedRun("run6", pack(node, [f"{REV}/run6"]))
    _refused(lambda: receiver.ship("t2", REV, [link], CAMPAIGN, None, "/w"))
    assert not (home / REV / "run5").exists() and not (home / REV / "run6").exists()


def replace_seeded(run: ShippedRun, seeded: bool) -> ShippedRun:
    return ShippedRun(run.local, run.data, seeded)


def test_a_seed_refuses_a_folder_outside_the_drivers_root(tmp_path):
    home, other = tmp_path / "a" / "home", tmp_path / "other"
    _run(other, "run0", "complete")
    _campaign(other, [(0, "run0", "complete")])
    for folder in (f"../../other/{REV}", str(other / REV), "..", f"{REV}/../../../other/{REV}"):
        with pytest.raises(BadName):
            Receiver(str(home)).seed(folder, ASKED.identity())
    assert not home.exists()
