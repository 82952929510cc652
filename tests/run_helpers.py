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

from omnibench_core.process.ports import ephemeral_low, port_in_use
from omnibench_core.run.ownership import port_lock_holder

REPO = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "fixtures"


# Servers of tests get ports below the kernel's ephemeral range, where every client connection
# (of any test running beside) takes its local port: a chosen port that a connection holds cannot
# be bound, and the READY gate then says, rightly, that it is in use. Above Ray's worker ports.
SERVER_PORTS = (20000, 32000)
PORT_SPAN = 4  # a duet and a matrix's slots serve on consecutive ports: the next ones are free too


def _worker_slice(low: int, high: int) -> range:
    """This xdist worker's own ports: two workers picking at random once drew the same port, the
    second one's run refused by the first's port lock before either had bound it (CI, stop 51)."""
    count = max(1, int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1") or 1))
    worker = int(re.sub(r"\D", "", os.environ.get("PYTEST_XDIST_WORKER", "")) or 0) % count
    width = (high - low) // count
    return range(low + worker * width, low + (worker + 1) * width - PORT_SPAN, PORT_SPAN)


_cursor = random.Random(os.urandom(8))  # where this worker starts its walk through its slice
_handed: list[int] = []


def _taken(port: int) -> bool:
    return any(port_in_use(p) or port_lock_holder(p) for p in range(port, port + PORT_SPAN))


def free_port() -> int:
    """A port nobody listens on, connects from or holds omnibench's lock on right now, the next
    PORT_SPAN - 1 too, outside the ephemeral range, from this xdist worker's own slice, walked in
    order so a port handed to an earlier test (whose run may not have bound it yet) comes last;
    when the host leaves no room below its ephemeral range, one the kernel picks."""
    ports = _worker_slice(SERVER_PORTS[0], min(SERVER_PORTS[1], ephemeral_low() - PORT_SPAN))
    if len(ports) > 1:
        start = _handed[-1] + PORT_SPAN if _handed else ports[_cursor.randrange(len(ports))]
        offset = (start - ports.start) // PORT_SPAN
        for i in range(len(ports)):
            port = ports[(offset + i) % len(ports)]
            if not _taken(port):
                _handed.append(port)
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


def invoke_in(results: Path, *args: str, env: dict[str, str] | None = None,
              timeout: float = 900) -> subprocess.CompletedProcess:
    """A real ``invoke ARGS...`` with its results under ``results`` (and ``env`` added)."""
    return subprocess.run([sys.executable, "-m", "invoke", *args], cwd=REPO, capture_output=True, text=True,
                          env={**os.environ, "INVOKE_OMNIBENCH_RESULTS": str(results), **(env or {})}, timeout=timeout)


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
