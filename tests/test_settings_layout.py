"""Settings, the results layout, atomic JSON and step ordering."""

from __future__ import annotations

import json
from dataclasses import fields

import pytest

from omnibench_core.defaults import MAX_SETTING_S
from omnibench_core.errors import PluginError, SettingsError
from omnibench_core.jsonio import read_json, write_json
from omnibench_core.records import Command, ServeSpec, Step
from omnibench_core.run.layout import move_aside, next_run_name
from omnibench_core.run.planning import order_steps
from omnibench_core.settings import SECTIONS, Settings, format_cpu_list, parse_cpu_list
from omnibench_core.store import manifest as manifest_file


def test_defaults_follow_the_runbook():
    s = Settings().run
    assert (s.port, s.ready_timeout_s, s.gpu_free_timeout_s, s.gpu_free_mib) == (8000, 1800, 600, 1024)
    assert s.health_interval_s < 5  # the runbook's 5 s sleeps are what omnibench replaces


FLAT_KEYS = ("results target port checkout venv gpus cpus ready_timeout_s gpu_free_timeout_s gpu_free_mib stop_grace_s "
             "health_interval_s gpu_poll_interval_s nvidia_smi git ci_gpus omni_ci_home ci_attempts ci_retry_delay_s "
             "ci_stage_timeout_s bench_dir gpu_a gpu_b cores_per_gpu skip_cores image container_name repo_url commit "
             "hf_cache pins_file lscpu docker bash sysfs telemetry_interval_s nvml_module local_delay_ms noise_max_foreign "
             "local_stream_delay server_profile worker_silence_s percentiles local_quality_flip noise_wait_s").split()


def test_the_flat_keys_users_write_are_unchanged_and_each_lives_in_one_section():
    keys = Settings.keys()
    assert set(keys) == set(FLAT_KEYS)  # exactly the keys of the flat settings before the sections
    assert len(keys) == sum(len(fields(record)) for record in SECTIONS.values())  # no key in two sections
    assert {k for k, section in keys.items() if section == "tools"} == {"nvidia_smi", "git", "lscpu", "docker", "bash",
                                                                        "nvml_module"}
    assert {k for k, section in keys.items() if section == "ci"} == {"ci_gpus", "omni_ci_home", "ci_attempts",
                                                                     "ci_retry_delay_s", "ci_stage_timeout_s"}
    assert keys["port"] == keys["results"] == keys["stop_grace_s"] == "run" and keys["bench_dir"] == "host"
    s = Settings.from_mapping({"port": "9001", "ci_gpus": "2,3", "bench_dir": "/b", "git": "/fake/git"})
    assert (s.run.port, s.ci.ci_gpus, s.host.bench_dir, s.tools.git) == (9001, "2,3", "/b", "/fake/git")
    assert Settings.from_mapping(s.flat()) == s and set(Settings.defaults()) == set(keys)


def test_from_mapping_converts_and_validates():
    s = Settings.from_mapping({"port": "9001", "ready_timeout_s": "12.5", "cpus": "2-4,8"})
    assert s.run.port == 9001 and s.run.ready_timeout_s == 12.5 and s.run.cpu_list() == (2, 3, 4, 8)
    with pytest.raises(SettingsError, match="unknown omnibench setting"):
        Settings.from_mapping({"prot": 1})
    with pytest.raises(SettingsError, match="must be a whole number"):
        Settings.from_mapping({"port": "eighty"})
    with pytest.raises(SettingsError, match="out of range"):
        Settings.from_mapping({"port": 70000})
    with pytest.raises(SettingsError, match="cannot read CPU list"):
        Settings.from_mapping({"cpus": "2-x"})


NUMBER_KEYS = sorted(k for k, v in Settings.defaults().items() if type(v) in (int, float))


@pytest.mark.parametrize("key", NUMBER_KEYS)
def test_a_negative_or_non_finite_number_setting_is_refused_for_every_task(key):
    """Issue 31: ``local_delay_ms=-40`` (nan, inf) was taken, and every run with it failed late."""
    assert "local_delay_ms" in NUMBER_KEYS and "stop_grace_s" in NUMBER_KEYS
    for bad in ("-40", "nan", "inf", "-inf"):
        if bad in ("nan", "inf", "-inf") and isinstance(Settings.defaults()[key], int):
            continue  # int("nan") is already refused as not a whole number
        with pytest.raises(SettingsError) as err:
            Settings.from_mapping({key: bad})
        assert f"setting {key!r} must be a finite number of 0 or more, got {bad!r}" in err.value.message
        assert key in err.value.hint
    if key != "port":  # zero is a setting (no delay, no wait); port 0 has its own range
        assert Settings.from_mapping({key: "0"}).flat()[key] == 0
    if key.endswith(("_s", "_ms")):  # second hostile round: local_delay_ms=1e308 was taken
        longest = MAX_SETTING_S * (1000 if key.endswith("_ms") else 1)
        assert Settings.from_mapping({key: str(longest)}).flat()[key] == longest
        for bad in ("1e308", str(longest + 1)):
            with pytest.raises(SettingsError, match=f"setting {key!r} is .*, over a day"):
                Settings.from_mapping({key: bad})


