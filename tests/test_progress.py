"""The progress mechanism, on an injected clock: the heartbeat's 10 s rule, the campaign's prefix
and estimates (deferred scoring included), the clients' counts. The real commands' output is
checked where they run: test_seedtts.py (`invoke run` of the main job), test_campaign.py (measure)."""

from __future__ import annotations

import io
import random
import threading
from dataclasses import replace
from pathlib import Path

import pytest

from omnibench_core.campaign.progress import (
    UNTIMED,
    CampaignProgress,
    Later,
    Scoring,
    estimate_left,
    scoring_seconds,
    scoring_start_seconds,
)
from omnibench_core.heartbeat import Heartbeat, beating, unstamped, working
from omnibench_core.run.eta import RunEta, revision_note, with_estimate
from omnibench_core.statuses import RunStatus, StepStatus
from omnibench_core.store.durations import PhaseTimes, phase_seconds
from omnibench_core.store.manifest import RunManifest
from omnibench_core.store.run_entries import ServerEntry, StepEntry
from omnibench_core.toolkit.clients import Progress


class Clock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_heartbeat_repeats_the_last_line_after_10_s_of_silence_and_not_before():
    clock, lines = Clock(), []
    beat = Heartbeat(lines.append, clock=clock)
    assert not beat.beat()  # nothing said yet: nothing to repeat
    beat("[    1.0s] videoamme.generate: questions 3/10 (0 failed, 0.3/s, 9s)")
    clock.now += 9.9
    assert not beat.beat() and len(lines) == 1
    clock.now += 0.1
    assert beat.beat()
    assert lines[-1] == "[   10.0s] still busy (10s since: videoamme.generate: questions 3/10 (0 failed, 0.3/s, 9s))"
    clock.now += 5
    assert not beat.beat()  # the repeat counts as a line: the next one 10 s after it
    clock.now += 5
    assert beat.beat() and "(20s since:" in lines[-1]
    beat("seedtts.generate: running")
    clock.now += 9
    assert not beat.beat() and lines[-1] == "seedtts.generate: running"


def test_one_heartbeat_per_stream():
    campaign = CampaignProgress(lambda line: None, 4)
    with beating(campaign) as same:
        assert same is campaign  # a campaign's runs add no second heartbeat
    with beating(print) as fresh:
        assert isinstance(fresh, Heartbeat) and fresh is not campaign


def test_unstamped_drops_only_leading_prefixes():
    assert unstamped("[run 1 of 4 | 3s elapsed | ~1m left] [   2.0s] x: a [b]") == "x: a [b]"


def test_the_first_campaign_line_names_the_start_not_an_empty_run_or_scoring():
    clock, lines = Clock(), []
    progress = CampaignProgress(lines.append, 4, clock=clock)
    progress.say("campaign selftest_local: ...")
    assert lines == ["[campaign start | 0s elapsed | estimate after the first run] campaign selftest_local: ..."]


def test_a_deferred_campaigns_estimate_includes_its_scoring():
    # two runs of 30 s are known, run 3 of 4 has run 10 s; four runs of 12 s scoring each are to come
    assert estimate_left([30, 30], 2, 10, Scoring(4, 12.0)) == "~1m38s left (scoring ~48s)"
    assert estimate_left([30, 30], 2, 10, Scoring(4, None)) == f"~50s left + {UNTIMED}"
    assert estimate_left([30, 30], 2, 10) == "~50s left"  # per-run scoring: inside the runs' durations
    clock, lines = Clock(), []
    progress = CampaignProgress(lines.append, 4, [30.0, 30.0, 30.0, 30.0], clock=clock, scoring_per_run_s=12.0)
    progress.phase("scoring 4 generated runs together", 4)
    clock.now += 8
    progress.say("asr: starting server")
    assert lines[-1].startswith("[scoring 4 generated runs together | 8s elapsed | ~40s left]")
    progress.scored(60.0, 4)
    assert progress.scoring_per_run_s == 15.0


