"""The four verdicts: the rules against intervals computed here and by SciPy, the exact rule for
metrics without spread, Holm's levels, the rounds-needed estimate checked by measuring that many
rounds, bisect's step decision, and `invoke compare` of real local campaigns."""

from __future__ import annotations

import csv
import json
import math
import os
import re
import statistics
import subprocess
import sys
from pathlib import Path

import pytest
from run_helpers import REPO, free_port
from scipy import stats as scipy_stats
from test_docs import run_page_command, shell_commands

from omnibench_core.campaign.compare import VERDICTS as COMPARE_VERDICTS
from omnibench_core.scale import bisect
from omnibench_core.scale.campaigns import Verdict as MetricVerdict
from omnibench_core.scale.matrix import _verdict_text
from omnibench_core.stats.verdict import (
    VERDICTS,
    Design,
    Samples,
    Verdict,
    change_text,
    holm_levels,
    interval_text,
    judge,
)

PAIRED, UNPAIRED = Design.PAIRED, Design.UNPAIRED


def _one(a, b, design=UNPAIRED, direction="lower", **kw):
    return judge([Samples("w.latency_mean_s", direction, tuple(a), tuple(b))], design, **kw)[0]


def _pattern(n: int, mean: float, sd: float) -> list[float]:
    """n numbers with exactly this sample mean and sd."""
    z = [i - (n - 1) / 2 for i in range(n)]
    scale = statistics.stdev(z)
    return [mean + sd * x / scale for x in z]


def test_the_verdict_words_are_the_enum_and_compare_re_exports_them():
    assert VERDICTS == ("better", "worse", "equivalent", "inconclusive", "context")
    assert COMPARE_VERDICTS is VERDICTS
    assert Verdict.WORSE == "worse" and f"{Verdict.WORSE}" == "worse" and json.dumps(Verdict.WORSE) == '"worse"'


def test_paired_interval_is_the_t_interval_of_the_log_ratios_back_transformed():
    a = [0.100, 0.120, 0.090, 0.110]
    b = [0.130, 0.150, 0.125, 0.135]
    row = _one(a, b, PAIRED)
    d = [math.log(y / x) for x, y in zip(a, b, strict=True)]
    ref = scipy_stats.ttest_1samp(d, 0.0)
    low, high = ref.confidence_interval(0.95)
    assert row.level == 0.05 and row.confidence == pytest.approx(0.95) and row.p == pytest.approx(ref.pvalue)
    assert row.change == pytest.approx(math.exp(statistics.mean(d)) - 1)
    assert (row.low, row.high) == pytest.approx((math.expm1(low), math.expm1(high)))
    assert row.verdict == Verdict.WORSE and row.method == "paired t, log(B/A)"  # latency up is worse
    assert _one(a, b, PAIRED, direction="higher").verdict == Verdict.BETTER
    assert interval_text(row.low, row.high, row.relative).startswith("[+") and change_text(row.change, True)[0] == "+"


def test_unpaired_interval_is_welchs_on_b_minus_a_as_a_fraction_of_a():
    a, b = [10.0, 11.0, 12.0], [14.0, 15.5, 17.0]
    row = _one(a, b, direction="higher")
    ref = scipy_stats.ttest_ind(b, a, equal_var=False)
    low, high = ref.confidence_interval(0.95)
    assert row.p == pytest.approx(ref.pvalue) and (row.low, row.high) == pytest.approx((low / 11, high / 11))
    assert row.change == pytest.approx(4.5 / 11)  # the change of the means the table shows
    assert row.verdict == Verdict.BETTER and row.method == "Welch t, B - A" and row.needed is None


def test_a_big_swing_with_a_wide_interval_is_inconclusive_and_says_how_many_runs():
    # the case: identical code, throughput +75 % between two campaigns on a busy host
    a, b = [8.0, 14.0, 5.0], [16.0, 9.0, 21.0]
    row = _one(a, b, direction="higher")
    assert row.change > 0.5 and row.low < 0 < row.high
    assert row.verdict == Verdict.INCONCLUSIVE and row.needed and row.needed > 3
    assert "includes 0" in row.why and f"about {row.needed} runs a side" in row.why


