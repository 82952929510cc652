"""Process groups: the whole group stops, stubborn processes are killed, CPUs are pinned."""

from __future__ import annotations

import os
import sys
import time

import pytest

from omnibench_core.process.processes import build_env, group_members, log_tail, start_group

SPAWNER = """
import subprocess, sys, time
kids = [subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"]) for _ in range(3)]
print("spawned", [k.pid for k in kids], flush=True)
time.sleep(600)
"""

STUBBORN = """
import signal, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
print("ignoring SIGTERM", flush=True)
time.sleep(600)
"""


def _wait_for(path, text):
    deadline = time.monotonic() + 600
    while text not in path.read_text():
        assert time.monotonic() < deadline, path.read_text()
        time.sleep(0.02)


def test_stop_ends_every_process_of_the_group(tmp_path):
    proc = start_group([sys.executable, "-c", SPAWNER], log_path=tmp_path / "log", env=dict(os.environ))
    _wait_for(tmp_path / "log", "spawned")
    assert len(group_members(proc.pgid)) == 4
    assert proc.stop(grace_s=10) == "terminated"
    assert group_members(proc.pgid) == []


def test_stop_kills_what_ignores_sigterm(tmp_path):
    proc = start_group([sys.executable, "-c", STUBBORN], log_path=tmp_path / "log", env=dict(os.environ))
    _wait_for(tmp_path / "log", "ignoring")
    assert proc.stop(grace_s=0.3) == "killed"
    assert group_members(proc.pgid) == []


def test_ctrl_c_while_the_program_starts_leaves_nothing_running(tmp_path, monkeypatch):
    """Ctrl-C after the watchdog started the program but before start_group returned its handle:
    the program and its children are stopped before the interrupt goes on (they outlived omnibench
    by the orphan grace, a server's port still open after `invoke ab` exited with 130)."""
    from omnibench_core.process import processes

    started: list[int] = []
    pump = processes.WatchedPopen.pump

    def interrupted_pump(self, timeout):
        pump(self, timeout)
        if self.pid:  # the program runs: the user presses Ctrl-C now
            started.append(self.pid)
            raise KeyboardInterrupt

    monkeypatch.setattr(processes.WatchedPopen, "pump", interrupted_pump)
    with pytest.raises(KeyboardInterrupt):
        start_group([sys.executable, "-c", SPAWNER], log_path=tmp_path / "log", env=dict(os.environ),
                    orphan_grace_s=600)  # a long grace: only the stop asked on the interrupt can end it soon
    (leader,) = started
    assert group_members(leader) == []  # the leader's group (it leads its own session)


def test_stop_after_exit_reports_exited(tmp_path):
    proc = start_group([sys.executable, "-c", "pass"], log_path=tmp_path / "log", env=dict(os.environ))
    proc.popen.wait(600)
    assert proc.stop(grace_s=1) == "exited"


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity"), reason="Linux only")
def test_processes_are_pinned_to_the_cpu_set(tmp_path):
    cpu = min(os.sched_getaffinity(0))
    proc = start_group([sys.executable, "-c", "import os; print(sorted(os.sched_getaffinity(0)))"],
                       log_path=tmp_path / "log", env=dict(os.environ), cpus=[cpu])
    proc.popen.wait(600)
    assert (tmp_path / "log").read_text().strip() == f"[{cpu}]"


def test_argv_must_be_a_list(tmp_path):
    with pytest.raises(TypeError, match="not a shell string"):
        start_group("echo hi", log_path=tmp_path / "log", env={})


def test_build_env_applies_unset_then_set():
    env = build_env({"A": "1", "PYTORCH_ALLOC_CONF": "x", "KEEP": "k"}, {"A": "2"}, ["PYTORCH_ALLOC_CONF"])
    assert env == {"A": "2", "KEEP": "k"}


def test_log_tail_reads_the_end(tmp_path):
    log = tmp_path / "log"
    log.write_text("\n".join(f"line {i}" for i in range(1000)))
    assert log_tail(log, lines=2) == "line 998\nline 999"
    assert "no log" in log_tail(tmp_path / "missing")
