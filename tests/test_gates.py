"""Gates on their own: health parsing, RUN_READY, GPU_FREE with a fake nvidia-smi."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
import time

import pytest
from gpu_helpers import fake_calls, write_fake_nvidia_smi
from proc_helpers import HEALTH, PY, leftovers, log_line, wait_for

from omnibench_core.errors import (
    ForeignListener,
    GpuNotFree,
    GpuQueryError,
    GpuQueryTimeout,
    RunNotReady,
    ServerDied,
    ServerNotReady,
)
from omnibench_core.process.processes import start_group
from omnibench_core.process.proctree import alive, cmdline, snapshot
from omnibench_core.run import gates


@pytest.mark.parametrize(
    ("code", "body", "healthy"),
    [
        (200, '{"status": "healthy"}', True),
        (200, '{"status": "unhealthy"}', False),
        (503, '{"status": "unhealthy"}', False),
        (503, '{"status": "healthy"}', False),
        (200, "healthy", True),
        (200, "ok", False),
        (200, "the server is unhealthy", False),
        (200, '{"ok": true, "detail": "healthy"}', True),
    ],
)
def test_is_healthy(code, body, healthy):
    assert gates.is_healthy(code, body) is healthy


def test_run_ready_refuses_an_existing_run_dir(tmp_path, port):
    run = tmp_path / "run0"
    run.mkdir()
    with pytest.raises(RunNotReady, match="exists already") as err:
        gates.check_run_ready(run, port)
    assert err.value.gate == "RUN_READY"


def test_run_ready_names_the_port_holder(tmp_path):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        with pytest.raises(RunNotReady) as err:
            gates.check_run_ready(tmp_path / "run0", port)
        assert err.value.evidence["held by"].startswith("pid ")
    assert gates.check_run_ready(tmp_path / "run0", port).status == "passed"


def test_wait_ready_notices_a_dead_server(tmp_path, port):
    proc = start_group([sys.executable, "-c", "print('boom: bad flag'); raise SystemExit(7)"],
                       log_path=tmp_path / "s.log", env={"PATH": "/usr/bin:/bin"})
    with pytest.raises(ServerDied) as err:
        gates.wait_ready(proc, f"http://127.0.0.1:{port}/health", timeout_s=600, interval_s=0.01)
    assert "exited with code 7" in str(err.value)
    assert "boom: bad flag" in err.value.evidence["log tail"]


def test_wait_ready_times_out_with_the_last_answer(tmp_path, port):
    proc = start_group([sys.executable, "-c", "import time; time.sleep(60)"], log_path=tmp_path / "s.log", env={})
    ticks = iter(range(1000))
    try:
        with pytest.raises(ServerNotReady) as err:
            gates.wait_ready(proc, f"http://127.0.0.1:{port}/health", timeout_s=3, interval_s=0.0,
                             clock=lambda: float(next(ticks)))
        assert "ConnectionRefusedError" in err.value.evidence["last answer"]
    finally:
        proc.stop(1)


def test_wait_ready_times_out_with_a_never_healthy_servers_answer(tmp_path, port):
    """A server that listens but answers 503 forever: the error quotes that answer, not a refusal."""
    log = tmp_path / "s.log"
    proc = start_group([PY, "-m", "omnibench_core.builtin.selftest_programs", "serve", "--port", str(port),
                        "--delay", "0", "--never-healthy"], log_path=log, env=dict(os.environ))
    ticks = iter(range(1000))
    try:
        log_line(log, "serving on")  # the port is bound: every look from now on gets an answer
        with pytest.raises(ServerNotReady) as err:
            gates.wait_ready(proc, f"http://127.0.0.1:{port}/health", timeout_s=3, interval_s=0.0,
                             clock=lambda: float(next(ticks)))
        last = err.value.evidence["last answer"]
        assert last.startswith("HTTP 503") and "unhealthy" in last, last
    finally:
        proc.stop(1)


def test_gpu_free_polls_until_every_gpu_is_below_threshold(tmp_path):
    smi = write_fake_nvidia_smi(tmp_path, [9000, 4000, 1024, 1023])
    record = gates.wait_gpu_free(["0", "1"], nvidia_smi=str(smi), interval_s=0, timeout_s=60)
    assert record.status == "passed"
    calls = fake_calls(tmp_path)
    assert len(calls) == 4  # 1024 is not below 1024
    assert calls[0] == ["-i", "0,1", "--query-gpu=memory.used", "--format=csv,noheader,nounits"]


def test_gpu_free_times_out_with_evidence(tmp_path):
    smi = write_fake_nvidia_smi(tmp_path, [80000])
    ticks = iter(range(1000))
    with pytest.raises(GpuNotFree) as err:
        gates.wait_gpu_free(["3"], nvidia_smi=str(smi), interval_s=0, timeout_s=5, clock=lambda: float(next(ticks)))
    assert err.value.evidence["memory.used MiB"] == '{"3": 80000}'
    assert err.value.gate == "GPU_FREE"


def test_gpu_free_names_who_holds_the_gpu_at_least_every_ten_seconds_and_in_its_failure(tmp_path):
    """A tenant (pid 4242, 2048 MiB; this test's own pid too, so its command line is known) holds
    the GPU past the deadline: the wait says who every 10 s of its clock, and the error names them."""
    smi = write_fake_nvidia_smi(tmp_path, [80000], apps=[(4242, 2048), (os.getpid(), 512)])
    ticks = iter(range(10_000))  # a second each time the gate reads its clock (a few times a look)
    said: list[str] = []
    with pytest.raises(GpuNotFree) as err:
        gates.wait_gpu_free(["0"], nvidia_smi=str(smi), interval_s=0, timeout_s=60, progress=said.append,
                            clock=lambda: float(next(ticks)))
    assert len(said) >= 4 and all("held by pid 4242 (not visible here) 2048 MiB" in line for line in said), said
    waited = [0] + [int(line.split("waiting ")[1].split(" s")[0]) for line in said]
    assert max(b - a for a, b in zip(waited, waited[1:], strict=False)) <= 10 + 5  # 10 s, and one look's clock reads
    mine = open(f"/proc/{os.getpid()}/cmdline", "rb").read().replace(b"\0", b" ").decode().strip()[:200]
    assert all(f"pid {os.getpid()} ({mine}) 512 MiB" in line for line in said)
    assert said[0].startswith("GPU_FREE: waiting ") and '{"0": 80000}' in said[0]
    assert "pid 4242 (not visible here) 2048 MiB" in err.value.evidence["held by"]


def test_an_ab_attempt_ended_by_gpu_free_names_the_holder_as_the_runs_error_does(tmp_path):
    """`invoke ab` keeps one line per attempt (its record, its final error's "attempts"): a duet
    side's report and an interleaved attempt both carry GPU_FREE's "held by", not its message alone."""
    from omnibench_core.ab.worker import _failure
    from omnibench_core.campaign.attempt import ended_by
    from omnibench_core.statuses import AttemptStatus, SideStatus

    smi = write_fake_nvidia_smi(tmp_path, [80000], apps=[(4242, 2048)])
    ticks = iter(range(10_000))
    with pytest.raises(GpuNotFree) as err:
        gates.wait_gpu_free(["0"], nvidia_smi=str(smi), interval_s=0, timeout_s=5, clock=lambda: float(next(ticks)))
    holder = "pid 4242 (not visible here) 2048 MiB"
    assert holder not in err.value.message and holder in str(err.value)  # the run's error names it
    side = _failure(SideStatus.FAILED, err.value)
    assert side.error.startswith(err.value.message) and f"held by {holder}" in side.error
    assert f"held by {holder}" in ended_by(err.value, AttemptStatus.FAILED, 1.0).error


def test_gpu_free_reports_a_failing_nvidia_smi(tmp_path):
    smi = write_fake_nvidia_smi(tmp_path, [0], fail=True)
    with pytest.raises(GpuQueryError) as err:
        gates.wait_gpu_free(["0"], nvidia_smi=str(smi), interval_s=0)
    assert "couldn't communicate" in err.value.evidence["output"]


def test_gpu_free_reports_a_missing_nvidia_smi(tmp_path):
    with pytest.raises(GpuQueryError, match="was not found"):
        gates.wait_gpu_free(["0"], nvidia_smi=str(tmp_path / "nope"), interval_s=0)


TRICKLING_HEALTH = textwrap.dedent("""\
    import socket, sys, time
    listener = socket.create_server(("127.0.0.1", int(sys.argv[1])))
    print("listening", flush=True)
    while True:
        conn, _ = listener.accept()
        conn.recv(65536)
        answer = b"HTTP/1.0 200 OK\\r\\nContent-Length: 2007\\r\\n\\r\\nhealthy" + b" " * 2000
        try:
            for i in range(len(answer)):  # a byte every 50 ms: each read is quick, the whole takes 100 s
                conn.sendall(answer[i:i + 1])
                time.sleep(0.05)
        except OSError:  # READY hung up
            pass
        conn.close()
    """)


def test_ready_holds_its_deadline_against_a_server_that_answers_a_byte_at_a_time(tmp_path, port):
    """Issue 46: /health answered `healthy` a byte every 50 ms. Each probe is one call bounded in
    all by the time READY has left (run/http_get.py), so READY fails at its deadline saying the
    answer never came whole; with a timeout per read (requests') the first probe took 100 s and
    passed."""
    log = tmp_path / "s.log"
    proc = start_group([PY, "-c", TRICKLING_HEALTH, str(port)], log_path=log, env=dict(os.environ))
    try:
        log_line(log, "listening")
        with pytest.raises(ServerNotReady) as err:
            gates.wait_ready(proc, f"http://127.0.0.1:{port}/health", timeout_s=2, interval_s=0.05)
        assert err.value.evidence["last answer"].startswith("no whole answer within"), err.value.evidence
    finally:
        proc.stop(1)


def test_gpu_free_does_not_apply_without_gpus():
    record = gates.wait_gpu_free([], nvidia_smi="/nonexistent")
    assert record.status == "not_applicable"


# -- READY trusts only our server ------------------------------------------------------------

def _foreign_health_server(port: int, log) -> subprocess.Popen[bytes]:
    with open(log, "wb") as out:
        foreign = subprocess.Popen([PY, "-c", HEALTH, str(port)], stdout=out, stderr=subprocess.STDOUT)
    log_line(log, "listening")
    return foreign


def test_ready_refuses_a_foreign_listener_and_leaves_it_alone(tmp_path, port):
    # Our "server" is still loading (it never binds); someone else answers /health on its port.
    ours = start_group([PY, "-c", "print('loading', flush=True); import time; time.sleep(600)"],
                       log_path=tmp_path / "s.log", env=dict(os.environ))
    foreign = _foreign_health_server(port, tmp_path / "foreign.log")
    try:
        with pytest.raises(ForeignListener) as err:
            gates.wait_ready(ours, f"http://127.0.0.1:{port}/health", timeout_s=600, interval_s=0.02)
        assert err.value.gate == "READY"
        assert err.value.evidence["foreign pids"] == str(foreign.pid)
        assert err.value.evidence["foreign listener"].startswith(f"pid {foreign.pid} (")
        assert HEALTH.strip()[:20] in err.value.evidence["foreign listener"]
        assert ours.stop(5) == "terminated"
        assert foreign.poll() is None  # reported, never touched
        # The check can be turned off (a server on another host): then the answer is taken.
        again = start_group([PY, "-c", "import time; time.sleep(600)"], log_path=tmp_path / "s2.log",
                            env=dict(os.environ))
        record = gates.wait_ready(again, f"http://127.0.0.1:{port}/health", timeout_s=600, check_listener=False)
        assert record.status == "passed"
        again.stop(5)
        assert foreign.poll() is None
    finally:
        ours.stop(5)
        foreign.kill()
        foreign.wait()


def test_ready_names_a_listener_on_another_address_of_the_port_while_its_probe_is_refused(tmp_path, port):
    """The probe to 127.0.0.1 is refused while a process holds 127.0.0.2 on the same port: the
    tables are read once a second then (issue 40), and that listener is still named."""
    ours = start_group([PY, "-c", "import time; time.sleep(600)"], log_path=tmp_path / "s.log", env=dict(os.environ))
    try:
        with socket.socket() as other:
            other.bind(("127.0.0.2", port))
            other.listen()
            with pytest.raises(ForeignListener) as err:
                gates.wait_ready(ours, f"http://127.0.0.1:{port}/health", timeout_s=600, interval_s=0.02)
        assert err.value.evidence["foreign pids"] == str(os.getpid())
    finally:
        ours.stop(5)


def test_ready_reads_the_listener_tables_about_once_a_second_while_refused(tmp_path, port, monkeypatch):
    """A server still loading (its port closed) is polled every 20 ms; the /proc/net/tcp{,6}
    tables, 10 ms of kernel time a read on a busy host, are read about once a second (they
    were read at every poll: issue 40)."""
    reads: list[int] = []
    real = gates.listener_inodes
    monkeypatch.setattr(gates, "listener_inodes", lambda *args: reads.append(1) or real(*args))
    ours = start_group([PY, "-c", "import time; time.sleep(600)"], log_path=tmp_path / "s.log", env=dict(os.environ))
    try:
        start = time.monotonic()
        with pytest.raises(ServerNotReady):
            gates.wait_ready(ours, f"http://127.0.0.1:{port}/health", timeout_s=1.5, interval_s=0.02)
        took = time.monotonic() - start  # past 1.5 s on a loaded host: the bound follows it
    finally:
        ours.stop(5)
    assert 1 <= len(reads) <= took / gates.REFUSED_LOOK_S + 1, (reads, took)


def test_ready_accepts_a_listener_that_is_a_setsid_descendant(tmp_path, port):
    # The leader hands serving to a child that leaves its session: still ours.
    leader = textwrap.dedent(f"""\
        import subprocess, sys, time
        subprocess.Popen([sys.executable, "-c", "import os; os.setsid(); exec(open({str(tmp_path / 'health.py')!r}).read())",
                          "{port}"])
        time.sleep(600)
        """)
    (tmp_path / "health.py").write_text(HEALTH)
    proc = start_group([PY, "-c", leader], log_path=tmp_path / "s.log", env=dict(os.environ))
    try:
        record = gates.wait_ready(proc, f"http://127.0.0.1:{port}/health", timeout_s=600, interval_s=0.02)
        assert record.status == "passed"
        assert "checked" in record.evidence["listener"]
    finally:
        proc.stop(5)
    assert not leftovers(pids={proc.pid}, pgid=proc.pgid, token=proc.token, port=port)


# -- GPU_FREE holds its deadline when nvidia-smi hangs -------------------------------------------

def _hanging_nvidia_smi(folder, hang_calls: int = 10**6):
    """A fake nvidia-smi that, for its first ``hang_calls`` calls, starts a sleeping helper, notes
    both pids in pids.<pid> and sleeps; later calls answer 0 MiB."""
    script = folder / "nvidia-smi"
    script.write_text(textwrap.dedent(f"""\
        #!{PY}
        import os, pathlib, subprocess, sys, time
        here = pathlib.Path(__file__).parent
        calls = here / "calls"
        with calls.open("a") as f:
            f.write("call\\n")
        if len(calls.read_text().splitlines()) > {hang_calls}:
            print(0)
            sys.exit(0)
        helper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
        (here / f"pids.{{os.getpid()}}").write_text(f"{{os.getpid()}} {{helper.pid}}")
        time.sleep(600)
        """))
    script.chmod(0o755)
    return script


def _hung_pids(folder) -> set[int]:
    return {int(p) for f in folder.glob("pids.*") for p in f.read_text().split()}


@pytest.mark.slow
def test_gpu_free_holds_its_deadline_when_nvidia_smi_hangs(tmp_path):
    smi = _hanging_nvidia_smi(tmp_path)
    with pytest.raises(GpuQueryTimeout) as err:  # returned at all: the call (600 s asleep) was cut
        gates.wait_gpu_free(["0"], nvidia_smi=str(smi), timeout_s=2, interval_s=0.1)
    assert err.value.gate == "GPU_FREE"
    assert int(err.value.evidence["hung calls"]) >= 1
    assert err.value.evidence["last memory.used MiB"] == "never answered"
    hung = _hung_pids(tmp_path)
    assert hung, "the fake nvidia-smi never got to start its helper"
    wait_for(lambda: not any(alive(p) for p in hung), what="the hung calls to end")
    assert not [p for p in snapshot() if str(smi) in cmdline(p)]  # process scan: nothing of it left


@pytest.mark.slow
def test_gpu_free_retries_a_hung_call_and_passes(tmp_path):
    smi = _hanging_nvidia_smi(tmp_path, hang_calls=1)
    # 10 s a call: the first (which sleeps 600 s) is cut then; the second, a Python start, answers
    # well within it even on a loaded host
    record = gates.wait_gpu_free(["0"], nvidia_smi=str(smi), timeout_s=600, interval_s=0, call_timeout_s=10)
    assert record.status == "passed"
    assert record.evidence["hung nvidia-smi calls"] == "1"
    hung = _hung_pids(tmp_path)
    wait_for(lambda: not any(alive(p) for p in hung), what="the hung call to end")


@pytest.mark.slow
def test_gpu_free_judges_by_the_last_answer_when_later_calls_hang(tmp_path):
    """nvidia-smi answers 50000 MiB once, then hangs: at the deadline the GPU is not free (what the
    last answer said), the hangs counted, not "hung until the deadline" (that is for no answer)."""
    smi = tmp_path / "nvidia-smi"
    smi.write_text(textwrap.dedent(f"""\
        #!{PY}
        import pathlib, time
        calls = pathlib.Path(__file__).with_name("calls")
        first = not calls.exists()
        calls.write_text("called")
        if first:
            print(50000)
        else:
            time.sleep(600)
        """))
    smi.chmod(0o755)
    ticks = iter(range(10_000))
    with pytest.raises(GpuNotFree) as err:
        # 10 s a call: the first answer is a Python start, which a loaded host may take seconds for
        gates.wait_gpu_free(["0"], nvidia_smi=str(smi), timeout_s=3, interval_s=0, call_timeout_s=10,
                            clock=lambda: float(next(ticks)), holders=lambda: "nobody")
    assert err.value.evidence["memory.used MiB"] == '{"0": 50000}'
    assert err.value.evidence["hung nvidia-smi calls"].endswith("(the last one too)")
    assert "nvidia-smi also hung" in err.value.hint
    wait_for(lambda: not [p for p in snapshot() if str(smi) in cmdline(p)], what="the hung calls to end")


@pytest.mark.slow
def test_gpu_free_calls_nvidia_smi_hung_when_it_hangs_twice_after_its_answer(tmp_path):
    """One answer, then every call hangs: more than the one call a deadline cuts short, so the
    answer is stale and the gate says nvidia-smi hung, quoting that answer."""
    smi = tmp_path / "nvidia-smi"
    smi.write_text("#!/bin/sh\n[ -e \"$0.called\" ] && exec sleep 600\ntouch \"$0.called\"\necho 50000\n")
    smi.chmod(0o755)
    ticks = iter(range(10_000))
    with pytest.raises(GpuQueryTimeout) as err:  # sh answers in ms; 3 s a call still leaves a loaded host room
        gates.wait_gpu_free(["0"], nvidia_smi=str(smi), timeout_s=8, interval_s=0, call_timeout_s=3,
                            clock=lambda: float(next(ticks)), holders=lambda: "nobody")
    assert int(err.value.evidence["hung calls"]) >= 2
    assert err.value.evidence["last memory.used MiB"] == '{"0": 50000}'
    wait_for(lambda: not [p for p in snapshot() if str(smi) in cmdline(p)], what="the hung calls to end")


def test_a_refused_first_run_leaves_no_empty_revision_folder(invoke, tmp_path, port):
    """`invoke run --port P` on a port another program listens on is refused (RUN_READY) before
    anything runs, and leaves neither its runN nor an empty results/local-<commit> behind."""
    with socket.socket() as holder:
        holder.bind(("0.0.0.0", port))
        holder.listen()
        done = invoke("run", "--workload", "selftest", "--port", str(port))
    assert done.returncode == 1 and f"port {port}" in done.stderr, done.stdout + done.stderr
    results = tmp_path / "results"
    assert not results.exists() or list(results.iterdir()) == [], list(results.rglob("*"))
