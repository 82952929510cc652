"""An A/B's decisive metrics first (serial gatekeeping, issue 43): the speed rows of one
measurement (seed-tts's latency mean, p50, p95, rtf and throughput) are nearly one quantity counted
five times, and one Holm family of them held a 4-round look to alpha / 6 (a critical |t| of 6.23
where one metric needs 3.18). The decisive metrics are now judged by Holm among themselves; the
other rows by Holm too, but called better or worse only once every decisive metric is. Checked
here on synthetic rounds through the real rule (``verdict.judge``, ``sequential.run_looks``): the
levels, the gate, the chance of any false call over many A/A experiments (fixed and sequential),
the case a gate exists for (decisive metrics truly changed, the others not), and the power it buys."""

from __future__ import annotations

import json

import numpy as np
import pytest

from omnibench_core.ab import execute, experiment_file, record, sequential, writing
from omnibench_core.ab.analysis import Analysis
from omnibench_core.ab.record import Family
from omnibench_core.ab.sequential import run_looks
from omnibench_core.errors import RecordError, SettingsError
from omnibench_core.records import ScorePolicy
from omnibench_core.settings import Settings
from omnibench_core.stats.verdict import Design, Samples, judge
from omnibench_core.statuses import AttemptStatus

MEAN, P95, QPS = "seedtts.latency_mean_s", "seedtts.latency_p95_s", "seedtts.throughput_qps"
OTHERS = ("seedtts.rtf_mean", "seedtts.server_ready_s", "seedtts.audio_seconds_per_request")  # not decisive here
CALLS = ("better", "worse")


def _rounds(rng: np.random.Generator, n: int, effect: float, shared: float = 0.08, own: float = 0.03,
            others_effect: float = 1.0, independent_others: bool = False) -> list[Samples]:
    """``n`` rounds of six speed metrics: B's latency ``effect`` times A's. Each round's B/A of the
    latency-like metrics shares one factor (sd ``shared``, as a round of seed-tts moves all of them
    together) plus a little of its own (``own``); throughput moves the other way. The non-decisive
    rows change by ``others_effect`` and, with ``independent_others``, share nothing with the rest."""
    base = rng.normal(0.0, shared, n)
    out = []
    for i, (name, direction) in enumerate([(MEAN, "lower"), (P95, "lower"), (QPS, "higher"),
                                           *((m, "lower") for m in OTHERS)]):
        other = i >= 3
        common = rng.normal(0.0, shared, n) if other and independent_others else base
        change = np.log(others_effect if other else effect) + common + rng.normal(0.0, own, n)
        a = 0.1 * np.exp(rng.normal(0.0, 0.05, n))
        sign = -1.0 if direction == "higher" else 1.0
        b = a * np.exp(sign * change)
        out.append(Samples(name, direction, tuple(a.tolist()), tuple(b.tolist())))
    return out


def _row(verdicts, metric):
    return next(v for v in verdicts if v.metric == metric)


def test_the_decisive_metrics_share_alpha_among_themselves_and_the_others_wait_for_all_of_them():
    rng = np.random.default_rng(1)
    changed = _rounds(rng, 4, 1.3, others_effect=1.3)
    one = judge(changed, Design.PAIRED, primary=(MEAN,))
    # a family of one: the decisive metric held to alpha itself, not alpha / 6
    assert _row(one, MEAN).level == 0.05 and _row(one, MEAN).verdict.value == "worse"
    # every decisive metric called: the others are tested (Holm among the five of them)
    assert sorted(v.level for v in one if v.metric != MEAN)[0] == 0.05 / 5
    assert all(v.verdict.value in CALLS for v in one)
    holm = judge(changed, Design.PAIRED)  # no primary: one family, as records of format 2 are judged
    assert min(v.level for v in holm) == 0.05 / 6

    # the decisive metric unchanged and noisy, the others changed: none of them is called
    quiet = _rounds(rng, 4, 1.0, others_effect=1.5)
    a = 0.1 * np.exp(rng.normal(0.0, 0.05, 4))
    quiet[0] = Samples(MEAN, "lower", tuple(a.tolist()), tuple((a * np.exp(rng.normal(0.0, 0.3, 4))).tolist()))
    gated = judge(quiet, Design.PAIRED, primary=(MEAN,))
    assert _row(gated, MEAN).verdict.value == "inconclusive"
    for v in gated:
        if v.metric in OTHERS:
            assert v.verdict.value == "inconclusive" and "excludes 0" in v.why and "gatekeeping" in v.why \
                and MEAN in v.why, v
    # the same rows without the gate are called: the gate, not the data, held them back
    assert any(v.verdict.value in CALLS for v in judge(quiet, Design.PAIRED) if v.metric in OTHERS)
    # a decisive metric with no row at all keeps the gate shut
    missing = judge(changed, Design.PAIRED, primary=(MEAN, "seedtts.not_measured"))
    assert all(_row(missing, m).verdict.value == "inconclusive" for m in OTHERS)
    assert "seedtts.not_measured" in _row(missing, OTHERS[0]).why


