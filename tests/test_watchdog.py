"""No program outlives omnibench: the watchdog stops the whole tree when omnibench dies or asks,
a stop cannot be interrupted halfway, and setsid does not let a child escape.

Real processes throughout; what is left is checked by pid, process group, a /proc scan for the
program's token, and the port.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap

import pytest
from proc_helpers import PY, SERVER, leftovers, log_line, wait_for

from omnibench_core.process.processes import COVERAGE_VARS, start_group, watchdog_argv, watchdog_env
from omnibench_core.process.proctree import alive

# An owner: starts the server under a watchdog, says who is who, then waits to be killed.
OWNER = textwrap.dedent("""\
    import json, os, sys, time
    from pathlib import Path
    from omnibench_core.process.processes import start_group
    p = start_group(json.loads(sys.argv[1]), log_path=Path(sys.argv[2]), env=dict(os.environ), orphan_grace_s=1)
    print(json.dumps({"watchdog": p.watchdog.pid, "leader": p.pid, "token": p.token}), flush=True)
    time.sleep(600)
    """)

# An owner like the runner: the first signal interrupts the run, its `finally` stops the server.
OWNER_STOPPING = textwrap.dedent("""\
    import json, os, signal, sys, time
    from pathlib import Path
    from omnibench_core.errors import Terminated
    from omnibench_core.process.processes import start_group
    def on_term(signum, frame):
        raise Terminated()
    signal.signal(signal.SIGTERM, on_term)
    p = start_group(json.loads(sys.argv[1]), log_path=Path(sys.argv[2]), env=dict(os.environ))
    print(json.dumps({"leader": p.pid, "token": p.token}), flush=True)
    try:
        time.sleep(600)
    except (KeyboardInterrupt, Terminated):
        record = p.stop_tree(grace_s=120)
        print(json.dumps(record.as_dict()), flush=True)
    """)


def _server(port: int, *extra: str) -> list[str]:
    return [PY, "-c", SERVER, str(port), *extra]


def _start_owner(script: str, argv: list[str], log) -> tuple[subprocess.Popen[str], dict]:
    owner = subprocess.Popen([PY, "-c", script, json.dumps(argv), str(log)], stdout=subprocess.PIPE, text=True)
    facts = json.loads(owner.stdout.readline())
    return owner, facts


def test_a_sigkilled_owner_takes_the_whole_tree_with_it(tmp_path, port):
    log = tmp_path / "server.log"
    owner, facts = _start_owner(OWNER, _server(port), log)
    try:
        kids = json.loads(log_line(log, "ready ").split(" ", 1)[1])
        pids = {facts["watchdog"], facts["leader"], kids["escapee"], kids["daemon"]}
        assert all(alive(p) for p in pids)
        owner.kill()  # SIGKILL: no finally, no atexit; only the pipe's end of file tells the watchdog
        owner.wait(600)
        wait_for(lambda: not leftovers(pids=pids, pgid=facts["leader"], token=facts["token"], port=port),
                 what="the tree to end")
    finally:
        owner.kill()
        owner.stdout.close()


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_second_signal_cuts_the_grace_short_but_never_the_stop(tmp_path, port, sig):
    log = tmp_path / "server.log"
    owner, facts = _start_owner(OWNER_STOPPING, _server(port, "stubborn"), log)
    try:
        kids = json.loads(log_line(log, "ready ").split(" ", 1)[1])
        owner.send_signal(sig)  # the first: the run is interrupted and the stop (grace 120 s) begins
        log_line(log, "got SIGTERM")  # the stop is under way, and the server ignores it
        owner.send_signal(sig)  # the second, during the grace
        record = json.loads(owner.stdout.readline())
        assert owner.wait(600) == 0  # the stop finished and the owner went on normally
        assert record["how"] == "killed"
        assert record["shortened_by"] == sig.name
        kill = [s for s in record["signals"] if s["signal"] == "SIGKILL"]
        term = [s for s in record["signals"] if s["signal"] == "SIGTERM"]
        assert kill and term and kill[0]["at_s"] < term[0]["at_s"] + 120  # before the grace would have ended
        assert record["leftover"] == []
        pids = {facts["leader"], kids["escapee"], kids["daemon"]}
        assert not leftovers(pids=pids, pgid=facts["leader"], token=facts["token"], port=port)
    finally:
        owner.kill()
        owner.stdout.close()


def test_a_hurry_sent_with_the_stop_request_is_not_lost(tmp_path, port):
    proc = start_group(_server(port, "stubborn"), log_path=tmp_path / "server.log", env=dict(os.environ))
    log_line(tmp_path / "server.log", "ready ")
    proc.popen.send("stop 120\nkill")  # both in one write, as when a signal comes right after the stop began
    record = proc.stop_tree(grace_s=120)
    assert (record.how, record.shortened_by) == ("killed", "request")
    assert not leftovers(pids={proc.pid}, pgid=proc.pgid, token=proc.token, port=port)


def test_stop_ends_children_that_called_setsid(tmp_path, port):
    proc = start_group(_server(port), log_path=tmp_path / "server.log", env=dict(os.environ))
    kids = json.loads(log_line(tmp_path / "server.log", "ready ").split(" ", 1)[1])
    pids = {proc.pid, kids["escapee"], kids["daemon"]}
    assert pids <= proc.members()
    record = proc.stop_tree(grace_s=10)
    assert record.how == "terminated"
    assert record.exit_code == -signal.SIGTERM
    assert set(record.signals[0].pids) >= pids
    assert not leftovers(pids=pids | {proc.watchdog.pid}, pgid=proc.pgid, token=proc.token, port=port)
    assert proc.stop_tree(grace_s=10).how == "exited"  # a second stop finds nothing


def test_a_sigkilled_watchdog_takes_the_leader_and_the_owner_stops_the_rest(tmp_path, port):
    proc = start_group(_server(port), log_path=tmp_path / "server.log", env=dict(os.environ))
    kids = json.loads(log_line(tmp_path / "server.log", "ready ").split(" ", 1)[1])
    proc.watchdog.kill()
    assert proc.popen.wait(600) == -signal.SIGKILL  # PR_SET_PDEATHSIG
    record = proc.stop_tree(grace_s=10)  # escapee and daemon are found by their token
    assert record.by == "owner"
    assert record.how == "terminated"
    assert "watchdog was gone" in record.notes[0]
    pids = {proc.pid, kids["escapee"], kids["daemon"]}
    assert not leftovers(pids=pids, pgid=proc.pgid, token=proc.token, port=port)


def test_exit_code_and_start_errors_are_the_programs(tmp_path):
    proc = start_group([PY, "-c", "raise SystemExit(7)"], log_path=tmp_path / "log", env=dict(os.environ))
    assert proc.popen.wait(600) == 7
    assert proc.exited() == 7
    record = proc.stop_tree(1)
    assert (record.how, record.exit_code) == ("exited", 7)
    with pytest.raises(subprocess.TimeoutExpired):
        start_group([PY, "-c", "import time; time.sleep(60)"], log_path=tmp_path / "log2",
                    env=dict(os.environ)).popen.wait(0.2)
    with pytest.raises(FileNotFoundError):
        start_group([str(tmp_path / "no-such-program")], log_path=tmp_path / "log3", env={})
    with pytest.raises(FileNotFoundError):
        start_group([PY, "-c", "pass"], log_path=tmp_path / "log4", env={}, cwd=str(tmp_path / "no-such-dir"))


def test_the_program_does_not_inherit_omnibench_pipes_or_ignored_signals(tmp_path):
    check = ("import os, signal; print(sorted(int(f) for f in os.listdir('/proc/self/fd')) , "
             "signal.getsignal(signal.SIGINT) is signal.default_int_handler)")
    proc = start_group([PY, "-c", check], log_path=tmp_path / "log", env=dict(os.environ))
    assert proc.popen.wait(600) == 0
    fds, default_sigint = (tmp_path / "log").read_text().strip().rsplit(" ", 1)
    assert fds == "[0, 1, 2, 3]"  # stdin, the log twice, and listdir's own fd
    assert default_sigint == "True"
    proc.stop(1)


def test_the_watchdog_is_not_reached_by_ctrl_c_on_the_terminal(tmp_path):
    proc = start_group([PY, "-c", "import time; time.sleep(60)"], log_path=tmp_path / "log", env=dict(os.environ))
    assert os.getpgid(proc.watchdog.pid) != os.getpgid(0)
    assert os.getpgid(proc.pid) not in (os.getpgid(0), proc.watchdog.pid)
    assert proc.stop(5) == "terminated"


if sys.platform != "linux":  # prctl and /proc
    pytestmark = pytest.mark.skip("Linux only")


def test_the_watchdogs_environment_imports_this_omnibench_without_site_packages():
    """The watchdog runs from "/" with the package root first on PYTHONPATH: with -S (no
    site-packages, no installed finder) that alone imports this very omnibench_core's watchdog, so
    an uninstalled tree starts one too (855e5ac's fix). The product runs it so (watchdog_argv), but
    with site where coverage.py's subprocess hook must reach it."""
    import omnibench_core

    env = {k: v for k, v in watchdog_env(os.environ).items() if k != "PYTHONHOME"}
    done = subprocess.run([sys.executable, "-S", "-c", "import omnibench_core.process.watchdog as w; print(w.__file__)"],
                          env=env, cwd="/", capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    here = os.path.dirname(omnibench_core.__file__)
    assert done.stdout.strip() == os.path.join(here, "process", "watchdog.py")


def test_the_watchdog_starts_without_site_unless_coverage_measures_subprocesses():
    """-S spares each watchdog the site's .pth files and the installed finder; coverage.py's hook is
    such a file, so where its variables are set the watchdog keeps site and is measured."""
    argv = watchdog_argv("py", 5, 6, {})
    assert argv == ["py", "-S", "-m", "omnibench_core.process.watchdog", "--ctl", "5", "--report", "6"]
    for var in COVERAGE_VARS:
        assert "-S" not in watchdog_argv("py", 5, 6, {var: "/x/.coveragerc"})
    assert "-S" in watchdog_argv("py", 5, 6, {COVERAGE_VARS[0]: ""})  # set but empty: the hook does nothing


@pytest.mark.parametrize("args", [[], ["--ctl", "5"], ["--ctl", "5", "--report", "x"], ["--ctl", "5", "--ctl", "6"],
                                  ["--report", "6", "--ctl", "5", "--extra", "1"]])
def test_a_watchdog_started_wrongly_prints_its_usage_and_exits_2(args):
    # the product's command line up to its two flags (-S, or site where coverage.py measures it)
    start = watchdog_argv(sys.executable, 0, 0, os.environ)[:-4]
    done = subprocess.run([*start, *args], env=watchdog_env(os.environ), cwd="/", capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 2 and done.stderr.startswith("usage: python -m omnibench_core.process.watchdog"), done
