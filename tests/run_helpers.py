"""Where the tests are and how they reach the real commands: the repository root, the fixture
files, a free loopback port, and a real `invoke run` into a results folder."""

from __future__ import annotations

import importlib.util
import os
import random
import re
import socket
import subprocess
import sys
from pathlib import Path
from types import ModuleType

from omnibench_core.process.ports import port_in_use

REPO = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "fixtures"


# Servers of tests get ports below the kernel's ephemeral range, where every client connection
# (of any test running beside) takes its local port: a chosen port that a connection holds cannot
# be bound, and the READY gate then says, rightly, that it is in use. Above Ray's worker ports.
SERVER_PORTS = (20000, 32000)
PORT_SPAN = 4  # a duet and a matrix's slots serve on consecutive ports: the next ones are free too
_ports = random.Random(os.urandom(8))  # each xdist worker its own sequence


def _ephemeral_low(path: Path = Path("/proc/sys/net/ipv4/ip_local_port_range")) -> int:
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default


def free_port() -> int:
    """A port nobody listens on or connects from right now, the next PORT_SPAN - 1 free too,
    outside the ephemeral range (when the host leaves room below it; else one the kernel picks)."""
    low, high = SERVER_PORTS[0], min(SERVER_PORTS[1], _ephemeral_low() - PORT_SPAN)
    for _ in range(200 if high > low else 0):
        port = _ports.randrange(low, high)
        if not any(port_in_use(port + i) for i in range(PORT_SPAN)):
            return port
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


def page_files(page: str) -> dict[str, str]:
    """The files a docs page's example package is made of (docs/plugins.md, docs/engines.md): each
    code block whose first line is a comment naming a file (``# acme_bench/client.py``), by that name."""
    files = {}
    for block in re.findall(r"```(?:python|toml)\n(.*?)```", page, flags=re.S):
        first, _, rest = block.partition("\n")
        if first.startswith("# ") and first[2:].strip().endswith((".py", ".toml")):
            files[first[2:].strip()] = block
    return files


def install_page_package(files: dict[str, str], tmp_path: Path, name: str) -> Path:
    """A docs page's example package (:func:`page_files`) written to ``tmp_path/name``, built by pip
    through its own [build-system] (offline: the backend is this environment's) and installed into
    a folder of its own, returned: put it on PYTHONPATH; nothing is left in the test's environment."""
    project = tmp_path / name
    for path, text in files.items():
        (project / path).parent.mkdir(parents=True, exist_ok=True)
        (project / path).write_text(text)
    site = tmp_path / "site"
    built = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-build-isolation", "--no-deps",
                            "--no-index", "--target", str(site), str(project)], capture_output=True, text=True,
                           timeout=300)
    assert built.returncode == 0, built.stdout + built.stderr
    return site


def page_commands(page: str) -> list[list[str]]:
    """The commands of a page's first bash block, each as words (comments dropped)."""
    return [line.split("#")[0].split() for line in page.split("```bash\n", 1)[1].split("```")[0].splitlines()]
