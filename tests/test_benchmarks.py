"""Every benchmark script runs, in its short form, so a change that breaks one fails the suite (issue
17: bench_campaign.py had been ending in a TypeError). No figure is asserted: a smoke run's
timings mean nothing. The local benchmarks take ``--smoke`` (tiny sizes); the real-GPU checks take
``--dry-run``: their whole wiring (holder, gates, stops, scans, report) against the fake
``nvidia-smi`` of benchmarks/dry_gpu.py and the tests' scripted NVML (tests/fake_nvml.py)."""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import socket
import subprocess
import sys
import types
from pathlib import Path

import pytest
from proc_helpers import wait_for
from run_helpers import REPO, free_port

from omnibench_core.process.ports import ephemeral_low, port_in_use

BENCH = REPO / "benchmarks"
HELPERS = {"dry_gpu.py", "gpu_hold.py", "bench_ports.py"}  # run by the checks below (gpu_hold.py --dry-run by the gate and
# watchdog checks; bench_ports.py by the benchmarks that start servers, and tested below)


def _module(script: str) -> types.ModuleType:
    """benchmarks/<script> imported (its main() not run): for its pure parts, what a smoke run leaves out."""
    spec = importlib.util.spec_from_file_location(f"bench_{Path(script).stem}", BENCH / script)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def _run(script: str, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """The script as its docstring shows it: ``python benchmarks/<script> ...`` from the repository root."""
    done = subprocess.run([sys.executable, str(BENCH / script), *args], cwd=REPO, capture_output=True, text=True,
                          timeout=timeout)
    assert done.returncode == 0, f"{script} exited {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


@pytest.mark.slow
def test_bench_campaign_smoke_runs_both_scorings():
    done = _run("bench_campaign.py", "--smoke")
    rows = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert [(r["scoring"], r["server_starts"], r["runs"]) for r in rows] == [("per-run", 6, 3), ("deferred", 4, 3)]


@pytest.mark.slow  # 2 to 6 s in the fast tier (issue 40: that tier within a minute)
def test_bench_proc_scan_times_both_scans_and_a_capture():
    done = _run("bench_proc_scan.py")  # as docs/performance.md shows it: a second's work
    assert "scan, every environment read" in done.stdout and "ratio" in done.stdout and "capture of" in done.stdout


@pytest.mark.slow
def test_bench_watchdog_start_times_each_way():
    done = _run("bench_watchdog_start.py")  # as docs/performance.md shows it: 120 starts
    assert "watchdog with -S" in done.stdout and "ratio, site / -S" in done.stdout


@pytest.mark.slow
def test_bench_recogniser_decodes_both_ways():
    done = _run("bench_recogniser.py", "--sentences", "2", "--repeat", "1")
    assert "pocketsphinx's defaults" in done.stdout and "ratio, defaults / omnibench's" in done.stdout


@pytest.mark.slow  # 2 to 6 s in the fast tier (issue 40: that tier within a minute)
def test_bench_revision_check_times_both_ways_and_they_agree():
    done = _run("bench_revision_check.py")  # as docs/performance.md shows it: 300 git calls, about 1 CPU-s
    assert "one call, status v2" in done.stdout and "ratio, before / one call" in done.stdout, done.stderr


@pytest.mark.slow
def test_bench_synth_start_loads_both_ways():
    done = _run("bench_synth_start.py", "--repeat", "1")  # docs/performance.md: 6 (1 is the wiring)
    assert "one voice, shared" in done.stdout and "ratio of the loads, before / shared" in done.stdout
    assert "False" not in done.stdout  # both ways say what a serial synthesis says


@pytest.mark.slow
def test_bench_gates_smoke_times_both_gates():
    done = _run("bench_gates.py", "--smoke")
    assert "READY" in done.stdout and "GPU_FREE (fake)" in done.stdout and "round 1/1" in done.stdout


@pytest.mark.slow
def test_bench_seedtts_smoke_runs_both_clients_and_the_collection_check():
    done = _run("bench_seedtts.py", "--smoke")
    assert all(f"concurrency {c}: asyncio" in done.stdout for c in (1, 16, 64, 256))
    assert "runbook loop s" in done.stdout


@pytest.mark.slow
def test_bench_matrix_smoke_runs_both_arms(tmp_path):
    out = tmp_path / "bench.json"
    _run("bench_matrix.py", "--smoke", "--out", str(out))
    figures = json.loads(out.read_text())
    assert figures["campaigns"] == 1 and figures["one_after_another_s"] > 0 and figures["matrix_2_slots_s"] > 0


@pytest.mark.slow
def test_bench_venv_reuse_smoke_times_a_build_and_a_relocated_copy(tmp_path):
    out = tmp_path / "bench.json"
    _run("bench_venv_reuse.py", "--smoke", "--out", str(out))
    figures = json.loads(out.read_text())
    assert figures["rounds"] == 1 and set(figures["median_s"]) == {"built", "copied", "prove"}


@pytest.mark.slow
def test_gpu_gate_check_dry_run_fails_while_held_and_passes_after_the_stop():
    done = _run("gpu_gate_check.py", "--dry-run")
    assert "GPU gate check: OK" in done.stdout and '"type": "GpuNotFree"' in done.stdout


@pytest.mark.slow
def test_gpu_watchdog_check_dry_run_finds_the_escaped_child_and_the_watchdog_stops_all():
    done = _run("gpu_watchdog_check.py", "--dry-run")
    assert "WATCHDOG_GPU_CHECK OK" in done.stdout


@pytest.mark.slow
def test_gpu_telemetry_check_dry_run_samples_every_phase(tmp_path):
    _run("gpu_telemetry_check.py", "--dry-run", "--out", str(tmp_path), "--idle-s", "0.3", "--busy-s", "0.6")
    report = json.loads((tmp_path / "telemetry_check.json").read_text())
    assert report["samples"] > 0 and set(report["phases"]) == {"idle", "busy", "idle2"}


def test_nvml_call_cost_dry_run_times_every_reading():
    done = _run("nvml_call_cost.py", "--dry-run", "--calls", "3")
    assert [line.split()[0] for line in done.stdout.splitlines()] == [
        "util", "mem", "power", "sm", "memclk", "temp", "reasons", "energy", "procs"]


@pytest.mark.slow  # 2 to 6 s in the fast tier (issue 40: that tier within a minute)
def test_nvml_process_util_check_dry_run_reads_both_tenants():
    done = _run("nvml_process_util_check.py", "--dry-run", "--seconds", "1.5")
    line = next(line for line in done.stdout.splitlines() if " dev " in line)  # the first second's readings
    assert "since [(" in line and ", 100, 33, " in line and "acct [(" in line  # the computing one's sample


@pytest.mark.slow
def test_gpu_matrix_check_dry_run_completes_its_campaigns(tmp_path):
    out = tmp_path / "gpu-matrix.json"
    # two commits, a campaign a slot (issue 40: a third campaign waiting for a slot is the engine's, shown in
    # its own tests, and the full check's default, 20,20,80, on the GPUs)
    _run("gpu_matrix_check.py", "--dry-run", "--mode", "matrix", "--runs", "2", "--requests", "1", "--delays-ms", "20,80",
         "--out", str(out), "--port", str(free_port()))
    report = json.loads(out.read_text())
    for bad in ("20", "20,x", "20,nan", "20,-5"):  # a bad --delays-ms is refused before anything starts
        refused = subprocess.run([sys.executable, str(BENCH / "gpu_matrix_check.py"), "--dry-run", "--delays-ms", bad,
                                  "--out", str(tmp_path / "x.json")], cwd=REPO, capture_output=True, text=True)
        assert refused.returncode == 2 and "--delays-ms" in refused.stderr and "Traceback" not in refused.stderr, bad
    campaigns = report["matrix"]["campaigns"]
    assert [c["status"] for c in campaigns] == ["complete"] * 2, [(c["revision"], c["status"], c["error"]) for c in campaigns]
    assert sorted(c["slot"]["gpus"] for c in campaigns) == [["0"], ["1"]] and campaigns[1]["verdicts"]  # against the first
    assert all(r["gpu_free_status"] and set(r["gpu_free_status"]) == {"passed"}  # GPU_FREE after each server stop
               for c in campaigns for r in c["runs"].values())
    assert report["apps_at_end"] == []  # nothing left on the (fake) GPUs


@pytest.mark.slow  # 2 to 6 s in the fast tier (issue 40: that tier within a minute)
def test_bench_boundary_smoke_prints_each_rule_with_its_false_alarms():
    done = _run("bench_boundary.py", "--max-rounds", "8", "--sd", "0.06", "--reps", "200")
    rows = [line for line in done.stdout.splitlines() if line.startswith("sd 0.06  N  8")]
    assert rows and any("(the rule)" in line for line in rows) and all("false alarms" in line for line in rows)


@pytest.mark.slow  # about 2 s
def test_bench_boundary_versus_fixed_as_docs_verdicts_md_runs_it_gives_the_recorded_table():
    """docs/verdicts.md's command as written (seeded: the same table on every host) prints the
    recorded file line for line, and each line's ratio is the rule's mean rounds over the fixed
    design's rounds on it."""
    done = _run("bench_boundary.py", "--versus-fixed", "--max-rounds", "12,24", "--reps", "20000", "--within", "0.01")
    recorded = REPO / "benchmarks/results/2026-12-08-boundary-versus-fixed/within-0.01.txt"
    assert done.stdout == recorded.read_text()
    rows = [line for line in done.stdout.splitlines() if "ratio" in line]
    assert len(rows) == 22, done.stdout
    for row in rows:
        mean = float(row.split(" in ")[1].split()[0])
        fixed = int(row.split("fixed")[1].split()[0])
        assert f"ratio {mean / fixed:.2f}" in row, row


@pytest.mark.slow  # 2 to 6 s in the fast tier (issue 40: that tier within a minute)
def test_suite_cpu_records_each_test_with_the_plugin_and_sums_them_up(tmp_path):
    """As its docstring runs it: a real pytest with ``-p suite_cpu`` (a tiny suite of its own: one
    test that burns CPU in a child, one that does not), then the script reads the folder."""
    (tmp_path / "test_tiny.py").write_text(
        "import subprocess, sys\n"
        "def test_burns_in_a_child():\n"
        "    subprocess.run([sys.executable, '-c', 'sum(range(3_000_000))'], check=True, cwd='/')\n"
        "def test_idle():\n    pass\n")
    (tmp_path / "none.ini").write_text("[pytest]\n")  # not this repository's settings (its -n 4)
    out, procs = tmp_path / "cpu", tmp_path / "procs"  # neither made here: the documented command makes them
    # a plain pytest of its own: not this xdist worker's (PYTEST_XDIST_WORKER names the recorder's file),
    # every Python process of it recorded by benchmarks/suite_procs as the docstring says: its relative
    # folders (the docstring's) found by a child started in another folder (a server in its run's)
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")},
           "PYTHONPATH": os.pathsep.join((str(BENCH), os.path.relpath(BENCH / "suite_procs", tmp_path))),
           "SUITE_CPU_OUT": str(out), "SUITE_PROCS_OUT": "procs"}
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "suite_cpu", "-q", "-p", "no:cacheprovider",
                           "-c", str(tmp_path / "none.ini"), "--rootdir", str(tmp_path), str(tmp_path / "test_tiny.py")],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    rows = {json.loads(line)["id"].split("::")[1]: json.loads(line) for line in (out / "main.jsonl").read_text().splitlines()}
    assert set(rows) == {"test_burns_in_a_child", "test_idle"}
    assert rows["test_burns_in_a_child"]["children"] > rows["test_idle"]["children"] == 0  # the child's CPU is counted
    table = _run("suite_cpu.py", str(out), "--top", "5").stdout
    assert "2 tests" in table and "test_tiny.py::test_burns_in_a_child" in table.splitlines()[-2]
    # by kind of process: pytest itself and the test's child, each with its own CPU; a stray file skipped
    (procs / "notes.json").write_text("{}")
    kinds = _run("suite_cpu.py", str(out), "--procs", str(procs)).stdout.split("Python processes")[1]
    child = next(line for line in kinds.splitlines() if line.endswith("-c sum(range(3_000_000))"))
    assert float(child.split()[3]) > 0 and " pytest" in kinds, kinds  # its CPU a process
    nothing = subprocess.run([sys.executable, str(BENCH / "suite_cpu.py"), str(out), "--procs", str(tmp_path / "none")],
                             capture_output=True, text=True)
    assert nothing.returncode == 2 and "no process records in" in nothing.stderr
    empty = subprocess.run([sys.executable, str(BENCH / "suite_cpu.py"), str(tmp_path)], capture_output=True, text=True)
    assert empty.returncode == 2 and "no test lines" in empty.stderr
    none = subprocess.run([sys.executable, str(BENCH / "suite_cpu.py"), str(out), "--top", "0"], capture_output=True, text=True)
    assert none.returncode == 2 and "--top 0: at least 1" in none.stderr


