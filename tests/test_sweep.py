"""``invoke sweep``: load points, the knee, the Pareto front, goodput, the open-loop schedule, and the
docs' two commands run as written on the local target (real servers, real campaigns)."""

from __future__ import annotations

import csv
import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from run_helpers import REPO, free_port

from omnibench_core.ab import execute as ab_execute
from omnibench_core.errors import OmnibenchError, SettingsError
from omnibench_core.settings import Settings
from omnibench_core.sweep import execute
from omnibench_core.sweep.curve import PointResult, best_within, curves, goodput, knee, pareto
from omnibench_core.sweep.points import (
    LoadPoint,
    Slo,
    at_point,
    load_points,
    parse_concurrencies,
    parse_point_metric,
    parse_rates,
    parse_slo,
)
from omnibench_core.toolkit.arrivals import lateness_summary, planned_offsets

# -- load points and targets --------------------------------------------------------------------------


def test_points_come_in_load_order_with_labels_that_name_them():
    points = load_points([4, 1], [None, 2.0])
    assert [p.label for p in points] == ["c1-r2", "c1", "c4-r2", "c4"]  # all at once is the closed-loop point
    assert points[0].options("seedtts") == ["seedtts.max_concurrency=1", "seedtts.request_rate=2"]
    assert points[1].options("seedtts") == ["seedtts.max_concurrency=1"]
    assert [p.label for p in load_points([], [None, 0.5])] == ["r0.5", "rinf"]
    assert load_points([], [None])[0].options("seedtts") == []


@pytest.mark.parametrize("text", ["0", "a", "1,,2", "", "2,2", "-1", "1.5"])
def test_a_bad_concurrency_list_is_refused_naming_it(text):
    with pytest.raises(SettingsError, match="--concurrency"):
        parse_concurrencies(text)


@pytest.mark.parametrize("text", ["0", "-2", "nan", "x", "inf,inf", "1,", "1e999"])
def test_a_bad_rate_list_is_refused_naming_it(text):
    with pytest.raises(SettingsError, match="--request-rate"):
        parse_rates(text)


def test_rates_take_inf_as_all_at_once():
    assert parse_rates("1, 2.5,INF") == [1.0, 2.5, None]


@pytest.mark.parametrize("text", ["latency_p95_s", "throughput_qps=2", "latency_p95_s=0", "latency_p95_s=nan",
                                  "latency_p95_s=-1", "=2"])
def test_a_bad_target_is_refused_with_the_metrics_it_takes(text):
    with pytest.raises(SettingsError, match="--slo") as caught:
        parse_slo(text)
    assert "latency_p95_s" in str(caught.value)


def test_a_target_may_name_the_workload():
    assert parse_slo("seedtts.latency_p95_s=2.0") == Slo("latency_p95_s", 2.0)


def test_no_points_is_refused():
    with pytest.raises(SettingsError, match="needs load points"):
        load_points([], [])


# -- a metric at a load point ------------------------------------------------------------------------


@pytest.mark.parametrize("name, options, canonical", [
    ("seedtts@c16.throughput_qps", ["seedtts.max_concurrency=16"], "seedtts@c16.throughput_qps"),
    ("seedtts@c4-r2.5.latency_p95_s", ["seedtts.max_concurrency=4", "seedtts.request_rate=2.5"], None),
    ("seedtts@r2.latency_mean_s", ["seedtts.request_rate=2"], None),
    ("seedtts@c4-rinf.latency_mean_s", ["seedtts.max_concurrency=4"], "seedtts@c4.latency_mean_s"),
    ("seedtts@rinf.latency_mean_s", [], None),
])
def test_a_metric_at_a_point_names_the_points_options_and_the_plain_metric(name, options, canonical):
    point = parse_point_metric(name)
    assert point is not None and point.options() == options and point.name == (canonical or name)
    assert point.metric == "seedtts." + name.rsplit(".", 1)[-1]  # a rate's fraction is not the metric's
    assert parse_point_metric("seedtts.throughput_qps") is None  # a plain name stays plain


@pytest.mark.parametrize("name", ["seedtts@x16.a", "seedtts@c0.a", "seedtts@c4", "seedtts@.a", "@c4.a",
                                  "seedtts@c4.a b", "seedtts@r0.a"])
