"""The Ray engine on a simulated cluster of 2 nodes (one fake GPU each, one process tree): a matrix
over a stand-in checkout (`invoke standin`) whose node is removed mid-campaign (the campaign
finishes on the other node), a SIGKILLed Ray worker (its servers die with their watchdogs, no port held, the campaign resumes elsewhere), and
--resume. Ray is in the test extra; without it these tests skip and say why."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path

import pytest
from gpu_helpers import write_fake_nvidia_smi
from proc_helpers import HUNG_S, listening
from run_helpers import free_port
from scale_helpers import invoke_standin, server_pids

from omnibench_core.scale import front_door as commands

ray = pytest.importorskip("ray", reason="Ray is not installed: pip install -e '.[test]' (or '.[ray]') to run the Ray "
                                        "engine's tests")
from ray_helpers import local_cluster  # noqa: E402

from omnibench_core.scale.ray_engine import RayEngine  # noqa: E402
from omnibench_core.settings import Settings  # noqa: E402

# three measured runs a commit: with two, Welch has about one degree of freedom and one run slowed
# by a busy machine made the planted 3x step inconclusive (a fresh-clone run, 2026-12-01)
RUNS = 3
OPTS = ("selftest.serve_with_target=true", "selftest.delay=0.05", "selftest.requests=4", "selftest.children=0")


@pytest.fixture(scope="module")
def cluster():
    with local_cluster({"num_cpus": 2, "num_gpus": 1}, {"num_cpus": 2, "num_gpus": 1}) as c:
        (worker,) = c.worker_nodes
        ray.init(address=c.address)
        try:
            yield c, worker
        finally:
            ray.shutdown()


def _running_run(results: Path) -> tuple[Path, dict] | None:
    for manifest in results.glob("*/run*/manifest.json"):
        try:
            data = json.loads(manifest.read_text())
        except ValueError:
            continue
        if data.get("status") == "running":
            return manifest.parent, data
    return None


def _wait(pred, thread: threading.Thread | None = None, box: dict | None = None):
    """Wait for ``pred``; give up at once when the matrix ``thread`` has ended (its error in ``box``)."""
    deadline = time.monotonic() + HUNG_S  # hung, not slow: a busy host only makes it later
    while time.monotonic() < deadline:
        got = pred()
        if got:
            return got
        if thread is not None and not thread.is_alive():
            raise AssertionError(f"the matrix ended before the awaited event: {(box or {}).get('error')!r}")
        time.sleep(0.1)
    raise AssertionError("timed out")


@pytest.mark.slow
def test_ray_matrix_survives_a_lost_node_and_a_killed_worker_then_resumes(cluster, tmp_path):
    c, worker_node = cluster
    # the stand-in `invoke standin` makes: 100, 100 and 300 ms a request (far above a busy machine's noise)
    commits = list(invoke_standin(tmp_path / "co", "--commits", "3", "--regress-at", "3", "--base-delay-ms", "100",
                                  "--delay-ms", "200").commits)
    # not the stand-in's fake: both simulated nodes are this host and each slot is its node's GPU 0,
    # so that fake would count the other node's server on "GPU 0"
    fake = write_fake_nvidia_smi(tmp_path / "fakebin", [0])
    settings = Settings.of(target="sglang-omni", checkout=str(tmp_path / "co"), results=str(tmp_path / "results"),
                           port=free_port(), nvidia_smi=str(fake))
    lines: list[str] = []
    engine = RayEngine("auto", settings.run.port, settings.run.results_root, per="gpu", cpu_mode="shared",
                       progress=lines.append, init=False)
    assert len(engine.slots()) == 2
    box: dict = {}

    def drive():
        try:
            box["result"] = commands.matrix(settings, revisions_spec=",".join(commits), workloads=["selftest"],
                                            options=OPTS, runs=RUNS, engine=engine, threshold=0.3, progress=lines.append)
        except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
            box["error"] = exc

    thread = threading.Thread(target=drive)
    thread.start()
    results = tmp_path / "results"
    # 1. SIGKILL the Ray worker that runs a campaign: its server dies with its watchdog.
    run_dir, manifest = _wait(lambda: _running_run(results), thread, box)
    killed_port = manifest["slot"]["port"]
    _wait(lambda: listening(killed_port), thread, box)
    os.kill(manifest["owner"]["pid"], signal.SIGKILL)
    _wait(lambda: not listening(killed_port))
    # 2. Remove the second node while a campaign runs there: it finishes on the other node.
    node_id = worker_node.node_id
    _wait(lambda: any(f"(node {node_id[:8]})" in line for line in lines[-20:] if line.startswith("start")), thread, box)
    time.sleep(1.0)
    c.remove_node(worker_node)
    thread.join(600)
    assert not thread.is_alive()
    assert "error" not in box, f"{box.get('error')}\n" + "\n".join(lines[-60:])
    result = box["result"]
    assert all(o.status == "complete" for o in result.outcomes.values()), "\n".join(lines[-60:])
    assert any("its slot was lost" in line for line in lines), "\n".join(lines[-60:])
    assert {x.metric: x.verdict for x in result.verdicts[result.jobs[2].key]}["selftest.latency_mean_s"] == "worse"
    assert list(results.glob("*/run*-incomplete*"))  # the killed run was moved aside, not counted
    # a server whose owner was killed is stopped by its watchdog (SIGTERM, grace, SIGKILL): allow it that
    _wait(lambda: not server_pids(tmp_path))
    for o in result.outcomes.values():
        assert not listening(int(o.slot["port"]))
    # 3. --resume keeps every complete campaign; nothing is measured again.
    before = sorted(p.name for p in results.glob("*/run*"))
    again = commands.matrix(settings, revisions_spec=",".join(commits), workloads=["selftest"], options=OPTS, runs=RUNS,
                            engine=RayEngine("auto", settings.run.port, results, per="gpu", cpu_mode="shared", init=False),
                            resume=True, progress=lines.append)
    assert all(o.reused for o in again.outcomes.values())
    assert sorted(p.name for p in results.glob("*/run*")) == before
