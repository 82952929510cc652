"""Issue 41: engines are an extension point. The local and Ray engines register through the
``omnibench_engines`` hook a third party uses; docs/engines.md's subprocess engine is built,
installed by entry point and runs a matrix; an unknown engine or option is refused naming it."""

from __future__ import annotations

import pytest
from run_helpers import REPO, free_port, install_page_package, page_commands, page_files
from test_docs import page_command, run_page_command

from omnibench_core.errors import SettingsError
from omnibench_core.registry import manager as plugin_manager
from omnibench_core.scale import front_door as scale
from omnibench_core.settings import Settings


def test_the_built_in_engines_register_through_the_hook_with_their_options():
    _, registry = plugin_manager.load()
    engines = registry.table("engine")
    assert sorted(engines) == ["local", "ray"] and scale.engine_names() == ("local", "ray")
    assert engines["local"].provider.plugin == engines["ray"].provider.plugin == "engines"
    assert [o.name for o in engines["ray"].record.options] == ["address", "results_transport", "checkout_url"]


def test_an_unknown_engine_or_engine_option_is_refused_naming_it(tmp_path):
    settings = Settings.of(results=str(tmp_path))
    with pytest.raises(SettingsError, match="unknown --engine 'slurm'") as unknown:
        scale.make_engine(settings, engine="slurm")
    assert "local or ray" in unknown.value.hint
    with pytest.raises(SettingsError, match="'local' has no option 'bogus'"):
        scale.make_engine(settings, engine="local", engine_opts=["bogus=1"])
    with pytest.raises(SettingsError, match="cannot read --engine-opt 'address'"):
        scale.make_engine(settings, engine="ray", engine_opts=["address"])
    with pytest.raises(SettingsError, match="results_transport=carrier-pigeon is refused") as bad:
        scale.make_engine(settings, engine="ray", engine_opts=["results_transport=carrier-pigeon"])
    assert bad.value.evidence["range"] == "auto|ray|shared"
    # the Ray engine's own flags stand for its options, and for no other engine
    assert scale.ray_flag_options("ray", {"address": "auto", "results_transport": "ray", "checkout_url": ""}) \
        == ["results_transport=ray"]
    with pytest.raises(SettingsError, match="--address applies to the ray engine, not --engine local"):
        scale.ray_flag_options("local", {"address": "10.0.0.1:6379"})


@pytest.mark.slow
def test_the_engines_page_example_is_installed_by_entry_point_and_runs_a_matrix(invoke, tmp_path):
    """docs/engines.md's engine, taken from the page: built and installed with pip into a folder of
    its own, listed by `invoke plugins`, and the page's matrix command runs on it (its log option
    reaches it: a line per campaign it started), after docs/campaigns.md's `invoke measure -w
    selftest` as a reader of the pages in order ran it: the engine's campaign is its own, not that one."""
    page = (REPO / "docs" / "engines.md").read_text()
    files = page_files(page)
    assert sorted(files) == ["acme_engine/plugin.py", "pyproject.toml"]
    env = {"PYTHONPATH": str(install_page_package(files, tmp_path, "acme-engine"))}
    commands = page_commands(page)
    matrix = ["invoke", "matrix", "--workload", "selftest", "--runs", "2", "--engine", "acme", "--engine-opt",
              "log=acme.log"]
    assert ["invoke", "plugins"] in commands and matrix in commands
    listed = invoke("plugins", env=env)
    assert listed.returncode == 0, listed.stderr
    assert any(line.split()[:2] == ["engine", "acme"] and "acme-engine" in line for line in listed.stdout.splitlines())
    engine_options = listed.stdout.split("engine options (--engine NAME --engine-opt KEY=VALUE):")[1]
    assert any(line.split()[:3] == ["acme", "log", "str"] for line in engine_options.splitlines()), listed.stdout
    escaping = invoke(*matrix[1:-1], "log=../acme.log", env=env)  # a name that leaves the results root
    assert escaping.returncode == 1 and "leaves the results root" in escaping.stderr, escaping.stderr
    assert not (tmp_path / "acme.log").exists()
    # campaigns.md's first campaign (its line's first command), measured before, by invoke measure
    first = page_command("campaigns.md", "invoke measure -w selftest &&").split(" && ")[0]
    assert first == "invoke measure -w selftest"
    measured = run_page_command(first, paths={}, env={"INVOKE_OMNIBENCH_RESULTS": str(tmp_path / "results"),
                                                      "INVOKE_OMNIBENCH_PORT": str(free_port())})
    assert measured.returncode == 0, measured.stdout[-3000:] + measured.stderr[-3000:]
    (measures,) = (tmp_path / "results").glob("local-*/campaigns/selftest_local.json")
    before = measures.read_text()
    done = invoke(*matrix[1:], env={**env, "INVOKE_OMNIBENCH_PORT": str(free_port())}, timeout=600)  # 8000 may be held
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    log = (tmp_path / "results" / "acme.log").read_text().splitlines()
    assert len(log) == 1 and log[0].startswith("started ") and log[0].endswith(" on slot 0")  # the engine ran it
    # its campaign is the engine's own; measure's is left as it was (neither refused nor taken for done)
    assert "complete already" not in done.stdout and measures.read_text() == before
    (campaign,) = (tmp_path / "results").glob("local-*/campaigns/selftest_local_engine-acme.json")
    assert '"status": "complete"' in campaign.read_text()
