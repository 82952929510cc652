"""Percentiles beside the runbook's mean and p95, the rule that marks the thin ones, and the units
tables print (omnibench_core/stats/percentiles.py, omnibench_core/run/collection.py, omnibench_core/units.py)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from omnibench_core.campaign.compare import compare
from omnibench_core.campaign.directions import direction, floor
from omnibench_core.campaign.summary import stats_of
from omnibench_core.errors import SettingsError
from omnibench_core.run.collection import Collection, with_percentiles, write_metrics
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
    got = with_percentiles(base, parse_percentiles("50,90,99"))
    assert got.metrics["w.latency_p50_s"] == float(np.percentile(values, 50))
    assert got.metrics["w.latency_p90_s"] == float(np.percentile(values, 90))
    assert got.metrics["w.latency_p95_s"] == 1234.0  # the workload's own (the runbook's) p95 is never replaced
    assert "w.latency_p99_s" not in got.metrics and not any(k.startswith("w.rtf_p") for k in got.metrics)
    (thin,) = got.thin
    assert (thin.metric, thin.n, thin.needed, thin.kept) == ("w.latency_p99_s", 40, 300, False)
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


def test_a_workloads_own_percentile_its_requests_cannot_support_keeps_its_value_and_is_marked_thin(tmp_path):
    """Upstream's summary p99 of ten requests (seed-tts streaming's audio_ttfp_p99_s) stays in metrics
    as upstream wrote it, is marked thin (kept) in metrics.json, printed as thin, and no verdict reads it."""
    values = [0.1 + i / 100 for i in range(10)]
    base = Collection({"w.audio_ttfp_p99_s": 0.5, "w.audio_ttfp_p95_s": 0.4}, (), (), (),
                      samples={"w.audio_ttfp_s": values})
    got = with_percentiles(base, parse_percentiles("50,90,99"))
    assert got.metrics["w.audio_ttfp_p99_s"] == 0.5 and got.metrics["w.audio_ttfp_p95_s"] == 0.4  # upstream's values
    assert {(p.metric, p.value, p.n, p.kept) for p in got.thin} == {("w.audio_ttfp_p99_s", 0.5, 10, True),
                                                                    ("w.audio_ttfp_p90_s", got.thin[0].value, 10, False)}
    write_metrics(tmp_path, got, "local")
    read = metrics_file.read(tmp_path)
    assert read.metrics["w.audio_ttfp_p99_s"] == 0.5  # metrics.json's upstream key unchanged
    assert read.thin_percentiles["w.audio_ttfp_p99_s"] == {"value": 0.5, "n": 10, "needed": 300, "kept": True}
    assert "w.audio_ttfp_p99_s" not in read.measured and read.measured["w.audio_ttfp_p95_s"] == 0.4
    text = metrics_table(read.metrics, read.thin_percentiles)
    assert "thin: n=10 < 300 (the workload's 500 ms not measured)" in text and text.count("500 ms") == 1
    # asked for p95 too, the runbook's p95 of ten requests is marked the same way, its value kept
    asked = with_percentiles(base, parse_percentiles("50,95"))
    assert asked.metrics["w.audio_ttfp_p95_s"] == 0.4 and any(p.metric == "w.audio_ttfp_p95_s" and p.kept
                                                               for p in asked.thin)


def test_a_campaign_neither_averages_nor_judges_a_thin_kept_percentile(tmp_path):
    """Two campaigns whose runs carry upstream's p99 of ten requests: the report has no mean for it and
    says why; compare lists it as not comparable, and --fail-on does not count it as a gap."""
    sides = {}
    for side, shift in (("a", 0.0), ("b", 0.5)):
        runs = []
        for i in range(3):
            run = tmp_path / side / f"run{i + 1}"
            run.mkdir(parents=True)
            values = [0.1 + shift + (i + j) / 100 for j in range(10)]
            got = with_percentiles(Collection({"w.audio_ttfp_p99_s": max(values), "w.latency_mean_s": sum(values) / 10},
                                              (), (), (), samples={"w.audio_ttfp_s": values}), (50, 99))
            write_metrics(run, got, "local")
            (run / "manifest.json").write_text(json.dumps({"steps": [], "status": "complete"}))
            runs.append(run)
        sides[side] = stats_of(side, runs)
    row = sides["a"].metric("w.audio_ttfp_p99_s")
    assert row is not None and row.mean is None and row.thin and "thin percentile" in row.problem
    assert any("w.audio_ttfp_p99_s: thin percentile, not measured (300 samples needed; run1 n=10" in n
               for n in sides["a"].notes)
    got = compare(sides["a"], sides["b"], force=True)
    by = {m.name: m for m in got.metrics}
    assert by["w.audio_ttfp_p99_s"].verdict == "not comparable" and by["w.audio_ttfp_p99_s"].thin
    assert by["w.latency_mean_s"].verdict == "worse"  # the measured metric is judged
    assert "w.latency_mean_s: worse" in got.fail_on("worse") and not any("p99" in f for f in got.fail_on("worse"))
