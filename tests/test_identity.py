"""One identity, one naming, defaults once, one slot type: which settings make two runs the same
measurement (omnibench_core/identity.py), used by measure, matrix, bisect, the compare guard and
A/B; a campaign made by `invoke measure` is found by `invoke matrix --resume`, on the local target
and on the stand-in checkout."""

from __future__ import annotations

import inspect
import json
from pathlib import Path

import pytest
from run_helpers import free_port, load_tasks
from scale_helpers import invoke_standin, path_without_nvidia_smi, server_pids

from omnibench_core import defaults
from omnibench_core.campaign import campaign_file, record
from omnibench_core.campaign.compare import NotComparable, compare
from omnibench_core.campaign.summary import MetricStats, RunSetStats
from omnibench_core.identity import NAME_LIMIT, Identity, file_name, recorded_settings
from omnibench_core.records import Endpoint, Slot
from omnibench_core.scale.jobs import CampaignJob
from omnibench_core.scale.slots import HostSlot
from omnibench_core.settings import Settings
from omnibench_plugins.seedtts.client import ClientConfig
from omnibench_plugins.videoamme.client import VideoClientConfig

FAST = ("--opt", "selftest.delay=0", "--opt", "selftest.requests=2", "--opt", "selftest.children=0")


def _settings(**values: object) -> Settings:
    return Settings.from_mapping(values)


# -- one identity, one name ---------------------------------------------------------------------

def test_two_long_option_sets_that_differ_only_at_the_end_get_two_hashed_names():
    a, b = (Identity.of(("selftest",), (f"selftest.note={'x' * 150}{end}",), None, {"target": "local"})
            for end in "ab")
    assert a.name() != b.name()
    assert all(len(i.name()) <= NAME_LIMIT and i.name().startswith("selftest_selftest.note-xxx") for i in (a, b))
    assert a.name()[:80] == b.name()[:80]  # the readable start, then a hash of the whole
    # the one naming function is what cuts them, for anything named
    assert file_name(["w", "x" * 200]) != file_name(["w", "x" * 199 + "y"])


def test_a_name_that_fits_is_the_one_measure_gave_before():
    """Names already on disk stay: measure's default name is unchanged."""
    ident = Identity.of(("selftest",), ("selftest.delay_ms=5",), "native", {"target": "local", "local_delay_ms": "0.0"})
    assert ident.name() == "selftest_selftest.delay_ms-5_client-native_local"
    planted = Identity.of(("selftest",), (), None, {"target": "local", "local_delay_ms": "40.0"})
    assert planted.name() == "selftest_local_delay40.0ms"
    # main's matrix name (no target, cut at 120) is still looked for
    assert ident.names() == (ident.name(), "selftest_selftest.delay_ms-5_client-native")


def test_measure_and_a_matrix_job_have_one_identity_wherever_they_ran():
    """The checkout's path (a matrix runs a worktree of the same commit) and the slot are where,
    not what: recorded, not compared. The target, its venv and a planted delay are what."""
    here = _settings(checkout="/co", gpus="0", cpus="2-5")
    there = _settings(checkout="/results/.worktrees/abc", gpus="3", cpus="9")
    job = CampaignJob("abc", ("selftest",), ("selftest.requests=2",))
    asked = record.Asked(("selftest",), ("selftest.requests=2",), None, recorded_settings(here))
    assert job.identity(there) == asked.identity() and job.identity(there).name() == asked.identity().name()
    for changed in (_settings(target="sglang-omni"), _settings(venv="other"), _settings(local_delay_ms=5)):
        diff = job.identity(changed).differences(asked.identity())
        assert len(diff) == 1 and diff[0].startswith("setting "), diff
    # flag order does not matter
    assert Identity.of(("w",), ("w.b=1", "w.a=2"), None, {}) == Identity.of(("w",), ("w.a=2", "w.b=1"), None, {})


def _campaign(folder: Path, name: str, asked: record.Asked) -> Path:
    path = campaign_file.campaign_path(folder, name)
    campaign_file.save(path, record.Campaign(name=name, revision=folder.name, asked=asked))
    return path


def test_an_older_name_is_used_only_when_it_holds_the_same_measurement(tmp_path):
    folder = tmp_path / "local-abc"
    asked = record.Asked(("selftest",), ("selftest.requests=2",), None, recorded_settings(_settings()))
    ident = asked.identity()
    canonical, legacy = ident.names()
    assert campaign_file.name_for(folder, ident) == canonical  # nothing there yet
    _campaign(folder, legacy, asked)  # as main's matrix named it
    assert campaign_file.name_for(folder, ident) == legacy
    # the same older name holding another measurement (a planted delay) is not taken over
    delayed = record.Asked(asked.workloads, asked.options, None, recorded_settings(_settings(local_delay_ms=40)))
    assert campaign_file.name_for(folder, delayed.identity()) == delayed.identity().name() != legacy
    # once the name of now exists, it wins
    _campaign(folder, canonical, asked)
    assert campaign_file.name_for(folder, ident) == canonical


