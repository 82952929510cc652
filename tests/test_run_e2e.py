"""`invoke run` end to end with real server processes on loopback."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from checkout_helpers import make_fake_checkout
from gpu_helpers import fake_calls, write_fake_nvidia_smi
from run_helpers import REPO

from omnibench_core.process.processes import group_members
from omnibench_core.store import manifest as manifest_file
from omnibench_core.store import metrics as metrics_file
from omnibench_core.store.manifest import RunManifest


def run_dirs(results: Path) -> list[Path]:
    return sorted(p for p in results.glob("*/*") if p.is_dir())


def manifest_of(run_dir: Path) -> RunManifest:
    return manifest_file.read(run_dir)


@pytest.mark.slow
def test_healthy_path_end_to_end(invoke, tmp_path, port):
    done = invoke("run", "--workload", "selftest", "--port", str(port))
    assert done.returncode == 0, done.stdout + done.stderr
    (run,) = run_dirs(tmp_path / "results")
    assert run.name == "run0"
    assert run.parent.name.startswith("local-")
    metrics = metrics_file.read(run)
    assert metrics.complete is True
    assert metrics.metrics["selftest.requests"] == 8
    assert metrics.metrics["selftest.matched"] == 8
    manifest = manifest_of(run)
    # server start as a metric: the selftest server's spawn to READY, as its manifest entry says
    assert manifest.servers[0].workloads == ("selftest",) and manifest.servers[0].ready_s > 0
    assert metrics.metrics["selftest.server_ready_s"] == manifest.servers[0].ready_s
    assert manifest.servers[1].phase == "score" and "echo-scorer.server_ready_s" not in metrics.metrics
    assert manifest.status == "complete"
    assert [s.step for s in manifest.steps] == ["selftest.client", "selftest.echo-check"]
    assert all(s.status == "ok" and s.started and s.ended for s in manifest.steps)
    assert manifest.steps[0].exit_code == 0
    assert (run / manifest.steps[0].log).read_text().count("request ") == 8
    gates = [(g["gate"], g["status"]) for g in manifest.gates]
    assert gates == [("RUN_READY", "passed"), ("READY", "passed"), ("GPU_FREE", "not_applicable"),
                     ("READY", "passed"), ("GPU_FREE", "not_applicable")]
    assert [s.label for s in manifest.servers] == ["selftest", "echo-scorer"]
    assert all(s.stop == "terminated" and s.pgid for s in manifest.servers)
    assert manifest.environment["packages"]["pluggy"] != "not installed"
    assert (run / "commit.txt").read_text().strip() == manifest.revision
    assert "RUN_COMPLETE" in done.stdout and "selftest.requests" in done.stdout
    # progress lines are printed while it works
    assert "selftest: READY after" in done.stdout
    # percentiles beside the mean: p50 of 8 requests is measured, p90 and p99 (30 and 300 needed) are marked thin,
    # kept out of the metrics with their sample count; the table prints milliseconds
    latencies = list(json.loads((run / "request_values.json").read_text())["selftest.latency_mean_s"].values())
    assert metrics.metrics["selftest.latency_p50_s"] == pytest.approx(float(np.percentile(latencies, 50)))
    assert "selftest.latency_p90_s" not in metrics.metrics and "selftest.latency_p99_s" not in metrics.metrics
    assert metrics.thin_percentiles["selftest.latency_p99_s"] == {
        "value": pytest.approx(float(np.percentile(latencies, 99))), "n": 8, "needed": 300}
    assert re.search(r"selftest\.latency_p99_s +thin: n=8 < 300 \([0-9.]+ ms not measured\)", done.stdout), done.stdout
    assert re.search(r"selftest\.latency_mean_s +[0-9.]+ ms\n", done.stdout), done.stdout
    # the next run gets the next free name and never touches run0; --percentiles chooses more, and 30
    # requests measure p90 (30 needed) but not p99.9 (3000)
    command = "invoke run --workload selftest --opt selftest.requests=30 --percentiles 50,90,99,99.9"
    assert command in (REPO / "docs" / "usage.md").read_text()  # the docs' command, on this test's port
    again = invoke(*command.split()[1:], "--port", str(port))
    assert again.returncode == 0, again.stderr
    assert [p.name for p in run_dirs(tmp_path / "results")] == ["run0", "run1"]
    # the first run had nothing to go by; the second's estimate is the first's phases, and each
    # line carries what is left (or, on a busy host, that a phase is past it) (issue 43)
    assert "estimate: none yet" in done.stdout and "| ~" not in done.stdout
    assert "estimate: ~" in again.stdout and "the mean of 1 earlier complete run of these workloads" in again.stdout
    ready = [line for line in again.stdout.splitlines() if "selftest: READY after" in line]
    assert ready and re.match(r"\[ +[\d.]+s \| (~\w+ left|generate past the estimate( \+ ~\w+)?)\] ", ready[0]), ready
    second = metrics_file.read(run.parent / "run1")
    assert {"selftest.latency_p50_s", "selftest.latency_p90_s"} <= set(second.metrics)
    assert set(second.thin_percentiles) == {"selftest.latency_p99_s", "selftest.latency_p99_9_s"}
    assert second.thin_percentiles["selftest.latency_p99_9_s"]["needed"] == 3000


@pytest.mark.slow
def test_server_that_dies_during_startup_fails_with_log_tail(invoke, tmp_path, port):
    # The ready timeout is long: failing at all proves the exit was noticed, not a timeout.
    done = invoke("run", "--workload", "selftest", "--port", str(port), "--opt", "selftest.die=1",
                  "--opt", "selftest.delay=0.2", env={"INVOKE_OMNIBENCH_READY_TIMEOUT_S": "600"}, timeout=600)
    assert done.returncode == 1
    assert "exited with code 3 before it became healthy" in done.stderr
    assert "fatal: simulated startup failure" in done.stderr  # the log tail
    (run,) = run_dirs(tmp_path / "results")
    assert run.name == "run0-incomplete"
    manifest = manifest_of(run)
    assert manifest.status == "failed"
    assert manifest.gates[-1]["gate"] == "READY" and manifest.gates[-1]["status"] == "failed"
    assert manifest.error["type"] == "ServerDied"


@pytest.mark.slow
def test_server_never_healthy_times_out(invoke, tmp_path, port):
    done = invoke("run", "--workload", "selftest", "--port", str(port), "--opt", "selftest.never_healthy=1",
                  env={"INVOKE_OMNIBENCH_READY_TIMEOUT_S": "1.5"})
    assert done.returncode == 1
    assert "was not healthy after 1.5 s" in done.stderr
    # What the last look saw depends on whether the server bound its port within 1.5 s (on a busy
    # host it may not have); that it is said at all is the user's evidence. The 503 answer itself is
    # tested at the gate, after the server is seen listening (test_gates).
    assert "last answer: " in done.stderr
    (run,) = run_dirs(tmp_path / "results")
    assert run.name == "run0-incomplete"
    server = manifest_of(run).servers[0]
    assert server.pgid is not None and not group_members(server.pgid)


def test_port_taken_by_foreign_listener(invoke, tmp_path, port):
    listener = subprocess.Popen([sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.05)
        done = invoke("run", "--workload", "selftest", "--port", str(port))
        assert done.returncode == 1
        assert f"port {port} is already in use" in done.stderr
        assert f"pid {listener.pid}" in done.stderr  # who holds it
        assert "omnibench leaves it alone" in done.stderr
        assert listener.poll() is None  # still alive and still serving
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
        assert run_dirs(tmp_path / "results") == []
    finally:
        listener.terminate()
        listener.wait(600)


def _start_long_run(tmp_path: Path, port: int) -> tuple[subprocess.Popen, Path]:
    env = {**os.environ, "INVOKE_OMNIBENCH_RESULTS": str(tmp_path / "results")}
    proc = subprocess.Popen([sys.executable, "-m", "invoke", "run", "--workload", "selftest", "--port", str(port),
                             "--opt", "selftest.client_seconds=60"], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        runs = run_dirs(tmp_path / "results")
        if runs and (runs[0] / "manifest.json").exists():
            manifest = manifest_of(runs[0])
            if manifest.steps and manifest.steps[0].status == "running":
                log = runs[0] / manifest.steps[0].log
                if log.exists() and "request 8/8" in log.read_text():
                    return proc, runs[0]
        time.sleep(0.05)
    proc.kill()
    raise AssertionError("the client never started: " + proc.communicate()[1])


def _assert_interrupted(proc: subprocess.Popen, tmp_path: Path, why: str) -> None:
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 130, out + err
    assert f"interrupted by {why}" in err
    (run,) = run_dirs(tmp_path / "results")
    assert run.name == "run0-incomplete"
    manifest = manifest_of(run)
    assert manifest.status == "interrupted"
    assert manifest.steps[0].status == "interrupted"
    for server in manifest.servers:
        assert server.pgid is not None and not group_members(server.pgid), f"processes of {server.label} survived"
    assert manifest.servers[0].stop in ("terminated", "killed")


@pytest.mark.slow
def test_sigint_while_client_runs_stops_everything(tmp_path, port):
    proc, run = _start_long_run(tmp_path, port)
    client_pgid = manifest_of(run).steps[0].pgid
    assert group_members(client_pgid)  # the client is running now
    proc.send_signal(signal.SIGINT)
    _assert_interrupted(proc, tmp_path, "Ctrl-C")
    assert not group_members(client_pgid)


@pytest.mark.slow
def test_sigterm_while_client_runs_stops_everything(tmp_path, port):
    proc, _ = _start_long_run(tmp_path, port)
    proc.send_signal(signal.SIGTERM)
    _assert_interrupted(proc, tmp_path, "SIGTERM")


def _gpu_env(tmp_path: Path, values: list[int], **extra: str) -> dict[str, str]:
    fake_bin = tmp_path / "fakebin"
    write_fake_nvidia_smi(fake_bin, values)
    checkout = make_fake_checkout(tmp_path / "sglang-omni")
    return {"PATH": f"{fake_bin}{os.pathsep}{os.environ['PATH']}", "INVOKE_OMNIBENCH_CHECKOUT": str(checkout),
            "INVOKE_OMNIBENCH_TARGET": "sglang-omni", **extra}


@pytest.mark.slow
def test_gpu_gate_waits_until_memory_drops(invoke, tmp_path, port):
    env = _gpu_env(tmp_path, [70000, 60000, 30000, 2000, 500], INVOKE_OMNIBENCH_GPUS="0,1")
    done = invoke("run", "--workload", "selftest", "--port", str(port), env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    (run,) = run_dirs(tmp_path / "results")
    manifest = manifest_of(run)
    free = [g for g in manifest.gates if g["gate"] == "GPU_FREE"]
    assert [g["status"] for g in free] == ["passed", "passed"]
    calls = fake_calls(tmp_path / "fakebin")
    assert ["-i", "0,1", "--query-gpu=memory.used", "--format=csv,noheader,nounits"] in calls
    assert len([c for c in calls if "--query-gpu=memory.used" in c]) >= 5  # it polled until the drop
    # the sglang-omni target applied the runbook's shell block to the server
    log = (run / "selftest.log").read_text()
    assert '"CUDA_VISIBLE_DEVICES": "0,1"' in log and '"SGLANG_OMNI_STRICT_PORT": "1"' in log
    assert f"cwd {tmp_path / 'sglang-omni'}" in log
    short = subprocess.run(["git", "-C", str(tmp_path / "sglang-omni"), "rev-parse", "--short=7", "HEAD"],
                           capture_output=True, text=True, check=True).stdout.strip()
    assert run.parent.name == short  # <results>/<short-sha>/run0 as in the runbook


@pytest.mark.slow
def test_gpu_gate_that_never_frees_fails_the_run(invoke, tmp_path, port):
    env = _gpu_env(tmp_path, [50000], INVOKE_OMNIBENCH_GPU_FREE_TIMEOUT_S="0.5")
    done = invoke("run", "--workload", "selftest", "--port", str(port), env=env)
    assert done.returncode == 1
    assert "GPU memory stayed at or above 1024 MiB" in done.stderr
    assert '{"0": 50000}' in done.stderr
    (run,) = run_dirs(tmp_path / "results")
    assert run.name == "run0-incomplete"
    manifest = manifest_of(run)
    assert manifest.error["type"] == "GpuNotFree"
    assert [g["status"] for g in manifest.gates if g["gate"] == "GPU_FREE"] == ["failed"]


@pytest.mark.slow
def test_unknown_workload_lists_known_ones(invoke):
    done = invoke("run", "--workload", "nosuch")
    assert done.returncode == 1
    assert "no workload named 'nosuch'" in done.stderr and "selftest" in done.stderr


@pytest.mark.slow
def test_missing_checkout_names_the_setting(invoke, tmp_path):
    done = invoke("run", "--workload", "selftest", "--target", "sglang-omni", "--checkout", str(tmp_path / "none"))
    assert done.returncode == 1
    assert "no sglang-omni checkout" in done.stderr and "omnibench.checkout" in done.stderr
