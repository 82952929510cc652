"""Quality verdicts from paired samples (issue 44): McNemar's exact test against a hand-computed
case, the paired bootstrap's A/A false alarms over seeded simulations, the verdict words and
their margins, outputs matched by sample id from real per-sample files, and the planted flip."""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

import pytest

from omnibench_core.errors import SettingsError
from omnibench_core.local import flip
from omnibench_core.quality.paired import compare_runs, lines, rows
from omnibench_core.settings import Settings
from omnibench_core.stats.paired_quality import QualityTest, decide, judge, mcnemar, paired_bootstrap
from omnibench_core.stats.verdict import Verdict


# -- McNemar ----------------------------------------------------------------------------------------
def test_mcnemar_exact_p_is_the_hand_computed_binomial_tail():
    # 1 sample right on A only, 9 right on B only, 90 alike: p = 2 * P(X <= 1 | 10, 1/2) = 2 * 11 / 1024
    a = [True] * 1 + [False] * 9 + [True] * 45 + [False] * 45
    b = [False] * 1 + [True] * 9 + [True] * 45 + [False] * 45
    test = mcnemar(a, b)
    assert (test.n, test.b, test.c) == (100, 1, 9)
    assert test.p() == pytest.approx(22 / 1024)
    assert test.difference == pytest.approx(0.08)
    lo, hi = test.interval(0.05)
    assert 0 < lo < 0.08 < hi <= 0.10  # excludes 0, as the test does; at most all 10 discordant for B
    assert mcnemar([True, False] * 5, [False, True] * 5).p() == 1.0  # 5 against 5: no evidence
    assert mcnemar([True] * 4, [True] * 4).p() == 1.0  # no discordant pair


def test_three_changed_answers_cannot_say_worse_but_sixty_can():
    """The issue's arithmetic: 3 answers a 0.3 flip changes of 10 give p = 0.25; of 200, ~60 do."""
    few = QualityTest("videoamme.accuracy", "higher", 0.01, mcnemar([True] * 10, [False] * 3 + [True] * 7))
    assert few.test.p() == pytest.approx(0.25)
    assert decide(few, 0.05).verdict is Verdict.INCONCLUSIVE
    assert decide(few, 0.05).needed and decide(few, 0.05).needed > 10  # says how many samples would resolve it
    many = QualityTest("videoamme.accuracy", "higher", 0.01, mcnemar([True] * 200, [False] * 60 + [True] * 140))
    made = decide(many, 0.05)
    assert made.verdict is Verdict.WORSE and "60 right on A only" in made.counts


def test_identical_answers_are_equivalent_within_the_margin_only_with_enough_samples():
    same = [random.Random(1).random() < 0.7 for _ in range(400)]
    assert decide(QualityTest("videoamme.accuracy", "higher", 0.01, mcnemar(same, same)), 0.05).verdict \
        is Verdict.EQUIVALENT


# -- the paired bootstrap ---------------------------------------------------------------------------
def _utterances(rng: random.Random, n: int, shift: float) -> tuple[list[float], list[float]]:
    base = [rng.uniform(0.0, 0.3) for _ in range(n)]  # each utterance's own difficulty, shared by both sides
    a = [max(0.0, x + rng.gauss(0, 0.03)) for x in base]
    b = [max(0.0, x + shift + rng.gauss(0, 0.03)) for x in base]
    return a, b


def test_paired_test_aa_false_alarms_stay_at_most_five_percent():
    """1000 seeded A/As of 40 utterances: the share called a change at 0.05 is at most 5 % (an
    exact test's rate is at most its level; the count's own binomial spread, 0.7 point at 1000
    experiments, is allowed once)."""
    rng = random.Random(44)
    runs = 1000
    alarms = sum(paired_bootstrap(*_utterances(rng, 40, 0.0), draws=400, seed=k).p() < 0.05 for k in range(runs))
    assert alarms / runs <= 0.05 + (0.05 * 0.95 / runs) ** 0.5


def test_paired_bootstrap_calls_a_planted_wer_increase_worse_and_weighs_by_words():
    a, b = _utterances(random.Random(3), 40, 0.05)
    made = decide(QualityTest("seedtts.wer", "lower", 0.005, paired_bootstrap(a, b, draws=400)), 0.05)
    assert made.verdict is Verdict.WORSE and made.low > 0
    # corpus WER: a long utterance's errors weigh by its words
    assert paired_bootstrap([0.0, 0.0], [1.0, 0.0], [1, 9]).estimate == pytest.approx(0.1)


