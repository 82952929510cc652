"""Percentiles beside the runbook's mean and p95, the rule that marks the thin ones, and the units
tables print (omnibench_core/stats/percentiles.py, omnibench_core/run/collection.py, omnibench_core/units.py)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from omnibench_core.campaign.directions import direction, floor
from omnibench_core.errors import SettingsError
from omnibench_core.run.collection import Collection, with_percentiles
from omnibench_core.settings import parse_percentiles
from omnibench_core.stats.percentiles import label, samples_needed
from omnibench_core.store import metrics as metrics_file
from omnibench_core.tables import metrics_table
from omnibench_core.units import display, sig3
from omnibench_plugins.videoamme.metrics import collect as collect_videoamme


def test_samples_needed_is_the_tail_over_one_minus_q_exactly():
    # 3 / (1 - 0.99) is 300.00000000000006 in floats: a ceil of that would ask for 301
    assert [samples_needed(q) for q in (50, 90, 95, 99, 99.9)] == [6, 30, 60, 300, 3000]
    assert samples_needed(99, tail=1) == 100
    assert label(99.9) == "p99_9" and label(50) == "p50"


@pytest.mark.parametrize("text", ["0", "100", "50,abc", "", "-5"])
def test_a_percentile_outside_0_to_100_is_refused(text):
    with pytest.raises(SettingsError, match="above 0 and below 100"):
        parse_percentiles(text)


def test_percentiles_join_the_metrics_only_where_the_samples_support_them():
    values = [float(i) for i in range(1, 41)]  # 40 requests: p50 and p90 measured, p99 thin
    base = Collection({"w.latency_mean_s": float(np.mean(values)), "w.latency_p95_s": 1234.0}, (), (), (),
                      by_request={"w.latency_mean_s": {str(i): v for i, v in enumerate(values)},
                                  "w.rtf_mean": {"a": 0.5}})
    got = with_percentiles(base, parse_percentiles("50,90,95,99"))
    assert got.metrics["w.latency_p50_s"] == float(np.percentile(values, 50))
    assert got.metrics["w.latency_p90_s"] == float(np.percentile(values, 90))
    assert got.metrics["w.latency_p95_s"] == 1234.0  # the workload's own (the runbook's) p95 is never replaced
    assert "w.latency_p99_s" not in got.metrics and not any(k.startswith("w.rtf_p") for k in got.metrics)
    (thin,) = got.thin
    assert (thin.metric, thin.n, thin.needed) == ("w.latency_p99_s", 40, 300)
    # the planted case: 300 requests support p99
    many = with_percentiles(Collection({}, (), (), (), samples={"w.audio_ttfp_s": [0.1] * 300}), (99,))
    assert many.metrics == {"w.audio_ttfp_p99_s": pytest.approx(0.1)} and not many.thin


def test_the_new_names_are_lower_is_better_and_floored_at_zero():
    for name in ("seedtts.latency_p50_s", "seedtts.latency_p99_9_s", "seedtts.audio_ttfp_p90_s",
                 "videoamme.latency_p90_s", "seedtts.inter_chunk_p50_s"):
        assert direction(name) == "lower" and floor(name) == 0.0, name


def test_videoamme_gives_its_answered_samples_latencies(tmp_path):
    rows = [{"sample_id": "a", "latency_s": 1.5, "is_success": True},
            {"sample_id": "b", "latency_s": 9.0, "is_success": False},
            {"sample_id": "c", "latency_s": "x", "is_success": True}]
    (tmp_path / "videoamme_results.json").write_text(json.dumps({"summary": {}, "speed": {}, "per_sample": rows}))
    got = collect_videoamme(tmp_path, scored=False)
    assert got.samples == {"videoamme.latency_s": [1.5]}  # the failed and the malformed rows left out


def test_metrics_json_keeps_thin_percentiles_apart_and_reads_them_back(tmp_path):
    metrics_file.write(tmp_path, {"w.latency_p50_s": 0.01}, (), True, "local", (), (),
                       {"w.latency_p99_s": {"value": 0.02, "n": 8, "needed": 300}})
    doc = json.loads((tmp_path / "metrics.json").read_text())
    assert "w.latency_p99_s" not in doc["metrics"]
    assert metrics_file.read(tmp_path).thin_percentiles == {"w.latency_p99_s": {"value": 0.02, "n": 8, "needed": 300}}
    metrics_file.write(tmp_path, {}, (), True, "local", (), ())
    assert "thin_percentiles" not in json.loads((tmp_path / "metrics.json").read_text())  # the runbook's keys alone


@pytest.mark.parametrize(("metric", "value", "shown"), [
    ("w.latency_mean_s", 0.0129915, "13.0 ms"), ("w.latency_p99_s", 12.345, "12.3 s"), ("w.x_s", 0.0005, "0.500 ms"),
    ("w.throughput_qps", 3.14159, "3.14 req/s"), ("w.audio_throughput_s_per_s", 20.5, "20.5 s/s"),
    ("w.failed", 0, "0"), ("w.wer.wer_corpus", 0.0123456, "0.0123456"), ("w.latency_mean_s", None, "-"),
    ("w.rtf_mean", 0.25, "0.25"), ("w.latency_ms", 250.0, "250 ms")])
def test_display_prints_times_in_ms_or_s_and_rates_with_their_unit(metric, value, shown):
    assert display(metric, value) == shown


def test_sig3_keeps_three_digits_without_an_exponent():
    assert [sig3(v) for v in (9.996, 0.0012345, 123456.0, 99.96)] == ["10.0", "0.00123", "123456", "100"]


def test_the_run_table_marks_a_thin_percentile():
    text = metrics_table({"w.latency_p50_s": 0.0101}, {"w.latency_p99_s": {"value": 0.02, "n": 8, "needed": 300}})
    assert "10.1 ms" in text and "thin: n=8 < 300 (20.0 ms not measured)" in text
