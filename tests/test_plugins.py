"""The plugin manager: entry points, validation, clashes, `invoke plugins`, a third-party package."""

from __future__ import annotations

import inspect
import json
import textwrap
from pathlib import Path

import pytest
from run_helpers import REPO, install_page_package, page_commands, page_files

from omnibench_core.errors import PluginError
from omnibench_core.hooks import specs as hookspecs
from omnibench_core.hooks.specs import hookimpl
from omnibench_core.records import Target, Workload
from omnibench_core.records import options as options
from omnibench_core.registry import manager as plugin_manager
from omnibench_core.store.manifest import read as read_manifest
from omnibench_core.store.metrics import BrokenRule
from omnibench_core.store.metrics import read as read_metrics


def _workload(name: str) -> Workload:
    return Workload(name, "test", plan=lambda ctx: [])


class ProvidesWorkload:
    def __init__(self, *records):
        self.records = list(records)

    @hookimpl
    def omnibench_workloads(self):
        return self.records


def test_builtins_come_from_entry_points():
    _, registry = plugin_manager.load()
    assert {"selftest"} <= set(registry.workloads)
    assert {"local", "sglang-omni"} <= set(registry.targets)
    assert registry.targets["local"].provider.distribution == "omnibench"
    assert registry.workloads["selftest"].provider.plugin == "selftest"


def test_name_clash_names_both_plugins():
    with pytest.raises(PluginError) as err:
        plugin_manager.load([("acme", ProvidesWorkload(_workload("selftest")))])
    text = str(err.value)
    assert "two plugins register a workload named 'selftest'" in text
    assert "selftest (omnibench" in text and "second: acme" in text


@pytest.mark.parametrize("bad", ["SeedTTS", "has space", "", "9lives"])
def test_invalid_names_are_refused(bad):
    with pytest.raises(PluginError, match="invalid name"):
        plugin_manager.load([("acme", ProvidesWorkload(_workload(bad)))])


def test_wrong_record_type_is_refused():
    class Wrong:
        @hookimpl
        def omnibench_targets(self):
            return [_workload("oops")]

    with pytest.raises(PluginError, match="returned a Workload where a Target belongs"):
        plugin_manager.load([("wrong", Wrong())])


def test_non_list_return_is_refused():
    class Wrong:
        @hookimpl
        def omnibench_workloads(self):
            return _workload("single")

    with pytest.raises(PluginError, match="not a list"):
        plugin_manager.load([("wrong", Wrong())])


def test_misspelt_hook_is_caught_by_check_pending():
    class Typo:
        @hookimpl
        def omnibench_workload(self):  # missing "s"
            return []

    with pytest.raises(PluginError, match="does not define"):
        plugin_manager.load([("typo", Typo())])


def test_registry_get_lists_known_names():
    _, registry = plugin_manager.load()
    with pytest.raises(PluginError) as err:
        registry.get("target", "tpu")
    assert "local" in str(err.value) and "sglang-omni" in str(err.value)


def test_every_hook_has_a_docstring_and_is_documented():
    readme = (Path(__file__).resolve().parent.parent / "docs" / "plugins.md").read_text()
    specs = [name for name, fn in inspect.getmembers(hookspecs, inspect.isfunction) if name.startswith("omnibench_")]
    assert len(specs) == 12  # the six registration hooks, run start and finish, and the four after a campaign
    for name in specs:
        assert (getattr(hookspecs, name).__doc__ or "").strip(), name
        assert name in readme, f"{name} is not in docs/plugins.md"


def test_invoke_plugins_lists_everything(invoke):
    done = invoke("plugins")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.split("\n\n")[0].splitlines()  # the first table; the options follow
    assert lines[0].split()[:3] == ["kind", "name", "description"]
    rows = {tuple(line.split()[:2]) for line in lines[2:]}
    assert {("workload", "selftest"), ("target", "local"), ("target", "sglang-omni"), ("scorer", "echo-check")} <= rows
    from importlib.metadata import version
    assert all(f"omnibench       {version('omnibench')}" in line for line in lines[2:] if line.strip())


THIRD_PARTY = '''
"""A third-party workload: reuses omnibench's test server, brings its own client and rules."""
import json, sys
from omnibench_core.plugin import Collected, RuleResult, ServeSpec, Step, Workload, hookimpl

def _client(ctx):
    import requests
    texts = ["one", "two", "three"]
    out = [requests.post(ctx.endpoint.url("/v1/echo"), json={"text": t}, timeout=600).json()["text"] for t in texts]
    (ctx.workload_dir / "echoes.json").write_text(json.dumps(out))

def plan(ctx):
    server = ServeSpec("acme", argv=(sys.executable, "-m", "omnibench_core.builtin.selftest_programs", "serve",
                                     "--port", str(ctx.port), "--delay", "0.1"))
    return [Step("client", _client, server=server, outputs=("acme-echo/echoes.json",))]

def collect(run_dir, options):
    echoes = json.loads((run_dir / "acme-echo" / "echoes.json").read_text())
    return Collected({"acme.echoes": len(echoes)}, rules=(RuleResult("three echoes", len(echoes) == 3),))

@hookimpl
def omnibench_workloads():
    return [Workload("acme-echo", "third-party echo workload", plan, collect)]
'''


