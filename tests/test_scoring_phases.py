"""The run layer's phases: generate now, score later, several runs on one scoring server start,
with metrics identical to scoring each run on its own."""

from __future__ import annotations

import shutil

import pytest

from omnibench_core import api
from omnibench_core.campaign import front_door as campaign
from omnibench_core.errors import RunNotReady
from omnibench_core.settings import Settings
from omnibench_core.store import manifest as manifest_file
from omnibench_core.store import metrics as metrics_file


def _starts(run_dir) -> list[str]:
    """Labels of the servers this run started itself (not those it shared)."""
    return [s.label for s in manifest_file.read(run_dir).servers if s.started_here]


def _generate_and_copy(settings, workloads, options, copies):
    run = api.run(settings, workloads, options=options, phases=("generate",), progress=lambda m: None)
    assert run.status == "generated" and not run.complete
    assert manifest_file.read(run.run_dir).status == "generated"
    dirs = [run.run_dir]
    for i in range(copies):
        dirs.append(run.run_dir.with_name(f"copy{i}"))
        shutil.copytree(run.run_dir, dirs[-1])
    return dirs


@pytest.mark.slow
def test_selftest_runs_scored_together_start_the_scorer_once(tmp_path, port):
    settings = Settings.of(results=str(tmp_path / "results"), port=port)
    alone, *together = _generate_and_copy(settings, ["selftest"], [], 2)
    (one,) = api.score_runs(settings, ["selftest"], [alone], progress=lambda m: None)
    both = api.score_runs(settings, ["selftest"], together, progress=lambda m: None)
    assert [r.status for r in (one, *both)] == ["complete"] * 3
    assert _starts(alone) == ["selftest", "echo-scorer"]
    assert _starts(together[0]) == ["selftest", "echo-scorer"] and _starts(together[1]) == ["selftest"]
    shared = manifest_file.read(together[1]).servers[-1]
    assert shared.started_in == together[0].name
    metrics = [metrics_file.read(d) for d in (alone, *together)]
    assert metrics[0] == metrics[1] == metrics[2]
    with pytest.raises(RunNotReady, match="is complete, not generated"):
        api.score_runs(settings, ["selftest"], [alone], progress=lambda m: None)


def test_generate_only_is_the_sole_partial_phase_set(tmp_path, port):
    settings = Settings.of(results=str(tmp_path / "results"), port=port)
    with pytest.raises(Exception, match="cannot run the phases"):
        api.run(settings, ["selftest"], phases=("score",), progress=lambda m: None)


@pytest.mark.slow
def test_speech_metrics_are_identical_scored_per_run_or_deferred(tmp_path, port):
    """The same WAVs give the same metrics whether scored alone or after another run on one server."""
    settings = Settings.of(results=str(tmp_path / "results"), port=port)
    options = ["seedtts.max_samples=3", "seedtts.warmup=1", "seedtts.max_concurrency=2"]
    alone, *together = _generate_and_copy(settings, ["seedtts"], options, 2)
    api.score_runs(settings, ["seedtts"], [alone], options=options, progress=lambda m: None)
    api.score_runs(settings, ["seedtts"], together, options=options, progress=lambda m: None)
    metrics = [metrics_file.read(d) for d in (alone, *together)]
    assert metrics[0].complete and metrics[0] == metrics[1] == metrics[2]
    assert _starts(together[1]) == ["seedtts"]  # its ASR scoring ran on the first copy's server
    # a report of them carries the local target's substitute notes that each run printed
    made = campaign.report(settings, runs=[d.name for d in together])
    md = made.written.markdown.read_text()
    assert "## Notes from the runs" in md and "seedtts.sim: local substitute" in md
    assert md.count("seedtts.sim: local substitute") == 1  # each note once, not once per run
