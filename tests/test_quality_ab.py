"""Did B change what the model says? (issue 44's check) On the local target, a planted quality
change (`--b-set local_quality_flip=0.3`: another letter for 30 % of the Video-AMME questions) is
called `worse` by McNemar's exact test with its counts, and the answers changed are counted; an
A/A (a side against itself) changes no answer and calls no quality row better or worse; `invoke
compare` of two campaigns, one with the flip, says the same (test_quality_compare.py); a seed-tts
A/B with the flip calls WER worse (test_quality_seedtts.py): three files, so that the suite's
workers run the three stories side by side."""

from __future__ import annotations

import re

import pytest
from run_helpers import free_port
from run_helpers import invoke_in as invoke

from omnibench_core.ab import experiment_file
from omnibench_core.ab.record import runs_of
from omnibench_core.campaign.compare import compare
from omnibench_core.campaign.summary import stats_of
from omnibench_core.local import flip
from omnibench_core.stats.verdict import Verdict

# The fewest that show it, as test_quality_compare.py's campaigns: 11 of 40 questions are flipped at 0.3,
# 10 of them right on A (McNemar needs 6 one way, p 0.03). 200 proved nothing more and cost 5x the requests.
SAMPLES = 40
# `--score none`: accuracy comes from the answers, no WER scoring is needed; one warm-up request
FAST = ("--opt", f"videoamme.max_samples={SAMPLES}", "--opt", "videoamme.warmup=1")


def planted_count() -> int:
    """How many of the set's questions the flip changes (its own hash, not a guess)."""
    return sum(flip.chosen(f"local_vamme_{i:03d}.mp4", 0.3) for i in range(SAMPLES))


@pytest.mark.slow
def test_a_planted_flip_is_worse_by_mcnemar_and_a_side_against_itself_changes_nothing(tmp_path):
    results = tmp_path / "results"
    done = invoke(results, "ab", "--workload", "videoamme", *FAST, "--b-set", "local_quality_flip=0.3",
                  "--rounds", "2", "--score", "none", "--port", str(free_port()))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    out = done.stdout
    n = planted_count()
    # every flipped question's answer changed (another letter); most were right on A, so wrong on B
    assert f"videoamme: {n} of {SAMPLES} answers changed between A and B" in out, out
    assert "A deterministic" in out and "B deterministic" in out
    row = next(line for line in out.splitlines() if line.lstrip("| ").startswith("videoamme.accuracy") and "McNemar" in line)
    b, c = (int(x) for x in re.findall(r"McNemar: (\d+) right on A only, (\d+) right on B only", row)[0])
    assert "WORSE" in row and b + c <= n and b >= 6 and b > 3 * c and f"of {SAMPLES}" in row
    # two rounds of one answer set: the rounds' accuracy row cannot tell; the console says the samples decide
    assert "videoamme.accuracy: the runs' row says inconclusive; its paired samples decide it: worse (McNemar:" in out, out
    md = next((results / "ab").glob("*/ab.md")).read_text()
    assert "## Outputs and quality, sample by sample" in md and f"McNemar: {b} right on A only" in md
    # the same request with --fail-on resumes the finished experiment (the port is not part of its
    # name): no run again, the gate judged on the record the first command left
    failed = invoke(results, "ab", "--workload", "videoamme", *FAST, "--b-set", "local_quality_flip=0.3",
                    "--rounds", "2", "--score", "none", "--port", str(free_port()), "--fail-on", "worse")
    assert failed.returncode == 1 and "videoamme.accuracy (paired samples): worse" in failed.stdout + failed.stderr
    assert "RUN_READY" not in failed.stdout + failed.stderr and len(list((results / "ab").glob("*.json"))) == 1

    # compare's library (campaign/compare.py) on the A/B's runs as two run sets: the same; and a side
    # against itself changes nothing and calls no quality row better or worse
    experiment = experiment_file.load(next((results / "ab").glob("*.json")))
    dirs = {side: [results / a.revision / a.run for a in runs_of(experiment, side)] for side in ("A", "B")}
    sets = {side: stats_of(side, ds) for side, ds in dirs.items()}
    flipped = compare(sets["A"], sets["B"]).quality
    assert flipped is not None and flipped.changed[0].changed == n
    assert flipped.verdicts[0].verdict is Verdict.WORSE and flipped.verdicts[0].counts.startswith(f"McNemar: {b} right")
    same = compare(sets["A"], sets["A"]).quality
    assert same is not None and same.changed[0].changed == 0
    assert all(v.verdict not in (Verdict.BETTER, Verdict.WORSE) for v in same.verdicts)


@pytest.mark.slow  # 2.5 to 8 s in the fast tier (issue 40: that tier within a minute)
def test_a_bad_flip_is_refused_in_one_line_before_anything_starts(tmp_path):
    for bad in ("1.5", "-0.2", "x"):
        done = invoke(tmp_path / "results", "ab", "--workload", "videoamme", "--b-set", f"local_quality_flip={bad}",
                      "--rounds", "2", "--port", str(free_port()))
        assert done.returncode != 0 and "local_quality_flip" in done.stderr + done.stdout
        assert not (tmp_path / "results").exists() or not any((tmp_path / "results").glob("local-*/run*"))