def _false_calls(verdicts, metrics=None) -> bool:
    return any(v.verdict.value in CALLS for v in verdicts if metrics is None or v.metric in metrics)


@pytest.mark.slow  # 2 to 6 s in the fast tier (issue 40: that tier within a minute)
def test_identical_sides_are_called_changed_at_most_alpha_of_the_time_fixed_and_sequential():
    """400 fixed 4-round and 300 sequential (at most 8 rounds) A/A experiments of the six
    correlated rows, the decisive ones latency mean, p95 and throughput: any row called better or
    worse in at most 5 % of them (here 13 of 400 and 3 of 300)."""
    rng = np.random.default_rng(43)
    fixed = sum(_false_calls(judge(_rounds(rng, 4, 1.0), Design.PAIRED, primary=(MEAN, P95, QPS)))
                for _ in range(400))
    looked = sum(_false_calls(run_looks(_rounds(rng, 8, 1.0), 8, decide=(MEAN, P95, QPS)).verdicts)
                 for _ in range(300))
    print(f"A/A, any row called: {fixed} of 400 fixed 4-round, {looked} of 300 sequential (at most 8 rounds)")
    assert fixed / 400 <= 0.05 and looked / 300 <= 0.05, (fixed, looked)


def test_where_every_decisive_metric_truly_changed_the_unchanged_others_are_called_at_most_alpha():
    """The case the gate opens on: B truly 30 % slower on the decisive rows, the other three
    unchanged and independent of them. Over 400 experiments, the gate opens in most (here all), and
    an unchanged row is called better or worse in at most 5 % (Holm at alpha among them; here 17)."""
    rng = np.random.default_rng(7)
    opened = false = 0
    for _ in range(400):
        verdicts = judge(_rounds(rng, 6, 1.3, independent_others=True), Design.PAIRED, primary=(MEAN, P95, QPS))
        opened += all(_row(verdicts, m).verdict.value == "worse" for m in (MEAN, P95, QPS))
        false += _false_calls(verdicts, OTHERS)
    print(f"decisive rows +30 %: the gate opened in {opened} of 400, an unchanged row was called in {false}")
    assert opened > 300 and false / 400 <= 0.05, (opened, false)


def test_a_ten_percent_slowdown_is_found_more_often_at_four_rounds_than_by_one_holm_family():
    """+10 % on the six correlated rows, 4 rounds, 300 experiments: the latency called worse more
    often with the decisive metrics first than by one family of six (the same data; here 100 of 300
    against 27)."""
    rng = np.random.default_rng(11)
    gated = holm = 0
    for _ in range(300):
        samples = _rounds(rng, 4, 1.1)
        gated += _row(judge(samples, Design.PAIRED, primary=(MEAN,)), MEAN).verdict.value == "worse"
        holm += _row(judge(samples, Design.PAIRED), MEAN).verdict.value == "worse"
    print(f"+10 % at 4 rounds: found in {gated} of 300 with one decisive metric first, {holm} by one family of six")
    assert gated > holm, (gated, holm)