def test_a_misspelt_point_metric_is_refused_with_the_form(name):
    with pytest.raises(SettingsError) as refused:
        parse_point_metric(name)
    assert "seedtts@c16.throughput_qps" in refused.value.hint and "\n" not in refused.value.message


def test_a_campaign_is_at_a_point_when_its_concurrency_and_rate_are_the_points():
    c4 = parse_point_metric("seedtts@c4.latency_mean_s")
    assert c4 is not None
    assert c4.holds(["seedtts.max_concurrency=4", "seedtts.max_samples=8"])
    assert c4.holds(["seedtts.max_concurrency=4.0", "seedtts.request_rate=inf"])  # all at once, written out
    assert not c4.holds(["seedtts.max_concurrency=4", "seedtts.request_rate=2"])  # open loop: another point
    assert not c4.holds(["seedtts.max_concurrency=8"]) and not c4.holds([])  # [] is the workload's default
    assert not c4.holds(["other.max_concurrency=4"])


def test_options_that_move_a_run_off_the_point_are_refused():
    c16 = parse_point_metric("seedtts@c16.throughput_qps")
    assert c16 is not None
    assert at_point(["seedtts.max_samples=8"], c16) == ["seedtts.max_samples=8", "seedtts.max_concurrency=16"]
    assert at_point(["seedtts.max_concurrency=16"], c16) == ["seedtts.max_concurrency=16"]
    with pytest.raises(SettingsError, match="seedtts.max_concurrency=8"):
        at_point(["seedtts.max_concurrency=8"], c16)


@pytest.mark.parametrize("name, options", [
    ("seedtts@c16.throughput_qps", ["seedtts.request_rate=2"]),  # c16 is all at once: a rate moves it
    ("seedtts@r2.latency_mean_s", ["seedtts.max_concurrency=4"]),  # r2 is at the default concurrency
    ("seedtts@rinf.latency_mean_s", ["seedtts.max_concurrency=4"]),
    ("seedtts@c16.throughput_qps", ["seedtts.max_concurrency=16", "seedtts.max_concurrency=8"]),
])
def test_an_option_for_what_the_point_leaves_at_its_default_is_refused_too(name, options):
    point = parse_point_metric(name)
    assert point is not None
    with pytest.raises(SettingsError, match="but the options give") as refused:
        at_point(options, point)
    assert "\n" not in refused.value.message and not point.holds([*options, *point.options()])


def test_all_at_once_written_out_is_the_same_point_and_a_tiny_rate_reads_back():
    c16 = parse_point_metric("seedtts@c16.throughput_qps")
    assert c16 is not None
    for rate in ("inf", "INF", ""):  # an empty rate is the option's "all at once" too
        assert at_point([f"seedtts.request_rate={rate}"], c16)[-1] == "seedtts.max_concurrency=16"
        assert c16.holds(["seedtts.max_concurrency=16", f"seedtts.request_rate={rate}"])
    tiny = LoadPoint(None, 1e-05)
    back = parse_point_metric(f"seedtts@{tiny.label}.latency_mean_s")
    assert back is not None and back.point == tiny
    with pytest.raises(SettingsError):
        parse_point_metric("seedtts@r2.5")  # the metric forgotten: not rate 2 and a metric "5"


def test_ab_deciding_a_metric_at_a_point_measures_both_sides_there(tmp_path):
    settings = Settings.from_mapping({"results": str(tmp_path)})
    request = ab_execute.request_from(settings, ["seedtts"], aa=True, max_rounds=3, options=["seedtts.max_samples=8"],
                                      decide=["seedtts@c4.latency_mean_s", "seedtts@c4.throughput_qps"])
    for side in (request.identity.a, request.identity.b):
        assert side.options == ("seedtts.max_concurrency=4", "seedtts.max_samples=8")
    assert request.sequential is not None
    assert request.sequential.decide == ("seedtts.latency_mean_s", "seedtts.throughput_qps")