def test_cpu_lists_round_trip():
    cpus = parse_cpu_list("2-15,66-79")
    assert len(cpus) == 28
    assert format_cpu_list(cpus) == "2-15,66-79"
    assert parse_cpu_list("") == ()


@pytest.mark.slow
def test_invoke_configuration_reaches_the_run(invoke, tmp_path, port):
    (tmp_path / "cfg.yaml").write_text(f"omnibench:\n  port: {port}\n")
    done = invoke("-f", str(tmp_path / "cfg.yaml"), "run", "--workload", "selftest",
                  "--opt", "selftest.requests=3")
    assert done.returncode == 0, done.stderr
    (run,) = (tmp_path / "results").glob("*/run0")
    data = manifest_file.read(run)
    assert {s.port for s in data.servers} == {port}
    assert data.options["selftest"]["requests"] == 3  # typed by the schema


@pytest.mark.slow
def test_bad_option_is_explained(invoke):
    done = invoke("run", "--workload", "selftest", "--opt", "selftest.nosuch=1")
    assert done.returncode == 1
    assert "has no option 'nosuch'" in done.stderr and "client_seconds" in done.stderr
    assert "did you mean" not in done.stderr  # nothing close to guess
    # the new-user trial's typo (issue 46): the close name is offered, as for a misspelt flag
    done = invoke("run", "--workload", "seedtts", "--opt", "seedtts.max_sampels=10")
    assert done.returncode == 1 and "did you mean seedtts.max_samples?" in done.stderr, done.stderr


def test_next_run_name_reuses_a_run_moved_aside(tmp_path):
    assert next_run_name(tmp_path / "missing") == "run0"
    for name in ("run0", "run1-incomplete", "run2"):
        (tmp_path / name).mkdir()
    assert next_run_name(tmp_path) == "run1"


def test_move_aside_never_overwrites(tmp_path):
    for i in range(3):
        run = tmp_path / "run0"
        run.mkdir()
        (run / "marker").write_text(str(i))
        moved = move_aside(run)
        assert not run.exists()
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["run0-incomplete", "run0-incomplete-2", "run0-incomplete-3"]
    assert [(tmp_path / n / "marker").read_text() for n in names] == ["0", "1", "2"]
    assert moved.name == "run0-incomplete-3"


def test_write_json_is_strict_and_leaves_no_temp_files(tmp_path):
    target = write_json(tmp_path / "a" / "speed.json", {"request_rate": float("inf"), "x": [float("nan"), 1.5]})
    assert json.loads(target.read_text()) == {"request_rate": None, "x": [None, 1.5]}
    assert read_json(target)["x"][1] == 1.5
    assert [p.name for p in target.parent.iterdir()] == ["speed.json"]


def _step(name, phase="generate", server=None):
    return Step(name, Command(("true",)), phase=phase, server=server)


def test_steps_are_ordered_like_the_runbook():
    omni_v, omni_s = ServeSpec("videoamme", model_path="m"), ServeSpec("seedtts", model_path="m", args=("--x",))
    asr = ServeSpec("asr", model_path="Qwen/Qwen3-ASR-1.7B")
    groups = order_steps({
        "videoamme": [_step("client", server=omni_v), _step("wer", "score", asr)],
        "seedtts": [_step("client", server=omni_s), _step("wer", "score", asr), _step("sim", "score"),
                    _step("utmos", "score")],
    })
    assert [(g.phase, g.label, [p.key for p in g.steps]) for g in groups] == [
        ("generate", "videoamme", ["videoamme.client"]),
        ("generate", "seedtts", ["seedtts.client"]),
        ("score", "asr", ["videoamme.wer", "seedtts.wer"]),  # one ASR server for both
        ("score", "score (no server)", ["seedtts.sim", "seedtts.utmos"]),
    ]


def test_duplicate_step_names_are_refused():
    with pytest.raises(PluginError, match="two steps named 'client'"):
        order_steps({"w": [_step("client"), _step("client")]})


def test_command_refuses_a_shell_string():
    with pytest.raises(TypeError):
        Command("echo hi")


def test_client_flag_sets_every_workload_client_option():
    from omnibench_core.api import parse_options
    from omnibench_core.records import Option, Workload

    with_client = Workload("a", "", plan=lambda ctx: [], options=(Option("client", str, "auto"),))
    without = Workload("b", "", plan=lambda ctx: [])
    assert parse_options([], [with_client, without], client="native") == {"a": {"client": "native"}, "b": {}}
    assert parse_options(["a.client=sglang"], [with_client], client="native")["a"]["client"] == "sglang"
    with pytest.raises(SettingsError, match="no workload of this run has a client"):
        parse_options([], [without], client="native")


def test_every_python_package_is_listed_in_pyproject():
    """A package missing from pyproject.toml works editable and breaks a real install."""
    from pathlib import Path

    tomllib = pytest.importorskip("tomllib")  # Python 3.11+

    root = Path(__file__).resolve().parent.parent
    listed = set(tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = set()
    for init in list((root / "omnibench_core").rglob("__init__.py")) + list((root / "plugins").rglob("__init__.py")):
        rel = init.parent.relative_to(root).parts
        if rel[:3] == ("omnibench_core", "standin", "files"):
            continue  # the stand-in checkout's own files, shipped as package data
        found.add(".".join(("omnibench_plugins",) + rel[1:] if rel[0] == "plugins" else rel))
    assert found == listed