# -- the compare guard --------------------------------------------------------------------------

def _stats(title: str, **identity: object) -> RunSetStats:
    values = {"run1": 1.0, "run2": 1.1}
    metric = MetricStats("selftest.latency_mean_s", values, 1.05, 0.07, "lower", 0.07)
    base = {"target": "local", "workloads": ["selftest"], "options": [], "cpus": "0"}
    return RunSetStats(title, ("run1", "run2"), (), {**base, **identity}, (metric,), environment={"cpu_set": "0"})


def test_the_compare_guard_notes_a_slot_difference_across_slots_and_refuses_any_other():
    a, other_slot, other_target = _stats("A"), _stats("B", cpus="1"), _stats("B", target="sglang-omni")
    made = compare(a, other_slot, across_slots=True)
    assert made.differences == ("pinned CPUs: A '0', B '1'",) and made.forced
    with pytest.raises(NotComparable) as refused:
        compare(a, other_slot)
    assert refused.value.evidence["differences"] == "pinned CPUs: A '0', B '1'"
    with pytest.raises(NotComparable, match="different setups") as refused:
        compare(a, other_target, across_slots=True)
    assert refused.value.evidence["differences"] == "target: A 'local', B 'sglang-omni'"


# -- defaults once ------------------------------------------------------------------------------

LIBRARY_DEFAULTS = {"runs": defaults.RUNS, "retries": defaults.RETRIES, "scoring": defaults.SCORING,
                    "rounds": defaults.ROUNDS, "alpha": defaults.ALPHA, "min_effect": defaults.MIN_EFFECT,
                    "threshold": defaults.MIN_EFFECT}


def test_the_defaults_invoke_shows_are_the_librarys():
    """Invoke shows a signature's default in --help: each, read by the task's own flag check, is
    the library's default (omnibench_core/defaults.py). A flag whose default is None (ab's
    --rounds: given or not matters, as it cannot go with --max-rounds) says the library's
    default in its help instead."""
    seen = set()
    ns = load_tasks().ns
    for name in ns.task_names:
        task = ns[name]
        for param in inspect.signature(task.body).parameters.values():
            if param.name in LIBRARY_DEFAULTS and name != "report":  # report's --runs names runs
                if param.default is None:
                    assert f"default {LIBRARY_DEFAULTS[param.name]:g}" in task.help[param.name], (name, param.name)
                else:
                    value = task.checks[param.name].parse(param.name, param.default)
                    assert value == pytest.approx(LIBRARY_DEFAULTS[param.name]), (name, param.name, param.default)
                seen.add((name, param.name))
    assert {("measure", "runs"), ("matrix", "threshold"), ("compare", "alpha"), ("ab", "rounds")} <= seen


# -- one slot type, URLs in one place -----------------------------------------------------------

def test_a_host_slot_holds_the_runs_slot_and_keeps_its_json():
    slot = HostSlot(1, Slot(8001, ("2",), (4, 5)), ("3",), note="n")
    data = slot.as_dict()
    assert data == {"index": 1, "port": 8001, "gpus": ["2"], "idle_gpus": ["3"], "cpus": [4, 5], "shared_cpus": False,
                    "node": "", "note": "n", "cpu_mode": "rule"}
    assert HostSlot.from_dict(json.loads(json.dumps(data))) == slot
    on = slot.settings_on(_settings(port=9000, gpus="0").flat())
    assert (on.run.port, on.run.gpus, on.run.cpu_list()) == (8001, "2", (4, 5))


def test_the_clients_urls_come_from_endpoint():
    cfg = ClientConfig("meta.lst", Path("out"), host="10.0.0.2", port=8123)
    assert cfg.endpoint == Endpoint(8123, "10.0.0.2")
    assert cfg.endpoint.chat_url == "http://10.0.0.2:8123/v1/chat/completions"
    assert cfg.endpoint.health_url == "http://10.0.0.2:8123/health"
    assert VideoClientConfig(Path("d"), Path("o"), port=8124).endpoint.chat_url == \
        "http://127.0.0.1:8124/v1/chat/completions"


# -- the user's path: measure, then matrix --resume ---------------------------------------------

def _campaign_files(results: Path) -> list[Path]:
    return sorted(results.glob("*/campaigns/*.json"))


def _runs(results: Path) -> list[str]:
    return sorted(p.name for p in results.glob("*/run*"))