@pytest.mark.parametrize("kwargs, words", [
    ({"decide": ["seedtts@c4.latency_mean_s", "seedtts@c8.throughput_qps"]}, "names 2 load points"),
    ({"decide": ["selftest@c4.latency_mean_s"]}, "selftest is not a workload of this experiment"),
    ({"decide": ["seedtts@c4.latency_mean_s"], "b_opts": ["seedtts.max_concurrency=8"]}, "seedtts.max_concurrency=8"),
    ({"decide": ["seedtts@c4.latency_mean_s"], "a_opts": ["seedtts.request_rate=2"]}, "seedtts.request_rate=2"),
    ({"decide": ["seedtts@c4.latency_mean_s", "seedtts.latency_mean_s"]}, "names one metric twice"),
    ({"decide": ["seedtts@c4.latency_mean_s", "seedtts@c4-rinf.latency_mean_s"]}, "names one metric twice"),
])
def test_ab_refuses_points_it_cannot_measure_in_one_line(tmp_path, kwargs, words):
    settings = Settings.from_mapping({"results": str(tmp_path)})
    with pytest.raises(SettingsError) as refused:
        ab_execute.request_from(settings, ["seedtts"], aa=True, max_rounds=3, **kwargs)
    assert words in refused.value.message and "\n" not in refused.value.message and refused.value.hint


def test_bisect_at_a_point_of_a_workload_it_does_not_measure_is_refused(tmp_path):
    from omnibench_core.scale import front_door

    settings = Settings.from_mapping({"results": str(tmp_path), "target": "sglang-omni", "checkout": str(tmp_path)})
    with pytest.raises(SettingsError, match="seedtts is not a workload of this bisect"):
        front_door.bisect(settings, good="a", bad="b", metric="seedtts@c16.throughput_qps", workloads=["selftest"],
                          engine=None)  # type: ignore[arg-type]  # refused before any engine is used


# -- the knee, the front, goodput ---------------------------------------------------------------------


def _r(c: int, throughput: float | None, latency: float | None, p95: float | None = None) -> PointResult:
    return PointResult(LoadPoint(c, None), f"s.c{c}", 2, throughput, 0.0, latency, p95,
                       {"latency_p95_s": p95, "latency_mean_s": latency})


def test_the_knee_is_the_last_point_before_latency_outgrows_throughput():
    curve = [_r(1, 1.0, 1.0), _r(2, 1.9, 1.05), _r(4, 3.5, 1.2), _r(8, 3.8, 2.4), _r(16, 3.9, 4.8)]
    assert knee(curve).point.label == "c4"  # 4 -> 8: +9 % throughput for +100 % latency


def test_no_knee_while_throughput_keeps_pace():
    assert knee([_r(1, 1.0, 1.0), _r(2, 2.0, 1.1), _r(4, 4.0, 1.3)]) is None
    assert knee([_r(1, 1.0, 1.0)]) is None
    assert knee([_r(1, None, 1.0), _r(2, 2.0, 5.0)]) is None  # a point without numbers decides nothing


def test_the_pareto_front_drops_points_another_beats_on_both():
    points = [_r(1, 1.0, 1.0), _r(2, 2.0, 1.5), _r(4, 1.8, 2.0), _r(8, 2.5, 3.0)]
    assert [r.point.label for r in pareto(points)] == ["c1", "c2", "c8"]  # c4: c2 has more at less


def test_goodput_counts_successes_within_the_bound_over_the_window():
    assert goodput([0.5, 1.0, 2.5, None], 2.0, 1.0) == 1.0  # two within 1 s, in 2 s
    assert goodput([0.5], 0.0, 1.0) is None


def test_the_best_point_within_the_target_is_the_fastest_that_holds_it():
    points = [_r(1, 1.0, 0.5, 0.8), _r(4, 3.0, 1.0, 1.9), _r(8, 3.5, 2.0, 3.0)]
    assert best_within(points, Slo("latency_p95_s", 2.0)).point.label == "c4"
    assert best_within(points, Slo("latency_p95_s", 0.1)) is None


def test_both_kinds_of_point_make_one_curve_per_rate():
    points = [PointResult(LoadPoint(c, r), "x", 2, 1.0, 0.0, 1.0, 1.0, {}) for c in (1, 4) for r in (None, 2.0)]
    assert sorted(len(c) for c in curves(points)) == [2, 2]
    assert all(len({r.point.rate for r in c}) == 1 for c in curves(points))


# -- the open-loop schedule -------------------------------------------------------------------------


