"""GPU telemetry with a scripted NVML (tests/fake_nvml.py in place of pynvml): the CSV, the
summaries per server and step window, energy, throttling, the comparability warnings, and a GPU
NVML cannot read recorded as "not available", never a failed run."""

from __future__ import annotations

import csv
import json
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest
from gpu_helpers import write_fake_nvidia_smi
from proc_helpers import wait_for

from omnibench_core import api
from omnibench_core.builtin.targets import prepare_local
from omnibench_core.hooks.specs import hookimpl
from omnibench_core.records import Target, TargetFacts
from omnibench_core.settings import Settings
from omnibench_core.statuses import StepStatus
from omnibench_core.store import manifest as manifest_file
from omnibench_core.store import metrics as metrics_file
from omnibench_core.store import telemetry_file
from omnibench_core.store.run_entries import ServerEntry, StepEntry
from omnibench_core.telemetry.hostload import HostLoad, LoadWindow, noisy_windows
from omnibench_core.telemetry.nvml import reason_names
from omnibench_core.telemetry.run_summary import run_warnings, write_run_telemetry
from omnibench_core.telemetry.sampler import COLUMNS, Sampler
from omnibench_core.telemetry.summary import window

GPU_FACTS = TargetFacts(uses_gpu=True)


class GpuSim:
    """A third-party target that says it uses GPU 0 (the GPU gates read a fake nvidia-smi)."""

    @hookimpl
    def omnibench_targets(self):
        def prepare(settings):
            return replace(prepare_local(settings), target="gpu-sim", facts=GPU_FACTS, gpus=("0",),
                           results_folder="gpu-sim")

        return [Target("gpu-sim", "local server, GPU facts", prepare, GPU_FACTS)]


def _run(tmp_path, port, script: dict, monkeypatch):
    path = tmp_path / "nvml.json"
    path.write_text(json.dumps(script))
    monkeypatch.setenv("FAKE_NVML_SCRIPT", str(path))
    smi = write_fake_nvidia_smi(tmp_path / "smi", [10])
    settings = Settings.of(results=str(tmp_path / "r"), port=port, target="gpu-sim", nvidia_smi=str(smi),
                        nvml_module="fake_nvml", telemetry_interval_s=0.05)
    return api.run(settings, ["selftest"], options=["selftest.client_seconds=0.6"], progress=lambda m: None,
                   extra_plugins=[("gpu-sim", GpuSim())])


BUSY = {"phases": [{"until_s": 0.2, "util": 0, "power_w": 80, "reasons": 1},
                   {"until_s": 1000, "util": 97, "power_w": 640, "reasons": 4}],
        "processes": [{"pid": 1, "used_mib": 2048, "sm": 90}]}


@pytest.mark.slow
def test_samples_summaries_energy_and_warnings_of_a_gpu_run(tmp_path, port, monkeypatch):
    result = _run(tmp_path, port, BUSY, monkeypatch)
    assert result.complete
    manifest = manifest_file.read(result.run_dir)
    server = next(s for s in manifest.servers if s.label == "selftest")
    tele = server.telemetry
    assert tele["available"] and tele["samples"] > 5
    rows = list(csv.DictReader(open(result.run_dir / "telemetry" / tele["csv"])))
    assert tuple(rows[0]) == COLUMNS and {r["gpu"] for r in rows} == {"0"}
    client = tele["steps"]["selftest.client"][0]
    assert client["gpu_util_mean"] > 90 and 600 < client["power_mean_w"] <= 640
    assert client["energy_source"] == "counter" and client["energy_j"] == pytest.approx(640 * client["seconds"], rel=0.25)
    assert client["throttled_s"]["sw_power_cap"] > 0.3
    doc = json.loads((result.run_dir / "telemetry.json").read_text())
    assert doc["applies"] and doc["workloads"]["selftest"]["window"] == "selftest.client"
    warned = run_warnings(result.run_dir)
    assert any("throttled during the timed window: sw_power_cap" in w for w in warned)
    assert any("another process held 2048.0 MiB on GPU 0" in w and "pid 1" in w for w in warned)
    metrics = metrics_file.read(result.run_dir)
    assert not any(k.startswith("telemetry") for k in metrics.metrics)  # metrics.json keeps the runbook's keys
    # the GPU noise guard: pid 1 held the GPU through the timed window, so the window is noisy
    (step,) = [s for s in manifest.steps if s.step == "selftest.client"]
    assert step.host_load["noisy"] is True and step.host_load["gpu_tenants"][0].startswith("pid 1 (")
    assert "2048 MiB on GPU 0, SM 90 %" in step.host_load["gpu_tenants"][0]