def test_the_campaign_heartbeat_carries_a_fresh_prefix():
    clock, lines = Clock(), []
    progress = CampaignProgress(lines.append, 2, [20.0], clock=clock)
    progress.start_run(2, "measured run 1 of 1")
    progress("[    3.0s] selftest.client: running")
    clock.now += 12
    assert progress.beat()
    assert lines[-1] == "[run 2 of 2 (measured run 1 of 1) | 12s elapsed | ~8s left] still busy (12s since: " \
                        "selftest.client: running)"


def test_scoring_seconds_counts_score_steps_and_the_scoring_servers_this_run_started():
    ok = StepStatus.OK
    manifest = RunManifest(Path("manifest.json"), RunStatus.COMPLETE, steps=(
        StepEntry("w.client", "generate", ok, started="2026-12-01T10:00:00+00:00", ended="2026-12-01T10:01:00+00:00"),
        StepEntry("w.asr", "score", ok, started="2026-12-01T10:02:00+00:00", ended="2026-12-01T10:02:30+00:00"),
        StepEntry("w.wer", "score", ok, started="2026-12-01T10:02:30+00:00", ended="2026-12-01T10:02:40+00:00")),
        servers=(ServerEntry("asr", "score", started="2026-12-01T10:01:55+00:00", ready="2026-12-01T10:02:00+00:00"),
                 ServerEntry("asr", "score", started_in="run1", at="2026-12-01T10:02:00+00:00")))
    assert scoring_seconds(manifest) == 45.0
    assert scoring_start_seconds(manifest) == 5.0  # the start it made, not the one it shared
    assert scoring_seconds(replace(manifest, steps=manifest.steps[:1])) is None


def test_a_clients_progress_says_its_count_at_the_start_and_the_end():
    out = io.StringIO()
    with Progress(3, "questions", stream=out, interval_s=3600, quiet_s=3600) as progress:
        for ok in (True, False, True):
            progress.tick(ok)
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("progress: questions 0/3 (0 failed") and lines[-1].startswith("progress: questions 3/3 (1 failed")
    assert len(lines) == 2  # nothing in between: each came within interval_s


def test_a_clients_progress_repeats_its_count_every_5_s_while_no_item_finishes():
    clock, out = Clock(), io.StringIO()
    progress = Progress(10, "questions", stream=out, clock=clock)  # the ticker (inside `with`) calls quiet_tick
    clock.now += 4.9
    progress.quiet_tick()
    assert out.getvalue() == ""
    clock.now += 0.1
    progress.quiet_tick()
    assert out.getvalue() == "progress: questions 0/10 (0 failed, 0.0/s, 5s)\n"
    clock.now += 1
    progress.tick(True)  # an item 1 s after a line: within interval_s, so not printed
    clock.now += 4
    progress.quiet_tick()
    assert out.getvalue().splitlines()[-1] == "progress: questions 1/10 (0 failed, 0.1/s, 10s)"


def test_an_estimate_never_says_0s_left_of_work_that_is_left():
    # deferred scoring never timed: said so; timed and overrun: said so; done: nothing left
    clock, lines = Clock(), []
    progress = CampaignProgress(lines.append, 4, [30.0] * 4, clock=clock)
    progress.phase("scoring side A: 4 generated runs together", 8)
    progress.say("asr: starting server")
    assert lines[-1].startswith(f"[scoring side A: 4 generated runs together | 0s elapsed | {UNTIMED}]")
    clock.now += 40
    progress.scored(40.0, 4)  # 10 s a run; side B's 4 are left
    progress.say("side B: round 0 (run0) finished without scoring")  # before B's phase: B's 40 s are all left
    assert "| ~40s left]" in lines[-1], lines[-1]
    progress.phase("scoring side B: 4 generated runs together", 4)
    clock.now += 30
    progress.say("x")
    assert "| ~10s left]" in lines[-1]
    clock.now += 30  # past what side A's scoring took
    progress.say("y")
    assert "| past the estimate]" in lines[-1]
    progress.scored(60.0, 4)
    progress.say("A/B experiment complete")
    assert "| nothing left]" in lines[-1]
    assert not any("~0s left" in line for line in lines)
    # a run past the runs' mean, with nothing after it: past the estimate, not ~0s left
    assert estimate_left([30, 30], 1, 45) == "past the estimate"
    assert estimate_left([30, 30], 1, 45, Scoring(2, None)) == f"generation past the estimate + {UNTIMED}"
    # a phase of unknown size says it has no estimate
    other = CampaignProgress(lines.append, 2, [5.0], clock=clock)
    other.phase("writing the report")
    assert other.estimate() == "no estimate for this step"