def test_a_seeded_schedule_is_upstreams_draw_and_repeats():
    """The offsets are numpy's default_rng(seed).exponential(1 / rate) gaps, summed, as upstream's
    runner draws them: the same seed plans the same arrivals there and here."""
    ours = planned_offsets(4.0, 6, seed=7)
    assert ours == planned_offsets(4.0, 6, seed=7)
    assert ours == pytest.approx(list(np.cumsum(np.random.default_rng(7).exponential(0.25, 6))))
    assert ours != planned_offsets(4.0, 6, seed=8)
    assert planned_offsets(None, 6, seed=7) is None
    assert sum(np.diff(planned_offsets(10.0, 4000, seed=1))) / 3999 == pytest.approx(0.1, rel=0.05)
    with pytest.raises(ValueError):
        planned_offsets(0.0, 3, seed=1)


def test_lateness_is_summarised_in_seconds():
    assert lateness_summary([0.0, 0.1, 0.3]) == pytest.approx(
        {"dispatch_lateness_mean_s": 0.1333333, "dispatch_lateness_p95_s": 0.28, "dispatch_lateness_max_s": 0.3})
    assert lateness_summary([])["dispatch_lateness_max_s"] is None


# -- refused before anything runs ---------------------------------------------------------------------


def test_a_workload_without_the_load_option_is_refused():
    spec = execute.SweepSpec("videoamme", tuple(load_points([], [2.0])), runs=2)
    with pytest.raises(SettingsError, match="has no option 'request_rate'"):
        execute.check_spec(spec)


def test_an_opt_that_sets_the_swept_option_is_refused():
    spec = execute.SweepSpec("seedtts", tuple(load_points([1, 4], [])), runs=2,
                             options=("seedtts.max_concurrency=2",))
    with pytest.raises(SettingsError, match="sets what --concurrency sweeps"):
        execute.check_spec(spec)


@pytest.mark.parametrize("points, options, words", [
    (load_points([], [2.0]), (), "concurrency levels at one request rate"),
    (load_points([1, 4], [2.0, None]), (), "concurrency levels at one request rate"),
    (load_points([1, 4], []), ("seedtts.concurrencies=1,2",), "sets what --upstream --concurrency sweeps"),
])
def test_an_upstream_sweep_it_cannot_hand_to_sglang_omnis_client_is_refused(points, options, words):
    spec = execute.SweepSpec("seedtts", tuple(points), runs=2, options=options, upstream=True)
    with pytest.raises(SettingsError, match=words):
        execute.check_spec(spec)
    assert execute.SweepSpec("seedtts", tuple(points), runs=2, upstream=True).sweep_name() != \
        execute.SweepSpec("seedtts", tuple(points), runs=2).sweep_name()  # never the campaign-per-point sweep's


def test_sweeps_of_other_options_get_other_names():
    a = execute.SweepSpec("seedtts", (), runs=2, options=("seedtts.max_samples=8",))
    b = execute.SweepSpec("seedtts", (), runs=2, options=("seedtts.max_samples=4",))
    assert a.sweep_name() != b.sweep_name() and a.sweep_name().startswith("sweep-seedtts-")
    assert execute.SweepSpec("seedtts", (), runs=2).sweep_name() == "sweep-seedtts"


def test_a_sweeps_name_is_read_from_its_flags_and_one_named_by_its_digest_before_is_still_found(tmp_path):
    """Issue 46, item 5: sweeps were named by a digest (sweep-seedtts-e07b4afe) a user had to copy.
    Now by their flags in words; the digest is kept in the record, and a sweep measured under its
    digest name is resumed there (its folder, or only its points' campaigns, on disk)."""
    spec = execute.SweepSpec("seedtts", tuple(load_points([1, 4], [])), runs=2,
                             options=("seedtts.max_samples=4", "seedtts.stream=true"), client="sglang")
    assert spec.sweep_name() == "sweep-seedtts-max_samples-4_stream-true_client-sglang"
    assert spec.campaign_name(spec.points[0]) == "sweep-seedtts-max_samples-4_stream-true_client-sglang.c1"
    assert execute.SweepSpec("seedtts", (), runs=2, upstream=True).sweep_name() == "sweep-seedtts-upstream"
    old = f"sweep-seedtts-{spec.options_digest()}"
    assert spec.older_name() == old and len(spec.options_digest()) == 8
    assert spec.on_disk(tmp_path).sweep_name() == spec.sweep_name()  # nothing on disk: the new name
    (tmp_path / "campaigns").mkdir()
    (tmp_path / "campaigns" / f"{old}.c1.json").write_text("{}")  # a point measured under the old name
    assert spec.on_disk(tmp_path).sweep_name() == old
    (tmp_path / "sweeps" / spec.sweep_name()).mkdir(parents=True)  # once under the new name: that one
    assert spec.on_disk(tmp_path).sweep_name() == spec.sweep_name()
    given = execute.SweepSpec("seedtts", (), runs=2, options=spec.options, name="mine")
    assert given.on_disk(tmp_path).sweep_name() == "mine"