def test_suite_cpu_reads_process_accounting_records_into_the_tree_below_pytest(tmp_path):
    """acct(2)'s version 3 records as Linux writes them: comp_t CPU, the tree below the suite's
    pytest by ppid and start time (a pid reused by a process outside it is not counted), a Python
    process named by its start file, any other by its command name."""
    suite_cpu = _module("suite_cpu.py")

    def rec(pid, ppid, start, elapsed_ticks, user_ticks, comm):
        return suite_cpu.ACCT_V3.pack(0, 3, 0, 0, 0, 0, pid, ppid, start, float(elapsed_ticks), user_ticks, 0,
                                      0, 0, 0, 0, 0, 0, comm)
    exponent = (1 << 13) | 5  # comp_t: 5 * 8 ticks
    path = tmp_path / "suite.pacct"
    path.write_bytes(b"".join([
        rec(102, 101, 1000, 50, 30, b"git"),           # the server's git, ended first
        rec(101, 100, 1000, 300, exponent, b"python"),  # a server pytest started (40 ticks)
        rec(103, 1, 1001, 10, 500, b"cron"),           # the host's, not the suite's
        rec(101, 1, 1010, 10, 500, b"python"),          # pid 101 again, later, outside the suite
    ]))
    rows = suite_cpu.read_pacct(path)
    assert [r["cpu"] for r in rows] == [0.3, 0.4, 5.0, 5.0]
    inside = suite_cpu.below(rows, 100, 999.5)
    assert sorted(r["comm"] for r in inside) == ["git", "python"]
    starts = {101: [{"argv": ["python", "-m", "omnibench_core.local", "serve"], "started": 1000.02}]}
    table = suite_cpu.pacct_summary(inside, starts, 5)
    assert "2 processes below pytest, 1 CPU-s" in table and table.splitlines()[-2].endswith("omnibench_core.local")
    assert table.splitlines()[-1].endswith("  git"), table

    # a pytest that a test of the accounted suite starts (its env inherited) leaves the accounting be:
    # taking it over truncated the suite's file and turned accounting off as it ended (2026-12-07)
    path.write_bytes(b"kept")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(suite_cpu.PACCT_VAR, str(path))
        mp.setenv(suite_cpu.OWNER_VAR, "1")
        mp.delenv("PYTEST_XDIST_WORKER", raising=False)
        assert suite_cpu.pytest_configure(types.SimpleNamespace(stash={})) is None
    assert path.read_bytes() == b"kept" and not Path(str(path) + suite_cpu.ROOT_SUFFIX).exists()