@pytest.mark.slow
def test_a_step_outside_the_runs_says_what_it_does_then_beats_while_it_works():
    """`working` (compare, report, doctor, an A/B's start): its first line at once, then a
    "still busy" line while the step goes on; the step here lasts until that line has come."""
    lines: list[str] = []
    beat_seen = threading.Event()

    def emit(line: str) -> None:
        lines.append(line)
        if "still busy" in line:
            beat_seen.set()

    with working(emit, "comparing B with base A: reading their runs"):
        assert beat_seen.wait(timeout=600)  # the step ends on the event, never on a time budget
    assert lines[0] == "comparing B with base A: reading their runs"
    assert "still busy" in lines[1] and "since: comparing B with base A" in lines[1]


def test_an_estimate_off_by_more_than_2x_says_so_and_recomputes():
    assert revision_note("round 1", 40.0, 96.0) == "estimate revised: round 1 took 2.4x its estimate"
    assert revision_note("round 1", 40.0, 16.0) == "estimate revised: round 1 took 0.40x its estimate"
    assert revision_note("round 1", 40.0, 79.0) is None and revision_note("round 1", 40.0, 21.0) is None  # within 2x
    assert revision_note("round 1", None, 96.0) is None  # nothing estimated: nothing proved wrong
    # the first round goes by the results root's history (20 s a run); it took 48 s: said, and the
    # rounds left go by this command's round alone
    clock, lines = Clock(), []
    progress = CampaignProgress(lines.append, 4, prior_run_s=20.0, clock=clock)
    assert progress.estimate() == "~20s a run (earlier runs here)"
    progress.start_run(1, "round 0 (warm-ups)")
    assert progress.estimate() == "~1m20s left"  # 4 rounds of 20 s
    clock.now += 48
    progress.end_run(48.0)
    assert lines[-1].endswith("estimate revised: round 0 (warm-ups) took 2.4x its estimate; the runs left are "
                              "estimated from this command's 1 run (~48s each)")
    progress.start_run(2, "round 1")
    assert progress.estimate() == "~2m24s left"  # 3 rounds of 48 s, no longer the history's 20 s
    progress.end_run(50.0)  # within 2x of 48 s: nothing said
    assert not lines[-1].endswith("(~50s each)") and len(lines) == 1


def test_a_scoring_phase_past_its_estimate_grows_what_follows_instead_of_jumping():
    """The duet A/B of issue 43: history said 8 s a run; side A's 4 runs took 96 s (2.4x). The old
    estimate counted side A down to "~0s" and jumped to side B's 96 s when B began."""
    clock, lines = Clock(), []
    progress = CampaignProgress(lines.append, 5, [60.0] * 5, clock=clock, scoring_per_run_s=8.0)
    progress.phase("scoring side A: 4 generated runs together", 8, 4)
    assert progress.left_s() == 64.0 and progress.estimate() == "~1m04s left"
    clock.now += 32
    assert progress.left_s() == 32.0  # 8 s of A's estimate left, then B's 4 runs of 8 s
    clock.now += 64  # 96 s: past A's 32 s estimate; B's estimate grows at A's pace
    assert progress.estimate() == "this phase past the estimate + ~1m36s after it at its rate"
    before = progress.left_s()
    progress.scored(96.0, 4)
    assert lines[-1].endswith("estimate revised: scoring side A: 4 generated runs together took 3.0x its estimate; "
                              "the 4 runs left to score are estimated at its ~24s a run")
    progress.phase("scoring side B: 4 generated runs together", 4, 4)
    after = progress.left_s()
    assert before == after == 96.0  # continuous at the boundary: no jump
    assert not any("~0s left" in line for line in lines)