@pytest.fixture
def third_party(tmp_path) -> dict[str, str]:
    """A real installed distribution as importlib.metadata sees one: a dist-info with an entry point."""
    site = tmp_path / "site"
    (site / "acme_bench").mkdir(parents=True)
    (site / "acme_bench" / "__init__.py").write_text(textwrap.dedent(THIRD_PARTY))
    info = site / "acme_bench-1.2.3.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: acme-bench\nVersion: 1.2.3\n")
    (info / "entry_points.txt").write_text("[omnibench]\nacme = acme_bench\n")
    return {"PYTHONPATH": str(site)}


def test_third_party_distribution_is_listed(invoke, third_party):
    done = invoke("plugins", env=third_party)
    assert done.returncode == 0, done.stderr
    row = next(line for line in done.stdout.splitlines() if "acme-echo" in line)
    assert row.split()[0] == "workload" and "acme-bench" in row and "1.2.3" in row


def test_third_party_workload_runs_end_to_end(invoke, third_party, tmp_path, port):
    done = invoke("run", "--workload", "acme-echo", "--port", str(port), env=third_party)
    assert done.returncode == 0, done.stdout + done.stderr
    (metrics_file,) = (tmp_path / "results").glob("*/run0/metrics.json")
    metrics = json.loads(metrics_file.read_text())
    ready = metrics["metrics"].pop("acme-echo.server_ready_s")  # omnibench's own: its server's spawn to READY
    assert metrics == {"metrics": {"acme.echoes": 3}, "rates": [], "complete": True, "target": "local",
                       "broken_rules": [], "notes": []} and ready > 0
    manifest = read_manifest(metrics_file.parent)
    assert "acme-bench" in manifest.environment["packages"]


def test_broken_third_party_plugin_names_its_distribution(invoke, tmp_path):
    site = tmp_path / "site"
    info = site / "broken_bench-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: broken-bench\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[omnibench]\nbroken = broken_bench_missing\n")
    done = invoke("plugins", env={"PYTHONPATH": str(site)})
    assert done.returncode == 1
    assert "broken (broken-bench 0.1) failed to load" in done.stderr
    assert "ModuleNotFoundError" in done.stderr


@pytest.mark.slow
def test_run_hooks_are_called_with_the_final_result(tmp_path, port):
    from omnibench_core import api
    from omnibench_core.settings import Settings

    seen = []

    class Telemetry:
        @hookimpl
        def omnibench_run_start(self, run):
            seen.append(("start", run.run_dir.name, run.workloads))

        @hookimpl
        def omnibench_run_finish(self, run, result):
            seen.append(("finish", result.run_dir.name, result.status))

    settings = Settings.of(results=str(tmp_path / "r"), port=port)
    result = api.run(settings, ["selftest"], progress=lambda m: None, extra_plugins=[("telemetry", Telemetry())])
    assert result.complete
    assert seen == [("start", "run0", ("selftest",)), ("finish", "run0", "complete")]


def test_incomplete_coverage_moves_the_run_aside(tmp_path, port):
    from omnibench_core import api
    from omnibench_core.builtin import selftest as testing
    from omnibench_core.records import Collected, RuleResult
    from omnibench_core.settings import Settings

    def collect(run_dir, options):
        return Collected({"half.files": 1}, rules=(RuleResult("one WAV per sample", False, "1 WAV for 2 samples"),))

    class Half:
        @hookimpl
        def omnibench_workloads(self):
            return [Workload("half", "breaks a rule", testing.plan, collect, options=testing.OPTIONS)]

    settings = Settings.of(results=str(tmp_path / "r"), port=port)
    result = api.run(settings, ["half"], progress=lambda m: None, extra_plugins=[("half", Half())])
    assert not result.complete and result.status == "incomplete"
    assert result.run_dir.name == "run0-incomplete"
    metrics = read_metrics(result.run_dir)
    assert metrics.complete is False
    assert metrics.broken_rules == (BrokenRule("one WAV per sample", "1 WAV for 2 samples"),)
    assert read_manifest(result.run_dir).status == "incomplete"


def test_target_record_is_validated():
    class BadTarget:
        @hookimpl
        def omnibench_targets(self):
            return [Target("Local", "bad", prepare=lambda s: None)]

    with pytest.raises(PluginError, match="invalid name 'Local'"):
        plugin_manager.load([("bad", BadTarget())])


