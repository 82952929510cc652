"""The progress mechanism, on an injected clock: the heartbeat's 10 s rule, the campaign's prefix
and estimates (deferred scoring included), the clients' counts. The real commands' output is
checked where they run: test_seedtts.py (`invoke run` of the main job), test_campaign.py (measure)."""

from __future__ import annotations

import io
import threading
from dataclasses import replace
from pathlib import Path

import pytest

from omnibench_core.campaign.progress import UNTIMED, CampaignProgress, Scoring, estimate_left, scoring_seconds
from omnibench_core.heartbeat import Heartbeat, beating, unstamped, working
from omnibench_core.statuses import RunStatus, StepStatus
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
    progress.scored(40.0, 4)  # 10 s a run; side B's 4 are left
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
