"""The campaign layer's statistics, checked against t-table values, hand computations and SciPy,
and the runbook's directions."""

from __future__ import annotations

import statistics

import pytest
from scipy import stats as scipy_stats

from omnibench_core.campaign import directions as metrics
from omnibench_core.stats import estimators as stats


@pytest.mark.parametrize(("t", "df", "p"), [
    (12.706204736, 1, 0.05),  # the t table's 97.5 % quantiles
    (2.776445105, 4, 0.05),
    (2.570581836, 5, 0.05),
    (2.0, 5, 0.101939),  # P(|T| >= 2) with 5 df
    (1.0, 10, 0.340893),
    (0.0, 3, 1.0),
    (3.169272667, 10, 0.01),
])
def test_two_sided_t_tail_and_quantile_match_the_t_table(t, df, p):
    assert stats.t_sf_two_sided(t, df) == pytest.approx(p, abs=2e-6)
    assert stats.t_sf_two_sided(-t, df) == pytest.approx(p, abs=2e-6)
    if t:
        assert stats.t_quantile(1 - p / 2, df) == pytest.approx(t, rel=2e-5)


@pytest.mark.parametrize("df", [1, 2, 3.48, 7, 30, 1e6])
def test_t_functions_agree_with_scipy_stats_t(df):
    for q in (0.5, 0.9, 0.975, 0.99583, 0.9995):
        assert stats.t_quantile(q, df) == pytest.approx(scipy_stats.t.ppf(q, df), rel=1e-9)
    assert stats.t_cdf(-1.3, df) == pytest.approx(scipy_stats.t.cdf(-1.3, df), rel=1e-9)
    assert stats.t_cdf(-1.3, df) == pytest.approx(1 - stats.t_cdf(1.3, df))


def test_paired_t_interval_computed_by_hand():
    # differences 0.1 0.2 0.3 0.2: mean 0.2, sd sqrt(0.02/3), se sd/2, t(0.975, 3) = 3.182446305 (t table)
    est = stats.paired_t([0.1, 0.2, 0.3, 0.2])
    se = (0.02 / 3) ** 0.5 / 2
    assert est.estimate == pytest.approx(0.2) and est.se == pytest.approx(se) and est.df == 3
    low, high = est.interval(0.05)
    assert low == pytest.approx(0.2 - 3.182446305 * se) and high == pytest.approx(0.2 + 3.182446305 * se)
    assert (round(low, 4), round(high, 4)) == (0.0701, 0.3299)
    ref = scipy_stats.ttest_1samp([0.1, 0.2, 0.3, 0.2], 0.0)
    assert est.p == pytest.approx(ref.pvalue) and (low, high) == pytest.approx(tuple(ref.confidence_interval(0.95)))


def test_welch_matches_a_worked_example_and_scipy():
    # Welch-Satterthwaite by hand: t = 4.5 / sqrt(1/3 + 2.25/3) = 4.32, df = 3.48
    a, b = [10.0, 11.0, 12.0], [14.0, 15.5, 17.0]
    w = stats.welch_t(a, b)
    va, vb = statistics.variance(a) / 3, statistics.variance(b) / 3
    assert w.estimate == 4.5 and w.estimate / w.se == pytest.approx((15.5 - 11) / (va + vb) ** 0.5)
    assert w.df == pytest.approx((va + vb) ** 2 / (va ** 2 / 2 + vb ** 2 / 2)) == pytest.approx(3.48, abs=0.01)
    assert 0.01 < w.p < 0.03
    ref = scipy_stats.ttest_ind(b, a, equal_var=False)
    assert w.p == pytest.approx(ref.pvalue) and w.interval(0.05) == pytest.approx(tuple(ref.confidence_interval(0.95)))


def test_no_spread_is_never_a_t_statistic():
    with pytest.raises(ValueError, match="no spread"):
        stats.paired_t([0.2, 0.2, 0.2])
    with pytest.raises(ValueError, match="neither side"):
        stats.welch_t([1, 1, 1], [2, 2, 2])
    assert stats.welch_t([1, 1, 1], [2, 2.1, 2.2]).p > 0  # one side constant is Welch's ordinary case


def test_exact_permutation_p_values():
    assert [stats.exact_p_paired(n) for n in (1, 2, 3, 6)] == [1.0, 0.5, 0.25, 0.03125]
    assert stats.exact_p_unpaired(3, 3) == pytest.approx(0.1)  # 2 of the C(6, 3) = 20 labellings
    assert stats.exact_p_unpaired(4, 4) == pytest.approx(2 / 70) and stats.exact_p_unpaired(1, 1) == 1.0


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
