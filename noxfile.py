"""nox sessions: ``tests`` (the suite), ``fast`` (its fast tier), ``coverage``, ``bench`` (benchmarks),
``lint``, and ``ci_stages`` (the model-CI stages of an sglang-omni checkout, one parametrized
session per stage)."""

from __future__ import annotations

import argparse
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import nox

nox.options.sessions = ["tests"]
# uv when nox was installed with it (the README's `nox[uv]`): it installs the test environment in a
# fraction of pip's time (measured in docs/development.md); plain venv and pip otherwise.
nox.options.default_venv_backend = "uv|venv"
# uv compiles the installed modules' bytecode as pip does: otherwise the first import of each does
# it (four xdist workers at once), and a dependency's old escape warns in the tests' output.
os.environ.setdefault("UV_COMPILE_BYTECODE", "1")
# The suite's pytest runs without PYTHONDONTWRITEBYTECODE (set on this host, as in many containers):
# with it Python keeps no bytecode of omnibench's own modules (an editable install, which uv does
# not compile) nor pytest's rewritten tests, so each of the suite's 3,600 Python processes compiled
# what it imported anew and each worker rewrote every test module: 1,081 CPU-s of a whole run
# with it against 1,006 without it (the scoring server's lazy start, d4ae46d, came in between: part
# of that difference is its), and the fast tier's pytest 49 s against 35 (2026-12-06,
# docs/development.md). The first import writes the bytecode, the rest read it; what the product
# does is unchanged (nox removes a variable given as None).
SUITE_ENV: dict[str, str | None] = {"PYTHONDONTWRITEBYTECODE": None}
HERE = Path(__file__).resolve().parent


BROWSER = "chromium"  # Debian's package and its command: the site's browser tests drive it headless
BROWSER_INSTALL = (("apt-get", "update"), ("apt-get", "install", "-y", BROWSER))
# Set to 1 to leave the browser out: nothing is installed, and the browser tests report a skip
# that says why (tests/browser_helpers.py reads the same name).
SKIP_BROWSER = "OMNIBENCH_SKIP_BROWSER"


def browser_steps(which: Callable[[str], str | None] | None = None,
                  euid: Callable[[], int] | None = None,
                  environ: dict[str, str] | None = None) -> tuple[tuple[str, ...], ...]:
    """The commands that install the browser the tests drive: none when ``chromium`` is on PATH or
    ``OMNIBENCH_SKIP_BROWSER=1`` asks for no browser, apt-get's as root; anyone else is told what to
    run (a RuntimeError with the commands and the way to skip). ``which``, ``euid`` and ``environ``
    default to ``shutil.which``, ``os.geteuid`` and ``os.environ``."""
    if (environ if environ is not None else os.environ).get(SKIP_BROWSER) == "1" or (which or shutil.which)(BROWSER):
        return ()
    if (euid or os.geteuid)() != 0:
        raise RuntimeError(f"the browser tests need {BROWSER!r} on PATH and this user cannot install it; run as "
                           "root: " + " && ".join(" ".join(step) for step in BROWSER_INSTALL)
                           + f" (or run nox as root), or skip the browser tests: {SKIP_BROWSER}=1 python3 -m nox -s tests")
    return BROWSER_INSTALL


def install_browser(session: nox.Session) -> None:
    """Install Debian's chromium with apt when it is missing (CI's fresh machine has none), saying
    first what will be installed and how to skip it."""
    try:
        steps = browser_steps()
    except RuntimeError as exc:
        session.error(str(exc))
    if steps:
        session.log(f"the site's browser tests drive {BROWSER!r}, which is not on PATH: installing Debian's package "
                    f"now ({' && '.join(' '.join(step) for step in steps)}). To skip those tests instead (they then "
                    f"report a skip): {SKIP_BROWSER}=1 python3 -m nox -s tests")
    for step in steps:
        session.run(*step, external=True, env={"DEBIAN_FRONTEND": "noninteractive"})


@nox.session
def tests(session: nox.Session) -> None:
    """Build a fresh environment, install omnibench with its test extras and the browser the
    site's test drives; ruff, mypy, then pytest.

    The lint and the type check run first and fail fast: they keep the layers apart (no core
    module imports a plugin, the records and the run layer are typed strictly)."""
    install_browser(session)
    session.install("-e", ".[test,lint]")
    if not session.posargs:  # a subset (`-- -k gates`) is for a quick look: pytest alone
        session.run("ruff", "check", ".")
        session.run("mypy")
    session.run("pytest", *session.posargs, env=SUITE_ENV)


@nox.session
def fast(session: nox.Session) -> None:
    """The fast tier for the edit loop: ruff, mypy, and every test not marked ``slow`` (about a
    minute on 2 cores). CI runs the whole suite (``nox -s tests``)."""
    session.install("-e", ".[test,lint]")
    session.run("ruff", "check", ".")
    session.run("mypy")
    session.run("pytest", "-m", "not slow", *session.posargs, env=SUITE_ENV)