def test_holm_holds_the_family():
    weak = QualityTest("seedtts.sim", "higher", 0.01, mcnemar([True] * 60, [False] * 4 + [True] * 56))  # p 0.125
    strong = QualityTest("videoamme.accuracy", "higher", 0.01, mcnemar([True] * 100, [False] * 30 + [True] * 70))
    levels = [v.level for v in judge([weak, strong], 0.05)]
    assert levels[1] == pytest.approx(0.025) and levels[0] == pytest.approx(0.05)


# -- outputs matched by sample, from real files -----------------------------------------------------
def _run(root: Path, name: str, answers: dict[str, str], truth: dict[str, str]) -> Path:
    folder = root / name / "videoamme"
    folder.mkdir(parents=True)
    per_sample = [{"sample_id": i, "predicted": x, "is_correct": x == truth[i], "is_success": True}
                  for i, x in answers.items()]
    (folder / "videoamme_results.json").write_text(json.dumps({"per_sample": per_sample}))
    return folder.parent


def test_compare_runs_counts_changed_answers_and_a_sides_own_nondeterminism(tmp_path):
    truth = {f"s{i:03d}": "A" for i in range(200)}
    flipped = {i: ("B" if flip.chosen(i, 0.3) else "A") for i in truth}
    a = [_run(tmp_path, f"a{r}", dict(truth), truth) for r in range(2)]
    b = [_run(tmp_path, f"b{r}", dict(flipped), truth) for r in range(2)]
    report = compare_runs(a, b)
    (changed,) = report.changed
    n = sum(1 for i in truth if flipped[i] != "A")
    assert 40 < n < 80 and changed.changed == n and changed.matched == 200
    assert changed.within == {"A": (0, 2), "B": (0, 2)}
    (acc,) = report.verdicts
    assert acc.verdict is Verdict.WORSE and f"{n} right on A only" in acc.counts
    assert any("WORSE" in r for r in rows(report)[0])
    # an A/A: nothing changed, nothing better or worse
    aa = compare_runs(a, [_run(tmp_path, f"a2{r}", dict(truth), truth) for r in range(2)])
    assert aa.changed[0].changed == 0 and aa.verdicts[0].verdict not in (Verdict.BETTER, Verdict.WORSE)
    # a planted nondeterministic run of B is named, with its rate
    noisy = {**flipped, "s000": "C", "s001": "D"}
    report = compare_runs(a, [b[0], _run(tmp_path, "b-noisy", noisy, truth)])
    assert report.changed[0].within["B"] == (2, 2)
    assert "B NOT deterministic: 2 of 200 (1.0%)" in lines(report)[0]


# -- the planted flip -------------------------------------------------------------------------------
def test_flip_is_fixed_per_sample_and_takes_about_its_share():
    keys = [f"local_vamme_{i:03d}.mp4" for i in range(1000)]
    share = sum(flip.chosen(k, 0.3) for k in keys) / len(keys)
    assert 0.25 < share < 0.35
    assert [flip.chosen(k, 0.3) for k in keys] == [flip.chosen(k, 0.3) for k in keys]  # the same every run
    assert not any(flip.chosen(k, 0.0) for k in keys) and all(flip.chosen(k, 1.0) for k in keys)
    assert all(flip.other_letter(x, k) != x for x in "ABCD" for k in keys[:20])
    text = "the quick brown fox jumps over the lazy dog"
    assert flip.altered_text(text, text) != text and flip.altered_text(text, text) == flip.altered_text(text, text)


@pytest.mark.parametrize("value", ["1.5", "-0.1", "abc", "nan"])
def test_flip_setting_outside_zero_to_one_is_refused(value):
    with pytest.raises(SettingsError, match="local_quality_flip"):
        Settings.from_mapping({"local_quality_flip": value})
    assert Settings.from_mapping({"local_quality_flip": "0.3"}).run.local_quality_flip == 0.3


def test_heard_cache_transcribes_each_audio_once_even_when_asked_together():
    import threading

    import numpy as np

    from omnibench_core.local.heard import HeardCache

    class Counting:
        calls = 0
        gate = threading.Event()

        def transcribe(self, samples, rate):
            Counting.calls += 1
            self.gate.wait()
            return f"{len(samples)} at {rate}"

    cache = HeardCache(Counting())  # type: ignore[arg-type]
    audio = np.zeros(100, np.float32)
    got: list[str] = []
    threads = [threading.Thread(target=lambda: got.append(cache.transcribe(audio, 16000))) for _ in range(8)]
    for t in threads:
        t.start()
    Counting.gate.set()
    for t in threads:
        t.join()
    assert got == ["100 at 16000"] * 8 and Counting.calls == 1
    assert cache.transcribe(np.ones(100, np.float32), 16000) and Counting.calls == 2  # another audio: heard anew