def test_a_real_but_negligible_change_is_equivalent_and_a_small_unclear_one_inconclusive():
    a = _pattern(10, 100.0, 0.2)
    tight = _one(a, [x * 1.01 for x in a], PAIRED)  # +1 % in every round, a hair of spread
    assert tight.low > 0 and tight.high < 0.05 and tight.verdict == Verdict.EQUIVALENT
    # +1 % again, but rounds that scatter by several percent: neither excluded nor inside +-5 %
    noisy = _one([100.0] * 4, [101 * math.exp(x) for x in _pattern(4, 0, 0.05)], PAIRED)
    assert noisy.high > 0.05 and noisy.verdict == Verdict.INCONCLUSIVE and "beyond ±5%" in noisy.why
    # excluded from 0 but smaller than the minimum effect, interval past it: inconclusive, not worse
    small = _one(a, [x * 1.04 * (1 + e) for x, e in zip(a, _pattern(10, 0, 0.03), strict=True)], PAIRED)
    assert small.low > 0 and small.high > 0.05 and small.change < 0.05 and small.verdict == Verdict.INCONCLUSIVE


def test_the_exact_rule_when_nothing_spreads():
    same = _one([8, 8, 8], [8, 8, 8], direction="higher")
    assert same.verdict == Verdict.EQUIVALENT and same.p == 1.0 and (same.low, same.high) == (0.0, 0.0)
    assert same.method.startswith("exact")
    # every run 8 -> 7: a permutation p of 2/C(6,3) = 0.1, never 0; 4 runs a side give 2/70
    fewer = _one([8, 8, 8], [7, 7, 7], direction="higher")
    assert fewer.p == pytest.approx(0.1) and fewer.verdict == Verdict.INCONCLUSIVE and fewer.needed == 4
    assert "exact p" in fewer.why
    assert interval_text(fewer.low, fewer.high, True, fewer.method) == "[-12.5%, -12.5%] exact"
    assert _one([8] * 4, [7] * 4, direction="higher").verdict == Verdict.WORSE
    # paired: the same ratio every round, a sign-flip p of 2/2^n: 3 rounds 0.25, 6 rounds 0.031
    paired = _one([1.0, 2.0, 4.0], [1.1, 2.2, 4.4], PAIRED)  # log-ratios equal up to the last bit
    assert paired.method.startswith("exact") and paired.p == 0.25 and paired.needed == 6
    assert _one([1.0, 2.0, 4.0] * 2, [1.1, 2.2, 4.4] * 2, PAIRED).verdict == Verdict.WORSE
    # below the minimum effect with no spread is equivalent at once
    assert _one([100.0] * 2, [101.0] * 2).verdict == Verdict.EQUIVALENT


def test_counts_with_zeros_are_read_on_b_minus_a():
    none = _one([0, 0, 0], [0, 0, 0])
    assert none.verdict == Verdict.EQUIVALENT and not none.relative and none.method == "exact (no spread), B - A"
    failed = _one([0] * 4, [1] * 4)
    assert failed.verdict == Verdict.WORSE and change_text(failed.change, failed.relative) == "B-A +1"
    mixed = _one([0.0, 2.0, 1.0], [1.0, 3.0, 2.0], PAIRED)  # B - A relative to A's mean of 1
    assert mixed.relative and mixed.change == pytest.approx(1.0) and mixed.method == "exact (no spread), B - A"


def test_rows_without_numbers_are_inconclusive_and_outside_the_family():
    rows = judge([Samples("w.latency_mean_s", "lower", (1.0, float("nan")), (1.0, 2.0)),
                  Samples("w.rtf", "lower", (1.0,), (2.0,)),
                  Samples("w.audio_duration_s", "context", (1.0, 1.1), (1.0, 1.2))], UNPAIRED)
    assert [r.verdict for r in rows] == [Verdict.INCONCLUSIVE, Verdict.INCONCLUSIVE, Verdict.CONTEXT]
    assert "not a finite number" in rows[0].why and rows[0].low is None and rows[0].p is None
    assert rows[2].level == 0.05 and rows[2].low is not None  # context rows keep their interval


