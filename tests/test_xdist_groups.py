"""The suite's scheduler (tests/conftest.py): files whole on a worker, a group's files together on
one, in a real pytest run of two workers over stand-in files named as the Ray group's are."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest
from conftest import unit_of
from run_helpers import REPO

PROBE = '''import os
def test_{name}():
    with open(os.environ["WORKERS_FILE"], "a") as out:
        out.write("{name} " + os.environ["PYTEST_XDIST_WORKER"] + "\\n")
'''


def test_a_groups_tests_are_one_unit_and_other_files_their_own():
    assert unit_of("tests/test_scale_ray.py::test_x") == unit_of("tests/test_scale_ray_remote.py::test_y[SIGINT]")
    assert unit_of("tests/test_history.py::test_x") == unit_of(
        "tests/test_publish.py::test_the_site_opened_alone_from_disk_draws_its_plots_and_its_report_links_resolve")
    assert unit_of("tests/test_publish.py::test_other") == "tests/test_publish.py"
    assert unit_of("tests/test_scale.py::test_x") == "tests/test_scale.py" != unit_of("tests/test_scale_ray.py::t")


def test_every_unit_the_groups_name_is_a_test_of_the_suite():
    """A renamed file or test would leave its group in silence: each prefix names a file that exists
    and, where it names a test, a test function defined in that file."""
    from conftest import XDIST_GROUPS

    for group, prefixes in XDIST_GROUPS.items():
        for prefix in prefixes:
            path, _, test = prefix.partition("::")
            assert (REPO / path).is_file(), f"group {group}: {path} is not a file of the suite"
            if test:
                assert f"def {test}(" in (REPO / path).read_text(), f"group {group}: no {test} in {path}"


def _probe_suite(tmp_path, files: dict[str, str], workers: int) -> list[tuple[str, str]]:
    """A real pytest run of ``workers`` workers over ``files`` (name -> source) beside the suite's
    conftest and addopts: each probe test's name and worker, in the order they ran."""
    tests = tmp_path / "tests"
    tests.mkdir()
    for helper in ("conftest.py", "run_helpers.py"):
        shutil.copy(REPO / "tests" / helper, tests / helper)
    (tmp_path / "pyproject.toml").write_text((REPO / "pyproject.toml").read_text())  # the suite's addopts
    for name, source in files.items():
        (tests / name).write_text(source)
    seen = tmp_path / "workers.txt"
    done = subprocess.run([sys.executable, "-m", "pytest", "-n", str(workers), "-p", "no:cacheprovider", "tests"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "WORKERS_FILE": str(seen)})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    return [(line.split()[0], line.split()[1]) for line in seen.read_text().splitlines()]


@pytest.mark.slow
def test_two_files_of_one_group_run_on_one_worker_under_two(tmp_path):
    names = ("scale_ray", "scale_ray_remote", "other_a", "other_b")
    seen = dict(_probe_suite(tmp_path, {f"test_{name}.py": PROBE.format(name=name) for name in names}, 2))
    assert len(seen) == 4 and seen["scale_ray"] == seen["scale_ray_remote"], seen


@pytest.mark.slow
def test_units_go_out_longest_first_not_by_their_number_of_tests(tmp_path):
    """LONGEST_FIRST's order, as collected: xdist reorders units by their number of tests unless told
    not to, which sent the long stories of few tests out last (found 2026-12-05). One worker runs the
    units in the order they are handed out."""
    files = {"test_streaming.py": PROBE.format(name="long_story"),  # in LONGEST_FIRST, one test
             "test_aaa_many.py": "".join(PROBE.format(name=f"quick_{i}") for i in range(5))}
    order = [name for name, _ in _probe_suite(tmp_path, files, 1)]
    assert order == ["long_story", *(f"quick_{i}" for i in range(5))], order