@pytest.mark.slow
def test_matrix_resume_keeps_the_campaign_measure_made_on_the_local_target(invoke, tmp_path):
    results = tmp_path / "results"
    env = {"PATH": path_without_nvidia_smi()}
    made = invoke("measure", "-w", "selftest", "--runs", "2", *FAST, "--port", str(free_port()), env=env, timeout=600)
    assert made.returncode == 0, made.stdout[-3000:] + made.stderr
    (campaign,) = _campaign_files(results)
    runs = _runs(results)
    assert runs == ["run0", "run1", "run2"]
    matrix = invoke("matrix", "-w", "selftest", "--runs", "2", *FAST, "--slots", "0", "--resume",
                    "--port", str(free_port()), env=env, timeout=600)
    assert matrix.returncode == 0, matrix.stdout[-3000:] + matrix.stderr
    assert "complete already, kept" in matrix.stdout and "complete (kept)" in matrix.stdout
    assert _campaign_files(results) == [campaign] and _runs(results) == runs  # nothing measured again
    # a campaign under the name main's matrix gave it (no target) is found and kept as well
    legacy = "selftest_selftest.children-0_selftest.delay-0_selftest.requests-3"
    opts = ("--opt", "selftest.delay=0", "--opt", "selftest.requests=3", "--opt", "selftest.children=0")
    old = invoke("measure", "-w", "selftest", "--runs", "2", *opts, "--name", legacy, "--port", str(free_port()),
                 env=env, timeout=600)
    assert old.returncode == 0, old.stdout[-3000:] + old.stderr
    runs = _runs(results)
    again = invoke("matrix", "-w", "selftest", "--runs", "2", *opts, "--slots", "0", "--resume",
                   "--port", str(free_port()), env=env, timeout=600)
    assert again.returncode == 0 and "complete already, kept" in again.stdout, again.stdout[-3000:] + again.stderr
    assert [p.stem for p in _campaign_files(results)] == sorted([campaign.stem, legacy]) and _runs(results) == runs
    assert not server_pids(tmp_path)


@pytest.mark.slow
def test_matrix_resume_keeps_the_campaign_measure_made_on_the_standin(invoke, tmp_path):
    """measure ran in the checkout; the matrix runs its commit in a worktree: the same measurement."""
    made = invoke_standin(tmp_path / "co", "--fake-gpus", str(tmp_path / "fakegpu"))
    assert made.fake_gpus is not None
    env = {"PATH": path_without_nvidia_smi(made.fake_gpus)}
    results, where = tmp_path / "results", ("--target", "sglang-omni", "--checkout", str(made.root))
    selftest = ("-w", "selftest", "--opt", "selftest.serve_with_target=true", "--opt", "selftest.requests=2")
    measured = invoke("measure", *where, *selftest, "--runs", "2", "--port", str(free_port()), env=env, timeout=600)
    assert measured.returncode == 0, measured.stdout[-3000:] + measured.stderr
    (campaign,) = _campaign_files(results)
    runs = _runs(results)
    matrix = invoke("matrix", *where, *selftest, "--revisions", "HEAD", "--runs", "2", "--slots", "0",
                    "--slot-cpus", "shared", "--resume", "--port", str(free_port()), env=env, timeout=600)
    assert matrix.returncode == 0, matrix.stdout[-3000:] + matrix.stderr
    assert "complete already, kept" in matrix.stdout, matrix.stdout
    assert _campaign_files(results) == [campaign] and _runs(results) == runs
    assert campaign.parent.parent.name == made.head[:7]
    assert not server_pids(tmp_path)


def test_a_later_setting_left_empty_and_a_stream_delay_without_a_delay_are_not_identity():
    """Records made before local_stream_delay existed have no such key: its empty value must not
    make their identity (or an A/B experiment's hashed name) differ; and where a delay goes when
    none is planted changes nothing."""
    from omnibench_core.identity import AB_SHARED_SETTINGS, counted_settings, planted

    before = {"target": "local", "checkout": "/co", "venv": "", "local_delay_ms": "0.0"}
    now = {**before, "local_stream_delay": ""}
    assert counted_settings(now, AB_SHARED_SETTINGS) == counted_settings(before, AB_SHARED_SETTINGS)
    assert Identity.of(("w",), (), None, {**before, "local_stream_delay": "every"}) == Identity.of(("w",), (), None, before)
    delayed = {**before, "local_delay_ms": "40", "local_stream_delay": "every"}
    assert Identity.of(("w",), (), None, delayed) != Identity.of(("w",), (), None, {**delayed, "local_stream_delay": ""})
    assert planted(before) == () and planted(now) == ()
    assert planted(delayed) == (("local_delay_ms", "40"), ("local_stream_delay", "every"))


def test_a_planted_delay_is_its_own_history_series():
    from omnibench_core.history.query import _label
    from omnibench_core.history.store import Identity as SeriesIdentity

    plain = SeriesIdentity(("seedtts",), (), "", "local")
    planted = SeriesIdentity(("seedtts",), (), "", "local", (("local_delay_ms", "1000.0"),))
    assert plain.key() != planted.key() and plain != planted
    assert _label(planted, "seedtts.latency_mean_s") == "seedtts [local_delay_ms=1000.0]"