def test_holm_levels_step_down_and_stop_at_the_first_failure():
    assert holm_levels([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.05 / 3, 0.025, 0.025, 0.0125])
    assert holm_levels([0.001, 0.002]) == pytest.approx([0.025, 0.05])
    assert holm_levels([]) == []
    # held below its level exactly when Holm's adjusted p (max over the smaller ones of (m-j) p) is below alpha
    ps = [0.0004, 0.02, 0.011, 0.3, 0.009, 0.0131, 0.04]
    order = sorted(range(len(ps)), key=ps.__getitem__)
    adjusted, running = {}, 0.0
    for rank, i in enumerate(order):
        running = max(running, (len(ps) - rank) * ps[i])
        adjusted[i] = min(1.0, running)
    levels = holm_levels(ps)
    assert [p < lv for p, lv in zip(ps, levels, strict=True)] == [adjusted[i] < 0.05 for i in range(len(ps))]


def test_a_family_is_held_to_alpha_and_each_row_shows_its_level():
    a = _pattern(4, 1.0, 0.02)
    family = [Samples(f"w.latency_{i}", "lower", tuple(a), tuple(x * f for x in _pattern(4, 1.0, 0.02)))
              for i, f in enumerate((1.30, 1.06, 1.0))]
    rows = judge(family, UNPAIRED)
    assert [round(r.level, 4) for r in rows] == [round(0.05 / 3, 4), 0.025, 0.05]  # the last: p = 1
    assert [r.verdict for r in rows] == [Verdict.WORSE, Verdict.WORSE, Verdict.EQUIVALENT]
    assert rows[0].confidence == pytest.approx(1 - 0.05 / 3)
    alone = judge(family[1:2], UNPAIRED)[0]  # the same +6 % alone is held to 0.05: a narrower interval
    assert alone.level == 0.05 and alone.high - alone.low < rows[1].high - rows[1].low


@pytest.mark.parametrize("design", [PAIRED, UNPAIRED])
def test_the_rounds_needed_estimate_resolves_at_that_many_rounds(design):
    # A and B at a spread of 6 % with a +10 % change: 3 rounds cannot tell
    def sides(n):
        if design is PAIRED:  # log-ratios with exactly this mean and spread
            return [1.0] * n, [1.10 * math.exp(x) for x in _pattern(n, 0, 0.06)]
        return _pattern(n, 1.0, 0.06), _pattern(n, 1.10, 0.06)  # means and sds exactly

    row = _one(*sides(3), design)
    assert row.verdict == Verdict.INCONCLUSIVE and row.needed
    assert _one(*sides(row.needed), design).verdict == Verdict.WORSE
    assert _one(*sides(row.needed - 1), design).verdict == Verdict.INCONCLUSIVE
    # an equivalence needs rounds too: +1 % at the same spread
    flat = _one([1.0] * 3, [1.01 * math.exp(x) for x in _pattern(3, 0, 0.06)], PAIRED)
    assert flat.verdict == Verdict.INCONCLUSIVE and flat.needed
    assert _one([1.0] * flat.needed, [1.01 * math.exp(x) for x in _pattern(flat.needed, 0, 0.06)],
                PAIRED).verdict == Verdict.EQUIVALENT


def _scale_verdict(word: str, **kw) -> MetricVerdict:
    return MetricVerdict("w.latency_mean_s", 1.0, 1.2, 0.2, word, "why", -0.1, 0.5, True, 0.05, kw.get("needed"))