@pytest.mark.slow
def test_an_unreadable_gpu_is_recorded_not_fatal(tmp_path, port, monkeypatch):
    result = _run(tmp_path, port, {"phases": [{"until_s": 1, "util": 0, "power_w": 0}], "fail_init": True},
                  monkeypatch)
    assert result.complete
    doc = json.loads((result.run_dir / "telemetry.json").read_text())
    assert doc["servers"][0]["available"] is False and "Driver Not Loaded" in doc["servers"][0]["reason"]
    assert any("not available" in w for w in doc["warnings"])


@pytest.mark.slow
def test_the_local_target_says_telemetry_did_not_apply(tmp_path, port):
    result = api.run(Settings.of(results=str(tmp_path / "r"), port=port), ["selftest"], progress=lambda m: None)
    doc = json.loads((result.run_dir / "telemetry.json").read_text())
    assert doc == {"format": telemetry_file.FORMAT, "applies": False, "reason": "the local target uses no GPU",
                   "servers": [], "workloads": {}, "warnings": []}
    assert not (result.run_dir / "telemetry").exists()


def _rows(power: list[float], energy: list[float | None], reasons: list[int]) -> list[dict]:
    return [{"gpu": "0", "time_unix": float(i), "power_w": p, "energy_mj": e, "throttle_reasons": r,
             "gpu_util_pct": 50.0, "mem_used_mib": 10.0 * i, "mem_util_pct": 5.0, "temperature_c": 50.0}
            for i, (p, e, r) in enumerate(zip(power, energy, reasons, strict=True))]


def test_energy_prefers_the_counter_and_integrates_power_without_it():
    rows = _rows([100, 300, 300, 100], [0, 250_000, 550_000, 700_000], [0, 4, 4, 0])
    counted = window(rows, "0", 0, 3)
    assert counted.energy_source == "counter" and counted.energy_j == 700.0
    assert counted.throttled_s == {"sw_power_cap": 2.0} and counted.mem_used_max_mib == 30.0
    integrated = window(_rows([100, 300, 300, 100], [None] * 4, [0] * 4), "0", 0, 3)
    assert integrated.energy_source == "power integral" and integrated.energy_j == 200 + 300 + 200
    assert window(rows, "0", 1, 2).samples == 2 and window(rows, "1", 0, 3).samples == 0


def test_throttle_reason_names():
    assert reason_names(0x1) == ["gpu_idle"]
    assert reason_names(0x4 | 0x40) == ["sw_power_cap", "hw_thermal_slowdown"]
    assert reason_names(0) == []


def test_telemetry_files_are_real_csv(tmp_path, monkeypatch):
    path = tmp_path / "nvml.json"
    path.write_text(json.dumps({"phases": [{"until_s": 9, "util": 10, "power_w": 90}]}))
    monkeypatch.setenv("FAKE_NVML_SCRIPT", str(path))
    sampler = Sampler(("0", "1"), tmp_path / "t" / "s.csv", interval_s=0.01, nvml_module="fake_nvml")
    assert sampler.start().available
    wait_for(lambda: sampler.result.samples >= 6, what="three samples of two GPUs")  # not a sleep: a late thread
    result = sampler.stop()
    assert result.samples >= 6 and result.samples % 2 == 0 and result.cpu_fraction is not None
    assert Path(result.csv).read_text().startswith(",".join(COLUMNS))