def test_a_benchmarks_servers_get_consecutive_free_ports_below_the_ephemeral_range(monkeypatch):
    """A port the kernel picks is one client connections take their local ports from: a duet's second
    slot on it + 1 was refused as in use beside the suite's other tests (2026-12-07)."""
    ports = _module("bench_ports.py")
    for _ in range(20):
        port = ports.free_port(span=2)
        assert ports.LOWEST <= port and port + 1 < ephemeral_low() and not port_in_use(port) and not port_in_use(port + 1)
    held = socket.socket()
    held.bind(("127.0.0.1", 0))
    with held:
        monkeypatch.setattr(ports, "random", types.SimpleNamespace(randrange=lambda low, high: held.getsockname()[1] - 1))
        monkeypatch.setattr(ports, "ephemeral_low", lambda: held.getsockname()[1] + 100)
        assert ports.free_port(span=2) not in (held.getsockname()[1] - 1, held.getsockname()[1])  # a held one is passed by
    monkeypatch.setattr(ports, "ephemeral_low", lambda: ports.LOWEST)  # no room below the range: the kernel's pick
    assert ports.free_port() >= 1024


@pytest.mark.parametrize("script", sorted(p.name for p in BENCH.glob("*.py")))
def test_every_benchmark_script_has_a_smoke_test_here(script):
    if script in HELPERS:
        return
    source = Path(__file__).read_text()
    assert f'_run("{script}"' in source, f"benchmarks/{script} has no smoke test in tests/test_benchmarks.py"


