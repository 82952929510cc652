"""The Ray engine without a shared filesystem (`--results-transport ray`), on a
`ray.cluster_utils.Cluster` of two nodes (one process tree, one fake GPU each) whose tasks write
under different node-local folders (each node's raylet gets its own OMNIBENCH_NODE_ROOT and a
custom resource naming it; no path is shared with the driver's results root): a matrix of 3
stand-in revisions whose runs all land in the driver's results root with the files a local-engine
matrix writes, --resume measuring nothing twice (a campaign under an older omnibench's name
too), a node removed mid-matrix costing only its unfinished run, SIGINT and SIGTERM of a real
`invoke matrix` process, and bad input (an unreachable --address, a cluster without GPUs, a
revision missing from the nodes' checkout)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
from gpu_helpers import write_fake_nvidia_smi
from proc_helpers import listening, wait_for
from run_helpers import REPO, free_port
from scale_helpers import MadeStandin, invoke_standin, path_without_nvidia_smi, server_pids

from omnibench_core.campaign import campaign_file
from omnibench_core.errors import CampaignFileError
from omnibench_core.history.store import opened
from omnibench_core.scale import front_door as commands
from omnibench_core.scale.local import LocalEngine
from omnibench_core.scale.matrix import MatrixResult
from omnibench_core.scale.slots import plan_slots
from omnibench_core.settings import Settings
from omnibench_core.statuses import CampaignStatus

ray = pytest.importorskip("ray", reason="Ray is not installed: pip install -e '.[test]' (or '.[ray]') to run the Ray "
                                        "engine's tests")
from ray_helpers import local_cluster  # noqa: E402

from omnibench_core.scale.ray_engine import RayEngine, _ActorHome  # noqa: E402

OPTS = ("selftest.serve_with_target=true", "selftest.delay=0.05", "selftest.requests=4", "selftest.children=0")
SELFTEST = ("--workload", "selftest", *[x for o in OPTS for x in ("--opt", o)])


def _node_args(base: Path, name: str) -> dict:
    """A node with one fake GPU, a resource naming it and its own folder (the stand-in's venv
    script needs the python that has omnibench: a node's own `python3` may not)."""
    return {"num_cpus": 2, "num_gpus": 1, "resources": {f"omnibench_{name}": 1}, "include_dashboard": False,
            "env_vars": {"OMNIBENCH_NODE_ROOT": str(base / name), "OMNIBENCH_PYTHON": sys.executable}}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    base = tmp_path_factory.mktemp("nodes")
    with local_cluster(_node_args(base, "node-a"), _node_args(base, "node-b")) as c:
        yield from _with_driver(c, base)


def _with_driver(c, base: Path):
    """The module's cluster with this process connected as its driver, and a stand-in checkout."""
    ray.init(address=c.address)
    co = base / "co"
    # the stand-in `invoke standin` makes: 100, 100 and 300 ms a request (far above a busy machine's noise)
    made = invoke_standin(co, "--commits", "3", "--regress-at", "3", "--base-delay-ms", "100", "--delay-ms", "200")
    # both simulated nodes are this host and each slot is its node's GPU 0: a fake that is always free
    fake = write_fake_nvidia_smi(base / "fakebin", [0])
    try:
        yield c, base, made, fake
    finally:
        ray.shutdown()


def _settings(made, fake: Path, results: Path) -> Settings:
    return Settings.of(target="sglang-omni", checkout=str(made.root), results=str(results), port=free_port(),
                       nvidia_smi=str(fake))


def _layout(root: Path) -> set[str]:
    """Every file under ``root`` a reader of results sees: not the worktrees (node-local on Ray),
    not lock files (a holder line of a process on a node), the probe caches (each node asks its own
    checkout) nor the Ray driver's token file."""
    out = set()
    for path in root.rglob("*"):
        rel = path.relative_to(root).as_posix()
        if path.is_file() and not rel.startswith((".worktrees/", ".omnibench-ray-", "capabilities/")) \
                and not path.name.endswith(".lock"):
            out.add(rel)
    return out


def _matrix(settings: Settings, made, engine, runs: int = 2, **kwargs):
    return commands.matrix(settings, revisions_spec=",".join(made.commits), workloads=["selftest"], options=OPTS,
                           runs=runs, engine=engine, threshold=0.3, **kwargs)


def _ray_engine(settings: Settings, lines: list[str]) -> RayEngine:
    """The engine `invoke matrix --engine ray --results-transport ray` makes (Ray is connected already)."""
    engine = commands.make_engine(settings, engine="ray", slot_per="gpu", slot_cpus="shared",
                                  engine_opts=commands.ray_flag_options("ray", {"results_transport": "ray"}),
                                  progress=lines.append)
    assert isinstance(engine, RayEngine)
    return engine


def _started(results: Path) -> dict[str, str]:
    """Each run's start time, by its path: a run measured again would start later."""
    return {str(p.parent.relative_to(results)): json.loads(p.read_text())["started"]
            for p in results.glob("*/run*/manifest.json")}


@dataclass(frozen=True)
class Shipped:
    """The Ray matrix of the stand-in's three commits, every run shipped home to ``results``."""

    made: MadeStandin
    fake: Path
    base: Path  # the nodes' folder
    results: Path
    settings: Settings
    result: MatrixResult
    lines: list[str]


@pytest.fixture(scope="module")
def shipped(cluster, tmp_path_factory) -> Shipped:
    # three runs a commit for the verdict: with two, one run slowed by a busy machine can leave the
    # planted 3x step inconclusive (Welch with about one degree of freedom)
    c, base, made, fake = cluster
    results, lines = tmp_path_factory.mktemp("shipped") / "results", []
    settings = _settings(made, fake, results)
    result = _matrix(settings, made, _ray_engine(settings, lines), runs=3, progress=lines.append)
    return Shipped(made, fake, base, results, settings, result, lines)


# The story in three tests, each under a minute (issue 40): the Ray matrix, the same matrix on the local
# engine laid out alike, and its resume.
def test_a_ray_matrix_ships_every_run_home_and_finds_the_planted_step(shipped):
    result, results = shipped.result, shipped.results
    assert all(o.status == "complete" for o in result.outcomes.values()), "\n".join(shipped.lines[-60:])
    assert {x.metric: x.verdict for x in result.verdicts[result.jobs[2].key]}["selftest.latency_mean_s"] == "worse"
    # both nodes ran campaigns, each under its own folder, each with its own clone and worktrees
    for node in ("node-a", "node-b"):
        assert list((shipped.base / node / "worktrees").glob("*/.git")), node
        assert list((shipped.base / node / "checkouts").glob("*.git"))
    assert not (results / ".worktrees").exists()  # nothing was prepared under the driver's results root
    # every campaign's outcome names the driver's files
    for o in result.outcomes.values():
        assert Path(o.campaign).is_relative_to(results) and len(o.runs) == 3


def test_the_same_matrix_on_the_local_engine_lays_out_the_same_files(shipped, tmp_path):
    made, results, lines = shipped.made, shipped.results, shipped.lines
    local_results = tmp_path / "local"
    local_settings = _settings(made, shipped.fake, local_results)
    slots = plan_slots(["0", "1"], local_settings.run.port, per="gpu", cpus="shared")
    local = _matrix(local_settings, made, LocalEngine(slots, progress=lines.append), runs=3, progress=lines.append)
    assert all(o.status == "complete" for o in local.outcomes.values())
    assert _layout(results) == _layout(local_results)
    for commit in made.commits:  # the campaign files say the same, the worktree path included
        here = json.loads(next((results / commit[:7] / "campaigns").glob("*.json")).read_text())
        there = json.loads(next((local_results / commit[:7] / "campaigns").glob("*.json")).read_text())
        assert here["asked"]["settings"]["checkout"] == str(results / ".worktrees" / commit)
        assert there["asked"]["settings"]["checkout"] == str(local_results / ".worktrees" / commit)
        assert [(a["slot"], a["run"], a["status"]) for a in here["attempts"]] == \
            [(a["slot"], a["run"], a["status"]) for a in there["attempts"]]


def test_resume_of_the_shipped_matrix_measures_nothing_again(shipped):
    # --resume from the driver's copy: every campaign kept, no run measured again
    before = _started(shipped.results)
    settings, lines = shipped.settings, shipped.lines
    again = _matrix(settings, shipped.made, _ray_engine(settings, lines), runs=3, resume=True, progress=lines.append)
    assert all(o.reused and o.status == "complete" for o in again.outcomes.values())
    assert _started(shipped.results) == before


def test_resume_continues_the_campaign_the_driver_holds_under_an_older_name_and_history_has_its_commit(cluster, tmp_path):
    c, base, made, fake = cluster
    results, lines = tmp_path / "results", []
    settings = _settings(made, fake, results)
    commit = made.commits[0]

    def matrix(**kwargs):
        return commands.matrix(settings, revisions_spec=commit, workloads=["selftest"], options=OPTS, runs=2,
                               engine=_ray_engine(settings, lines), progress=lines.append, **kwargs)

    (first,) = matrix().outcomes.values()
    assert first.status == "complete", "\n".join(lines[-60:])
    # the shipped campaign's history point has its commit's time and subject (from the driver's checkout)
    with opened(results) as store:
        (point,) = store.campaigns()
    facts = subprocess.run(["git", "-C", str(made.root), "show", "-s", "--format=%cI%x1f%s", commit], check=True,
                           capture_output=True, text=True).stdout.strip().split("\x1f")
    assert (point.revision, point.commit_time, point.subject) == (commit, *facts)
    # the campaign as an older omnibench left it: under the name it gave it (main's matrix named
    # campaigns without the target), interrupted before its last run
    path = Path(first.campaign)
    campaign = campaign_file.load(path)
    canonical, legacy = campaign.asked.identity().names()
    assert path.stem == canonical != legacy
    last = campaign.latest(2)
    assert last is not None
    shutil.rmtree(path.parent.parent / last.run)
    campaign_file.save(campaign_file.campaign_path(path.parent.parent, legacy), replace(
        campaign, name=legacy, status=CampaignStatus.INTERRUPTED, attempts=tuple(a for a in campaign.attempts if a.slot != 2)))
    path.unlink()
    before = _started(results)
    (again,) = matrix(resume=True).outcomes.values()
    assert again.status == "complete" and not again.reused, "\n".join(lines[-60:])
    assert [p.stem for p in path.parent.glob("*.json")] == [legacy]  # continued, not begun again under the new name
    after = _started(results)
    assert {k: after[k] for k in before} == before and len(after) == len(before) + 1  # only the missing run measured
    resumed = campaign_file.load(path.parent / f"{legacy}.json")
    assert resumed.status is CampaignStatus.COMPLETE and len(resumed.measured()) == 2


def test_a_campaign_file_the_driver_cannot_trust_reaches_the_task_as_the_typed_error(cluster, tmp_path):
    c, base, made, fake = cluster
    engine = _ray_engine(_settings(made, fake, tmp_path / "results"), [])
    try:
        with pytest.raises(CampaignFileError) as caught:  # a node's omnibench of a newer campaign format
            _ActorHome(engine.receiver).ship("task-9", "abc1234", [], "abc1234/campaigns/c.json", b'{"format": 2}', None)
    finally:
        engine.close()
    assert caught.value.evidence["sent by"] == "task task-9" and caught.value.evidence["field"] == "format"
    assert not (tmp_path / "results" / "abc1234").exists()


def test_a_node_removed_mid_matrix_costs_only_its_unfinished_run(cluster, tmp_path):
    c, base, made, fake = cluster
    node_c = c.add_node(**_node_args(base, "node-c"))
    c.wait_for_nodes()
    results, lines = tmp_path / "results", []
    settings = _settings(made, fake, results)
    engine = _ray_engine(settings, lines)
    assert len(engine.slots()) == 3
    box: dict = {}

    def drive():
        try:
            box["result"] = _matrix(settings, made, engine, progress=lines.append)
        except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
            box["error"] = exc

    thread = threading.Thread(target=drive)
    thread.start()
    try:
        tag = f"(node {node_c.node_id[:8]})"
        start = wait_for(lambda: next((x for x in list(lines) if x.startswith("start") and tag in x), None))
        short = start.split()[1].split("|")[0]
        # once node c's run0 is home, and a later run is under way there, the node goes
        wait_for(lambda: (results / short / "run0" / "manifest.json").is_file())
        shipped = _started(results)[f"{short}/run0"]
        wait_for(lambda: list((base / "node-c" / "tasks").glob(f"*/results/{short}/run1")))
    finally:
        c.remove_node(node_c)
    thread.join(600)
    assert not thread.is_alive()
    assert "error" not in box, f"{box.get('error')}\n" + "\n".join(lines[-60:])
    assert all(o.status == "complete" for o in box["result"].outcomes.values()), "\n".join(lines[-60:])
    assert any("its slot was lost" in x for x in lines), "\n".join(lines[-60:])
    # the run that was home stayed; the campaign went on from it elsewhere: run0 was measured once
    assert _started(results)[f"{short}/run0"] == shipped
    (campaign,) = (results / short / "campaigns").glob("*.json")
    attempts = json.loads(campaign.read_text())["attempts"]
    warmups = [a for a in attempts if a["slot"] == 0]
    assert [(a["run"], a["status"]) for a in warmups] == [("run0", "complete")]  # not measured again
    counted = sorted(a["run"] for a in attempts if a["slot"] > 0 and a["status"] == "complete")
    assert len(counted) == 2 and all((results / short / r / "metrics.json").is_file() for r in counted)
    # node c's run1 may have reached home in the instant before the node went (with the campaign
    # file that counts it: one call carries both), or not; nothing else is home
    assert set(counted) | {"run0"} <= {p.name for p in (results / short).glob("run*")} <= {"run0", "run1", "run2", "run3"}
    wait_for(lambda: not server_pids(base))


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_to_invoke_matrix_on_ray_stops_every_server_and_the_same_command_resumes(cluster, tmp_path, sig):
    c, base, made, fake = cluster
    results, port, release = tmp_path / "results", free_port(), tmp_path / "release"
    # each run's client is held open until the file exists: the signal lands while a campaign measures,
    # however fast its runs (a second's sleep after the first server was up once let both campaigns
    # finish first, 2026-12-06: no campaign interrupted)
    argv = [sys.executable, "-m", "invoke", "matrix", "--target", "sglang-omni", "--checkout", str(made.root), *SELFTEST,
            "--opt", f"selftest.hold={release}",
            "--revisions", ",".join(made.commits[:2]), "--runs", "2", "--slot-per", "gpu", "--slot-cpus", "shared",
            "--threshold", "30%", "--engine", "ray", "--address", c.address, "--results-transport", "ray",
            "--port", str(port)]
    env = {**os.environ, "INVOKE_OMNIBENCH_RESULTS": str(results), "INVOKE_OMNIBENCH_NVIDIA_SMI": str(fake),
           "PATH": path_without_nvidia_smi()}
    log = tmp_path / "driver.log"
    with open(log, "w") as out:
        driver = subprocess.Popen(argv, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            wait_for(lambda: listening(port) or listening(port + 1))  # a campaign's server is up, its client held
            driver.send_signal(sig)
            rc = driver.wait(600)
        finally:
            if driver.poll() is None:
                driver.kill()
    text = log.read_text()
    assert rc == 130, text[-4000:]
    why = "SIGTERM" if sig == signal.SIGTERM else "Ctrl-C (SIGINT)"
    assert f"interrupted by {why}" in text and "Traceback" not in text, text[-4000:]
    wait_for(lambda: not server_pids(base))
    assert not listening(port) and not listening(port + 1)
    (matrix_file,) = (results / "matrices").glob("*.json")
    record = json.loads(matrix_file.read_text())
    assert record["status"] == "interrupted" and record["interrupted"], record
    if sig == signal.SIGTERM:
        return  # the record is the same interrupted one as after SIGINT: its resume is shown there once
    kept = {k: v for k, v in _started(results).items()
            if json.loads((results / k / "manifest.json").read_text())["status"] == "complete"}
    release.touch()  # the resumed runs end as they come
    done = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "it resumes" in done.stdout
    assert json.loads(matrix_file.read_text())["status"] == "complete"
    after = _started(results)
    assert all(after[k] == v for k, v in kept.items())  # nothing complete was measured again


def test_bad_input_unreachable_address_no_gpus_and_a_revision_missing_on_the_nodes(cluster, tmp_path, invoke):
    c, base, made, fake = cluster
    common = ("matrix", "--target", "sglang-omni", "--checkout", str(made.root), *SELFTEST, "--revisions", "HEAD",
              "--runs", "2", "--engine", "ray", "--slot-cpus", "shared")
    # an address nobody listens on: a typed error at once, not Ray's long retry
    dead = invoke(*common, "--address", f"127.0.0.1:{free_port()}", timeout=600)
    assert dead.returncode == 1 and "cannot reach the Ray cluster at 127.0.0.1:" in dead.stderr, dead.stderr
    assert "Traceback" not in dead.stderr
    # a cluster without GPUs
    with local_cluster({"num_cpus": 1, "num_gpus": 0, "include_dashboard": False}) as bare:
        none = invoke(*common, "--address", bare.address, timeout=600)
    assert none.returncode == 1 and "the Ray cluster has no free GPU slot" in none.stderr, none.stdout + none.stderr
    assert "Traceback" not in none.stderr
    # the nodes clone from a repository that lacks the newest commit
    old = tmp_path / "old"
    # --no-tags: the stand-in tags its commits c1..cN, and a tag would keep the newest commit reachable
    subprocess.run(["git", "clone", "-q", "--no-tags", str(made.root), str(old)], check=True)
    subprocess.run(["git", "-C", str(old), "reset", "-q", "--hard", "HEAD~1"], check=True)
    settings = _settings(made, fake, tmp_path / "results")
    lines: list[str] = []
    engine = RayEngine("auto", settings.run.port, settings.run.results_root, per="gpu", cpu_mode="shared",
                       progress=lines.append, init=False, transport="ray", checkout_url=f"file://{old}")
    result = commands.matrix(settings, revisions_spec="HEAD", workloads=["selftest"], options=OPTS, runs=2,
                             engine=engine, progress=lines.append)
    (outcome,) = result.outcomes.values()
    assert outcome.status == "failed"
    assert f"revision {made.head} is not in this node's checkout" in outcome.error
    assert f"fetched from: file://{old}" in outcome.error and "node: " in outcome.error

