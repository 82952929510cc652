"""Workload option schemas: every bad value of every option is refused before anything starts,
the clients take their defaults from the same records, and `invoke plugins` shows them."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from omnibench_core import api
from omnibench_core.builtin import selftest as testing
from omnibench_core.errors import PluginError, SettingsError
from omnibench_core.hooks.specs import hookimpl
from omnibench_core.records import Option, Target, Workload
from omnibench_core.records import options as options
from omnibench_core.registry import manager as plugin_manager
from omnibench_core.settings import RunSettings, Settings
from omnibench_plugins.seedtts import client as seedtts_client
from omnibench_plugins.seedtts.options import OPTIONS as SEEDTTS
from omnibench_plugins.videoamme import client as videoamme_client
from omnibench_plugins.videoamme.options import OPTIONS as VIDEOAMME

SCHEMAS = {"seedtts": SEEDTTS, "videoamme": VIDEOAMME, "selftest": testing.OPTIONS}


def bad_values(opt: Option) -> list[str]:
    """Values the option must refuse: wrong type, not finite, out of range, unknown word."""
    if opt.choices:
        return ["bogus", opt.choices[0].upper() + "x"]
    if opt.type is bool:
        return ["maybe", "2"]
    bad = {int: ["abc", "1.5", "1e3"], float: ["abc", "nan", "inf", "-inf"]}.get(opt.type, [])
    if opt.min is not None:
        below = opt.min if opt.min_exclusive else opt.min - 1
        bad.append(options.format_value(int(below) if opt.type is int else float(below)))
        if opt.type is float:
            bad.append(options.format_value(opt.min - 0.5))
    if opt.max is not None:
        bad.append(options.format_value(opt.max + 1))
    if not opt.optional and opt.type is not str:
        bad.append("")  # only an optional option may be left unset
    return bad


CASES = [pytest.param(workload, opt, value, id=f"{workload}.{opt.name}={value}")
         for workload, schema in SCHEMAS.items() for opt in schema for value in bad_values(opt)]


class Probe:
    """A target whose prepare must never run: options are checked before the target is touched."""

    prepared: list[str] = []

    @hookimpl
    def omnibench_targets(self):
        def prepare(settings):
            Probe.prepared.append(settings.run.target)
            raise AssertionError("the target was prepared before the options were checked")

        return [Target("probe", "records prepare calls", prepare)]


@pytest.fixture
def no_processes(monkeypatch):
    """Every process start is recorded and refused."""
    started = []

    def popen(*args, **kwargs):
        started.append(args)
        raise AssertionError(f"a process was started: {args}")

    monkeypatch.setattr(subprocess, "Popen", popen)
    Probe.prepared = []
    return started


def test_every_option_of_every_builtin_workload_has_bad_values_to_try():
    for workload, schema in SCHEMAS.items():
        for opt in schema:
            assert opt.type is str or bad_values(opt), f"{workload}.{opt.name}"
    assert len(CASES) > 60


@pytest.mark.parametrize(("workload", "opt", "value"), CASES)
def test_every_bad_value_is_refused_before_anything_starts(workload, opt, value, tmp_path, no_processes):
    results = tmp_path / "results"
    settings = Settings.of(results=str(results), target="probe")
    with pytest.raises(SettingsError) as err:
        api.run(settings, [workload], options=[f"{workload}.{opt.name}={value}"], progress=lambda m: None,
                extra_plugins=[("probe", Probe())])
    text = str(err.value)
    assert f"{workload}.{opt.name}={value}" in text and "is refused" in text
    assert f"type: {options.type_text(opt)}" in text
    assert f"must be: {options.expectation(opt)}" in text
    if options.range_text(opt):
        assert options.range_text(opt) in text
    assert "invoke plugins" in err.value.hint
    assert not results.exists(), "a run directory was made"
    assert no_processes == [] and Probe.prepared == []


@pytest.mark.parametrize("workload", SCHEMAS)
def test_defaults_round_trip_through_the_command_line(workload):
    """A default written into a client's argv (format_value) reads back as the same value."""
    for opt in SCHEMAS[workload]:
        assert options.convert(opt, options.format_value(opt.default)) == opt.default, opt.name