def test_a_plugin_may_yield_its_records_and_hooks_go_through_pluggy():
    seen = []

    class Yields:
        @hookimpl
        def omnibench_workloads(self):
            yield _workload("yielded-one")
            yield _workload("yielded-two")

    class Watches:  # a hook wrapper sees every plugin's answer: the hook was called through pluggy
        @hookimpl(wrapper=True)
        def omnibench_workloads(self):
            answers = yield
            seen.extend(w.name for answer in answers for w in answer)
            return answers

    _, registry = plugin_manager.load([("yields", Yields()), ("watches", Watches())])
    assert registry.workloads["yielded-two"].provider.plugin == "yields"
    assert registry.workloads["seedtts"].provider.distribution == "omnibench"
    assert {"yielded-one", "yielded-two", "seedtts", "videoamme"} <= set(seen)


def test_a_generator_that_raises_names_its_plugin():
    class Breaks:
        @hookimpl
        def omnibench_targets(self):
            yield Target("half-made", "never finished", prepare=lambda s: None)
            raise RuntimeError("no config")

    with pytest.raises(PluginError, match=r"plugin breaks raised in omnibench_targets") as err:
        plugin_manager.load([("breaks", Breaks())])
    assert "no config" in str(err.value)


@pytest.mark.slow
def test_a_third_party_target_gets_the_workloads_own_clients_by_its_facts(tmp_path, port):
    """A target that is neither local nor sglang-omni: the workloads read its facts, not its name."""
    from dataclasses import replace

    from omnibench_core import api
    from omnibench_core.builtin.targets import prepare_local
    from omnibench_core.records import Endpoint, RunContext, TargetFacts
    from omnibench_core.settings import Settings
    from omnibench_plugins.seedtts import hooks as seedtts
    from omnibench_plugins.videoamme import hooks as videoamme

    facts = TargetFacts(own_clients=False, substitutes={"asr": "acme-asr 1.0"})

    def prepare(settings):
        return replace(prepare_local(settings), target="acme-remote", facts=facts, results_folder="acme")

    class Acme:
        @hookimpl
        def omnibench_targets(self):
            return [Target("acme-remote", "a third-party serving stack", prepare, facts)]

    _, registry = plugin_manager.load([("acme", Acme())])
    settings = Settings.of(results=str(tmp_path / "r"), port=port, target="acme-remote")
    env = registry.get("target", "acme-remote").prepare(settings)
    for workload in (seedtts, videoamme):
        record = registry.get("workload", workload.NAME)
        opts = options.defaults(record.options)
        ctx = RunContext(tmp_path / "run0", record.name, Endpoint(port), opts, env, settings.run)
        steps = {s.name: s for s in api.plan_steps(registry, record, ctx)}
        client = steps["generate"].run.argv
        assert client[1:3] == ("-m", f"omnibench_plugins.{record.name}.client")  # omnibench's own client
        wer = next(s for s in steps.values() if s.server is not None and s.server.label == "asr")
        assert wer.run.argv[wer.run.argv.index("--asr-label") + 1] == "acme-asr 1.0"
        if record.name == "videoamme":  # no local substitute claimed for a target that did not declare one
            assert client[client.index("--answer-method") + 1] == ""
    result = api.run(settings, ["selftest"], progress=lambda m: None, extra_plugins=[("acme", Acme())])
    assert result.complete and result.run_dir.parent.name == "acme"


@pytest.mark.slow
def test_the_plugins_page_example_builds_installs_and_runs_as_written(invoke, tmp_path, port):
    """docs/plugins.md's example, taken from the page itself: built as a package with pip (its
    [build-system] and [project]), installed, listed by `invoke plugins`, and run with the page's
    command; its `samples` option reaches the client (as many requests as asked)."""
    page = (REPO / "docs" / "plugins.md").read_text()
    files = page_files(page)
    assert sorted(files) == ["acme_bench/__init__.py", "acme_bench/client.py", "pyproject.toml"]
    site = install_page_package(files, tmp_path, "acme-bench")
    assert (site / "acme_bench" / "client.py").is_file() and list(site.glob("acme_bench-0.1.0.dist-info"))
    env = {"PYTHONPATH": str(site), "INVOKE_OMNIBENCH_PORT": str(port)}
    commands = page_commands(page)
    assert ["invoke", "plugins"] in commands and ["invoke", "run", "--workload", "acme", "--opt", "acme.samples=3"] in commands
    listed = invoke("plugins", env=env)
    assert listed.returncode == 0 and any("acme" in line and "acme-bench" in line and "0.1.0" in line
                                          for line in listed.stdout.splitlines()), listed.stdout + listed.stderr
    done = invoke("run", "--workload", "acme", "--opt", "acme.samples=3", env=env, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (run,) = (tmp_path / "results").glob("*/run0")
    got = dict(read_metrics(run).metrics)
    assert got.pop("acme.server_ready_s") > 0 and got == {"acme.samples": 3, "acme.failed": 0}
    rows = json.loads((run / "acme" / "results.json").read_text())
    assert [r["sample"] for r in rows] == [0, 1, 2] and all(r["ok"] for r in rows)
