"""nox sessions: ``nox -s tests`` (the test suite), ``nox -s bench`` (benchmarks), ``nox -s lint``."""

from __future__ import annotations

import nox

nox.options.sessions = ["tests"]
nox.options.default_venv_backend = "venv"


@nox.session
def tests(session: nox.Session) -> None:
    """Build a fresh environment, install omnibench with its test extras, run pytest."""
    session.install("-e", ".[test]")
    session.run("pytest", *session.posargs)


@nox.session
def bench(session: nox.Session) -> None:
    """Benchmarks, not tests: gate latency against the runbook's 5 s polling; the native
    client's overhead and the collection check against their alternatives."""
    session.install("-e", ".")
    session.run("python", "benchmarks/bench_gates.py", "--rounds", "5")
    session.run("python", "benchmarks/bench_seedtts.py")


@nox.session
def lint(session: nox.Session) -> None:
    """ruff over the library, plugins, tasks and tests."""
    session.install("ruff>=0.5")
    session.run("ruff", "check", ".")
