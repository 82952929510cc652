"""The campaign layer's statistics, checked against known values, and the runbook's directions."""

from __future__ import annotations

import statistics

import pytest

from omnibench_core.campaign import metrics, stats


@pytest.mark.parametrize(("t", "df", "p"), [
    (12.706204736, 1, 0.05),  # the t table's 97.5 % quantiles
    (2.776445105, 4, 0.05),
    (2.570581836, 5, 0.05),
    (2.0, 5, 0.101939),  # P(|T| >= 2) with 5 df
    (1.0, 10, 0.340893),
    (0.0, 3, 1.0),
    (3.169272667, 10, 0.01),
])
def test_two_sided_t_tail_matches_known_values(t, df, p):
    assert stats.t_sf_two_sided(t, df) == pytest.approx(p, abs=2e-6)


def test_t_cdf_is_symmetric_and_tends_to_the_normal():
    assert stats.t_cdf(-1.3, 7) == pytest.approx(1 - stats.t_cdf(1.3, 7))
    assert stats.t_cdf(1.959963985, 1e7) == pytest.approx(0.975, abs=1e-6)


def test_betainc_known_values():
    assert stats.betainc(1, 1, 0.3) == pytest.approx(0.3)  # the uniform distribution
    assert stats.betainc(2, 3, 0.4) == pytest.approx(0.5248)  # 1 - sum_{j<2} C(4,j) .4^j .6^(4-j)


def test_welch_matches_a_worked_example():
    # Welch-Satterthwaite by hand: t = 4.5 / sqrt(1/3 + 2.25/3) = 4.32, df = 3.48
    a, b = [10.0, 11.0, 12.0], [14.0, 15.5, 17.0]
    w = stats.welch(a, b)
    va, vb = statistics.variance(a) / 3, statistics.variance(b) / 3
    assert w.t == pytest.approx((15.5 - 11) / (va + vb) ** 0.5)
    assert w.df == pytest.approx((va + vb) ** 2 / (va ** 2 / 2 + vb ** 2 / 2))
    assert w.p == pytest.approx(stats.t_sf_two_sided(w.t, w.df))
    assert 0.01 < w.p < 0.03


def test_welch_without_spread():
    assert stats.welch([1, 1, 1], [1, 1, 1]).p == 1.0
    assert stats.welch([1, 1, 1], [2, 2, 2]).p == 0.0


@pytest.mark.parametrize(("metric", "direction"), [
    ("videoamme.accuracy", "higher"), ("seedtts.throughput_qps", "higher"), ("seedtts.sim", "higher"),
    ("seedtts.utmos", "higher"), ("seedtts.latency_p95_s", "lower"), ("seedtts.rtf_mean", "lower"),
    ("seedtts.wer.wer_below_50_corpus", "lower"), ("seedtts.sim_skipped", "lower"), ("seedtts.failed", "lower"),
    ("seedtts.audio_throughput_s_per_s", "context"), ("seedtts.completion_tokens_sum", "context"),
    ("audio.empty_or_nan", "lower"), ("selftest.latency_mean_s", "lower"),
])
def test_directions_follow_the_runbook(metric, direction):
    assert metrics.direction(metric) == direction


def test_throughput_spread_with_output_length_spread_is_flagged():
    values = {"seedtts.throughput_qps": [14.0, 12.0, 13.0], "seedtts.completion_tokens_sum": [9000, 10500, 9800],
              "videoamme.throughput_qps": [0.6, 0.61, 0.6]}
    rel = {k: statistics.stdev(v) / statistics.mean(v) for k, v in values.items()}
    notes = {f.metric: f.note for f in metrics.flags(values, rel)}
    assert "completion_tokens_sum spread" in notes["seedtts.throughput_qps"]
    assert "one batch" in notes["videoamme.throughput_qps"]
    steady = {**values, "seedtts.completion_tokens_sum": [9800, 9800, 9800]}
    rel = {k: statistics.stdev(v) / statistics.mean(v) for k, v in steady.items()}
    assert "seedtts.throughput_qps" not in {f.metric for f in metrics.flags(steady, rel)}
