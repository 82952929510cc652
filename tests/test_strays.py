"""The stray scan finds a run's processes by more than the process group: tree and token, the
port's listener, the GPU's compute processes; only strays proven ours are stopped."""

from __future__ import annotations

import json
import os
import subprocess
import textwrap

import pytest
from proc_helpers import HEALTH, PY, SERVER, leftovers, log_line
from run_helpers import free_port

from omnibench_core.process.processes import start_group
from omnibench_core.process.proctree import Tree, alive
from omnibench_core.process.strays import find_strays, stop_strays


@pytest.fixture
def free_port2() -> int:
    return free_port()


def _fake_compute_apps(folder, lines: list[str]):
    script = folder / "nvidia-smi"
    script.write_text(textwrap.dedent(f"""\
        #!{PY}
        import sys
        assert "--query-compute-apps=pid,used_memory" in sys.argv, sys.argv
        print({chr(10).join(lines)!r})
        """))
    script.chmod(0o755)
    return script


def test_strays_by_tree_port_and_gpu(tmp_path, port, free_port2):
    proc = start_group([PY, "-c", SERVER, str(port)], log_path=tmp_path / "server.log", env=dict(os.environ))
    kids = json.loads(log_line(tmp_path / "server.log", "ready ").split(" ", 1)[1])
    with open(tmp_path / "foreign.log", "wb") as out:
        foreign = subprocess.Popen([PY, "-c", HEALTH, str(free_port2)], stdout=out, stderr=subprocess.STDOUT)
    try:
        log_line(tmp_path / "foreign.log", "listening")
        smi = _fake_compute_apps(tmp_path, [f"{kids['daemon']}, 512", f"{foreign.pid}, [N/A]", "4194000, 100"])
        scan = find_strays(proc, port=port, gpus=["0"], nvidia_smi=str(smi))
        by_pid = {s.pid: s for s in scan.strays}
        assert set(by_pid[proc.pid].reasons) >= {"descendant", "group", "session", "token", f"port {port} listener"}
        assert set(by_pid[kids["escapee"]].reasons) == {"descendant", "token"}  # setsid: a new group and session
        assert "GPU compute (512 MiB)" in by_pid[kids["daemon"]].reasons
        assert by_pid[foreign.pid].reasons == ("GPU compute (? MiB)",) and not by_pid[foreign.pid].ours
        assert not by_pid[4194000].visible  # a pid of another namespace: reported, unknown
        assert os.getpid() not in by_pid

        # The port's listener is found for a port the program does not own, and is not ours.
        other = find_strays(None, port=free_port2).strays
        assert [(s.pid, s.ours) for s in other] == [(foreign.pid, False)]

        # After the watchdog is gone, the token still finds every process; only ours are stopped.
        proc.watchdog.kill()
        proc.popen.wait(600)
        scan = find_strays(Tree(pgid=proc.pgid, token=proc.token), port=free_port2, gpus=["0"], nvidia_smi=str(smi))
        assert {s.pid for s in scan.ours} == {kids["escapee"], kids["daemon"]}
        record = stop_strays(scan.strays, grace_s=5)
        assert record.how == "terminated"
        assert not leftovers(pids={kids["escapee"], kids["daemon"]}, pgid=proc.pgid, token=proc.token, port=port)
        assert foreign.poll() is None and alive(foreign.pid)
    finally:
        proc.stop(5)
        foreign.kill()
        foreign.wait()


def test_a_failing_nvidia_smi_is_a_note_not_an_error(tmp_path):
    scan = find_strays(None, gpus=["0"], nvidia_smi=str(tmp_path / "missing"))
    assert scan.strays == ()
    assert "was not found" in scan.notes[0]