def test_values_are_typed_and_unset_is_none():
    w = Workload("seedtts", "", plan=lambda ctx: [], options=SEEDTTS)
    values = options.parse(["seedtts.max_samples=5", "seedtts.temperature=1", "seedtts.seed=0",
                            "seedtts.warmup=0", "seedtts.meta="], [w])["seedtts"]
    assert values["max_samples"] == 5 and isinstance(values["max_samples"], int)
    assert values["temperature"] == 1.0 and isinstance(values["temperature"], float)
    assert values["seed"] == 0 and values["warmup"] == 0  # 0 is a value, not "unset"
    assert values["meta"] is None and values["data_dir"] is None
    assert values["client"] == "auto" and values["timeout_s"] == 300.0
    bools = options.parse(["selftest.die=yes", "selftest.never_healthy=0"],
                          [Workload("selftest", "", plan=lambda ctx: [], options=testing.OPTIONS)])["selftest"]
    assert bools["die"] is True and bools["never_healthy"] is False


def test_a_plain_dict_of_options_is_refused_naming_the_option_records():
    """The form before option schemas (``{name: default}``, untyped) is gone: a plugin that still
    uses it is told what to write instead, when plugins load."""
    with pytest.raises(TypeError, match=r"options must be Option records \(omnibench_core.plugin.Option\)"):
        Workload("acme", "", plan=lambda ctx: [], options={"samples": "10"})  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="Option records"):
        Workload("acme", "", plan=lambda ctx: [], options=("samples",))  # type: ignore[arg-type]
    typed = Workload("acme", "", plan=lambda ctx: [], options=[Option("samples", int, 10)])
    assert typed.options == (Option("samples", int, 10),)


def test_the_sglang_commands_get_the_typed_values_back_as_text(tmp_path):
    from omnibench_core.builtin.targets import prepare_local
    from omnibench_core.records import Endpoint, RunContext
    from omnibench_plugins.videoamme import hooks as videoamme

    w = Workload("videoamme", "", plan=videoamme.plan, options=VIDEOAMME)
    values = options.parse(["videoamme.video_fps=2.5", "videoamme.max_samples=3"], [w])["videoamme"]
    ctx = RunContext(tmp_path, "videoamme", Endpoint(8000), values, prepare_local(Settings()), RunSettings())
    argv = next(s for s in videoamme.plan(ctx) if s.name == "generate").run.argv
    assert argv[argv.index("--video-fps") + 1] == "2.5" and argv[argv.index("--max-samples") + 1] == "3"
    assert argv[argv.index("--temperature") + 1] == "0"  # the runbook's "0", not "0.0"


@pytest.mark.parametrize("schema,problem", [
    ((Option("n", int, 0, min=1),), "default that does not fit"),
    ((Option("n", int, None),), "cannot be unset"),
    ((Option("n", int, 1, choices=("1",)),), "choices are str"),
    ((Option("n", str, "a", min=1),), "has a range"),
    ((Option("n", list, []),), "use int, float, str or bool"),
    ((Option("n", int, 1), Option("n", int, 2)), "declared twice"),
    ((Option("Bad-Name", int, 1),), "is not lower-case"),
    ((Option("t", float, float("nan")),), "not a finite number"),
])
def test_a_broken_schema_is_refused_when_plugins_load(schema, problem):
    class Broken:
        @hookimpl
        def omnibench_workloads(self):
            return [Workload("broken", "", plan=lambda ctx: [], options=schema)]

    with pytest.raises(PluginError, match="broken option schema") as err:
        plugin_manager.load([("broken", Broken())])
    assert problem in str(err.value)


