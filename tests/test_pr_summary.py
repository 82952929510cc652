"""Pull-request summaries: the real `invoke compare` and `invoke ab` write summary.md beside their
result and append it to $GITHUB_STEP_SUMMARY (after what earlier steps wrote there), the changed
metrics first with their intervals and verdicts, the rest folded; a history range gets the same
renderer; a summary stays under GitHub's comment limit however many metrics there are."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from history_samples import history
from run_helpers import REPO, free_port

from omnibench_core.campaign import pr_summary as summary
from omnibench_core.campaign.compare import Comparison, MetricComparison
from omnibench_core.history.summary import from_history
from omnibench_core.stats.verdict import Verdict

QUICK = ("--opt", "selftest.requests=4", "--opt", "selftest.delay=0.05")
GITHUB_LIMIT = 65_536
EARLIER = "## an earlier step's summary\n"


def _invoke(results: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "invoke", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=600, env={**os.environ, "INVOKE_OMNIBENCH_RESULTS": str(results), **env})


def _changed_then_folded(text: str, changed: str) -> tuple[str, str]:
    """The part before <details> and the folded part; ``changed``'s row is in the first."""
    head, folded = text.split("<details>", 1)
    assert f"| {changed} |" in head and "**WORSE**" in head, text
    return head, folded


@pytest.mark.slow
def test_invoke_compare_writes_the_summary_beside_compare_md_and_appends_it_to_the_step_summary(tmp_path):
    results, step = tmp_path / "results", tmp_path / "step_summary.md"
    # three runs a side and a large step: two runs a side leave Welch about one degree of freedom,
    # and one run slowed by a busy machine then makes the planted step inconclusive. 1.5 s, not
    # 0.4: beside two CPU hogs one of A's runs read about 320 ms above its others (A 112 ms ± 187)
    # and 0.4 s was `inconclusive` (2026-12-07, docs/development.md); sleeping costs no CPU
    for name, delay in (("base", "0"), ("cand", "1500")):
        made = _invoke(results, "measure", "-w", "selftest", "--runs", "3", *QUICK, "--name", name,
                       "-p", str(free_port()), INVOKE_OMNIBENCH_LOCAL_DELAY_MS=delay)
        assert made.returncode == 0, made.stdout + made.stderr
    step.write_text(EARLIER)
    done = _invoke(results, "compare", "base", "cand", "--fail-on", "worse", GITHUB_STEP_SUMMARY=str(step))
    assert done.returncode == 1 and "selftest.latency_mean_s: worse" in done.stderr, done.stdout + done.stderr
    (folder,) = (results / "comparisons").iterdir()
    written = (folder / "summary.md").read_text()
    assert f"pull-request summary: {folder / 'summary.md'}" in done.stdout
    assert step.read_text() == EARLIER + written  # appended, the earlier step's text kept
    head, folded = _changed_then_folded(written, "selftest.latency_mean_s")
    latency = next(line for line in head.splitlines() if line.startswith("| selftest.latency_mean_s |"))
    assert "[+" in latency and "%]" in latency  # its interval, all above 0
    assert "| selftest.matched |" in folded and "equivalent" in folded and "</details>" in folded
    assert "Welch" in head and f"`{folder / 'compare.md'}`" in written and len(written) < GITHUB_LIMIT
    again = _invoke(results, "compare", "base", "cand", GITHUB_STEP_SUMMARY=str(step))
    assert again.returncode == 0 and (folder / "summary-2.md").is_file() and (folder / "compare-2.md").is_file()
    assert step.read_text() == EARLIER + written + (folder / "summary-2.md").read_text()
    refused = _invoke(results, "compare", "base", "cand", GITHUB_STEP_SUMMARY=str(tmp_path))  # a folder
    assert refused.returncode == 1 and "cannot append the summary to $GITHUB_STEP_SUMMARY" in refused.stderr
    assert "Traceback" not in refused.stderr and (folder / "summary-3.md").is_file()


@pytest.mark.slow
def test_invoke_ab_writes_the_summary_beside_ab_md_and_appends_it_to_the_step_summary(tmp_path):
    results, step = tmp_path / "results", tmp_path / "step_summary.md"
    step.write_text(EARLIER)
    done = _invoke(results, "ab", "--workload", "selftest", "--port", str(free_port()), *QUICK,
                   # both sides with a base latency (a change relative to A's few milliseconds alone is
                   # mostly noise on a busy machine) and three rounds: two leave one degree of freedom,
                   # and one round slowed by a busy machine then made a 4x step inconclusive
                   "--a-set", "local_delay_ms=50", "--b-set", "local_delay_ms=500", "--rounds", "3",
                   GITHUB_STEP_SUMMARY=str(step))
    assert done.returncode == 0, done.stdout + done.stderr
    (md,) = (results / "ab").glob("*/ab.md")
    written = (md.parent / "summary.md").read_text()
    assert step.read_text() == EARLIER + written and f"pull-request summary: {md.parent / 'summary.md'}" in done.stdout
    head, folded = _changed_then_folded(written, "selftest.latency_mean_s")
    assert "paired" in head and "over 3 rounds" in head and "| selftest.requests |" in folded
    assert f"`{md}`" in written and len(written) < GITHUB_LIMIT


