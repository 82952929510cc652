"""Real campaigns on the local target with the selftest workload (about a second a run): resume
after Ctrl-C, retries, the report against the runbook's statistics block, a mixed set refused,
compare's verdicts on a planted latency and its guard, plots."""

from __future__ import annotations

import hashlib
import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from run_helpers import REPO, free_port

from omnibench_core import api
from omnibench_core.campaign import campaign_file, plots
from omnibench_core.campaign import execute as campaign_execute
from omnibench_core.campaign import front_door as campaign
from omnibench_core.campaign.compare import NotComparable
from omnibench_core.campaign.progress import PAST
from omnibench_core.campaign.summary import MixedRuns
from omnibench_core.settings import Settings
from omnibench_core.units import unit_of

ORACLE = Path(__file__).with_name("runbook_stats.py")
QUIET = lambda message: None  # noqa: E731


def _measure(settings, *opts, runs=3, retries=2, scoring="deferred", name=None):
    asked = campaign_execute.asked_from(settings, ["selftest"], list(opts), None, runs, retries, scoring)
    return campaign_execute.measure(settings, asked, name=name, progress=QUIET)


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("campaigns")


@pytest.fixture(scope="module")
def base(results):
    """A deferred-scoring campaign with 100 ms planted per request (so noise is small beside it)."""
    settings = Settings.of(results=str(results), port=free_port(), local_delay_ms=100)
    return settings, _measure(settings)


@pytest.mark.slow
def test_a_campaign_records_what_was_asked_its_runs_and_server_starts(base):
    settings, outcome = base
    c = outcome.campaign
    assert outcome.path.parent.name == "campaigns" and c.name.startswith("selftest_local_delay100")
    assert c.status == "complete" and [a.run for a in c.measured()] == ["run1", "run2", "run3"]
    assert c.latest(0).run == "run0" and c.latest(0).status == "complete"
    assert c.server_starts == 4 + 1  # a selftest server per run, ONE scoring server for all four (deferred)
    data = json.loads(outcome.path.read_text())
    assert data["asked"]["scoring"] == "deferred" and float(data["asked"]["settings"]["local_delay_ms"]) == 100
    assert data["environment"]["host"] and "packages" in data["environment"]
    again = _measure(settings)  # the same command: nothing to do, nothing repeated
    assert len(again.campaign.attempts) == len(c.attempts)


@pytest.mark.slow
def test_report_equals_the_runbooks_statistics_block(base):
    settings, outcome = base
    made = campaign.report(settings, outcome.campaign.name)
    revision = outcome.path.parent.parent
    oracle = subprocess.run([sys.executable, str(ORACLE), *(str(revision / r) for r in ("run1", "run2", "run3"))],
                            capture_output=True, text=True, check=True).stdout
    for line in oracle.splitlines():
        name, mean, sd, _ = line.split(" ", 3)
        m = made.stats.metric(name)
        assert round(m.mean, 6) == float(mean) and round(m.sd, 6) == float(sd), name
    doc = json.loads(made.written.json.read_text())
    assert doc["metrics"]["selftest.latency_mean_s"]["direction"] == "lower"
    assert set(doc["metrics"]["selftest.requests"]["values"]) == {"run1", "run2", "run3"}
    md = made.written.markdown.read_text()
    assert "| selftest.latency_mean_s | lower |" in md
    assert "- settings: target=local, " in md and "local_delay_ms=100" in md  # planted: among the settings
    if plots.available():
        assert {p.name for p in made.written.plots} >= {"selftest.latency_mean_s.png"}
        assert all(p.stat().st_size > 1000 for p in made.written.plots)
        # selftest.requests is 8 in every run: listed, not plotted
        assert "selftest.requests.png" not in {p.name for p in made.written.plots}
        assert "selftest.requests" in doc["not_plotted_constant"] and "Not plotted, one value in every run: " in md
    else:
        pytest.skip("matplotlib is not installed: install the test extra to check the plots")


@pytest.mark.slow
def test_per_run_scoring_starts_the_scorer_every_run(results):
    settings = Settings.of(results=str(results), port=free_port(), local_delay_ms=1)
    outcome = _measure(settings, runs=2, scoring="per-run")
    assert outcome.campaign.server_starts == 3 * 2  # each run: its selftest server and its own scorer