def test_run_looks_judges_a_record_of_one_holm_family_by_that_family():
    """run_looks with ``Family.HOLM`` (a record of format 2 resumed) holds each look's smallest p to
    the boundary's level for alpha / 6, as before; with gatekeeping to its level for alpha / 3."""
    rng = np.random.default_rng(5)
    samples = _rounds(rng, 8, 1.3)
    old = run_looks(samples, 8, decide=(MEAN, P95, QPS), family=Family.HOLM)
    new = run_looks(samples, 8, decide=(MEAN, P95, QPS))
    assert min(v.level for v in old.verdicts) < min(v.level for v in new.verdicts)


# -- a fixed design names its own decisive metrics (--rounds N --decide ...) -------------------------------
def _fixed(decide: tuple[str, ...] = (), measured: AttemptStatus | None = None,
           score: ScorePolicy = ScorePolicy.LAST) -> record.Experiment:
    """Both warm-ups run; with ``measured``, round 1 too, its runs in that state (generated: waiting
    for deferred scoring, their timings on disk)."""
    ident = record.Identity(("selftest",), None, (("target", "local"),), record.Side("A"),
                            record.Side("B", sets=(("local_delay_ms", "9"),)), record.Design.INTERLEAVED, 4, 0)
    order = record.schedule(record.Design.INTERLEAVED, 4, 0)
    done = tuple(record.Attempt(p.side, p.round, f"run{i}", "local", measured if p.round else AttemptStatus.COMPLETE,
                                "t", 1.0) for i, p in enumerate(order[:4 if measured else 2]))
    return record.Experiment("x", ident, 2, "deferred", order, attempts=done, decide=decide, score=score)


def test_a_fixed_design_is_judged_with_its_own_decisive_metrics_kept_in_its_record(tmp_path):
    settings = Settings.from_mapping({"results": str(tmp_path)})
    asked = execute.request_from(settings, ["selftest"], b_sets=["local_delay_ms=5"], rounds=4,
                                 decide=["selftest.latency_mean_s"])
    assert asked.decide == ("selftest.latency_mean_s",) and asked.sequential is None
    # the same identity, so the same name: the decisive metrics are the experiment's rule, not what it measures
    assert asked.identity == execute.request_from(settings, ["selftest"], b_sets=["local_delay_ms=5"], rounds=4).identity
    until = execute.request_from(settings, ["selftest"], b_sets=["local_delay_ms=5"], max_rounds=6,
                                 decide=["selftest.latency_mean_s"])
    assert until.decide == () and until.sequential.decide == ("selftest.latency_mean_s",)  # one place each
    directions = {MEAN: "lower", P95: "lower", QPS: "higher", "seedtts.rtf_mean": "lower"}
    assert sequential.primary(_fixed((P95,)), directions) == (P95,)
    assert sequential.primary(_fixed(), directions) == (MEAN, P95, QPS)  # the default: latency and throughput
    # a decisive metric the rows cannot call (no better side) stays first: the gate stays shut, never one family
    assert sequential.primary(_fixed(("seedtts.rtf_x",)), directions) == ("seedtts.rtf_x",)

    path = tmp_path / "x.json"
    experiment_file.save(path, _fixed((P95, MEAN)))
    data = json.loads(path.read_text())
    assert data["decide"] == [P95, MEAN] and data["format"] == experiment_file.FORMAT == 5
    assert experiment_file.load(path).decide == (P95, MEAN)
    experiment_file.save(path, _fixed())
    assert "decide" not in json.loads(path.read_text())  # the default: the file as format 3 wrote it
    for bad, words in (([P95, P95], "a metric named twice"), ("x", "must be list"), ([""], "an empty name"),
                       ([f" {P95}"], "spaces around it")):
        path.write_text(json.dumps({**data, "decide": bad}))
        with pytest.raises(RecordError, match=words) as refused:
            experiment_file.load(path)
        assert "decide" in refused.value.message
    # hand edits the format and family cannot hold: a record of format 3 (no decide then), or of one Holm family
    for edit, words in (({"format": 3}, "has format 3 and field 'decide': no format before 4 had such a field"),
                        ({"family": "holm"}, "one Holm family")):
        path.write_text(json.dumps({**data, **edit}))
        with pytest.raises(RecordError, match=words) as refused:
            experiment_file.load(path)
        assert refused.value.evidence["field"] in ("decide", "family") and str(path) in refused.value.evidence["file"]