def test_without_the_variable_nothing_is_appended_anywhere(tmp_path):
    assert summary.append_step_summary("x", environ={}) is None
    assert summary.append_step_summary("x", environ={"GITHUB_STEP_SUMMARY": ""}) is None
    path = tmp_path / "s.md"
    assert summary.append_step_summary("one", environ={"GITHUB_STEP_SUMMARY": str(path)}) == path
    summary.append_step_summary("two\n", environ={"GITHUB_STEP_SUMMARY": str(path)})
    assert path.read_text() == "one\ntwo\n"


def test_a_history_range_gets_its_change_points_first_worse_before_the_others(tmp_path):
    text = summary.markdown(from_history(history(tmp_path / "results")))
    head = text.split("<details>", 1)[0] if "<details>" in text else text
    rows = [line for line in head.splitlines() if line.startswith("| selftest.")]
    assert rows[0].startswith("| selftest.latency_mean_s (selftest, local) |") and "**WORSE**" in rows[0]
    assert "+40.0%" in rows[0] and "[+33.0%, +47.0%]" in rows[0] and "05ababab..06ababab" in rows[0]
    assert "changed (environment)" in rows[1] and "driver: 550.54 -> 560.35" in rows[1]
    assert "E-Divisive" in head and "2 series over 8 measured commits" in head


def test_a_summary_of_thousands_of_metrics_stays_under_githubs_limit_and_says_what_it_left_out(tmp_path):
    def row(i: int, verdict: Verdict) -> MetricComparison:
        return MetricComparison(f"workload{i}.a_rather_long_metric_name_{i}", "lower", 1.0, 0.01, 1.2, 0.01, 0.2, 0.2,
                                0.001, verdict, "the interval excludes 0", 0.15, 0.25)

    metrics = tuple(row(i, Verdict.WORSE if i % 10 == 0 else Verdict.EQUIVALENT) for i in range(5000))
    c = Comparison("r1/base", "r2/cand", "Welch", 0.05, 0.05, metrics, (), False, ())
    text = summary.markdown(summary.from_comparison(c, tmp_path / "compare.md"))
    assert len(text) <= summary.MAX_CHARS < GITHUB_LIMIT
    head, folded = text.split("<details>", 1)
    assert head.count("**WORSE**") > 100 and "more changed metrics: see the full result." in head
    assert "4500 other metrics" in folded and "4500 more: see the full result." in folded
    assert "</details>" in folded and text.rstrip().endswith(f"`{tmp_path / 'compare.md'}`")


def test_a_cell_cannot_break_the_table_or_open_html():
    cell = summary.Row("m|x<script>", "lower", "+1%", "[+0.5%, +2%]", "worse", "a | b")
    line = summary._row(cell)
    assert line.count(" | ") == 5 and "<script>" not in line and "m\\|x&lt;script>" in line


def test_inconclusive_metrics_are_listed_up_front_and_never_read_as_no_change(tmp_path):
    """Four metrics inconclusive at +15 % to +18 %: the summary names each with its change, interval
    and what would decide it; "No metric changed" only when every decided metric is equivalent."""
    def row(name: str, pct: float, verdict: Verdict) -> MetricComparison:
        return MetricComparison(name, "lower", 1.0, 0.2, 1 + pct, 0.2, pct, pct, 0.2, verdict, "the interval is wide",
                                pct - 0.3, pct + 0.3, needed=9 if verdict is Verdict.INCONCLUSIVE else None)

    undecided = tuple(row(f"seedtts.latency_{i}", 0.15 + i / 100, Verdict.INCONCLUSIVE) for i in range(4))
    c = Comparison("r1/base", "r2/cand", "Welch", 0.05, 0.05, (*undecided, row("seedtts.wer", 0.0, Verdict.EQUIVALENT)),
                   (), False, ())
    text = summary.markdown(summary.from_comparison(c, tmp_path / "compare.md"))
    head = text.split("<details>", 1)[0]
    assert "No metric changed" not in text and "Could not tell** for 4 metrics" in head
    assert "No metric was called better or worse" in head
    for i in range(4):
        line = next(x for x in head.splitlines() if x.startswith(f"| seedtts.latency_{i} |"))
        assert f"+{15 + i}.0%" in line and "inconclusive" in line and "about 9 runs a side would resolve it" in line
    assert "| seedtts.wer |" in text.split("<details>", 1)[1]  # the equivalent one is folded
    calm = Comparison("r1/base", "r2/cand", "Welch", 0.05, 0.05, (row("seedtts.wer", 0.0, Verdict.EQUIVALENT),), (),
                      False, ())
    assert "No metric changed." in summary.markdown(summary.from_comparison(calm, tmp_path / "compare.md"))