def test_bisect_steps_on_the_good_end_then_the_bad_end_and_stops_when_neither_tells():
    good, bad, same, unsure = (_scale_verdict(w) for w in ("better", "worse", "equivalent", "inconclusive"))
    assert bisect.is_bad(bad) is True
    assert bisect.is_bad(same) is False and bisect.is_bad(good) is False
    assert bisect.is_bad(bad, unsure) is True  # the bad end is asked only when the good end cannot tell
    # against the good end inconclusive: better than the bad end lacks its regression, equivalent has it
    assert bisect.is_bad(unsure, good) is False
    assert bisect.is_bad(unsure, same) is True and bisect.is_bad(unsure, bad) is True
    assert bisect.is_bad(unsure, unsure) is None and bisect.is_bad(unsure) is None
    with pytest.raises(bisect.SettingsError, match="context"):
        bisect.is_bad(_scale_verdict("context"))
    err = bisect.inconclusive_error({"abcdef0123": _scale_verdict("inconclusive", needed=7)}, runs=3)
    assert isinstance(err, bisect.InconclusiveStep) and "--runs 7" in err.hint
    assert "[-10.0%, +50.0%]" in err.evidence["abcdef0"]


def test_bisect_verdicts_come_from_the_verdict_code():
    # a commit +20 % against the good end at a spread of 6 %, 3 runs, threshold 30 %: inconclusive;
    # against a bad end at +100 % it is clearly better, so the step is good
    rows = {}
    b = [1.2 * math.exp(x) for x in _pattern(3, 0, 0.06)]
    for name, level in (("good", 1.0), ("bad", 2.0)):
        a = [level * math.exp(x) for x in _pattern(3, 0, 0.06)]
        r = _one(a, b, direction="lower", min_effect=0.3)
        rows[name] = MetricVerdict(r.metric, None, None, r.change, r.verdict, r.why, r.low, r.high, r.relative,
                                   r.level, r.needed)
    assert rows["good"].verdict == "inconclusive" and rows["bad"].verdict == "better"
    assert bisect.is_bad(rows["good"], rows["bad"]) is False


# -- invoke compare of real local campaigns -------------------------------------------------------
@pytest.fixture(scope="module")
def campaigns(tmp_path_factory):
    """Three small selftest campaigns, made with `invoke measure`: A and an A/A repeat with 150 ms
    planted per request (so the host's noise is small beside it), and B with 300 ms."""
    results = tmp_path_factory.mktemp("verdicts") / "results"

    def invoke(*args, delay=150):
        env = {**os.environ, "INVOKE_OMNIBENCH_RESULTS": str(results), "INVOKE_OMNIBENCH_LOCAL_DELAY_MS": str(delay)}
        return subprocess.run([sys.executable, "-m", "invoke", *args], cwd=REPO, env=env, capture_output=True,
                              text=True, timeout=600)

    # fast and slower: the docs' own commands (EXPORT_COMMANDS), as written
    for command in EXPORT_COMMANDS[:2]:
        done = run_page_command(command, paths={}, env={"INVOKE_OMNIBENCH_RESULTS": str(results),
                                                        "INVOKE_OMNIBENCH_PORT": str(free_port())}, timeout=600)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr
    done = invoke("measure", "-w", "selftest", "-o", "selftest.requests=4", "--runs", "2", "--name", "again",
                  "-p", str(free_port()), delay=150)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr
    return invoke, results


def _json_of(stdout: str) -> dict:
    path = next(line.split(": ", 1)[1] for line in stdout.splitlines() if line.startswith("comparison data: "))
    return json.loads(Path(path).read_text())


