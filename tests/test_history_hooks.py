"""Issue 41: the history learns of new results through the plugin hooks it implements as the
built-in plugin ``history``, so whoever measures (a task, a matrix worker, a library caller of the
campaign layer) has them indexed, and a plugin that fails after a campaign is said, never a
failed measurement."""

from __future__ import annotations

import sqlite3

import pytest
from run_helpers import free_port

from omnibench_core.campaign import execute as campaign_execute
from omnibench_core.campaign import front_door as campaign
from omnibench_core.history.store import db_path
from omnibench_core.hooks.specs import hookimpl
from omnibench_core.registry import manager as plugin_manager
from omnibench_core.settings import Settings


def _indexed(results) -> list[tuple[str, str]]:
    with sqlite3.connect(db_path(results)) as db:
        return sorted(db.execute("SELECT file, kind FROM campaigns").fetchall())


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    """One selftest campaign measured by a library caller of the campaign layer's front door."""
    results = tmp_path_factory.mktemp("hooked")
    settings = Settings.of(results=str(results), port=free_port())
    said: list[str] = []
    asked = campaign_execute.asked_from(settings, ["selftest"], [], None, 2, 0, "deferred")
    made = campaign.measure(settings, asked, progress=said.append)
    return settings, made, said


def test_the_history_is_a_built_in_plugin_of_its_own():
    manager, _ = plugin_manager.load()
    assert manager._pm.has_plugin("history")
    names = {impl.plugin_name for impl in manager._pm.hook.omnibench_campaign_done.get_hookimpls()}
    assert names == {"history"}


@pytest.mark.slow
def test_a_library_caller_of_measure_gets_the_report_and_the_history_index(measured):
    settings, made, said = measured
    assert made.campaign is not None and made.written.markdown.is_file()
    (row,) = _indexed(settings.run.results_root)
    assert row[0].endswith(f"campaigns/{made.campaign.name}.json")
    assert not [line for line in said if line.startswith("note:")], said


@pytest.mark.slow
def test_a_plugin_failing_after_a_campaign_is_said_and_the_history_still_indexes(measured, tmp_path):
    settings, made, _ = measured

    class Broken:
        @hookimpl
        def omnibench_campaign_done(self, settings, path, progress):
            raise RuntimeError("no room for " + path.name)

    manager, _ = plugin_manager.load([("broken", Broken())])
    moved = Settings.of(results=str(tmp_path))  # another results root: the history indexes it afresh
    said: list[str] = []
    source = settings.run.results_root
    for path in source.rglob("*"):  # the campaign and its runs, as they are
        if path.is_file() and "history" not in path.name:
            target = tmp_path / path.relative_to(source)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(path.read_bytes())
    (campaign_path,) = tmp_path.glob("*/campaigns/*.json")
    manager.campaign_done(moved, campaign_path, said.append)
    assert said == [f"note: broken: RuntimeError('no room for {campaign_path.name}')"], said
    assert [f for f, _ in _indexed(tmp_path)] == [str(campaign_path.relative_to(tmp_path))]