def _simulated_duet(seed: int, history_off: float) -> list[tuple[float, float]]:
    """A seeded duet A/B (4 rounds after the warm-ups, deferred scoring of 4 runs a side) driven
    through CampaignProgress as ab/execute drives it, its history off by up to ``history_off``
    times either way; returns (the whole command's estimated, true) seconds, the estimate being
    the time so far plus what is left, sampled every 5 s after the first round."""
    rng = random.Random(seed)
    base, score = rng.uniform(30, 120), rng.uniform(5, 40)
    rounds = [base * 1.3 * rng.lognormvariate(0, 0.1)] + [base * rng.lognormvariate(0, 0.15) for _ in range(4)]
    scoring = {side: 4 * score * rng.lognormvariate(0, 0.15) for side in "AB"}
    total = sum(rounds) + sum(scoring.values())
    clock = Clock()
    t0 = clock.now
    off = [rng.uniform(1 / history_off, history_off) for _ in range(2)]
    progress = CampaignProgress(lambda line: None, 5, clock=clock, prior_run_s=base * off[0],
                                scoring_per_run_s=score * off[1])
    seen: list[tuple[float, float]] = []

    def wait(seconds: float, sample: bool) -> None:
        end = clock.now + seconds
        while clock.now + 5 < end:
            clock.now += 5
            left = progress.left_s()
            if sample and left is not None:
                seen.append((clock.now - t0 + left, total))
        clock.now = end

    for r, took in enumerate(rounds):
        progress.start_run(r + 1, f"round {r}", 8)
        wait(took, sample=r > 0)
        progress.end_run(took)
    to_score = 8
    for side in "AB":
        progress.phase(f"scoring side {side}: 4 generated runs together", to_score, 4)
        wait(scoring[side], sample=True)
        progress.scored(scoring[side], 4)
        to_score -= 4
    return seen


def _worst(history_off: float) -> float:
    return max(max(estimated / true, true / estimated) for seed in range(200)
               for estimated, true in _simulated_duet(seed, history_off))


def test_a_duets_estimate_is_never_off_by_more_than_2x_after_its_first_round():
    """Issue 43's check, on the estimator itself ("said about 11 minutes, took 22"): in 200
    seeded duets whose history is off by up to 1.5x, once a round ended the whole command's
    estimate (elapsed + left) is within 2x of what it took. Scoring before this command timed
    any goes by the history alone: history off by 4x breaks it, which the check sees."""
    assert _worst(1.5) <= 2.0
    assert _worst(4.0) > 2.0


def test_a_sweeps_estimate_covers_its_later_points():
    # the first point: later points as long as this one; after one was timed, as long as it took
    assert estimate_left([30, 30], 2, 10, Scoring(2, 10.0), Later(3), total_runs=4) == \
        "~8m10s left (scoring ~20s, 3 later points ~7m00s)"  # 50 + 20 + 3 x (4 x 30 + 20)
    assert estimate_left([30, 30], 2, 10, later=Later(1, 100.0), total_runs=4) == "~2m30s left (1 later point ~1m40s)"
    assert estimate_left([], 4, 0, later=Later(2)) == "estimate after the first run (+ 2 later points)"
    clock, lines = Clock(), []
    progress = CampaignProgress(lines.append, 2, [30.0], clock=clock, later=Later(2, 90.0))
    progress.phase("writing the report")
    assert progress.estimate() == "no estimate for this step + 2 later points ~3m00s"
    assert progress.left_s() == 180.0