def test_kept_transcripts_serve_the_next_server_and_never_another_recogniser(tmp_path, monkeypatch):
    """A video question's transcript kept in the folder (--heard-dir) is read by the next server
    process instead of transcribing again (every run starts one); a recogniser of another identity
    (a pocketsphinx upgrade, a changed speech.py) reads none of them; without a folder nothing lasts."""
    import numpy as np

    from omnibench_core.local import heard
    from omnibench_core.local.heard import HeardCache

    class Counting:
        calls = 0

        def transcribe(self, samples, rate):
            Counting.calls += 1
            return f"heard {len(samples)} at {rate}"

    audio = np.zeros(100, np.float32)
    first = HeardCache(Counting(), folder=tmp_path)  # type: ignore[arg-type]
    assert first.transcribe(audio, 16000) == "heard 100 at 16000" and (first.misses, Counting.calls) == (1, 1)
    kept = list(tmp_path.glob("*/*.txt"))
    assert len(kept) == 1 and kept[0].parent.name == heard.recogniser_identity()
    after = HeardCache(Counting(), folder=tmp_path)  # type: ignore[arg-type]  # the next run's server
    assert after.transcribe(audio, 16000) == "heard 100 at 16000"
    assert (after.misses, after.recalled, Counting.calls) == (0, 1, 1)
    kept[0].write_text("a planted transcript")  # what is recalled is the file's: the folder is really read
    assert HeardCache(Counting(), folder=tmp_path).transcribe(audio, 16000) == "a planted transcript"  # type: ignore[arg-type]
    # a FIFO or an oversized file in its place is not one of ours: heard anew, never a blocked open or a huge read
    for plant in ("fifo", "huge"):
        kept[0].unlink()
        if plant == "fifo":
            os.mkfifo(kept[0])
        else:
            kept[0].write_text("x" * (heard.MAX_TRANSCRIPT_BYTES + 1))
        calls = Counting.calls
        assert HeardCache(Counting(), folder=tmp_path).transcribe(audio, 16000) == "heard 100 at 16000"  # type: ignore[arg-type]
        assert Counting.calls == calls + 1
    assert kept[0].read_text() == "heard 100 at 16000"  # and the heard one replaced the plant
    # another pocketsphinx: another identity, so the planted (old) transcript is not read; heard anew
    monkeypatch.setattr(heard.importlib.metadata, "version", lambda name: "9.9.9")
    other = heard.recogniser_identity.__wrapped__()
    assert other != heard.recogniser_identity()
    calls = Counting.calls
    upgraded = HeardCache(Counting(), folder=tmp_path, identity=other)  # type: ignore[arg-type]
    assert upgraded.transcribe(audio, 16000) == "heard 100 at 16000" and Counting.calls == calls + 1
    assert HeardCache(Counting()).transcribe(audio, 16000) and Counting.calls == calls + 2  # type: ignore[arg-type]  # no folder



def test_servers_beside_each_other_on_one_folder_transcribe_an_audio_once(tmp_path, monkeypatch):
    """Two servers on one --heard-dir asked for the same audio at once (two campaigns measured side by
    side): the second waits for the first's transcript (its flock claim) and reads it, rather than
    transcribing too. A claim held past CLAIM_WAIT_S (a hung server), or a lock name taken by a folder,
    is passed by: the audio is heard anyway."""
    import threading

    import numpy as np

    from omnibench_core.local import heard
    from omnibench_core.local.heard import HeardCache

    changed = threading.Condition()
    release = threading.Event()

    class Blocking:
        calls = 0

        def transcribe(self, samples, rate):
            with changed:
                Blocking.calls += 1
                changed.notify_all()
            release.wait()
            return f"heard {len(samples)}"

    # two caches, two descriptors of the lock file: flock treats them as two servers would be treated
    first, second = (HeardCache(Blocking(), folder=tmp_path) for _ in range(2))  # type: ignore[arg-type]
    counted = second._waiting

    def waiting() -> None:  # the count the claim keeps, told to this test as it changes
        counted()
        with changed:
            changed.notify_all()

    second._waiting = waiting  # type: ignore[method-assign]
    audio = np.zeros(100, np.float32)
    got: dict[str, str] = {}
    a = threading.Thread(target=lambda: got.update(first=first.transcribe(audio, 16000)))
    a.start()
    with changed:
        assert changed.wait_for(lambda: Blocking.calls == 1, timeout=600)  # the first server is hearing it
    b = threading.Thread(target=lambda: got.update(second=second.transcribe(audio, 16000)))
    b.start()
    with changed:  # the second waits on the claim (or, without one, transcribes it too: the defect)
        assert changed.wait_for(lambda: second.waited == 1 or Blocking.calls == 2, timeout=600)
    release.set()
    a.join()
    b.join()
    assert got == {"first": "heard 100", "second": "heard 100"}
    assert Blocking.calls == 1 and (first.misses, second.misses, second.recalled, second.waited) == (1, 0, 1, 1)

    # a claim that stays held (a hung server's) is passed by after CLAIM_WAIT_S: heard anyway
    other = np.ones(100, np.float32)
    key = heard.hashlib.sha256(other.tobytes() + b"16000").hexdigest()
    folder = tmp_path / heard.recogniser_identity()
    with open(folder / f".{key}.lock", "a+") as held:
        heard.fcntl.flock(held, heard.fcntl.LOCK_EX)
        monkeypatch.setattr(heard, "CLAIM_WAIT_S", 0.0)
        third = HeardCache(Blocking(), folder=tmp_path)  # type: ignore[arg-type]
        assert third.transcribe(other, 16000) == "heard 100" and (third.misses, third.waited) == (1, 1)
    # the lock's name taken by a folder: no claim, heard all the same
    (folder / f".{key}.lock").unlink()
    (folder / f".{key}.lock").mkdir()
    (folder / f"{key}.txt").unlink()
    fourth = HeardCache(Blocking(), folder=tmp_path)  # type: ignore[arg-type]
    assert fourth.transcribe(other, 16000) == "heard 100" and fourth.misses == 1 and Blocking.calls == 3