def test_a_fixed_design_keeps_its_decisive_metrics_once_a_round_is_measured(tmp_path):
    """Chosen after seeing rounds, the decisive metrics would pick the rows judged first from the data."""
    path = tmp_path / "x.json"
    fresh = _fixed((MEAN,))
    assert execute._decisive_kept(fresh, (P95,), path) == (P95,)  # warm-ups only: no verdict seen yet
    # a round generated and waiting for deferred scoring has its timings on disk: measured too
    for state in (AttemptStatus.COMPLETE, AttemptStatus.GENERATED):
        measured = _fixed((MEAN, P95), measured=state)
        assert execute._decisive_kept(measured, (P95, MEAN), path) == (MEAN, P95)  # one family, in any order
        for asked in ((P95,), ()):
            with pytest.raises(SettingsError, match="has measured rounds judged with its own decisive metrics") as no:
                execute._decisive_kept(measured, asked, path)
            assert no.value.hint.startswith(f"repeat it with --decide {MEAN},{P95}")
            assert no.value.evidence["record"] == str(path)
    with pytest.raises(SettingsError) as default_kept:
        execute._decisive_kept(_fixed(measured=AttemptStatus.COMPLETE), (MEAN,), path)
    assert "no --decide (the default decisive metrics)" in default_kept.value.hint


def test_a_quality_decide_taken_on_resume_scores_every_round_and_a_context_metric_is_refused(tmp_path):
    """Review of d26bf27: a --decide of a quality metric taken before any round was measured kept
    the record's --score last, so its rows had no value and the gate never opened; a context metric
    (no better side) kept a fixed design's gate shut for the whole experiment."""
    settings = Settings.from_mapping({"results": str(tmp_path)})
    quality = execute.request_from(settings, ["seedtts"], b_sets=["local_delay_ms=5"], rounds=4,
                                   decide=["seedtts.wer.wer_corpus"])
    assert quality.score is ScorePolicy.EVERY_ROUND and not quality.score_given
    path = tmp_path / "x.json"
    assert execute._score_kept(_fixed(), quality, path) is ScorePolicy.EVERY_ROUND
    generated = _fixed(measured=AttemptStatus.GENERATED)  # a round measured: its own (the decide change is refused)
    assert execute._score_kept(generated, quality, path) is ScorePolicy.LAST
    given = execute.request_from(settings, ["seedtts"], b_sets=["local_delay_ms=5"], rounds=4, score="every-round")
    with pytest.raises(SettingsError, match="would leave its rounds scored by two rules"):
        execute._score_kept(generated, given, path)
    assert execute._score_kept(_fixed(), given, path) is ScorePolicy.EVERY_ROUND  # warm-ups only: never scored
    speed = execute.request_from(settings, ["seedtts"], b_sets=["local_delay_ms=5"], rounds=4)
    assert execute._score_kept(_fixed(score=ScorePolicy.NONE), speed, path) is ScorePolicy.NONE  # its own kept
    with pytest.raises(SettingsError, match="a context metric") as refused:
        execute.request_from(settings, ["selftest"], b_sets=["local_delay_ms=5"], rounds=4,
                             decide=["selftest.requests"])
    assert "\n" not in refused.value.message and "better side" in refused.value.hint


def test_the_statistics_line_says_when_a_decisive_metric_has_no_row():
    analysis = Analysis("x", "interleaved", (1, 2), {"A": (), "B": ()}, (), (), (), (), (), 0.05, 0.05,
                        primary=("selftest.latency_p99_s",))
    text = writing.family_text(analysis)
    assert "selftest.latency_p99_s has no row here, so no other row can be called" in text