@pytest.mark.slow
def test_reports_and_comparisons_show_the_telemetry_and_its_warnings(tmp_path, port, monkeypatch):
    from omnibench_core.campaign.compare import compare
    from omnibench_core.campaign.summary import stats_of
    from omnibench_core.campaign.writing import write_report

    runs = [_run(tmp_path, port, BUSY, monkeypatch).run_dir for _ in range(2)]
    stats = stats_of("gpu-sim", runs)
    written = write_report(tmp_path / "report", stats, {"campaign": "gpu-sim"})
    md = written.markdown.read_text()
    assert "## GPU telemetry" in md and "| selftest |" in md
    assert "throttled during the timed window: sw_power_cap" in md and "run0: " in md and "run1: " in md
    doc = json.loads(written.json.read_text())
    assert doc["telemetry"]["applies"] and doc["telemetry"]["workloads"]["selftest"]["energy_j"] > 0
    assert any(p.endswith("telemetry-selftest.png") for p in doc["plots"])  # utilisation and power over time
    notes = compare(stats, stats, force=True).notes
    assert any(n.startswith("A GPU telemetry: run0:") for n in notes)
    assert any(n.startswith("B GPU telemetry: run1:") for n in notes)


def test_a_scoring_server_shared_with_another_run_is_no_telemetry_warning(tmp_path):
    """Deferred scoring starts one scorer for several runs; the runs it did not start name it
    (``started_in``) without samples. That is not 'GPU telemetry not available' (seen on a real
    H200: every deferred run warned about echo-scorer); a server that was sampled and could not
    read its GPU still is."""
    path = write_run_telemetry(tmp_path, [
        ServerEntry("echo-scorer", "score", started_in="run1"),
        ServerEntry("selftest", telemetry={"available": False, "reason": "not available: no NVML"}),
    ], applies=True)
    doc = json.loads(path.read_text())
    assert doc["servers"][0] == {"label": "echo-scorer", "started_in": "run1"}
    assert doc["warnings"] == ["selftest: GPU telemetry not available: no NVML"]



# a CPU threshold no window reaches (a 50 ms window's tick-rounded share can pass 100 %)
CPU_NEVER = 1e9


def test_a_gpu_tenant_that_starts_mid_window_marks_that_window_noisy(tmp_path, monkeypatch):
    """The scripted NVML lists only this process, then a foreign one: the window that saw it is
    noisy and names it; the one before it is not (the sampler looks at every mark, so no wait)."""
    script = tmp_path / "nvml.json"
    script.write_text(json.dumps({"phases": [{"until_s": 1000, "util": 50, "power_w": 300}],
                                  "processes": [{"pid": "self", "used_mib": 4096}]}))
    monkeypatch.setenv("FAKE_NVML_SCRIPT", str(script))
    sampler = Sampler(("0",), tmp_path / "s.csv", interval_s=60, nvml_module="fake_nvml")
    assert sampler.start().available
    try:
        quiet = LoadWindow("w.quiet", (), CPU_NEVER)
        t0 = sampler.mark()
        t1 = sampler.mark()
        assert sampler.tenants_between(t0, t1) == []
        assert quiet.close([t.describe() for t in sampler.tenants_between(t0, t1)]).noisy is False
        busy = LoadWindow("w.busy", (), CPU_NEVER)
        t2 = sampler.mark()
        script.write_text(json.dumps({"phases": [{"until_s": 1000, "util": 50, "power_w": 300}],
                                      "processes": [{"pid": "self", "used_mib": 4096}, {"pid": 1, "used_mib": 1500}]}))
        t3 = sampler.mark()
        (tenant,) = sampler.tenants_between(t2, t3)
        assert (tenant.pid, tenant.gpu, tenant.used_mib) == (1, "0", 1500)
        load = busy.close([tenant.describe()])
        assert load.noisy and load.foreign_fraction <= CPU_NEVER  # noisy for the GPU alone
        assert "on the slot's GPUs another process computed: pid 1 (" in load.describe() and "1500 MiB on GPU 0" in load.describe()
        (again,) = noisy_windows([StepEntry("w.busy", "generate", StepStatus.OK, host_load=load.as_record())])
        assert again.gpu_tenants == load.gpu_tenants  # read back from the manifest's record
    finally:
        sampler.stop()