@pytest.mark.slow
def test_compare_calls_a_planted_tripled_latency_worse_and_a_repeat_the_same(base, results):
    # +200 % (300 ms against 100): a plant of +20 % was once inconclusive beside a loaded suite, whose
    # load stretched one base run's 100 ms to 117 (three runs a side, 2026-12-05), and +50 % once in a
    # whole run with other tests beside it (2026-12-06): Welch at two degrees of freedom needs the
    # plant far outside what load adds. Sleep costs no CPU.
    settings, outcome = base
    slower = Settings.of(results=str(results), port=free_port(), local_delay_ms=300)
    b = _measure(slower)
    repeat = _measure(settings, name="repeat")
    worse = campaign.compare(settings, outcome.campaign.name, b.campaign.name)
    verdicts = {m.name: m.verdict for m in worse.comparison.metrics}
    assert verdicts["selftest.latency_mean_s"] == "worse"
    assert verdicts["selftest.matched"] == "equivalent"  # 8 of 8 in every run: the exact rule
    same = campaign.compare(settings, outcome.campaign.name, repeat.campaign.name)
    assert {m.name: m.verdict for m in same.comparison.metrics}["selftest.latency_mean_s"] not in ("better", "worse")
    doc = json.loads(worse.written.json.read_text())
    assert "Welch" in doc["test"] and doc["min_effect"] == 0.05 and doc["correction"] == "Holm"
    assert "WORSE" in worse.written.markdown.read_text()
    assert worse.written.plots and worse.written.plots[0].is_file()  # matplotlib is a test dependency
    not_plotted = next(line for line in worse.written.markdown.read_text().splitlines()
                       if line.startswith("Not plotted, one value in every run of both: "))
    assert "selftest.failed" in not_plotted and "selftest.latency_mean_s" not in not_plotted
    # --fail-on worse makes the exit code usable in CI
    env = {**os.environ, "INVOKE_OMNIBENCH_RESULTS": str(results)}
    done = subprocess.run([sys.executable, "-m", "invoke", "compare", outcome.campaign.name, b.campaign.name,
                           "--fail-on", "worse"], cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 1 and "--fail-on worse: selftest.latency_mean_s: worse" in done.stderr
    # the comparison says it starts before it reads the runs (and beats while it works)
    assert done.stdout.startswith(f"comparing {b.campaign.name} with base {outcome.campaign.name}: reading their runs")


@pytest.mark.slow
def test_the_guard_names_each_difference_unless_forced(base, results):
    settings, outcome = base
    other = _measure(settings, "selftest.requests=4", runs=2)
    with pytest.raises(NotComparable) as err:
        campaign.compare(settings, outcome.campaign.name, other.campaign.name)
    # only the option that differs is named, not two whole dictionaries of options
    assert err.value.evidence["differences"] == "workload options: selftest.requests A 8, B 4"
    env = {**os.environ, "INVOKE_OMNIBENCH_RESULTS": str(settings.run.results_root)}
    done = subprocess.run([sys.executable, "-m", "invoke", "compare", outcome.campaign.name, other.campaign.name],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 1 and "workload options: selftest.requests A 8, B 4" in done.stderr, done.stderr
    forced = campaign.compare(settings, outcome.campaign.name, other.campaign.name, force=True)
    assert forced.comparison.forced and any("workload options" in d for d in forced.comparison.differences)
    assert "Setups differ" in forced.written.markdown.read_text()


@pytest.mark.slow
def test_report_refuses_runs_of_different_measurements(tmp_path, port):
    settings = Settings.of(results=str(tmp_path), port=port)
    a = api.run(settings, ["selftest"], progress=QUIET)
    b = api.run(settings, ["selftest"], options=["selftest.requests=4"], progress=QUIET)
    with pytest.raises(MixedRuns) as err:
        campaign.report(settings, runs=[a.run_dir.name, b.run_dir.name])
    # in the label's order: run0's value, then run1's (issue 46: the label read "run1 vs run0")
    assert err.value.evidence["differences"] == "run0 vs run1: options.selftest.requests: 8 != 4"
    env = {**os.environ, "INVOKE_OMNIBENCH_RESULTS": str(tmp_path)}
    done = subprocess.run([sys.executable, "-m", "invoke", "report", "--runs", f"{a.run_dir.name},{b.run_dir.name}"],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    # the hint names a command Invoke takes: `invoke report --name NAME`
    assert done.returncode == 1 and "options.selftest.requests: 8 != 4" in done.stderr
    assert "invoke report --name NAME" in done.stderr, done.stderr


@pytest.mark.slow
def test_a_run_that_fails_is_retried_and_retries_run_out(tmp_path, port):
    settings = Settings.of(results=str(tmp_path), port=port)
    flag = tmp_path / "failed-once"
    with pytest.raises(campaign_execute.CampaignStopped, match="--retries 0 is spent"):
        _measure(settings, f"selftest.fail_once={flag}", runs=2, retries=0)
    stopped = campaign_file.load(next((tmp_path).glob("local-*/campaigns/*.json")))
    assert stopped.status == "stopped" and stopped.latest(0).status == "failed"
    assert stopped.latest(0).moved_to.endswith("run0-incomplete")
    outcome = _measure(settings, f"selftest.fail_once={flag}", runs=2, retries=1)  # the same campaign, one retry
    c = outcome.campaign
    assert c.status == "complete" and [a.status for a in c.attempts if a.slot == 0] == ["failed", "complete"]
    assert c.latest(0).run == "run0"  # the retry took the name the failed run freed


@pytest.mark.slow
def test_ctrl_c_during_run2_leaves_a_campaign_the_same_command_resumes(tmp_path):
    env = {**os.environ, "INVOKE_OMNIBENCH_RESULTS": str(tmp_path)}
    argv = [sys.executable, "-m", "invoke", "measure", "-w", "selftest", "-o", "selftest.client_seconds=3",
            "--scoring", "per-run", "-p", str(free_port())]
    proc = subprocess.Popen(argv, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    seen = []
    for line in proc.stdout:
        seen.append(line)
        if "(measured run 2 of 3)" in line and "selftest.client: running" in line:
            proc.send_signal(signal.SIGINT)
            break
    rest, _ = proc.communicate(timeout=600)
    assert proc.returncode == 130, "".join(seen) + rest
    assert "the same command resumes it" in rest
    (revision,) = tmp_path.glob("local-*")
    before = {r: _sha(revision / r / "manifest.json") for r in ("run0", "run1")}
    assert (revision / "run2-incomplete").is_dir() and not (revision / "run2").exists()
    done = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert {r: _sha(revision / r / "manifest.json") for r in ("run0", "run1")} == before  # not repeated
    assert "estimate after the first run" not in done.stdout  # the earlier runs' durations give an estimate
    c = campaign_file.load(next((revision / "campaigns").glob("*.json")))
    assert [a.run for a in c.measured()] == ["run1", "run2", "run3"]
    assert [a.status for a in c.attempts if a.slot == 2] == ["interrupted", "complete"]
    interrupted = next(a for a in c.attempts if a.status == "interrupted")
    assert interrupted.server_starts == 1  # its selftest server had started before Ctrl-C
    assert c.server_starts == 2 * 4 + 1  # per-run: a server and a scorer per run, and the interrupted start
    assert "run 3 of 4 (measured run 2 of 3)" in done.stdout and "left]" in done.stdout


@pytest.mark.slow
def test_measure_says_where_it_starts_and_its_estimate_includes_deferred_scoring(tmp_path):
    """After an `invoke run` of the same workload, a deferred campaign's estimate holds the scoring
    that run took and, before its first run ended, that run's generation; the first line names
    the campaign's start."""
    env = {**os.environ, "INVOKE_OMNIBENCH_RESULTS": str(tmp_path)}
    port = str(free_port())
    first = subprocess.run([sys.executable, "-m", "invoke", "run", "-w", "selftest", "-p", port], cwd=REPO, env=env,
                           capture_output=True, text=True, timeout=600)
    assert first.returncode == 0, first.stdout + first.stderr
    done = subprocess.run([sys.executable, "-m", "invoke", "measure", "-w", "selftest", "--runs", "2", "-p", port],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    # the first estimate, before a run of its own ended, is the earlier `invoke run`'s (issue 43)
    assert re.match(r"\[campaign start \| 0s elapsed \| ~\d+s a run \(earlier runs here\)\] campaign selftest_local",
                    lines[0]), lines[0]
    assert not any(line.startswith("[ |") or "estimate: scoring" in line for line in lines)
    run2 = [line for line in lines if line.startswith("[run 2 of 3")]
    assert run2 and all("left (scoring ~" in line for line in run2), run2  # the runs' generation + 3 to score
    scoring = [line for line in lines if line.startswith("[scoring 3 generated runs together")]
    # each says what is left, or (a busy host scoring slower than the estimate) that it is past it
    assert scoring and " left]" in scoring[0] and all(" left]" in line or f"{PAST}]" in line for line in scoring), scoring


@pytest.mark.parametrize("name, unit", [("seedtts.latency_mean_s", "seconds"), ("seedtts.throughput_qps", "requests/s"),
                                        ("seedtts.audio_throughput_s_per_s", "seconds of audio per second"),
                                        ("seedtts.rtf_mean", "real-time factor (compute s per audio s)"),
                                        ("seedtts.wer.wer_corpus", "word error rate (fraction)"),
                                        ("seedtts.failed", "count"), ("seedtts.utmos", "MOS (1 to 5)"),
                                        ("acme.echoes", "value")])
def test_every_metric_plot_names_its_unit(name, unit):
    assert unit_of(name) == unit


def test_a_metric_plot_reads_on_a_laptop_from_zero_with_its_unit(tmp_path):
    if not plots.available():
        pytest.skip("matplotlib is not installed")
    from PIL import Image

    path = plots.metric_plot(tmp_path / "x.png", "seedtts.sim", {"run1": 0.912, "run2": 0.913}, 0.9125, 0.0007,
                             "higher")
    assert Image.open(path).size == (720, 405)
    fig = plots.compare_figure([("seedtts.sim", [0.912, 0.913], [0.911, 0.913], "equivalent")], "a", "b")
    (ax,) = [a for a in fig.axes if a.axison]
    assert ax.get_ylim()[0] == 0 and ax.get_ylabel() == "cosine similarity"


def test_the_compare_plot_names_base_and_candidate_leaves_out_zeros_and_has_no_offset():
    a, b = "local-b98bee6/selftest_local", "local-b98bee6/selftest_local_delay2.0ms"  # alike for 18 characters
    rows = [("selftest.latency_mean_s", [98.58101, 98.58103, 98.58102], [98.58111, 98.58113, 98.58112], "worse"),
            ("selftest.failed", [0.0, 0.0, 0.0], [0.0, 0.0, 0.0], "no significant change"),
            ("selftest.matched", [8.0, 8.0, 8.0], [8.0, 8.0, 7.0], "no significant change"),
            ("selftest.requests", [8.0, 8.0, 8.0], [8.0, 8.0, 8.0], "no significant change")]
    assert plots.constant_rows(rows) == ["selftest.failed", "selftest.requests"]
    fig = plots.compare_figure(rows, a, b)
    fig.canvas.draw()
    panels = [ax for ax in fig.axes if ax.axison]
    assert [ax.get_title().split("\n")[0] for ax in panels] == ["selftest.latency_mean_s", "selftest.matched"]
    for ax in panels:
        labels = [t.get_text() for t in ax.get_xticklabels()]
        assert labels == ["A: base", "B: candidate"]
        assert ax.yaxis.get_offset_text().get_text() == ""  # no "+9.858e1" beside the axis
        assert ax.get_ylim()[0] == 0  # from zero: a change of 0.0001 % does not fill the panel
        assert not any("e" in t.get_text() for t in ax.get_yticklabels())
    assert [ax.get_ylabel() for ax in panels] == ["seconds", "value"]
    assert f"A: base: {a}" in fig.texts[0].get_text() and f"B: candidate: {b}" in fig.texts[0].get_text()
