"""Process groups: the whole group stops, stubborn processes are killed, CPUs are pinned."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest
from proc_helpers import wait_for

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


# A server's graceful stop that restores SIGTERM's default action on its way out, as aiohttp's
# run_app does in its cleanup, then writes its last words.
GRACEFUL = """
import signal, sys, time
out = sys.argv[1]
def on_term(signum, frame):
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    open(out + ".stopping", "w").close()
    time.sleep(0.3)
    open(out + ".clean", "w").close()
    sys.exit(0)
signal.signal(signal.SIGTERM, on_term)
open(out + ".ready", "w").close()
time.sleep(600)
"""


def test_a_graceful_stop_that_restores_the_default_is_not_cut_by_a_second_sigterm(tmp_path):
    """Each process gets one SIGTERM: sent to it by pid and again to its group, it was killed mid-way
    through its stop whenever the sender was preempted between the two (a loaded host), and what it
    writes last was lost (its log's last lines; under coverage.py, its data file). The sender here
    waits after each signal until the process has begun its stop: with a second signal it dies of
    SIGTERM (fails on the pid-then-group send: exit -15)."""
    import signal
    import subprocess

    from omnibench_core.process.stopping import send_once

    out = tmp_path / "server"
    proc = subprocess.Popen([sys.executable, "-c", GRACEFUL, str(out)], start_new_session=True)
    wait_for(lambda: Path(f"{out}.ready").exists(), "the process's handler")
    began = Path(f"{out}.stopping")

    def preempted(send):
        def send_then_wait(target: int, sig: int) -> None:
            send(target, sig)
            wait_for(began.exists, "the stop to begin")
        return send_then_wait

    reached = send_once({proc.pid}, proc.pid, signal.SIGTERM, kill=preempted(os.kill), killpg=preempted(os.killpg))
    assert reached == (proc.pid,)
    assert proc.wait(timeout=600) == 0 and Path(f"{out}.clean").exists()


def test_each_member_gets_the_signal_once_by_its_group_or_else_by_pid():
    """Members in the stopped group get the group's signal only; one that left the group (a new
    session) gets its own; one already gone is not counted as reached; with the group gone, each
    member is signalled by pid."""
    from omnibench_core.process.stopping import send_once

    groups = {10: 10, 11: 10, 12: 99, 13: None}
    sent: list[tuple[str, int]] = []
    reached = send_once(set(groups), 10, 15, kill=lambda pid, sig: sent.append(("pid", pid)),
                        killpg=lambda pgid, sig: sent.append(("group", pgid)), group_of=groups.get)
    assert sent == [("group", 10), ("pid", 12)] and reached == (10, 11, 12)

    def gone(pgid: int, sig: int) -> None:
        raise ProcessLookupError(pgid)

    sent.clear()
    reached = send_once({10, 11}, 10, 15, kill=lambda pid, sig: sent.append(("pid", pid)), killpg=gone,
                        group_of=groups.get)
    assert sent == [("pid", 10), ("pid", 11)] and reached == (10, 11)