@pytest.mark.slow
def test_bench_verdicts_smoke_runs_both_modes_a_and_b_under_the_pinned_hog_and_sums_up(tmp_path):
    out = tmp_path / "verdicts.jsonl"
    _run("bench_verdicts.py", "--smoke", "--out", str(out), timeout=600)
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    host, outcomes = lines[0], lines[1:]
    assert host["lanes"] and "host" in host and host["args"]["score"] == "none"  # the smoke's: no scoring server
    assert isinstance(host["shared_cores"], list)
    assert all(o["steal"] is not None for o in outcomes) == Path("/proc/stat").is_file()  # Linux's counters read
    # the wiring in two experiments (issue 40): A/A in the fixed mode, A/B in the sequential one
    assert sorted((o["mode"], o["effect"]) for o in outcomes) == [("fixed-2", 0.0), ("sequential-3", 0.5)]
    assert not [o["error"] for o in outcomes if o["error"]]
    assert {o["latency"] for o in outcomes} <= {"better", "worse", "equivalent", "inconclusive"}
    assert {o["condition"] for o in outcomes} == {"slot-drift"} and all(o["rounds"] >= 2 for o in outcomes)
    assert {o["stop"] for o in outcomes if o["mode"] == "fixed-2"} == {"fixed"}
    # calls add up: the summary of the file alone gives its cells and the goals' lines
    done = _run("bench_verdicts.py", "--summary", str(out), str(out))
    assert re.search(r"false alarms [012] of 2 ", done.stdout), done.stdout  # its one A/A, read twice


