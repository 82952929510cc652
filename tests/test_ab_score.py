"""`--score` (issue 43, item 1): a speed question scores one round a side (`invoke ab`) or one run
a load point (`invoke sweep`), never a warm-up; the other runs are complete with the generation's
metrics only. Real A/B experiments of the self-test on the local target (its echo check is a real
score phase on a shared scoring server), read back through the runs' manifests and metrics; the
sweep's own story is test_sweep.py's docs sweeps."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from run_helpers import REPO, free_port

from omnibench_core import api
from omnibench_core.ab.record import Design, Experiment, Identity, Side
from omnibench_core.campaign import campaign_file
from omnibench_core.campaign.record import Asked, Campaign
from omnibench_core.errors import SettingsError
from omnibench_core.records import ScorePolicy


def _experiment(score: ScorePolicy, rounds: int = 4, max_rounds: int = 0) -> Experiment:
    ident = Identity(("selftest",), None, (), Side("A"), Side("B"), Design.INTERLEAVED, rounds, 0, max_rounds)
    return Experiment("x", ident, 0, "deferred", (), score=score)


def test_which_rounds_each_policy_scores():
    assert _experiment(ScorePolicy.LAST).scored_rounds() == (4,)
    assert _experiment(ScorePolicy.EVERY_ROUND).scored_rounds() == (1, 2, 3, 4)
    assert _experiment(ScorePolicy.NONE).scored_rounds() == ()
    # --max-rounds: each look's round may be where it stops, so each is scored before it is judged
    assert _experiment(ScorePolicy.LAST, 8, 8).scored_rounds((3, 4, 6, 8)) == (3, 4, 6, 8)
    assert not any(_experiment(p).scores(0) for p in ScorePolicy)  # a warm-up never


def test_a_sweep_points_campaign_scores_its_last_run_and_keeps_the_rule_in_its_file(tmp_path):
    last = Asked(("seedtts",), (), None, {}, runs=3, score=ScorePolicy.LAST)
    assert [last.scores(slot) for slot in range(4)] == [False, False, False, True]  # slot 0: run0
    assert all(Asked(("seedtts",), (), None, {}, runs=3).scores(slot) for slot in range(4))  # measure: every run
    path = tmp_path / "local-x" / "campaigns" / "c.json"
    path.parent.mkdir(parents=True)
    campaign_file.save(path, Campaign(name="c", revision="local-x", asked=last))
    assert json.loads(path.read_text())["asked"]["score"] == "last"
    assert campaign_file.load(path).asked.score is ScorePolicy.LAST
    campaign_file.save(path, Campaign(name="c", revision="local-x", asked=Asked(("seedtts",), (), None, {}, runs=3)))
    assert "score" not in json.loads(path.read_text())["asked"]  # every run: the file reads as before --score


def test_the_policy_is_last_unless_a_quality_metric_decides():
    assert api.score_policy(["seedtts"], None, ["seedtts.latency_mean_s"]) is ScorePolicy.LAST
    assert api.score_policy(["seedtts"], None, ["seedtts.wer.wer_corpus"]) is ScorePolicy.EVERY_ROUND
    assert api.score_policy(["selftest"], None, ["selftest.matched"]) is ScorePolicy.EVERY_ROUND
    assert api.score_policy(["selftest"], ScorePolicy.NONE, []) is ScorePolicy.NONE
    with pytest.raises(SettingsError) as refused:
        api.score_policy(["seedtts"], ScorePolicy.LAST, ["seedtts.sim"])
    assert "quality metric" in refused.value.message and "--score every-round" in refused.value.hint


# docs/ab.md's three commands ("What runs", step 4), run as written (each on its own port and results root)
LAST = "invoke ab --workload selftest --aa --rounds 3"
EVERY = "invoke ab --workload selftest --aa --rounds 2 --score every-round"
NONE = "invoke ab --workload selftest --aa --rounds 2 --score none"
QUICK = ("--opt", "selftest.requests=4", "--opt", "selftest.delay=0.05")


def run_ab(results: Path, command: str, *more: str) -> subprocess.CompletedProcess:
    assert command in (REPO / "docs" / "ab.md").read_text()
    argv = [sys.executable, "-m", *command.split(), "--port", str(free_port()), *QUICK, *more]
    return subprocess.run(argv, cwd=REPO, env={**os.environ, "INVOKE_OMNIBENCH_RESULTS": str(results)},
                          capture_output=True, text=True, timeout=600)


def _runs(results: Path) -> dict[str, dict]:
    """Each run of the experiment: its manifest and metrics, by folder name."""
    out = {}
    for manifest in results.glob("local-*/run*/manifest.json"):
        run = manifest.parent
        out[run.name] = {"manifest": json.loads(manifest.read_text()),
                         "metrics": json.loads((run / "metrics.json").read_text())["metrics"],
                         "scored": (run / "selftest" / "score.json").is_file()}
    return out


def _rounds(results: Path) -> dict[tuple[str, int], str]:
    """(side, round) -> the run's folder name, from the experiment's record."""
    (path,) = (results / "ab").glob("*.json")
    attempts = json.loads(path.read_text())["attempts"]
    return {(a["side"], a["round"]): a["run"] for a in attempts if a["status"] == "complete"}


@pytest.mark.slow
def test_a_speed_ab_scores_only_its_last_round_and_says_so(tmp_path):
    results = tmp_path / "results"
    # the unscored metric does not fail it. An A/A: alpha 0.001 keeps a false alarm on the speed metrics
    # (2 ms latencies on a loaded host: +85 % [+7.5 %, +217 %] at the default, 2026-12-05) from failing it
    done = run_ab(results, LAST, "--fail-on", "worse", "--alpha", "0.001")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "selftest.matched" not in done.stderr
    runs, rounds = _runs(results), _rounds(results)
    scored = {k for k, run in rounds.items() if runs[run]["scored"]}
    assert scored == {("A", 3), ("B", 3)}  # warm-ups (round 0) and rounds 1, 2: generated and timed only
    for (_side, r), run in rounds.items():
        got = runs[run]
        assert got["manifest"]["status"] == "complete"
        assert ("selftest.matched" in got["metrics"]) == (r == 3)
        assert got["manifest"].get("scored", True) is (r == 3)
        assert "selftest.latency_mean_s" in got["metrics"]  # the speed verdict's metric, every round
    md = next((results / "ab").glob("*/ab.md")).read_text()
    line = next(x for x in md.splitlines() if x.startswith("- quality: "))
    rev = next(results.glob("local-*")).name
    assert f"scored on round 3 only (A {rev}/{rounds['A', 3]}, B {rev}/{rounds['B', 3]}; --score last)" in line, line
    assert "selftest.matched: scored on round 3 only (--score last)" in md
    assert "quality: scored on round 3 only" in done.stdout
    # one echo-scorer start a side (round 3's), none for the rounds left unscored
    starts = [s for run in runs.values() for s in run["manifest"]["servers"] if s.get("label") == "echo-scorer"
              and not s.get("started_in")]
    assert len(starts) == 2
    # the same experiment asked again with another rule: refused, nothing measured
    again = run_ab(results, LAST, "--score", "every-round")
    assert again.returncode == 1 and "began with --score last" in again.stderr, again.stderr[-2000:]
    assert _runs(results).keys() == runs.keys()


@pytest.mark.slow
def test_every_round_scores_every_measured_round_and_none_scores_nothing(tmp_path):
    every = tmp_path / "every"
    done = run_ab(every, EVERY)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    runs, rounds = _runs(every), _rounds(every)
    assert {k for k, run in rounds.items() if runs[run]["scored"]} == {(s, r) for s in "AB" for r in (1, 2)}
    assert "| selftest.matched |" in next((every / "ab").glob("*/ab.md")).read_text()  # judged like the rest

    none = tmp_path / "none"
    done = run_ab(none, NONE)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert not any(run["scored"] for run in _runs(none).values())
    assert "quality: no run scored (--score none)" in done.stdout


def test_a_bad_score_word_is_refused_before_anything_starts(tmp_path):
    done = run_ab(tmp_path / "r", LAST, "--score", "evry-round")
    assert done.returncode != 0 and not (tmp_path / "r").exists()
    assert "--score" in done.stderr and "every-round" in done.stderr
    help_text = subprocess.run([sys.executable, "-m", "invoke", "ab", "--help"], cwd=REPO, capture_output=True,
                               text=True, timeout=600).stdout
    assert "--score" in help_text and "every-round" in help_text
