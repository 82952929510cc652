"""Where the tests are and how they reach the real commands: the repository root, the fixture
files, a free loopback port, and a real `invoke run` into a results folder."""

from __future__ import annotations

import importlib.util
import os
import socket
import subprocess
import sys
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "fixtures"


def free_port() -> int:
    """A port nobody listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def load_tasks(name: str = "omnibench_tasks_under_test") -> ModuleType:
    """tasks.py as Invoke loads it (a fresh module: Invoke consumes a task's help texts once)."""
    spec = importlib.util.spec_from_file_location(name, REPO / "tasks.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def invoke_run_into(results: Path, *workloads: str, timeout: float = 900,
                    extra: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    """One real `invoke run` of ``workloads`` on the local target, results under ``results``;
    ``extra``: more flags, as a user would add them."""
    argv = [sys.executable, "-m", "invoke", "run", "--port", str(free_port()), *extra]
    for workload in workloads:
        argv += ["--workload", workload]
    return subprocess.run(argv, cwd=REPO, env={**os.environ, "INVOKE_OMNIBENCH_RESULTS": str(results)},
                          capture_output=True, text=True, timeout=timeout)