def _tts_run(root: Path, name: str, texts: dict[str, str], refs: dict[str, str], sims: dict[str, float]) -> Path:
    folder = root / name / "seedtts"
    folder.mkdir(parents=True)
    rows = []
    for i, text in texts.items():
        ref, hyp = refs[i].split(), text.split()
        errors = sum(1 for k, w in enumerate(ref) if k >= len(hyp) or hyp[k] != w)
        rows.append({"id": i, "hyp_norm": text, "wer": errors / len(ref), "hits": len(ref) - errors,
                     "substitutions": errors, "deletions": 0, "is_success": True})
    (folder / "wer_results.json").write_text(json.dumps({"per_sample": rows}))
    (folder / "similarity_results.json").write_text(json.dumps({"per_sample": [
        {"id": i, "speaker_similarity": s, "is_success": True} for i, s in sims.items()]}))
    return folder.parent


def test_seedtts_transcripts_wer_and_sim_are_matched_and_a_flip_is_worse_wer(tmp_path):
    refs = {f"u{i:03d}": f"sentence number {i} is read aloud by the local voice today" for i in range(120)}
    said = {i: (flip.altered_text(t, t) if flip.chosen(t, 0.3) else t) for i, t in refs.items()}
    sims = {i: 0.8 for i in refs}
    report = compare_runs([_tts_run(tmp_path, "a", refs, refs, sims)], [_tts_run(tmp_path, "b", said, refs, sims)])
    (changed,) = report.changed
    assert changed.changed == sum(1 for i in refs if said[i] != refs[i]) > 20 and changed.within == {"A": None, "B": None}
    by = {v.metric: v for v in report.verdicts}
    assert by["seedtts.wer"].verdict is Verdict.WORSE and by["seedtts.wer"].change > 0
    assert by["seedtts.sim"].verdict is Verdict.EQUIVALENT  # the same similarity: inside its margin
    assert "one run, its own nondeterminism unknown" in lines(report)[0]


def test_bisect_on_accuracy_takes_the_paired_verdict_that_run_against_run_cannot_give(tmp_path):
    """bisect --metric videoamme.accuracy: a deterministic server's accuracy is one value a run, so
    run against run a flipped commit is only `equivalent` (bisect would call it good); the paired
    McNemar verdict of the same runs says `worse` (bad)."""
    from omnibench_core.scale.bisect import is_bad
    from omnibench_core.scale.campaigns import Verdict as ScaleVerdict
    from omnibench_core.scale.campaigns import paired_verdict

    truth = {f"s{i:03d}": "A" for i in range(200)}
    flipped = {i: ("B" if flip.chosen(i, 0.3) else "A") for i in truth}
    a = [_run(tmp_path, f"a{r}", dict(truth), truth) for r in range(2)]
    b = [_run(tmp_path, f"b{r}", dict(flipped), truth) for r in range(2)]
    report = compare_runs(a, b, metrics=("videoamme.accuracy",))
    (paired,) = report.verdicts
    run_against_run = ScaleVerdict("videoamme.accuracy", 0.8, 0.6, -0.25, "equivalent", "0 sd: the same every run")
    assert is_bad(run_against_run) is False  # the bad case: without the paired test the flip passes as good
    taken = paired_verdict(run_against_run, paired)
    assert taken.verdict == "worse" and is_bad(taken) is True and "McNemar" in taken.why and not taken.relative
    assert taken.high is not None and taken.high < 0
    # a metric not asked for is not in the family (a family of one, as bisect's)
    assert compare_runs(a, b, metrics=("seedtts.wer",)).verdicts == ()