def test_bench_verdicts_passes_decide_to_fixed_and_sequential_cells_alike():
    """--decide names the decisive metrics of every cell (fixed rounds take it too, issue 43)."""
    bench = _module("bench_verdicts.py")
    args = argparse.Namespace(base_delay_ms=5.0, requests=4, seedtts_samples=6, decide="seedtts.latency_mean_s",
                              opt=[], score="")
    for mode, flag in (("fixed-4", "--rounds"), ("sequential-12", "--max-rounds")):
        argv = bench.argv_of(bench.Cell("seedtts", "duet", mode, "quiet", 0.1, 5.0), 1, 20000, args, 80.0)
        at = argv.index("--decide")
        assert argv[at + 1] == "seedtts.latency_mean_s" and argv[argv.index(flag) + 1] == mode.split("-")[1]
    args.decide = ""
    assert "--decide" not in bench.argv_of(bench.Cell("seedtts", "duet", "fixed-4", "quiet", 0.1, 5.0), 1, 20000,
                                           args, 80.0)


def test_bench_verdicts_drift_hog_draws_its_periods_so_cells_cannot_fall_into_step_with_it():
    """A fixed 20 s on, 20 s off hog fell into step with the cells' round-robin (2026-12-07: every
    sequential A/A of a call ran in the off-windows); each period is now drawn around its mean, the
    same draws for the same seed."""
    bench = _module("bench_verdicts.py")
    hog = bench.Hog([], 20.0, 10.0, seed=7)
    periods = [hog.period(20.0) for _ in range(50)]
    assert all(10.0 <= p <= 30.0 for p in periods) and max(periods) - min(periods) > 10.0, periods
    again = bench.Hog([], 20.0, 10.0, seed=7)
    assert [again.period(20.0) for _ in range(50)] == periods
    assert [bench.Hog([], 20.0, 10.0, seed=8).period(20.0) for _ in range(3)] != periods[:3]


