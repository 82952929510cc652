"""Faults a run meets and must survive: dead owners, races, full or read-only disks, planted and
malformed files, a reader that goes away. Each asserts the outcome: a typed error with the first
cause, nothing overwritten, no placeholder left, and no process of the run left behind."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from proc_helpers import listening
from run_helpers import REPO

from omnibench_core import api
from omnibench_core.errors import RunNotReady, StepFailed, StorageError
from omnibench_core.hooks.specs import hookimpl
from omnibench_core.jsonio import write_json
from omnibench_core.process.ports import port_in_use
from omnibench_core.process.processes import group_alive
from omnibench_core.records import Collected, Command, RuleResult, Step, Workload
from omnibench_core.run import ownership
from omnibench_core.settings import Settings
from omnibench_core.store import manifest as manifest_file
from omnibench_core.store import metrics as metrics_file
from omnibench_plugins.seedtts import metrics as seedtts_metrics


def _run(tmp_path: Path, port: int, *plugins, workload: str = "selftest", results: Path | None = None, **kw):
    settings = Settings.of(results=str(results or tmp_path / "r"), port=port)
    return api.run(settings, [workload], progress=lambda m: None, extra_plugins=list(plugins), **kw)


def _servers_gone(manifest: dict) -> None:
    for server in manifest["servers"]:
        assert not group_alive(server["pgid"]), server


class OnStart:
    """A plugin whose run-start hook does something to the run directory (a fault)."""

    def __init__(self, action):
        self.action = action

    @hookimpl
    def omnibench_run_start(self, run):
        self.action(run.run_dir)


# -- owners and races ----------------------------------------------------------------------
@pytest.mark.slow
def test_a_run_whose_owner_died_is_moved_aside_by_the_next_run(tmp_path, port):
    first = _run(tmp_path, port)
    revision = first.run_dir.parent
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    manifest = json.loads((first.run_dir / "manifest.json").read_text())
    left = revision / "run1"
    left.mkdir()
    write_json(left / "manifest.json", {**manifest, "run": "run1", "status": "running",
                                        "owner": {**manifest["owner"], "pid": int(dead.stdout)}})
    lines: list[str] = []
    second = api.run(Settings.of(results=str(tmp_path / "r"), port=port), ["selftest"], progress=lines.append)
    assert second.complete and second.run_dir.name == "run1"  # the abandoned run1 freed its name
    moved = manifest_file.read(revision / "run1-incomplete")
    assert moved.status == "abandoned" and f"pid {int(dead.stdout)}" in moved.reason
    assert any("its omnibench process died" in line for line in lines)


def test_a_running_run_of_a_live_owner_is_left_alone(tmp_path):
    revision = tmp_path / "rev"
    (revision / "run0").mkdir(parents=True)
    write_json(revision / "run0" / "manifest.json", {"status": "running", "owner": ownership.Owner.me().as_record()})
    assert ownership.reclaim_abandoned(revision) == []
    assert (revision / "run0").is_dir()


def test_run_names_are_claimed_atomically(tmp_path):
    revision = tmp_path / "rev"
    claimed: list[Path] = []
    barrier = threading.Barrier(8)

    def claim():
        barrier.wait()
        claimed.append(ownership.claim_run_dir(revision))

    threads = [threading.Thread(target=claim) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(p.name for p in claimed) == sorted(f"run{i}" for i in range(8))
    with pytest.raises(RunNotReady, match="exists already"):
        ownership.claim_run_dir(revision, "run3")


def test_two_runs_on_one_port_are_refused_not_cross_wired(tmp_path, port):
    with ownership.port_lock(port):  # another omnibench run holds the port
        with pytest.raises(RunNotReady, match="held by another omnibench run") as err:
            _run(tmp_path, port)
    assert f"pid {os.getpid()}" in str(err.value)
    assert not list((tmp_path / "r").glob("*/run*"))  # the claimed name was released


# -- storage ---------------------------------------------------------------------------------
@pytest.fixture
def tiny_fs(tmp_path):
    """Mount a small tmpfs (options given by the test); skipped where mounting is not allowed."""
    mounted: list[Path] = []

    def mount(options: str) -> Path:
        where = tmp_path / f"fs{len(mounted)}"
        where.mkdir()
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(where)], capture_output=True)
        if done.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
        mounted.append(where)
        return where

    yield mount
    for where in mounted:
        subprocess.run(["umount", "-l", str(where)], check=False)


def test_a_read_only_results_root_is_a_typed_error(tmp_path, port, tiny_fs):
    root = tiny_fs("size=1m,ro")
    with pytest.raises(StorageError) as err:
        _run(tmp_path, port, results=root)
    assert "EROFS" in str(err.value) and "read-only" in err.value.hint


def _fill(folder: Path) -> None:
    with open(folder / "filler", "wb") as f:
        try:
            while True:
                f.write(b"\0" * 65536)
                f.flush()
        except OSError:
            pass


def _use_inodes(folder: Path) -> None:
    try:
        for i in range(100000):
            (folder / f"i{i}").touch()
    except OSError:
        pass


@pytest.mark.parametrize("fault", [_fill, _use_inodes], ids=["disk-full", "no-inodes"])
def test_a_disk_that_fills_mid_run_reports_the_first_cause(tmp_path, port, tiny_fs, fault):
    root = tiny_fs("size=2m,nr_inodes=400")
    with pytest.raises(StorageError) as err:
        _run(tmp_path, port, ("fault", OnStart(lambda run_dir: fault(run_dir.parent))), results=root)
    assert "ENOSPC" in str(err.value)
    runs = [p for p in root.glob("*/run*")]
    assert runs and all(any(p.iterdir()) for p in runs)  # what was written is kept; no empty placeholder
    manifest = json.loads((runs[0] / "manifest.json").read_text())
    _servers_gone(manifest)
    assert not listening(port)


def test_a_directory_made_immutable_mid_run_is_a_typed_error(tmp_path, port):
    def freeze(run_dir: Path) -> None:
        if subprocess.run(["chattr", "+i", str(run_dir)], capture_output=True).returncode != 0:
            pytest.skip("chattr +i is not supported here")

    try:
        with pytest.raises(StorageError) as err:
            _run(tmp_path, port, ("fault", OnStart(freeze)))
        assert "EPERM" in str(err.value) and "immutable" in err.value.hint
        assert "run not moved aside" in err.value.evidence  # the second failure is evidence, not the error
    finally:
        for run in (tmp_path / "r").glob("*/run*"):
            subprocess.run(["chattr", "-i", str(run)], check=False)
    (run,) = (tmp_path / "r").glob("*/run0")
    assert (run / "manifest.json").is_file()
    assert not listening(port)


# -- outputs are checked, not just found -----------------------------------------------------
def _planting_workload(tmp_path: Path) -> Workload:
    def plant(ctx) -> None:  # a well-formed result file appears before the step that should write it
        write_json(ctx.workload_dir / "utmos_results.json", {"summary": {"utmos_mean": 5.0, "skipped": 0}})
        os.utime(ctx.workload_dir / "utmos_results.json", ns=(0, 0))

    def collect(run_dir, options) -> Collected:
        return Collected({"planted.utmos": 5.0}, rules=(RuleResult("ok", True),))

    lazy = Command((sys.executable, "-c", "pass"))  # claims the file, never writes it
    return Workload("planted", "plants a result", lambda ctx: [Step("plant", plant), Step("utmos", lazy,
                    outputs=("planted/utmos_results.json",))], collect)


def test_a_planted_output_does_not_pass_for_the_steps_own(tmp_path, port):
    class Planted:
        @hookimpl
        def omnibench_workloads(self):
            return [_planting_workload(tmp_path)]

    with pytest.raises(StepFailed, match="did not write planted/utmos_results.json: the file is older than the step"):
        _run(tmp_path, port, ("planted", Planted()), workload="planted")
    (moved,) = (tmp_path / "r").glob("*/run0-incomplete")
    assert manifest_file.read(moved).status == "failed"


@pytest.mark.slow
def test_skipped_steps_need_this_runs_own_record(tmp_path, port):
    result = _run(tmp_path, port)
    manifest = manifest_file.read(result.run_dir)
    records = {s.step: s.outputs for s in manifest.steps}
    written = (records["selftest.client"] or {})["selftest/client.json"]
    assert written is not None and written.size > 0 and len(written.sha256) == 64
    assert all(s.status == "ok" for s in manifest.steps)  # nothing on disk made a step skip


@pytest.mark.parametrize("speed", [
    {"summary": {"failed_requests": False, "completed_requests": 2}, "per_request": [{"id": "a"}, {"id": "b"}]},
    {"summary": {"failed_requests": 0, "completed_requests": 2}, "per_request": ["a", 7]},
    {"summary": "broken", "per_request": {"id": "a"}},
    ["not", "an", "object"],
], ids=["failed-false", "rows-not-objects", "summary-not-object", "document-a-list"])
def test_malformed_but_parseable_results_break_a_named_rule(tmp_path, speed):
    folder = tmp_path / "seedtts"
    folder.mkdir()
    write_json(folder / "speed_results.json", speed)
    write_json(folder / "dataset.json", {"samples": 2})
    collected = seedtts_metrics.collect(folder)
    broken = {r.name for r in collected.rules if not r.ok}
    assert broken & {"0 failed requests", "unique sample ids", "every sample generated and scored"}


# -- files and output ------------------------------------------------------------------------
@pytest.mark.slow
def test_metrics_and_manifest_are_readable_like_the_other_files(tmp_path, port):
    result = _run(tmp_path, port)
    for name in ("metrics.json", "manifest.json", "commit.txt"):
        mode = stat.S_IMODE((result.run_dir / name).stat().st_mode)
        assert mode & 0o044 == 0o044, (name, oct(mode))


@pytest.mark.slow
def test_a_closed_stdout_does_not_fail_the_run(tmp_path, port):
    env = {**os.environ, "INVOKE_OMNIBENCH_RESULTS": str(tmp_path / "r")}
    reader = subprocess.Popen([sys.executable, "-m", "invoke", "run", "--workload", "selftest", "--port", str(port)],
                              cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert reader.stdout is not None
    reader.stdout.readline()
    reader.stdout.close()  # `invoke run ... | head -1`
    _, err = reader.communicate(timeout=600)
    assert reader.returncode == 0, err.decode()[-2000:]
    (run,) = (tmp_path / "r").glob("*/run0")
    assert metrics_file.read(run).complete is True


def test_a_failed_steps_log_path_points_where_the_run_went(tmp_path, port):
    class Fails:
        @hookimpl
        def omnibench_workloads(self):
            bad = Command((sys.executable, "-c", "import sys; print('boom'); sys.exit(3)"))
            return [Workload("fails", "exits 3", lambda ctx: [Step("client", bad)], lambda d, o: Collected({}))]

    with pytest.raises(StepFailed) as err:
        _run(tmp_path, port, ("fails", Fails()), workload="fails")
    log = Path(err.value.evidence["log"])
    assert "-incomplete" in str(log) and log.is_file() and "boom" in log.read_text()



# -- the owner dies --------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("when", ["startup", "client"])
def test_kill_9_of_invoke_leaves_no_server_and_the_next_run_reclaims_it(tmp_path, port, when):
    from proc_helpers import leftovers, wait_for

    env = {**os.environ, "INVOKE_OMNIBENCH_RESULTS": str(tmp_path / "r")}
    slow = "selftest.client_seconds=30" if when == "client" else "selftest.delay=30"
    owner = subprocess.Popen([sys.executable, "-m", "invoke", "run", "--workload", "selftest", "--port", str(port),
                              "--opt", slow], cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    def reached():
        for manifest in (tmp_path / "r").glob("*/run0/manifest.json"):
            data = json.loads(manifest.read_text())
            if when == "startup" and data["servers"] and not data["servers"][0]["ready"]:
                return data  # the server is loading, its port still closed
            if any(s["step"] == "selftest.client" and s["status"] == "running" for s in data["steps"]):
                return data
        return None

    data = wait_for(reached, what=when)
    owner.kill()  # kill -9: no finally, no handler runs in omnibench
    owner.wait()
    servers = data["servers"]
    assert servers
    for server in servers:
        wait_for(lambda s=server: not leftovers(pids={s["pid"]}, pgid=s["pgid"], token=s["tree_token"], port=port),
                 what=f"server {server['label']} gone")
    assert not port_in_use(port)
    nxt = api.run(Settings.of(results=str(tmp_path / "r"), port=port), ["selftest"], progress=lambda m: None)
    assert nxt.complete and nxt.run_dir.name == "run0"
    assert manifest_file.read(nxt.run_dir.parent / "run0-incomplete").status == "abandoned"


@pytest.mark.slow
def test_the_local_target_never_runs_nvidia_smi(tmp_path, port, monkeypatch):
    from gpu_helpers import fake_calls, write_fake_nvidia_smi

    write_fake_nvidia_smi(tmp_path / "bin", [0])
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    result = _run(tmp_path, port)
    assert result.complete and fake_calls(tmp_path / "bin") == []
    manifest = manifest_file.read(result.run_dir)
    assert manifest.environment["gpus"].startswith("not applicable")
    assert [g["status"] for g in manifest.gates if g["gate"] == "GPU_FREE"] == ["not_applicable"] * 2