def test_a_name_that_is_no_sweep_is_not_compared_as_one(tmp_path):
    from omnibench_core.settings import Settings
    from omnibench_core.sweep import compare

    settings = Settings.of(results=str(tmp_path / "results"))
    assert not compare.is_sweep(settings, "nothing-here")
    assert not compare.is_sweep(settings, "../../etc")  # outside the results root: never a sweep
    (tmp_path / "results" / "local-x" / "sweeps").mkdir(parents=True)
    assert not compare.is_sweep(settings, "local-x/..")  # ".." is no sweep's name
    (tmp_path / "results" / "local-x" / "sweeps" / "s" / "c1_c4").mkdir(parents=True)
    with pytest.raises(OmnibenchError, match="no sweep 'local-x/s'") as caught:
        compare.find_sweep(settings, "local-x/s")
    assert "invoke sweep" in caught.value.hint


def test_a_sweep_record_of_another_format_or_without_campaigns_is_refused_naming_it(tmp_path):
    from omnibench_core.errors import RunFileError
    from omnibench_core.store import sweep_file

    sweep_file.save(tmp_path, {"workload": "seedtts", "points": [{"label": "c1", "campaign": "s.c1",
                                                                    "concurrency": 1, "request_rate": None}]})
    assert sweep_file.load(tmp_path)["format"] == sweep_file.FORMAT
    sweep_file.record_path(tmp_path).write_text(json.dumps({"format": 2, "points": []}))
    with pytest.raises(RunFileError, match="format 2"):
        sweep_file.load(tmp_path)
    for point in ({"label": "c1"}, {"label": "c1", "campaign": "../../../etc/x"}):
        sweep_file.record_path(tmp_path).write_text(json.dumps({"format": 1, "points": [point]}))
        with pytest.raises(RunFileError, match="must each name their campaign") as caught:
            sweep_file.load(tmp_path)
        assert caught.value.evidence["field"] == "points"
    good = {"label": "c1", "campaign": "s.c1"}
    for record, field in (({"points": [{**good, "concurrency": 0}]}, "points[0].concurrency"),
                          ({"points": [{**good, "concurrency": True}]}, "points[0].concurrency"),
                          ({"points": [good, {**good, "request_rate": "fast"}]}, "points[1].request_rate"),
                          ({"points": [{**good, "request_rate": -1}]}, "points[0].request_rate"),
                          ({"points": [{**good, "request_rate": 10**400}]}, "points[0].request_rate"),
                          ({"points": [good], "workload": 3}, "workload"),
                          ({"points": [good], "slo": {"metric": "latency_p95_s", "bound_s": 0}}, "slo"),
                          ({"points": [good], "upstream": "yes"}, "upstream")):
        sweep_file.record_path(tmp_path).write_text(json.dumps({"format": 1, "workload": "seedtts", **record}))
        with pytest.raises(RunFileError, match="is not valid") as caught:
            sweep_file.load(tmp_path)
        assert caught.value.evidence["field"] == field and "\n" not in caught.value.message


# -- the docs' commands, as written --------------------------------------------------------------------
# docs/sweep.md: a concurrency sweep, then a rate sweep at c4 that shares the first one's c4 campaign
CONCURRENCY_COMMAND = "invoke sweep --workload seedtts --concurrency 1,4 --runs 2 --opt seedtts.max_samples=4"
RATE_COMMAND = ("invoke sweep --workload seedtts --concurrency 4 --request-rate 2,inf --runs 2 "
                "--opt seedtts.max_samples=4 --slo latency_p95_s=2.0")
HISTORY_COMMAND = "invoke history --metric seedtts@c4.throughput_qps"
COMPARE_COMMAND = "invoke compare REVISION_A/SWEEP REVISION_B/SWEEP --fail-on worse"
AB_COMMAND = ("invoke ab --workload seedtts --aa --max-rounds 3 --decide seedtts@c4.latency_mean_s "
              "--opt seedtts.max_samples=4 --score none --csv ab-c4.csv")