@pytest.mark.slow
def test_invoke_compare_calls_a_planted_delay_worse_with_its_interval(campaigns):
    invoke, _ = campaigns
    done = invoke("compare", "fast", "slower", "--fail-on", "worse")
    assert done.returncode == 1 and "--fail-on worse: selftest.latency_mean_s: worse" in done.stderr, done.stdout + done.stderr
    row = next(line for line in done.stdout.splitlines() if line.startswith("selftest.latency_mean_s"))
    assert "WORSE" in row and "[+" in row, done.stdout
    # the latency and the server's start (selftest.server_ready_s) are judged; the rest have no better side
    assert "a family of 2 held to alpha 0.05 (Holm)" in done.stdout
    assert any(line.startswith("selftest.server_ready_s") for line in done.stdout.splitlines()), done.stdout
    doc = _json_of(done.stdout)
    latency = next(m for m in doc["metrics"] if m["name"] == "selftest.latency_mean_s")
    assert latency["verdict"] == "worse" and 0 < latency["low"] < latency["pct"] < latency["high"]
    # failed and matched are equal in every run: they could never reach alpha, so the family is latency and
    # the server's start; Holm holds the smaller p of the two to alpha / 2, the other to alpha
    ready = next(m for m in doc["metrics"] if m["name"] == "selftest.server_ready_s")
    assert ready["in_family"] and ready["direction"] == "lower"
    assert sorted([latency["level"], ready["level"]]) == [0.025, 0.05]
    assert latency["in_family"] and latency["method"] == "Welch t, B - A"
    matched = next(m for m in doc["metrics"] if m["name"] == "selftest.matched")
    assert matched["verdict"] == "equivalent" and matched["method"].startswith("exact") and not matched["in_family"]
    assert doc["correction"] == "Holm" and "Welch" in doc["test"]
    assert invoke("compare", "fast", "slower", "--fail-on", "better").returncode == 0


@pytest.mark.slow
def test_invoke_compare_of_an_a_a_pair_calls_nothing_better_or_worse(campaigns):
    invoke, _ = campaigns
    # alpha 0.001, as test_ab's A/A: two campaigns measured minutes apart on a loaded host differ
    # by that host's load (what `invoke ab` pairs away); the test is about the code, not the host
    done = invoke("compare", "fast", "again", "--fail-on", "worse", "--alpha", "0.001")
    assert done.returncode == 0, done.stdout + done.stderr
    verdicts = {m["name"]: m["verdict"] for m in _json_of(done.stdout)["metrics"]}
    assert not {"better", "worse"} & set(verdicts.values()), done.stdout
    assert verdicts["selftest.latency_mean_s"] in ("equivalent", "inconclusive")
    if verdicts["selftest.latency_mean_s"] == "inconclusive":
        assert "runs a side would resolve it" in done.stdout


def _stats(title: str, ready: list[float], noisy: tuple[str, ...]):
    from statistics import mean, stdev

    from omnibench_core.campaign.summary import MetricStats, RunSetStats

    values = {f"run{i + 1}": v for i, v in enumerate(ready)}
    m = MetricStats("selftest.server_ready_s", values, mean(ready), stdev(ready), "lower", None)
    return RunSetStats(title, tuple(values), (), {}, (m,), noisy=noisy)


@pytest.mark.parametrize("noisy, verdict", [((), "better"), (("run2: selftest.client: 88% of the slot's CPU",), "inconclusive")])
def test_a_server_start_moved_on_a_busy_host_is_not_called_the_codes(noisy, verdict):
    """An A/A pair on a host with two CPU hogs read server_ready_s 1.83 s against 1.32 s (-28 %,
    "better"): load that came and went between the two campaigns. With the noise guard's evidence
    of a busy host the start's verdict is inconclusive, saying why; on a quiet host it is judged."""
    from omnibench_core.campaign.compare import compare

    a = _stats("A", [1.70, 1.83, 1.97], noisy)
    b = _stats("B", [1.30, 1.32, 1.33], ())
    (row,) = compare(a, b).metrics
    assert row.verdict == verdict
    if noisy:
        assert "noise guard found the host busy" in row.why and "invoke ab" in row.why


def test_matrix_column_names_what_moved_what_is_unclear_and_otherwise_equivalent():
    moved = MetricVerdict("w.latency_mean_s", 1.0, 2.0, 1.0, "worse", "", 0.8, 1.2, True, 0.05)
    unclear = _scale_verdict("inconclusive", needed=9)
    same = _scale_verdict("equivalent")
    assert _verdict_text([moved, unclear, same]) == ("w.latency_mean_s worse +100.0% [+80.0%, +120.0%]; "
                                                     "inconclusive: w.latency_mean_s (~9 runs)")
    assert _verdict_text([same]) == "equivalent on every metric with a better side"


