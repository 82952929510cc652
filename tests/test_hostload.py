"""The noise guard: a timed window's foreign CPU time, from /proc (scripted and real), and a real
run marked noisy by a CPU hog that is not part of it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from run_helpers import invoke_run_into

from omnibench_core.campaign.summary import noisy_runs
from omnibench_core.errors import SettingsError
from omnibench_core.settings import Settings
from omnibench_core.statuses import StepStatus
from omnibench_core.store import manifest as manifest_file
from omnibench_core.store.run_entries import StepEntry
from omnibench_core.telemetry import hostload


def _write_proc(root: Path, cpu_busy: dict[int, int], pids: dict[int, tuple[int, int]], load: float) -> None:
    """A scripted /proc: per-CPU busy ticks (as user time), processes (ppid, ticks), the load."""
    lines = ["cpu  0 0 0 0 0 0 0 0 0 0"]
    lines += [f"cpu{c} {busy} 0 0 1000 0 0 0 0 0 0" for c, busy in sorted(cpu_busy.items())]
    (root / "stat").write_text("\n".join(lines) + "\nintr 0\n")
    (root / "loadavg").write_text(f"{load} 0.5 0.5 1/100 42\n")
    for pid, (ppid, ticks) in pids.items():
        (root / str(pid)).mkdir(exist_ok=True)
        fields = ["S", str(ppid), str(pid), str(pid)] + ["0"] * 7 + [str(ticks), "0", "0", "0"] + ["0"] * 30
        (root / str(pid) / "stat").write_text(f"{pid} (some (odd) name) " + " ".join(fields) + "\n")


def test_foreign_time_is_the_slots_busy_time_less_the_runs_own(tmp_path):
    hz = hostload.clock_ticks()
    now = [100.0]
    _write_proc(tmp_path, {0: 0, 1: 0, 2: 0}, {10: (1, 0), 11: (10, 0), 99: (1, 0)}, 0.2)
    window = hostload.LoadWindow("seedtts.client", (0, 1), 0.10, root=10, proc=tmp_path, clock=lambda: now[0])
    # 2 s later: CPUs 0 and 1 were busy 3 CPU-s; the run's tree (10 and its child 11) used 1 CPU-s;
    # CPU 2 (not the slot's) and pid 99 (not the run's) do not count as the run's.
    now[0] += 2.0
    _write_proc(tmp_path, {0: 2 * hz, 1: 1 * hz, 2: 5 * hz}, {10: (1, hz // 2), 11: (10, hz // 2), 99: (1, 4 * hz)}, 2.5)
    load = window.close()
    assert load.busy_cpu_s == 3.0 and load.own_cpu_s == 1.0 and load.foreign_cpu_s == 2.0
    assert load.foreign_fraction == 0.5 and load.noisy  # 2 CPU-s of 4 possible
    assert (load.load_start, load.load_end) == (0.2, 2.5)
    record = load.as_record()
    assert record["noisy"] is True and record["cpus"] == [0, 1]
    assert hostload.noisy_windows([StepEntry("w.client", "generate", StepStatus.OK, host_load=record),
                                   StepEntry("w.check", "score", StepStatus.OK)]) == [load]
    assert "50% of the slot's CPU time went to other processes" in load.describe()


def test_a_quiet_window_is_not_noisy_and_foreign_time_never_goes_below_zero(tmp_path):
    hz = hostload.clock_ticks()
    now = [0.0]
    _write_proc(tmp_path, {0: 0}, {10: (1, 0)}, 0.1)
    window = hostload.LoadWindow("w", (0,), 0.10, root=10, proc=tmp_path, clock=lambda: now[0])
    now[0] = 1.0
    _write_proc(tmp_path, {0: hz // 2}, {10: (1, hz)}, 0.1)  # the run used more than the CPU's busy time
    load = window.close()
    assert load.foreign_cpu_s == 0.0 and not load.noisy


def test_a_reaped_childs_cpu_time_counts_as_the_runs(tmp_path):
    """Real /proc: a child that burns CPU and is reaped is still in the tree's time (cutime).

    Measured from a fresh process whose only child is the burner: the pytest worker's own tree
    also holds other tests' processes, whose time leaves the tree when one is re-parented."""
    probe = (
        "import os, subprocess, sys\n"
        "from omnibench_core.telemetry import hostload\n"
        "before = hostload.tree_ticks(os.getpid())\n"
        "burn = 'import time\\nt = time.process_time()\\nwhile time.process_time() - t < 0.3: pass\\n'\n"
        "subprocess.run([sys.executable, '-c', burn], check=True)\n"
        "print((hostload.tree_ticks(os.getpid()) - before) / hostload.clock_ticks())\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], check=True, capture_output=True, text=True)
    assert float(out.stdout) >= 0.25
    assert hostload.busy_ticks(()) > 0 and hostload.load_average() is not None


@pytest.mark.slow
def test_a_cpu_hog_outside_the_run_marks_its_timed_window_noisy(tmp_path):
    """The user's path: `invoke run` while two CPU hogs that are not the run's take every core."""
    hog = "while True: pass\n"
    hogs = [subprocess.Popen([sys.executable, "-c", hog], start_new_session=True) for _ in range(os.cpu_count() or 2)]
    try:
        time.sleep(0.5)
        done = invoke_run_into(tmp_path / "results", "selftest", extra=("--opt", "selftest.client_seconds=2"))
    finally:
        for p in hogs:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    assert done.returncode == 0, done.stdout + done.stderr
    run = next((tmp_path / "results").glob("*/run0"))
    steps = manifest_file.read(run).steps
    timed = [s for s in steps if s.host_load]
    assert [s.step for s in timed] == ["selftest.client"]  # only the timed window is watched
    assert timed[0].host_load["noisy"] is True and timed[0].host_load["foreign_fraction"] > 0.10
    assert "noisy window: selftest.client" in done.stdout
    assert noisy_runs([run]) and noisy_runs([run])[0].startswith("run0 was noisy: selftest.client")


def test_the_threshold_is_a_share_from_0_to_1():
    assert Settings.of(noise_max_foreign="0.25").run.noise_max_foreign == 0.25
    for bad in ("2", "-0.1", "nan"):
        with pytest.raises(SettingsError, match="noise_max_foreign"):
            Settings.of(noise_max_foreign=bad)


def test_a_proc_without_the_slots_cpus_is_unavailable_not_an_error(tmp_path):
    _write_proc(tmp_path, {0: 5}, {10: (1, 0)}, 0.1)
    window = hostload.LoadWindow("w", (7,), 0.10, root=10, proc=tmp_path)  # no cpu7 line
    assert window.close() is None and "no line for CPUs [7]" in window.unavailable
    broken = hostload.LoadWindow("w", (0,), 0.10, root=10, proc=tmp_path / "missing")
    assert broken.close() is None and "could not be read" in broken.unavailable


# One duet side for the test below: its window on its slot's CPU (its own tree, as a worker on
# disjoint slots counts it) and, beside it, the window the guard used to take (the whole duet's
# tree: the test process, as the driver). Between "open" and "burnt" its client, pinned to the
# slot's CPU, burns 0.4 CPU-s; it closes both windows when told, after both sides burnt.
SIDE = r'''
import json, os, subprocess, sys
from omnibench_core.telemetry import hostload
cpu, duet_root = int(sys.argv[1]), int(sys.argv[2])
side = hostload.LoadWindow("side", (cpu,), 0.10)
duet = hostload.LoadWindow("duet", (cpu,), 0.10, root=duet_root)
print("open", flush=True)
sys.stdin.readline()
burn = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.4: pass\n"
subprocess.run([sys.executable, "-c", burn], check=True, preexec_fn=lambda: os.sched_setaffinity(0, {cpu}))
print("burnt", flush=True)
sys.stdin.readline()
print(json.dumps({"root": side.root, "side": side.close().as_record(), "duet": duet.close().as_record()}), flush=True)
'''
# A hog outside every side's tree and the driver's: it forks, its parent exits (so the hog is
# re-parented away from the test process, the driver here), and it spins pinned to CPU 0.
HOG = r'''
import os, sys
if os.fork():
    os._exit(0)
os.sched_setaffinity(0, {0})
print(os.getpid(), flush=True)
os.dup2(os.open(os.devnull, os.O_WRONLY), 1)  # the starter's reader sees the end of its output
while True:
    pass
'''


def _tell_all(procs: list[subprocess.Popen[str]], line: str) -> None:
    for p in procs:
        assert p.stdin is not None
        p.stdin.write(line + "\n")
        p.stdin.flush()


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="two CPUs make two slots")
def test_a_hog_pinned_to_one_cpu_of_slot_0_is_slot_0s_noise_not_slot_1s():
    """Real processes, as a duet on two disjoint one-CPU slots runs them: each side's worker (its
    environment from the duet's worker_env) watches its slot's CPU while its pinned client burns;
    a hog that is neither side's is pinned to slot 0's CPU. Slot 0's window is noisy with at
    least the hog's CPU time as foreign; slot 1's foreign time has none of it and none of slot
    0's side. The old accounting (both sides' trees as each side's own) is measured beside it:
    it took the partner's burn as slot 0's own, so slot 0's foreign share lost it (and clipped)."""
    from omnibench_core.ab.duet import slots_share_cpus, worker_env

    cpus = sorted(os.sched_getaffinity(0))[:2]
    assert cpus == [0, 1] or pytest.skip("the hog is pinned to CPU 0")
    assert not slots_share_cpus((0,), (1,)) and slots_share_cpus((0, 1), (1, 2)) and slots_share_cpus((), (1,))
    env = worker_env(os.environ, os.getpid(), shared_cpus=False)
    assert hostload.ROOT_VAR not in env  # each side's own tree
    assert worker_env(os.environ, 4242, shared_cpus=True)[hostload.ROOT_VAR] == "4242"
    starter = subprocess.run([sys.executable, "-c", HOG], stdout=subprocess.PIPE, text=True, check=True, timeout=60)
    hog = int(starter.stdout)
    sides: list[subprocess.Popen[str]] = []
    try:
        sides = [subprocess.Popen([sys.executable, "-c", SIDE, str(cpu), str(os.getpid())], env=env, text=True,
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE) for cpu in cpus]
        assert [s.stdout.readline() for s in sides] == ["open\n"] * 2
        hog_before = hostload.tree_ticks(hog)
        _tell_all(sides, "go")
        assert [s.stdout.readline() for s in sides] == ["burnt\n"] * 2
        hog_s = (hostload.tree_ticks(hog) - hog_before) / hostload.clock_ticks()  # inside both windows
        # closed one after the other: a side that exits while slot 0 still reads its tree is a zombie
        # there, its burn in neither its own ticks nor yet its parent's (seen once in a whole run)
        out = []
        for side in sides:
            _tell_all([side], "close")
            out.append(json.loads(side.stdout.readline()))
    finally:
        os.kill(hog, signal.SIGKILL)
        for p in sides:
            p.kill()
            p.wait()
    slot0, slot1 = (o["side"] for o in out)
    assert [o["root"] for o in out] == [s.pid for s in sides]  # each side's own: its worker's tree
    tick = 2 / hostload.clock_ticks()  # /proc's counters move in ticks, twice read
    # The hog ran only on CPU 0, inside slot 0's window: all of it is slot 0's foreign time.
    assert hog_s > 0.05 and slot0["foreign_cpu_s"] >= hog_s - tick - 0.05, (hog_s, out)
    assert slot0["noisy"] is True and slot0["foreign_fraction"] > 0.10
    # Each side's own is its burn (0.4 CPU-s) and a little start-up, never its partner's too.
    assert all(0.4 - tick <= o["side"]["own_cpu_s"] < 0.75 for o in out), out
    # The bad case: the duet's tree as each side's own takes slot 1's burn off slot 0's busy time.
    assert out[0]["duet"]["own_cpu_s"] >= slot0["own_cpu_s"] + 0.4 - tick
    assert out[0]["duet"]["foreign_cpu_s"] <= max(slot0["foreign_cpu_s"] - 0.4 + 2 * tick, 0.0)
    # Slot 1's foreign time is its CPU's busy time less its side alone: the hog is not in it
    # (other tenants of this shared host may be, so its share is not asserted below 10 %).
    assert slot1["foreign_cpu_s"] == pytest.approx(max(slot1["busy_cpu_s"] - slot1["own_cpu_s"], 0.0), abs=0.002)
    assert slot1["busy_cpu_s"] >= slot1["own_cpu_s"] - tick - 0.05