def test_a_gpu_tenant_holding_memory_idle_is_named_present_and_one_computing_makes_the_window_noisy(
        tmp_path, monkeypatch):
    """The scripted NVML answers per-process utilisation as an H100 did: a foreign process holding
    708 MiB and computing nothing has no sample. That window keeps its verdict and names it
    present; once it computes (SM 97 %) the window is noisy. Its use before a window (read at the
    window's first mark) is not the window's. A driver without per-process figures weighs every
    tenant as computing, as before."""
    script = tmp_path / "nvml.json"
    monkeypatch.setenv("FAKE_NVML_SCRIPT", str(script))

    def plan(tenant_sm: int, **more: bool) -> None:
        script.write_text(json.dumps({"phases": [{"until_s": 1000, "util": 80, "power_w": 500}], **more,
                                      "processes": [{"pid": "self", "used_mib": 4096, "sm": 80},
                                                    {"pid": 1, "used_mib": 708, "sm": tenant_sm}]}))

    def window(name: str, before: Callable[[], None] = lambda: None) -> HostLoad:
        load = LoadWindow(name, (), CPU_NEVER)
        t0 = sampler.mark()
        before()
        t1 = sampler.mark()
        tenants = sampler.tenants_between(t0, t1)
        assert [t.pid for t in tenants] == [1]
        closed = load.close([t.describe() for t in tenants if t.computing],
                            [t.describe() for t in tenants if not t.computing])
        assert closed is not None
        return closed

    plan(0)
    sampler = Sampler(("0",), tmp_path / "s.csv", interval_s=60, nvml_module="fake_nvml")
    assert sampler.start().available
    try:
        idle = window("w.idle")
        assert not idle.noisy and idle.gpu_tenants == ()
        assert len(idle.gpu_present) == 1 and idle.gpu_present[0].startswith("pid 1 (")
        assert "708 MiB on GPU 0, SM 0 %" in idle.gpu_present[0]
        assert "holding memory idle (not noise): pid 1 (" in idle.describe()
        busy = window("w.busy", before=lambda: plan(97))
        assert busy.noisy and busy.gpu_present == () and "708 MiB on GPU 0, SM 97 %" in busy.gpu_tenants[0]
        # computing until the window's first mark, idle inside it: not the window's noise
        after = window("w.after", before=lambda: plan(0))
        assert not after.noisy and "SM 0 %" in after.gpu_present[0]
        (again,) = noisy_windows([StepEntry("w.busy", "generate", StepStatus.OK, host_load=busy.as_record()),
                                  StepEntry("w.idle", "generate", StepStatus.OK, host_load=idle.as_record())])
        # read back from the manifest's records: only the computing one is noisy
        assert (again.window, again.gpu_tenants, again.gpu_present) == ("w.busy", busy.gpu_tenants, ())
    finally:
        sampler.stop()
    plan(0, no_process_util=True)
    blind = Sampler(("0",), tmp_path / "b.csv", interval_s=60, nvml_module="fake_nvml")
    assert blind.start().available
    try:
        t0, t1 = blind.mark(), blind.mark()
        (tenant,) = blind.tenants_between(t0, t1)
        assert tenant.sm_pct is None and tenant.computing and "SM use unknown" in tenant.describe()
    finally:
        blind.stop()