def test_bench_verdicts_hogs_die_with_a_killed_bench():
    """A bench killed by a signal runs no __exit__: its drift hogs once kept burning a CPU into the
    next call (2026-12-07). Each hog dies with the bench: SIGKILL the parent, the hog goes too."""
    parent = subprocess.Popen([sys.executable, "-c", (
        "import sys, threading; sys.path.insert(0, sys.argv[1]); import bench_verdicts as b\n"
        "h = b.Hog([0], 3600.0, 1.0).__enter__()\n"
        "while not h._procs: threading.Event().wait(0.01)\n"
        "import os; pid = h._procs[0].pid\n"  # past its parent check once it has pinned itself
        "while os.sched_getaffinity(pid) != {0}: threading.Event().wait(0.01)\n"
        "print(pid, flush=True); threading.Event().wait()"), str(REPO / "benchmarks")],
        stdout=subprocess.PIPE, text=True)
    assert parent.stdout is not None
    hog = int(parent.stdout.readline())
    assert Path(f"/proc/{hog}").exists()
    parent.kill()
    parent.wait()
    wait_for(lambda: _gone(hog), what=f"hog {hog} to die with its bench")


def _gone(pid: int) -> bool:
    """The process has exited: no /proc entry, or a zombie not reaped yet."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (FileNotFoundError, ProcessLookupError):
        return True


def test_bench_verdicts_reads_the_hosts_steal_share_and_the_lanes_that_share_a_core(tmp_path):
    """The device's seed-tts A/As spread ten times as much in 8 lanes as in one lane here (2026-12-07):
    each outcome carries the steal share of its time (a VM's host busy elsewhere), and the bench names
    lanes whose CPUs are threads of one core, from the kernel's files (fakes of their formats here)."""
    bench = _module("bench_verdicts.py")
    stat = tmp_path / "stat"
    stat.write_text("cpu  100 0 50 800 10 0 0 40 0 0\ncpu0 50 0 25 400 5 0 0 20 0 0\n")
    before = bench.cpu_times(stat)
    stat.write_text("cpu  200 0 100 1500 10 0 0 190 0 0\n")
    assert before == (40, 1000) and bench.cpu_times(stat) == (190, 2000)
    assert bench.steal_share(before, bench.cpu_times(stat)) == 0.15
    assert bench.cpu_times(tmp_path / "absent") is None and bench.steal_share(None, (1, 2)) is None
    for other in ("intr 1 2 3\n", ""):  # not the cpu line; an empty file
        stat.write_text(other)
        assert bench.cpu_times(stat) is None
    # 4 CPUs, threads (0,2) and (1,3): lanes [0,1] and [2,3] share both cores; lanes [0,2] and [1,3] do not
    for cpu, siblings in {0: "0,2", 1: "1,3", 2: "0,2", 3: "1,3"}.items():
        (tmp_path / "cpu" / f"cpu{cpu}" / "topology").mkdir(parents=True)
        (tmp_path / "cpu" / f"cpu{cpu}" / "topology" / "thread_siblings_list").write_text(siblings + "\n")
    assert bench.shared_cores([[0, 1], [2, 3]], tmp_path / "cpu") == [
        "lane 0 (CPU 0) and lane 1 (CPU 2)", "lane 0 (CPU 1) and lane 1 (CPU 3)"]
    assert bench.shared_cores([[0, 2], [1, 3]], tmp_path / "cpu") == []
    assert bench.shared_cores([[0, 1]], tmp_path / "nowhere") == []
    assert bench._cpu_list("0-2,8") == {0, 1, 2, 8}


def test_bench_verdicts_summary_gives_the_aa_spread_and_the_rounds_it_would_take():
    """The spread of the A/A estimates is the noise a verdict fights; with it the summary says about how
    many fixed rounds would find +10 % 90 % of the time: ((1.96 + 1.28) x spread x sqrt(R) / 0.10)^2."""
    bench = _module("bench_verdicts.py")

    def made(mode, effect, change, latency="inconclusive", steal=0.02):
        return bench.Outcome("seedtts", "duet", mode, "quiet", effect, 1, 0, 20.0, 4, "fixed", latency, change,
                             latency == "worse", 0, 1.0, steal=steal)

    outcomes = [made("fixed-4", 0.0, c) for c in (-0.08, 0.0, 0.08)] + [made("fixed-4", 0.1, 0.12),
                                                                         made("fixed-4", 0.1, 0.2, "worse", None)]
    (row,) = bench.summary(outcomes)
    assert row.aa_spread == 8.0 and row.steal == 2.0 and row.table()["A/A spread %"] == 8.0
    assert row.rounds_for(0.10) == 27  # (3.2415 x 0.08 x 2 / 0.10)^2 = 26.9
    assert any("at least about 27 fixed rounds would find +10 % 90 %" in line for line in bench.goals([row]))
    sequential = bench.summary([made("sequential-12", 0.0, c) for c in (-0.05, 0.05)])[0]
    assert sequential.rounds_for(0.10) is None  # its rounds are not fixed: no such figure
    (old,) = bench.summary([made("fixed-4", 0.0, 0.01, steal=None)])  # one A/A, an outcome file before steal
    assert old.aa_spread is None and old.steal is None and old.rounds_for(0.10) is None


@pytest.mark.parametrize("low", [40000, 15000])
def test_bench_verdicts_picks_its_port_pairs_below_the_ephemeral_range_wherever_it_starts(tmp_path, low):
    """A port in the kernel's ephemeral range may be taken by a client's connection before a server
    binds it (a lost experiment on the device): every pair lies below the range, also where it starts
    below 20000."""
    port_range = tmp_path / "ip_local_port_range"
    port_range.write_text(f"{low}\t60999\n")
    pairs = _module("bench_verdicts.py").free_pairs(4, port_range)
    assert len(set(pairs)) == 4 and all(1024 <= p and p + 1 < low for p in pairs), pairs
    assert all(p >= 20000 for p in pairs) == (low == 40000)


@pytest.mark.parametrize(("flags", "said"), [
    (["--rounds", "1"], "argument --rounds: '1': every value must be at least 2"),
    (["--workloads", "selftst"], "argument --workloads: selftst: not one of selftest, seedtts"),
    (["--effects", "0.05,x"], "argument --effects: '0.05,x': not a list of float values"),
    (["--aa", "3,4"], "argument --aa: '3,4': one number, not a list"),
])
def test_bench_verdicts_refuses_a_bad_flag_before_any_experiment(flags, said):
    done = subprocess.run([sys.executable, str(BENCH / "bench_verdicts.py"), *flags], cwd=REPO,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 2 and said in done.stderr and not done.stdout, done.stderr


@pytest.mark.slow
def test_bench_verdict_cost_smoke_gives_every_design_a_verdict(tmp_path):
    out = tmp_path / "cost.json"
    _run("bench_verdict_cost.py", "--smoke", "--out", str(out), timeout=1800)
    got = json.loads(out.read_text())
    # the smoke's one design (issue 40): the duet, whose two slots are the script's own wiring
    assert [(o["design"], o["mode"]) for o in got["outcomes"]] == [("duet", "rounds")]
    # the smoke's --score none reached `invoke ab`: every server start was a model server's, none scoring's
    assert got["args"]["score"] == "none" and all(o["server_starts"] == o["model_starts"] for o in got["outcomes"])
    assert {o["latency"] for o in got["outcomes"]} <= {"better", "worse", "equivalent", "inconclusive"}
    assert all(o["model_starts"] > 0 and o["waited_s"] > 0 for o in got["outcomes"])
    # each design's time over sequential's (or interleaved's): the figures a full run reports, on made-up outcomes
    cost = _module("bench_verdict_cost.py")
    made = [cost.Outcome(d, m, s, 6, 6, 1.0, 3.0, 6, 2, "worse", 0.4, 0.5) for d, m, s in
            (("duet", "rounds", 10.0), ("sequential", "rounds", 20.0), ("duet", "max-rounds", 5.0))]
    assert cost.ratios(made, "rounds") == {"duet/sequential": 0.5}
    assert cost.ratios(made, "max-rounds") == {"duet/sequential (fixed)": 0.25}


@pytest.mark.slow
def test_gpu_duet_check_dry_run_takes_the_duet_on_two_fake_gpus_and_merges(tmp_path):
    # two fake GPUs: the duet's path (slots swapped; no two-GPU machine has run it yet). The one-GPU designs'
    # path is the same experiment with slot 0 alone (below, its argv); it is run and recorded by hand on one GPU
    # (benchmarks/results/2026-12-01-h200-duet/), so the smoke runs the duet only (issue 40)
    _run("gpu_duet_check.py", "--dry-run", "--dry-gpus", "2", "--designs", "duet", "--kinds", "ab10",
         "--experiments", "1", "--rounds", "2", "--requests", "1", "--score", "none", "--out", str(tmp_path), timeout=600)
    report = json.loads((tmp_path / "duet_check.json").read_text())
    assert report["settings"]["score"] == "none"  # quality is not the point here: no scoring server
    assert report["designs"] == ["duet"] and [g["index"] for g in report["host"]["gpus"]] == ["0", "1"]
    assert [(o["design"], o["kind"]) for o in report["outcomes"]] == [("duet", "ab10")]
    (duet,) = report["outcomes"]
    assert duet["latency"] in {"better", "worse", "equivalent", "inconclusive"}
    assert len(duet["windows"]) == 4 and all(w["window"] == "selftest.client" for w in duet["windows"])
    assert all(w["gpu"] and w["gpu"][0]["gpu_util_mean"] is not None for w in duet["windows"])  # the scripted NVML
    assert {(w["side"], tuple(w["slot_gpus"])) for w in duet["windows"]} == {("A", ("0",)), ("A", ("1",)),
                                                                            ("B", ("0",)), ("B", ("1",))}
    assert report["apps_at_end"] == [] and "| duet | ab10 | 1 |" in (tmp_path / "duet_check.md").read_text()
    _run("gpu_duet_check.py", "--merge", str(tmp_path / "duet_check.json"), "--out", str(tmp_path / "merged"))
    merged = json.loads((tmp_path / "merged" / "summary.json").read_text())
    assert merged["summary"] == report["summary"]
    # a one-GPU design's experiment: the same `invoke ab`, on slot 0 alone
    check = _module("gpu_duet_check.py")
    argv = check.ab_argv("interleaved", "ab10", 3, tmp_path / "co", {"aa": "a" * 40, "ab10": "b" * 40},
                         argparse.Namespace(requests=1, rounds=2, min_effect=2.0, slot_cpus="shared", score="none"), 9)
    assert argv[argv.index("--slots") + 1] == "0" and argv[argv.index("--design") + 1] == "interleaved"
    assert argv[argv.index("--b-rev") + 1] == "b" * 40 and argv[argv.index("--name") + 1] == "interleaved-ab10-3"


def test_bench_changepoints_smoke_scores_the_installed_candidates(tmp_path):
    done = _run("bench_changepoints.py", "--smoke", "--out", str(tmp_path))
    rows = {r["library"]: r for r in (json.loads(line) for line in done.stdout.splitlines() if line.startswith("{"))}
    assert {"asv", "omnibench"} <= set(rows)  # asv is a dependency; the others say they are not installed here
    assert all(r["series"] == 2 and r["planted"] == 1 for r in rows.values())
    assert (tmp_path / "omnibench.json").is_file()


def test_bench_quality_smoke_judges_every_arm_and_refuses_a_folder_without_answers(tmp_path):
    done = _run("bench_quality.py", "--smoke", "--out", str(tmp_path / "q.json"))
    rows = json.loads((tmp_path / "q.json").read_text())["rows"]
    assert [r["arm"] for r in rows] == ["A/A", "A/A deterministic", "flip 0.05", "flip 0.1"]
    assert all(sum(r[w] for w in ("better", "worse", "equivalent", "inconclusive")) == r["experiments"] for r in rows)
    assert "false alarms: 0 of 5" in done.stdout.splitlines()[2]  # a deterministic A/A changes nothing
    few = subprocess.run([sys.executable, str(BENCH / "bench_quality.py"), "--runs", str(tmp_path), "--experiments", "10"],
                         cwd=REPO, capture_output=True, text=True, timeout=300)
    assert few.returncode != 0 and "no Video-AMME per_sample rows" in few.stderr  # an empty folder is no pool