def test_clients_take_their_defaults_from_the_schema():
    seed = options.by_name(SEEDTTS)
    cfg = seedtts_client.parse_args(["--meta", "m.lst", "--output-dir", "out"])
    for name in ("max_concurrency", "max_new_tokens", "temperature", "seed", "warmup", "max_samples", "timeout_s"):
        assert getattr(cfg, name) == seed[name].default, name
        assert getattr(seedtts_client.ClientConfig("m", Path("o")), name) == seed[name].default, name
    video = options.by_name(VIDEOAMME)
    vcfg = videoamme_client.VideoClientConfig(Path("d"), Path("o"))
    for name in ("max_samples", "video_fps", "video_max_frames", "video_max_pixels", "max_tokens", "temperature",
                 "timeout_s", "max_concurrency", "warmup"):
        assert getattr(vcfg, name) == video[name].default, name


@pytest.mark.parametrize(("argv", "flag"), [
    (["--max-samples", "0"], "--max-samples"),
    (["--temperature", "nan"], "--temperature"),
    (["--max-concurrency", "abc"], "--max-concurrency"),
])
def test_clients_refuse_what_the_workload_refuses(argv, flag, capsys):
    with pytest.raises(SystemExit) as err:
        seedtts_client.parse_args(["--meta", "m.lst", "--output-dir", "out", *argv])
    assert err.value.code == 2
    assert flag in capsys.readouterr().err


# -- through the real command line ----------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("args", [
    ("--workload", "seedtts", "--opt", "seedtts.max_samples=abc"),
    ("--workload", "seedtts", "--opt", "seedtts.max_samples=-1"),
    ("--workload", "videoamme", "--opt", "videoamme.max_samples=0"),
    ("--workload", "seedtts", "--workload", "videoamme", "--opt", "videoamme.temperature=abc"),
    ("--workload", "seedtts", "--client", "bogus"),
], ids=["abc", "negative", "videoamme-zero", "temperature-abc", "client"])
def test_invoke_run_refuses_a_bad_option_cleanly(invoke, tmp_path, args):
    done = invoke("run", *args, timeout=600)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Traceback" not in done.stderr and "is refused" in done.stderr
    assert "range:" in done.stderr and "what to do:" in done.stderr
    assert not (tmp_path / "results").exists() and done.stdout.strip() == ""  # nothing ran


@pytest.mark.slow
def test_invoke_plugins_shows_every_option(invoke):
    done = invoke("plugins")
    assert done.returncode == 0, done.stderr
    _, listing = done.stdout.split("workload options (--opt WORKLOAD.KEY=VALUE):")
    rows = {tuple(line.split()[:2]): line for line in listing.splitlines()[3:] if line.strip()}
    for workload, schema in SCHEMAS.items():
        for opt in schema:
            assert (workload, opt.name) in rows, (workload, opt.name)
    assert ">= 1" in rows[("seedtts", "max_samples")] and "unset: all samples" in rows[("seedtts", "max_samples")]
    assert "auto|native|sglang" in rows[("seedtts", "client")]
    only = invoke("plugins", "--options")
    assert only.returncode == 0 and only.stdout.split()[:2] == ["workload", "option"]
    assert "invoke plugins" in invoke("--help", "run").stdout


@pytest.mark.slow
def test_invoke_plugins_shows_data_dir_under_omnibench_cache_when_it_is_set(invoke, tmp_path):
    """The local sets are made under $OMNIBENCH_CACHE when it is set, and `invoke plugins` says so."""
    cache = tmp_path / "cache"
    done = invoke("plugins", "--options", env={"OMNIBENCH_CACHE": str(cache)})
    assert done.returncode == 0, done.stderr
    rows = {tuple(line.split()[:2]): line for line in done.stdout.splitlines()}
    for workload in ("seedtts", "videoamme"):
        assert f"unset: {cache / f'{workload}-local-v1'}" in rows[(workload, "data_dir")]
        assert "~/.cache" not in rows[(workload, "data_dir")]