def test_invoke_runs_estimate_goes_phase_by_phase_from_the_history():
    history = PhaseTimes({"generate": 40.0, "score": 20.0, "collect": 1.0}, 3)
    clock, lines = Clock(), []
    eta = RunEta(lines.append, history, ["generate", "score", "collect"], clock=clock)
    assert eta.opening() == ("estimate: ~1m01s (generate ~40s, score ~20s, collect ~1s; the mean of 3 earlier "
                             "complete runs of these workloads here)")
    eta.phase_begins("generate")
    clock.now += 10
    eta("[   10.0s] selftest: READY after 9.0 s")
    assert lines[-1] == "[   10.0s | ~51s left] selftest: READY after 9.0 s"
    clock.now += 40
    eta("[   50.0s] x")
    assert lines[-1] == "[   50.0s | generate past the estimate + ~21s] x"
    clock.now += 50  # generation took 100 s of 40: 2.5x; the phases after it at that rate
    eta.phase_begins("score")
    assert lines[-1] == "estimate revised: the generate phase took 2.5x its estimate; ~52s for the phases after it " \
                        "at that rate"
    eta("[  100.0s] y")
    assert lines[-1] == "[  100.0s | ~52s left] y"
    eta("not a runner line")
    assert lines[-1] == "not a runner line"
    # no history: the lines stay as they were, and the first says why there is no estimate
    bare: list[str] = []
    none = RunEta(bare.append, None, ["generate"], clock=clock)
    none("[    1.0s] z")
    assert bare == ["[    1.0s] z"] and none.opening().startswith("estimate: none yet")
    assert with_estimate("[    1.0s] z", "~5s left") == "[    1.0s | ~5s left] z"


def test_phase_seconds_spans_each_phases_steps_and_servers_stop_included():
    ok = StepStatus.OK
    manifest = RunManifest(Path("manifest.json"), RunStatus.COMPLETE, steps=(
        StepEntry("w.client", "generate", ok, started="2026-12-01T10:00:10+00:00", ended="2026-12-01T10:01:00+00:00"),
        StepEntry("w.asr", "score", ok, started="2026-12-01T10:02:00+00:00", ended="2026-12-01T10:02:30+00:00")),
        servers=(ServerEntry("w", "generate", started="2026-12-01T10:00:00+00:00", ready="2026-12-01T10:00:10+00:00",
                             stopped="2026-12-01T10:01:05+00:00"),
                 ServerEntry("asr", "score", started_in="run1", at="2026-12-01T10:01:00+00:00")))
    assert phase_seconds(manifest) == {"generate": 65.0, "score": 30.0}  # a shared scoring start is not this run's


def test_scoring_servers_start_once_a_phase_not_once_a_run():
    """History runs each started their scoring servers (20 s) and scored (5 s): 25 s a run. An
    A/B's deferred scoring of 4 runs a side starts them once a side: 2 x 20 + 8 x 5 = 80 s, not
    8 x 25 = 200 s."""
    clock, lines = Clock(), []
    progress = CampaignProgress(lines.append, 5, [60.0], clock=clock, scoring_per_run_s=5.0, scoring_start_s=20.0,
                                scoring_phases=2)
    progress.start_run(5, "round 4", 8)
    assert progress.estimate() == "~2m20s left (scoring ~1m20s)"  # 60 s of the round + 80 s
    progress.end_run(60.0)
    progress.phase("scoring side A: 4 generated runs together", 8, 4)
    assert progress.left_s() == 80.0
    clock.now += 60
    progress.scored(60.0, 4)  # 20 s of start and 4 runs of 10 s
    assert progress.scoring_per_run_s == 10.0
    progress.phase("scoring side B: 4 generated runs together", 4, 4)
    assert progress.left_s() == 60.0 and progress.estimate() == "~1m00s left"
