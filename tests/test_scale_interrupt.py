"""Ctrl-C (SIGINT) and SIGTERM of a real `invoke matrix` process on the local engine: every
campaign stops its servers, nothing is left listening on the slots' ports, the matrix file says
which campaigns were interrupted, and the same command resumes them without measuring a complete
run again. (The Ray engine's: tests/test_scale_ray_remote.py.)"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from proc_helpers import listening, wait_for
from run_helpers import REPO, free_port
from scale_helpers import path_without_nvidia_smi, server_pids


def _complete_runs(results: Path) -> dict[str, str]:
    """Each complete run's start time, by its path."""
    out = {}
    for path in results.glob("*/run*/manifest.json"):
        data = json.loads(path.read_text())
        if data["status"] == "complete":
            out[str(path.parent.relative_to(results))] = data["started"]
    return out


def _ignore_ctrl_c() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # as `nohup invoke matrix ... &` from a script starts it


@pytest.mark.slow
@pytest.mark.parametrize("sig, started", [(signal.SIGINT, "terminal"), (signal.SIGTERM, "terminal"),
                                          (signal.SIGTERM, "background")],
                         ids=["SIGINT", "SIGTERM", "SIGTERM-to-a-background-job"])
def test_a_signal_to_invoke_matrix_stops_every_campaign_and_the_same_command_resumes(tmp_path, sig, started):
    """``background``: the driver started with SIGINT ignored, as a shell without job control
    starts a background job; its campaigns inherit that, yet the driver's SIGINT to each must
    still stop it (it was lost: they measured on after the driver exited 130)."""
    results, port = tmp_path / "results", free_port()
    argv = [sys.executable, "-m", "invoke", "matrix", "--workload", "selftest", "--sweep", "selftest.requests=3,4",
            "--runs", "2", "--slots", "0,1", "--slot-cpus", "shared", "--port", str(port)]
    env = {**os.environ, "INVOKE_OMNIBENCH_RESULTS": str(results), "PATH": path_without_nvidia_smi()}
    log = tmp_path / "driver.log"
    with open(log, "w") as out:
        driver = subprocess.Popen(argv, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                                  preexec_fn=_ignore_ctrl_c if started == "background" else None)
        try:
            wait_for(lambda: listening(port) or listening(port + 1), what="a campaign's server")
            driver.send_signal(sig)  # to the driver alone: it must reach every campaign itself
            rc = driver.wait(600)
        finally:
            if driver.poll() is None:
                os.killpg(driver.pid, signal.SIGKILL)
    text = log.read_text()
    why = "SIGTERM" if sig == signal.SIGTERM else "Ctrl-C (SIGINT)"
    assert rc == 130, text[-4000:]
    assert f"interrupted by {why}" in text and "Traceback" not in text, text[-4000:]
    wait_for(lambda: not server_pids(tmp_path), what="the servers to stop")
    assert not listening(port) and not listening(port + 1)
    (matrix_file,) = (results / "matrices").glob("*.json")
    record = json.loads(matrix_file.read_text())
    assert record["status"] == "interrupted", record
    assert record["interrupted"] and set(record["interrupted"]) <= set(record["outcomes"])
    assert all(record["outcomes"][k]["status"] == "interrupted" for k in record["interrupted"])
    kept = _complete_runs(results)
    # the same command, as typed: it resumes, and no complete run is measured again
    done = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "was interrupted before" in done.stdout and "it resumes" in done.stdout
    assert json.loads(matrix_file.read_text())["status"] == "complete"
    after = _complete_runs(results)
    assert all(after.get(k) == v for k, v in kept.items())
    assert len(after) == 6  # 2 campaigns x (run0 + 2 runs)
    assert not server_pids(tmp_path) and not listening(port) and not listening(port + 1)