@nox.session
def coverage(session: nox.Session) -> None:
    """Line and branch coverage of ``omnibench_core/`` and ``plugins/`` over the whole suite
    (coverage.py; settings in pyproject.toml's ``[tool.coverage.*]``): every process the tests
    start is measured too (servers, clients, ``invoke`` commands), and a table of the totals is
    printed. docs/development.md keeps the figures, with the commit and the date."""
    install_browser(session)
    session.install("-e", ".[test]", "coverage>=7.10")  # 7.10: `patch = subprocess`
    # not session.create_tmp(): it also points TMPDIR there, inside this repository, and tests whose
    # temporary folders must lie outside any git work tree (a fake checkout, "not a git work tree")
    # failed under coverage only (6 of them, 2026-12-06)
    data = Path(session.virtualenv.location).resolve() / "coverage-data" / ".coverage"
    data.parent.mkdir(parents=True, exist_ok=True)
    for old in data.parent.glob(".coverage*"):
        old.unlink()
    env = {"COVERAGE_FILE": str(data)}
    session.run("coverage", "run", "-m", "pytest", *session.posargs, env={**env, **SUITE_ENV})
    session.run("coverage", "combine", "--quiet", env=env)
    session.run("coverage", "report", "--precision=1", "--skip-covered", "--sort=cover", env=env)


@nox.session
def bench(session: nox.Session) -> None:
    """Benchmarks (not tests): gate latency, native client overhead, collection check.

    Each is measured side by side with its alternative (the runbook's 5 s loops, a threaded
    client, the runbook's read-everything loop) in the same run."""
    session.install("-e", ".")
    session.run("python", "benchmarks/bench_gates.py", "--rounds", "5")
    session.run("python", "benchmarks/bench_seedtts.py")


@nox.session
def lint(session: nox.Session) -> None:
    """ruff over the library, plugins, tasks and tests, and mypy over the library."""
    session.install("-e", ".[lint]")
    session.run("ruff", "check", ".")
    session.run("mypy")


# -- CI stages ------------------------------------------------------------------------------
# They run in the checkout's own venv (no nox-built environment), so omnibench must be importable
# by the python running nox: `python3 -m pip install -e .` installs both.
try:
    from omnibench_core import ci as _ci
    from omnibench_core.cli.config import load_settings
    from omnibench_core.errors import OmnibenchError

    _STAGES = {stage.name: stage for stage in _ci.stages()}
    _WHY_NOT = ""
except Exception as exc:  # not installed here, or a broken plugin: `tests` and `lint` must still work
    _STAGES, _WHY_NOT = {}, f"{type(exc).__name__}: {exc}"

_RUN: list = []  # the one CiRun of this nox invocation, shared by its stage sessions
_NOT_READY: list = []  # why the CI stages could not start (said once; the other stages skip)


def _ci_args(posargs: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="nox -s ci_stages --")
    parser.add_argument("--attempts", type=int, help="tries per stage, like CI's flaky wrapper (default 1)")
    parser.add_argument("--retry-delay-s", type=float)
    parser.add_argument("--timeout-s", type=float, help="per-stage time limit")
    parser.add_argument("--out", type=Path, help="output directory (default <results>/<sha>/ci/runN)")
    return parser.parse_args(posargs)


def _run_stage(session: nox.Session, name: str) -> None:
    args = _ci_args(session.posargs)
    if _NOT_READY:
        session.skip(f"not run: {_NOT_READY[0]} (see the first stage)")
    if not _RUN:
        try:
            _RUN.append(_ci.CiRun(load_settings(HERE), out_dir=args.out, progress=session.log))
        except OmnibenchError as exc:
            _NOT_READY.append(exc.message)
            session.error(str(exc))
    run = _RUN[0]
    try:
        result = run.run_stage(_STAGES[name], attempts=args.attempts, retry_delay_s=args.retry_delay_s,
                               timeout_s=args.timeout_s)
    except OmnibenchError as exc:
        session.error(str(exc))
    print(run.summary_table(), flush=True)
    session.log(f"summary: {run.out_dir / 'summary.json'}")
    if result.exit_code != 0:
        session.error(f"stage {name} failed with exit code {result.exit_code}; log {result.log}")


if _STAGES:

    @nox.session(venv_backend="none")
    @nox.parametrize("stage", list(_STAGES))
    def ci_stages(session: nox.Session, stage: str) -> None:
        """Run one MiniCPM-o CI stage in the checkout's venv (plain ci_stages runs all, in order).

        Logs, exit codes and summary.json go to <results>/<sha>/ci/runN."""
        _run_stage(session, stage)

else:

    @nox.session(venv_backend="none")
    def ci_stages(session: nox.Session) -> None:
        """Run the model-CI stages (needs omnibench installed where nox runs)."""
        session.error(f"the CI stages could not be loaded ({_WHY_NOT}). Install omnibench where nox runs: "
                      "`python3 -m pip install -e .`, then `python3 -m nox -s ci_stages` with that python")
