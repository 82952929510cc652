"""Issue 41, item 3: the verdict rule calls the estimator of a design by name and never branches
on a design; a new statistic is a new entry in stats.designs.ESTIMATORS."""

from __future__ import annotations

import ast
from dataclasses import replace

import pytest
from run_helpers import REPO

from omnibench_core.stats import designs
from omnibench_core.stats.designs import Design, PairedT, WelchT
from omnibench_core.stats.verdict import Samples, Verdict, judge

NOISY = Samples("m.latency_s", "lower", (1.00, 1.10, 0.90, 1.05, 0.95), (1.02, 1.16, 0.91, 1.12, 0.97))
SHIFTED = Samples("m.latency_s", "lower", (1.0, 1.0, 1.0), (1.2, 1.2, 1.2))


def test_a_new_estimator_is_one_entry_and_the_rule_calls_it_by_name(monkeypatch):
    """A toy estimator registered under a name of its own: judge uses it (its test in the method,
    its unit and sizes in the words), and with the paired statistics it agrees with paired on the
    numbers."""

    class Toy(PairedT):
        test, unit = "toy t", "toy rounds"

        def sizes(self, n_a: int, n_b: int) -> str:
            return f"{n_a} toy rounds"

    monkeypatch.setitem(designs.ESTIMATORS, "toy", Toy())
    (toy,) = judge([NOISY], "toy")
    (paired,) = judge([NOISY], Design.PAIRED)
    assert toy.design == "toy" and toy.method.startswith("toy t, ") and paired.method.startswith("paired t, ")
    assert (toy.verdict, toy.change, toy.low, toy.high, toy.needed) == \
        (paired.verdict, paired.change, paired.low, paired.high, paired.needed)
    assert toy.verdict is Verdict.INCONCLUSIVE and "toy rounds would resolve it" in toy.why
    (exact,) = judge([replace(SHIFTED, a=SHIFTED.a[:2], b=SHIFTED.b[:2])], "toy")  # no spread, too few to tell
    assert "2 toy rounds give at best an exact p" in exact.why
    with pytest.raises(ValueError, match="no estimator is registered as 'nope'; known: paired, toy, unpaired"):
        judge([NOISY], "nope")


def test_the_built_in_designs_are_their_estimators():
    assert isinstance(designs.estimator(Design.PAIRED), PairedT) and isinstance(designs.estimator("unpaired"), WelchT)
    (unpaired,) = judge([NOISY], Design.UNPAIRED)
    assert unpaired.method.startswith("Welch t, B - A") and unpaired.design == "unpaired"


def test_no_code_branches_on_a_design():
    """No comparison with Design.PAIRED or Design.UNPAIRED anywhere in the library: a design is a
    name the estimator table answers to (calling judge with one is not a branch)."""
    offenders = []
    for path in sorted((REPO / "omnibench_core").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Compare):
                named = [n for n in [node.left, *node.comparators]
                         if isinstance(n, ast.Attribute) and n.attr in ("PAIRED", "UNPAIRED")]
                offenders += [f"{path.relative_to(REPO)}:{node.lineno}" for _ in named]
    assert offenders == []
    planted = ast.parse("if design is Design.PAIRED:\n    pass\n")  # the finder itself
    assert any(isinstance(n, ast.Compare) and getattr(n.comparators[0], "attr", "") == "PAIRED"
               for n in ast.walk(planted))


def test_a_rounds_estimate_is_the_mean_log_ratio_of_the_requests_matched_by_id():
    """Issue 43: each round's values are each side's geometric mean over the requests matched by
    id, so the paired rule's per-round log-ratio is the mean of the requests' own log-ratios; a
    request missing on one side (it failed) is left out of both; a round without per-request
    values leaves the metric on its rounds' own values."""
    import math

    from omnibench_core.ab.analysis import round_samples
    from omnibench_core.stats.matched import matched_rounds

    a = [{"0": 1.0, "1": 4.0, "2": 9.0}, {"0": 2.0, "1": 2.0}]
    b = [{"0": 1.1, "1": 4.4, "2": 9.9}, {"0": 2.2, "1": 2.4, "7": 50.0}]  # "7" never ran on A
    rounds = matched_rounds(a, b)
    assert rounds is not None and rounds.requests == (3, 2)
    for i, (ra, rb) in enumerate(zip(a, b, strict=True)):
        ids = sorted(set(ra) & set(rb))
        assert math.log(rounds.b[i] / rounds.a[i]) == pytest.approx(
            sum(math.log(rb[k] / ra[k]) for k in ids) / len(ids))
    assert rounds.b[0] / rounds.a[0] == pytest.approx(1.1)  # the arithmetic means' ratio would be 1.1 too
    # round 2's means are 2.0 and 18.2 (the unmatched 50 s request): matched, B is +9.5 %, not +810 %
    samples = round_samples("m.latency_s", "lower", (14 / 3, 2.0), (15.4 / 3, 54.6 / 3), a, b)
    assert samples.matched == (3, 2) and samples.b[1] / samples.a[1] == pytest.approx(math.sqrt(1.1 * 1.2))
    (row,) = judge([samples], Design.PAIRED)
    assert "of 2+ matched requests a round" in row.method and row.change == pytest.approx(math.sqrt(1.1 * math.sqrt(
        1.1 * 1.2)) - 1)
    # no per-request values in a round, or none matched: the rounds' own values
    assert matched_rounds([a[0], None], b) is None and matched_rounds([a[0], {"9": 1.0}], b) is None
    plain = round_samples("m.latency_s", "lower", (1.0, 2.0), (1.1, 2.2), [a[0], None], b)
    assert plain.matched == () and plain.a == (1.0, 2.0)
    assert "matched" not in judge([plain], Design.PAIRED)[0].method


def test_seed_tts_gives_each_mean_metrics_values_by_request_id_of_the_requests_that_succeeded():
    """Issue 43: what the A/B matches comes from upstream's ``per_request`` keys (``id``,
    ``is_success``, ``latency_s``, ``rtf``, ``audio_ttfp_s``): a failed request, an RTF of 0
    (upstream's default without audio) and an id that repeats are left out; streaming adds the
    first-audio latency."""
    from omnibench_plugins.seedtts.metrics import by_request

    rows = [{"id": "a", "is_success": True, "latency_s": 1.5, "rtf": 0.5, "audio_ttfp_s": 0.2},
            {"id": "b", "is_success": False, "latency_s": 9.0, "rtf": 0.0, "audio_ttfp_s": None},
            {"id": "c", "is_success": True, "latency_s": 2.0, "rtf": 0.0, "audio_ttfp_s": 0.3},
            {"id": "d", "is_success": True, "latency_s": 1.0, "rtf": 0.4, "audio_ttfp_s": 0.1},
            {"id": "d", "is_success": True, "latency_s": 1.1, "rtf": 0.4, "audio_ttfp_s": 0.1}]
    assert by_request(rows, "seedtts", stream=False) == {"seedtts.latency_mean_s": {"a": 1.5, "c": 2.0},
                                                         "seedtts.rtf_mean": {"a": 0.5}}
    assert by_request(rows, "seedtts", stream=True)["seedtts.audio_ttfp_mean_s"] == {"a": 0.2, "c": 0.3}
    assert by_request(rows[1:2], "seedtts", stream=True) == {}