def test_two_far_apart_rounds_at_a_small_level_give_an_unbounded_interval_not_an_overflow():
    """A paired t interval of 2 rounds at level 1e-6 reaches e^1000 on the log scale: the row is
    inconclusive with "+inf%" as its upper end (an A/A `ab --rounds 2 --alpha 0.001` crashed on it)."""
    s = Samples("x.latency_mean_s", "lower", (1.0, 1.0), (0.5, 3.0))
    (row,) = judge([s], Design.PAIRED, alpha=1e-6)
    assert row.verdict is Verdict.INCONCLUSIVE and row.high == math.inf
    assert interval_text(row.low, row.high, row.relative).endswith("+inf%]")


EXPORT_COMMANDS = ("INVOKE_OMNIBENCH_LOCAL_DELAY_MS=150 invoke measure -w selftest -o selftest.requests=4 --name fast",
                   "INVOKE_OMNIBENCH_LOCAL_DELAY_MS=300 invoke measure -w selftest -o selftest.requests=4 --name slower",
                   "invoke report --name fast --csv report.csv",
                   "invoke compare fast slower --csv compare.csv --json compare.json")


def test_the_docs_show_the_export_commands_these_tests_run():
    """Each page shows the four commands, in this order, one block: what the exports name is made there."""
    for page in ("usage.md", "campaigns.md"):
        commands = shell_commands((REPO / "docs" / page).read_text())
        at = commands.index(EXPORT_COMMANDS[0])
        assert tuple(commands[at:at + 4]) == EXPORT_COMMANDS, page


@pytest.mark.slow
def test_report_and_compare_export_exact_rows_with_units_in_their_columns(campaigns, tmp_path):
    # the docs' commands (EXPORT_COMMANDS), their files put under tmp_path
    invoke, results = campaigns
    out = tmp_path / "exports"
    done = invoke("compare", "fast", "slower", "--csv", str(out / "compare.csv"), "--json", str(out / "compare.json"))
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"wrote CSV rows: {out / 'compare.csv'}" in done.stdout
    doc = {m["name"]: m for m in _json_of(done.stdout)["metrics"]}
    rows = {r["metric"]: r for r in json.loads((out / "compare.json").read_text())}
    latency = rows["selftest.latency_mean_s"]
    assert latency["unit"] == "seconds" and latency["verdict"] == "worse"
    # exact values, not the table's three digits
    assert latency["a_mean"] == doc["selftest.latency_mean_s"]["a_mean"]
    assert latency["interval_low"] == doc["selftest.latency_mean_s"]["low"]
    with (out / "compare.csv").open() as handle:
        by_metric = {r["metric"]: r for r in csv.DictReader(handle)}
    assert float(by_metric["selftest.latency_mean_s"]["b_mean"]) == doc["selftest.latency_mean_s"]["b_mean"]
    # report: one row a run, one column a metric with its unit; the runs' exact values
    made = invoke("report", "--name", "fast", "--csv", str(out / "report.csv"))
    assert made.returncode == 0, made.stdout + made.stderr
    with (out / "report.csv").open() as handle:
        runs = list(csv.DictReader(handle))
    run1 = next(results.glob("*/run1"))
    exact = json.loads((run1 / "metrics.json").read_text())["metrics"]["selftest.latency_mean_s"]
    assert [r["run"] for r in runs] == ["run1", "run2", "run3"]
    assert float(runs[0]["selftest.latency_mean_s [seconds]"]) == exact
    # the table prints milliseconds; 4 requests a run support no p50 (6 needed): the report says so
    assert re.search(r"selftest\.latency_mean_s +lower +[0-9.]+ ms", made.stdout), made.stdout
    assert "selftest.latency_p50_s: thin percentile, not measured (6 samples needed; run1 n=4" in made.stdout
    # a path whose new folder breaks the name rule is refused before anything is written
    bad = invoke("report", "--name", "fast", "--json", str(tmp_path / "a b" / "r.json"))
    assert bad.returncode == 1 and "--json" in bad.stderr and not (tmp_path / "a b").exists(), bad.stderr
