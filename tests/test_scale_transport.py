"""Results shipped home, without Ray: the receiver writes runs atomically and keeps two campaigns'
runs of one revision apart, the shipper sends runs as they complete and the campaign file only
with them in one call (the runs written first), and a seed holds what a resumed task starts from. (On a real cluster:
tests/test_scale_ray_remote.py.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from omnibench_core.scale.transport import Receiver, Shipped, ShippedRun, Shipper, node_root, pack, seed, unpack

REV = "abc1234"
CAMPAIGN = f"{REV}/campaigns/c.json"


def _run(results: Path, name: str, status: str, note: str = "") -> None:
    run = results / REV / name
    run.mkdir(parents=True, exist_ok=True)
    (run / "manifest.json").write_text(json.dumps({"run": name, "status": status}))
    (run / "metrics.json").write_text(json.dumps({"metrics": {"m": 1.0}, "note": note}))


def _campaign(results: Path, attempts: list[tuple[int, str, str]], checkout: str = "/node/wt/abc") -> None:
    path = results / CAMPAIGN
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"asked": {"settings": {"checkout": checkout}},
                                "attempts": [{"slot": s, "run": r, "status": st} for s, r, st in attempts]}))


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
    assert _ship(receiver, "t2", two, "run0", campaign=True) == Shipped({"run0": "run1"}, str(home / CAMPAIGN))
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
    unpack(seed(home, REV, CAMPAIGN), node)
    assert sorted(p.name for p in (node / REV).iterdir()) == ["campaigns", "run0"]
    assert seed(home, REV, f"{REV}/campaigns/none.json") == b""


def test_the_node_root_is_the_nodes_setting_or_a_folder_of_its_own(tmp_path):
    assert node_root({"OMNIBENCH_NODE_ROOT": str(tmp_path)}) == tmp_path
    assert node_root({}).name.startswith("omnibench-node-")
