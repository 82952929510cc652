"""The noise guard: a timed window's foreign CPU time, from /proc (scripted and real), and a real
run marked noisy by a CPU hog that is not part of it."""

from __future__ import annotations

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
