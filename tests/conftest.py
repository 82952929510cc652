"""Shared fixtures: a data cache, free ports, a runner for the real `invoke` command. Helper
functions live in named modules beside it (run_helpers, gpu_helpers, checkout_helpers,
proc_helpers, scale_helpers)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from run_helpers import REPO, free_port

# A suite started as a background job of a shell without job control (`nohup ... &`, a CI script)
# inherits SIGINT ignored, and so would every `invoke` a test starts and then Ctrl-C's: those tests
# would test the shell's choice, not omnibench. A handler (not SIG_IGN) is reset to the default at
# each child's exec, as in a terminal. (omnibench's own workers obey SIGINT either way:
# tests/test_scale_interrupt.py starts a driver ignoring it.)
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


# pytest-xdist hands its workers the terminal's size (COLUMNS=80, LINES=24 without a terminal) and
# omnibench fits its tables to $COLUMNS: the tests read output as a pipe gets it, whole (the programs
# they start inherit this environment); tests/test_tables.py sets the variables where it tests fitting.
for _size in ("COLUMNS", "LINES"):
    os.environ.pop(_size, None)


@pytest.fixture(scope="session", autouse=True)
def data_cache(tmp_path_factory) -> Path:
    """Data sets the tests make go to a temporary cache, never the user's ~/.cache. Test workers
    (pytest -n) share one: the sets are made once, under a lock."""
    base = tmp_path_factory.getbasetemp()
    cache = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "omnibench-cache"
    cache.mkdir(exist_ok=True)
    os.environ["OMNIBENCH_CACHE"] = str(cache)
    return cache


# Module and session fixtures that make real runs, campaigns or clusters: a test that uses one is
# slow whatever its own body costs (the fast tier, `-m "not slow"`, leaves it out).
HEAVY_FIXTURES = frozenset({"full_run", "made", "base", "standin_run", "campaigns", "cluster"})


# The files that take longest, first: xdist hands whole files to its workers in collection order,
# so a long file collected last leaves one core idle at the end (the workers' count and its
# measurement: pyproject.toml's pytest addopts). By the summed wall time of each file's tests in a
# whole run of 441cc71 (`pytest`, 2026-12-05, quiet 2-core host; docs/development.md); the quality
# files after the stand-in's since the local target keeps its questions' transcripts (w-speed40,
# 2026-12-06: 221, 203 and 90 s tests down to 27 to 51 s each, run alone at load 2.5).
# Tried at 8719a1b (2026-12-06): the Ray group first and the waiting units spread between computing
# ones. No faster (10 min 42 s, 1.77 cores busy, against 10 min 48 s and 1.76) and worse for the
# 60-second aim: the two heaviest computing tests then started together beside two others that
# compute, and took 79 and 73 s (53 and 46 s in this order, where each starts beside waiting units).
LONGEST_FIRST = ("test_streaming.py", "test_ab.py", "test_ab_seedtts_docs.py", "test_ab_seedtts_duet_docs.py", "test_sweep.py", "test_campaign_faults.py",
                 "test_benchmarks.py", "test_history.py", "test_standin.py", "test_quality_compare.py",
                 "test_quality_ab.py", "test_quality_seedtts.py", "test_scale_ray_remote.py", "test_history_rebuild.py",
                 "test_campaign.py", "test_eras.py", "test_scale.py", "test_scale_standin.py", "test_seedtts.py",
                 "test_ci_stages.py", "test_pr_summary.py", "test_videoamme.py", "test_flags.py",
                 "test_scale_interrupt.py", "test_ab_sequential.py", "test_scoring_phases.py", "test_verdicts.py",
                 "test_ab_score.py", "test_gates.py", "test_scale_ray.py", "test_setup.py", "test_sweep_standin.py")


# Tests that must not run beside each other, by node id prefix: each group is one unit of work,
# its tests one after another on one worker. A table here, not xdist_group marks: pytest 9 reads a
# node id from a field xdist 3.8's `--dist loadgroup` no longer writes, so those marks group nothing.
XDIST_GROUPS = {
    # two Chromiums on two cores made a page load outlast its wait; test_history.py goes whole, its
    # story made once (its last test publishes that story and opens it in the browser)
    "browser": ("tests/test_history.py::",
                "tests/test_publish.py::test_the_site_opened_alone_from_disk_draws_its_plots_and_its_report_links_resolve",
                "tests/test_publish_studies.py::test_the_new_pages_load_clean_with_names_inert_and_the_index_filter_works"),
    # two local Ray clusters started at once hung both fixtures in ray.init() (2026-12-04)
    "ray": ("tests/test_scale_ray.py::", "tests/test_scale_ray_remote.py::"),
}


def unit_of(nodeid: str) -> str:
    """The unit of work a test goes to a worker in: its group, else its file."""
    for group, prefixes in XDIST_GROUPS.items():
        if nodeid.startswith(prefixes):
            return f"group {group}"
    return nodeid.split("::", 1)[0]


# A unit goes to a worker once the worker has at most this many tests left: the test it holds back
# (an xdist worker runs a test only once it knows the next one, or that none comes). xdist's own rule
# is 2, which queued a unit behind a worker's long last test while another worker ran dry.
REFILL_AT = 1


def pytest_xdist_make_scheduler(config, log):
    """Under ``--dist loadfile`` (pyproject.toml's addopts): whole test files to a worker (a
    module's fixtures are made once), except the tests of ``XDIST_GROUPS``, whose group is one unit;
    the units in collection order (``LONGEST_FIRST``), each to the first worker that runs dry."""
    if config.getvalue("dist") != "loadfile":
        return None  # another --dist given on the command line: xdist's own scheduler
    from xdist.scheduler import LoadScopeScheduling

    # xdist (3.5 on) orders the units by their number of tests unless told not to, which put the
    # long stories of few tests (Ray's, the eras', the streaming campaigns) last, on one worker,
    # while the others had finished: longest first is the collection's order, kept.
    config.option.loadscopereorder = False

    class FileOrGroup(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return unit_of(nodeid)

        def _reschedule(self, node) -> None:
            if node.shutting_down:
                return
            if not self.workqueue:
                node.shutdown()
                return
            if self._pending_of(self.assigned_work[node]) <= REFILL_AT:
                self._assign_work_unit(node)

    return FileOrGroup(config, log)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test that uses a heavy fixture ``slow``; put the longest files first."""
    for item in items:
        if HEAVY_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: each file's own order kept


@pytest.fixture
def scripted(monkeypatch):
    """``scripted(runs)`` puts ``runs`` (tests/ab_scripted.py's ScriptedRuns or a kind of it) in
    place of `invoke ab`'s real runs; a run's status is the attempt's word (a real run's manifest
    says it)."""
    from omnibench_core.ab import execute
    from omnibench_core.statuses import AttemptStatus, RunStatus

    def use(runs):
        monkeypatch.setattr(execute, "run_attempt", runs)
        return runs

    monkeypatch.setattr(execute._Driver, "_run_status",
                        lambda self, a: RunStatus(a.status.value) if a.status is AttemptStatus.COMPLETE else None)
    return use


@pytest.fixture
def port() -> int:
    return free_port()


@pytest.fixture
def invoke(tmp_path):
    """Run `python -m invoke ...` in the repo root, with results under tmp_path."""

    def run_invoke(*args: str, env: dict[str, str] | None = None, timeout: float = 600) -> subprocess.CompletedProcess:
        full_env = {**os.environ, "INVOKE_OMNIBENCH_RESULTS": str(tmp_path / "results"), **(env or {})}
        return subprocess.run([sys.executable, "-m", "invoke", *args], cwd=REPO, env=full_env,
                              capture_output=True, text=True, timeout=timeout)

    return run_invoke

