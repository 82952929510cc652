"""Repeated runs: `invoke measure` (warm-up run, measured runs, mean and spread) and `invoke report`."""

from __future__ import annotations

import json
import statistics

import pytest

from omnibench_core.errors import OmnibenchError
from omnibench_core.jsonio import write_json
from omnibench_core.summary import summarize_runs


def _run(folder, name, metrics, complete=True):
    write_json(folder / name / "metrics.json", {"metrics": metrics, "rates": [], "complete": complete})
    return folder / name


def test_mean_and_sample_stdev_per_metric(tmp_path):
    runs = [_run(tmp_path, f"run{i}", {"qps": q, "wer": w, "note": "x"})
            for i, (q, w) in enumerate([(14.1, 0.015), (14.5, 0.014), (13.9, 0.016)], start=1)]
    spreads = {s.name: s for s in summarize_runs(runs)}
    assert spreads["qps"].mean == pytest.approx(statistics.mean([14.1, 14.5, 13.9]))
    assert spreads["qps"].stdev == pytest.approx(statistics.stdev([14.1, 14.5, 13.9]), abs=1e-6)
    assert spreads["wer"].values == (0.015, 0.014, 0.016)
    assert spreads["note"].mean is None and spreads["note"].values == ("x", "x", "x")


def test_an_incomplete_run_is_refused(tmp_path):
    runs = [_run(tmp_path, "run1", {"a": 1}), _run(tmp_path, "run2", {"a": 2}, complete=False)]
    with pytest.raises(OmnibenchError, match="a run is incomplete") as err:
        summarize_runs(runs)
    assert "run2" in err.value.evidence["runs"]


def test_measure_is_a_campaign_with_its_report(invoke, tmp_path, port):
    done = invoke("measure", "--workload", "selftest", "--runs", "2", "--port", str(port))
    assert done.returncode == 0, done.stdout + done.stderr
    (folder,) = (tmp_path / "results").glob("local-*")
    assert sorted(p.name for p in folder.iterdir() if p.is_dir()) == ["campaigns", "run0", "run1", "run2"]
    report = json.loads((folder / "campaigns" / "selftest_local" / "report.json").read_text())
    assert report["runs"] == ["run1", "run2"]  # run0 is the warm-up
    assert report["metrics"]["selftest.requests"]["values"] == {"run1": 8, "run2": 8}
    assert "run 1 of 3 (run0 warm-up, discarded)" in done.stdout and "selftest.latency_mean_s" in done.stdout
    (folder / "run3-incomplete").mkdir()  # moved aside: never part of a report
    again = invoke("report")
    assert again.returncode == 0, again.stderr
    assert "report-2.md" in again.stdout and "an earlier report is kept" in again.stdout
    assert json.loads((folder / "campaigns" / "selftest_local" / "report-2.json").read_text())["runs"] == ["run1", "run2"]