EXPORT_COMMAND = ("invoke sweep --workload seedtts --concurrency 1,4 --runs 2 --opt seedtts.max_samples=4 "
                  "--csv sweep.csv --json sweep-rows.json")


def _invoke(results: Path, command: str, cwd: Path = REPO) -> subprocess.CompletedProcess:
    """``command`` as a reader runs it in ``cwd`` (where a relative --csv lands), on ``results``."""
    env = {**os.environ, "INVOKE_OMNIBENCH_RESULTS": str(results), "INVOKE_OMNIBENCH_PORT": str(free_port())}
    return subprocess.run([sys.executable, "-m", "invoke", "-r", str(REPO), *command.split()[1:]], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=1200)


@dataclass(frozen=True)
class Swept:
    """A docs sweep as the module fixtures ran it: its results root, its output, and the runs there
    were once it had finished."""

    results: Path
    done: subprocess.CompletedProcess
    runs: tuple[str, ...]


def _swept(results: Path, command: str) -> Swept:
    done = _invoke(results, command)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return Swept(results, done, tuple(sorted(p.name for p in results.glob("local-*/run*"))))


# The page's commands one after another on one results root, as a reader runs them: each a module
# fixture, and each test (under a minute, issue 40) asserts what one of them showed.
@pytest.fixture(scope="module")
def docs_results(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("docs-sweeps") / "results"


@pytest.fixture(scope="module")
def concurrency_swept(docs_results) -> Swept:
    return _swept(docs_results, CONCURRENCY_COMMAND)


@pytest.fixture(scope="module")
def rate_swept(concurrency_swept) -> Swept:
    return _swept(concurrency_swept.results, RATE_COMMAND)


def _sweep_folder(results: Path, points: str) -> Path:
    (folder,) = results.glob(f"local-*/sweeps/sweep-seedtts-*/{points}")
    return folder


def test_the_docs_show_the_commands_these_tests_run():
    page = (REPO / "docs" / "sweep.md").read_text()
    for command in (CONCURRENCY_COMMAND, RATE_COMMAND, COMPARE_COMMAND, HISTORY_COMMAND, AB_COMMAND, EXPORT_COMMAND):
        assert command in page, command
    assert CONCURRENCY_COMMAND in (REPO / "README.md").read_text()


@pytest.mark.slow
def test_the_docs_concurrency_sweep_writes_the_table_the_plot_and_the_knee(concurrency_swept):
    results, done = concurrency_swept.results, concurrency_swept.done
    folder = _sweep_folder(results, "c1_c4")
    record = json.loads((folder / "sweep.json").read_text())
    # named by its flags, in words; the digest it was named by before is kept in the record
    assert folder.parent.name == record["sweep"] == "sweep-seedtts-max_samples-4" and len(record["options_digest"]) == 8
    by = {p["label"]: p for p in record["points"]}
    assert list(by) == ["c1", "c4"] and all(p["runs"] == 2 and p["failed"] == 0 for p in by.values())
    assert all(p["throughput_qps"] > 0 and 0 < p["latency_mean_s"] <= p["latency_p95_s"] for p in by.values())
    assert record["findings"][0].startswith("knee: ") and record["pareto_front"]
    assert (folder / "sweep.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    md = (folder / "sweep.md").read_text()
    assert "| c1 |" in md and "| c4 |" in md and "![latency against throughput](sweep.png)" in md
    assert "sweep data: " in done.stdout and "knee: " in done.stdout
    # a load curve is speed: each point's last run is scored for quality, its run0 and run1 are not (issue 43)
    for point in ("c1", "c4"):
        (campaign,) = results.glob(f"local-*/campaigns/sweep-seedtts-*.{point}.json")
        attempts = {a["slot"]: a["run"] for a in json.loads(campaign.read_text())["attempts"] if a["status"] == "complete"}
        scored = {slot for slot, run in attempts.items()
                  if (campaign.parent.parent / run / "seedtts" / "wer_results.json").is_file()}
        assert scored == {2} and set(attempts) == {0, 1, 2}, (point, attempts, scored)
    assert "finished without scoring (--score last" in done.stdout
    # the first point's estimate covers the point after it; the last point's has none after it (issue 43)
    first = [line for line in done.stdout.splitlines() if line.startswith("[sweep point 1 of 2: c1] [run ")]
    last = [line for line in done.stdout.splitlines() if line.startswith("[sweep point 2 of 2: c4] [run ")]
    assert first and all("1 later point" in line.split("]")[1] for line in first), first[:3]
    assert last and not any("later point" in line for line in last), last[:3]


@pytest.mark.slow
def test_the_docs_sweep_export_writes_each_points_exact_numbers_with_units_in_the_columns(concurrency_swept, tmp_path):
    # the same sweep again measures nothing (its points are finished) and exports its rows where it is run
    done = _invoke(concurrency_swept.results, EXPORT_COMMAND, cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert sorted(p.name for p in concurrency_swept.results.glob("local-*/run*")) == list(concurrency_swept.runs)
    record = json.loads((_sweep_folder(concurrency_swept.results, "c1_c4") / "sweep.json").read_text())
    rows = {r["point"]: r for r in json.loads((tmp_path / "sweep-rows.json").read_text())}
    for point in record["points"]:
        row = rows[point["label"]]
        assert row["throughput_req_per_s"] == point["throughput_qps"] and row["latency_p95_s"] == point["latency_p95_s"]
    with (tmp_path / "sweep.csv").open() as handle:
        (first, _) = list(csv.DictReader(handle))
    assert float(first["latency_mean_s"]) == rows["c1"]["latency_mean_s"] and first["concurrency"] == "1"
    # the table prints the same numbers in the units people read
    assert re.search(r"\nc1 +\S+ +2 +[0-9.]+ req/s +[0-9.]+ req/s +[0-9.]+ ms +[0-9.]+ ms +0", done.stdout), done.stdout


@pytest.mark.slow
def test_the_docs_rate_sweep_reads_c4_again_and_writes_each_runs_schedule(concurrency_swept, rate_swept):
    results = rate_swept.results
    record = json.loads((_sweep_folder(results, "c4-r2_c4") / "sweep.json").read_text())
    by = {p["label"]: p for p in record["points"]}
    assert record["slo"] == {"metric": "latency_p95_s", "bound_s": 2.0}
    assert by["c4-r2"]["request_rate"] == 2.0 and by["c4-r2"]["arrival_seed"] == 0
    assert by["c4-r2"]["dispatch_lateness_mean_s"] >= 0 and by["c4-r2"]["goodput_qps"] >= 0  # > 0 needs a request under 2 s: load-dependent
    assert by["c4"]["arrival_seed"] is None and by["c4"]["dispatch_lateness_mean_s"] is None
    assert any(f.startswith("goodput under latency_p95_s <= 2 s") for f in record["findings"])
    # c4 was the first sweep's campaign, read again: only c4-r2's run0 and two runs are new
    assert len(rate_swept.runs) == len(concurrency_swept.runs) + 3
    docs = [json.loads(p.read_text()) for p in results.glob("local-*/run*/seedtts/speed_results.json")]
    at_rate = [d for d in docs if d["config"].get("request_rate") == 2.0]
    assert len(at_rate) == 3  # run0 and two measured runs, each with its schedule's record
    for speed in at_rate:
        assert all(r["dispatch_lateness_s"] >= 0 for r in speed["per_request"])
        assert speed["summary"]["arrival_seed"] == 0 and "dispatch_lateness_p95_s" in speed["summary"]


@pytest.mark.slow
def test_the_docs_compare_of_the_two_sweeps_compares_their_common_points(rate_swept):
    results, folder = rate_swept.results, _sweep_folder(rate_swept.results, "c4-r2_c4")
    # the two sweeps compared point by point: c4 is their one common point (the same campaign)
    revision = folder.parent.parent.parent.name
    name = folder.parent.name
    assert f"{revision}/sweeps/{name}/c4-r2_c4" in rate_swept.done.stdout  # the names the page says to fill in
    # the page's command, its names filled in from the `sweep data:` line: the name holds two sets of
    # points (c1_c4, c4-r2_c4), so it is refused naming both, not guessed
    filled = COMPARE_COMMAND.replace("REVISION_A", revision).replace("REVISION_B", revision).replace("SWEEP", name)
    asked = _invoke(results, filled)
    assert asked.returncode == 1 and "was written for 2 sets of points" in asked.stderr, asked.stdout + asked.stderr
    assert f"{revision}/{name}/c1_c4, {revision}/{name}/c4-r2_c4" in asked.stderr
    # the set the page names (c4-r2_c4) on both sides: every point is common and unchanged
    filled = filled.replace(f"{revision}/{name}", f"{revision}/{name}/c4-r2_c4")
    same = _invoke(results, filled)
    assert same.returncode == 0 and "2 common load points;" in same.stdout, same.stdout[-3000:] + same.stderr[-3000:]
    done = _invoke(results, f"invoke compare {revision}/{name}/c1_c4 {revision}/{name}/c4-r2_c4")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "1 common load point;" in done.stdout and "only in A (not compared): c1" in done.stdout
    assert "only in B (not compared): c4-r2" in done.stdout
    (compared,) = {p for p in results.glob("comparisons/*__vs__*/sweep-compare.json")
                   if "c1_c4" in p.parent.name}
    record = json.loads(compared.read_text())
    assert [p["label"] for p in record["points"]] == ["c4"]
    assert set(record["points"][0]["changes"].values()) == {0.0}  # one campaign against itself
    assert (compared.parent / "sweep-compare.png").is_file() and (compared.parent / "sweep-compare.md").is_file()
    # a point's campaign compared as a campaign: its quality metrics, scored on its last run only, are
    # listed as such and do not fail --fail-on (not measured on purpose, not lost)
    itself = _invoke(results, f"invoke compare {name}.c4 {name}.c4 --fail-on worse")
    assert itself.returncode == 0, itself.stdout[-3000:] + itself.stderr[-3000:]
    assert re.search(r"seedtts\.wer\.wer_corpus: scored in run\d+ only \(the other runs were left unscored, --score\)",
                     itself.stdout), itself.stdout[-3000:]


@pytest.mark.slow
def test_the_docs_history_at_a_point_is_that_points_campaigns_only(rate_swept, tmp_path):
    # a metric at a point: history's series is c4's campaign only, not c4-r2's (it sets a rate)
    results = rate_swept.results
    done = _invoke(results, HISTORY_COMMAND + f" --json {tmp_path / 'h.json'}")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (series,) = json.loads((tmp_path / "h.json").read_text())["series"]
    assert series["metric"] == "seedtts.throughput_qps" and "seedtts.max_concurrency=4" in series["workload"]
    assert "request_rate" not in series["workload"] and len(series["points"][0]["values"]) == 2
    done = _invoke(results, "invoke history --metric seedtts@c16.throughput_qps")
    assert done.returncode == 1 and "no campaign of seedtts was measured at c16" in done.stderr
    assert "seedtts.max_concurrency=4 seedtts.max_samples=4" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.slow
def test_the_docs_ab_at_a_point_measures_both_sides_there(docs_results):
    # ... and ab measures both sides at it, deciding the metric by its plain name
    results = docs_results
    done = _invoke(results, AB_COMMAND, cwd=results.parent)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    # its rows, exported: the decided metric with its unit and the verdict the record holds
    with (results.parent / "ab-c4.csv").open() as handle:
        rows = {r["metric"]: r for r in csv.DictReader(handle)}
    assert rows["seedtts.latency_mean_s"]["unit"] == "seconds" and rows["seedtts.latency_mean_s"]["verdict"]
    (ab_record,) = results.glob("ab/*.json")
    experiment = json.loads(ab_record.read_text())
    for side in ("a", "b"):
        assert experiment["identity"][side]["options"] == ["seedtts.max_concurrency=4", "seedtts.max_samples=4"]
    assert experiment["sequential"]["decide"] == ["seedtts.latency_mean_s"]
    # a speed question (--score none, issue 40): every run generated and timed, none transcribed or scored. That
    # only each look's round is scored under the default --score last is shown on selftest, in
    # test_ab_sequential.py's docs command (it was shown here, at two seed-tts scorings' cost)
    ab_runs = [results / a["revision"] / a["run"] for a in experiment["attempts"] if a["status"] == "complete"]
    assert len(ab_runs) == 2 * (1 + experiment["sequential"]["rounds_run"])  # the warm-ups and every round, both sides
    assert not [r for r in ab_runs if (r / "seedtts" / "wer_results.json").is_file()]
    assert "quality: no run scored (--score none)" in done.stdout