def test_history_flags_a_commit_whose_answers_changed_while_accuracy_did_not_move(tmp_path):
    """history's accuracy series: commit 2 answers one question another wrong letter (accuracy the
    same), commit 3 answers as commit 2 did; only commit 2 is flagged, with its count."""
    from omnibench_core.history import store as st
    from omnibench_core.history.outputs import changed_lines
    from omnibench_core.history.series import Series
    from omnibench_core.history.text import series_text

    truth = {f"s{i:03d}": "A" for i in range(40)}
    answers = {1: {**truth, "s000": "B"}, 2: {**truth, "s000": "C"}, 3: {**truth, "s000": "C"}}
    identity = st.Identity(("videoamme",), (), "native", "local")
    campaigns = []
    for i, said in answers.items():
        rev = f"{i}" * 40
        for r in ("run1", "run2"):
            _run(tmp_path / f"local-{rev[:12]}", r, said, truth)
        accuracy = sum(said[q] == truth[q] for q in truth) / len(truth)
        campaigns.append(st.IndexedCampaign(f"c{i}.json", f"local-{rev[:12]}", rev, identity, {},
                                            {"run1": {"videoamme.accuracy": accuracy},
                                             "run2": {"videoamme.accuracy": accuracy}}, ""))
    assert len({c.runs["run1"]["videoamme.accuracy"] for c in campaigns}) == 1  # the aggregate did not move
    flagged = changed_lines(tmp_path, "videoamme.accuracy", campaigns)
    assert len(flagged) == 1 and flagged[0].startswith(f"{'2' * 7} (after {'1' * 7}): videoamme: 1 of 40 answers")
    assert changed_lines(tmp_path, "videoamme.latency_mean_s", campaigns) == ()  # a speed series: no flag
    series = Series("videoamme", "videoamme.accuracy", "local", "higher", (), (), "checkout", flagged)
    shown = series_text(series, 0.95)
    assert f"outputs changed at {'2' * 7}" in shown and "the aggregate did not move" in shown
    # the published site's series page shows the same line (escaped), and none for a series without it
    from omnibench_core.history.series import History
    from omnibench_core.history.site import series_page

    page = series_page(series, History((series,)), {})
    assert "<h2>Outputs changed</h2>" in page and f"<li>{flagged[0]}</li>" in page
    planted = Series("videoamme", "videoamme.accuracy", "local", "higher", (), (), "checkout", ("<b>x</b>",))
    assert "&lt;b&gt;x&lt;/b&gt;" in series_page(planted, History((planted,)), {})
    assert "Outputs changed" not in series_page(Series("videoamme", "videoamme.accuracy", "local", "higher", (), (),
                                                       "checkout"), History(()), {})


def test_a_runs_row_that_differs_from_its_paired_samples_says_which_decides():
    """Two rounds of a deterministic answer set give every run the same accuracy: the runs' row
    cannot tell (`inconclusive [-28.8 %, -28.8 %]`), while McNemar over the samples says worse; the
    console then says which one to read (the new-user retrial met both verdicts side by side)."""
    from omnibench_core.quality.paired import QualityReport, deciding
    from omnibench_core.stats.paired_quality import QualityVerdict
    from omnibench_core.stats.verdict import Verdict

    worse = QualityVerdict("videoamme.accuracy", "higher", "McNemar", 200, -0.23, -0.3, -0.16, 1e-12, 0.05, 0.01,
                           Verdict.WORSE, "", counts="McNemar: 48 right on A only, 2 right on B only")
    report = QualityReport((), (worse,), 0.05)
    (line,) = deciding(report, {"videoamme.accuracy": "inconclusive", "videoamme.latency_mean_s": "worse"})
    assert line == ("videoamme.accuracy: the runs' row says inconclusive; its paired samples decide it: worse "
                    "(McNemar: 48 right on A only, 2 right on B only)")
    assert deciding(report, {"videoamme.accuracy": "worse"}) == []  # they agree: nothing to say
    assert deciding(report, {}) == []  # no runs' row (a metric of the samples alone)
