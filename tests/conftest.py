"""Shared fixtures: free ports, a runner for the real `invoke` command, fake GPU hosts."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "fixtures"


def free_port() -> int:
    """A port nobody listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


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


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test that uses a heavy fixture ``slow``."""
    for item in items:
        if HEAVY_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)


@pytest.fixture
def port() -> int:
    return free_port()


@pytest.fixture
def invoke(tmp_path):
    """Run `python -m invoke ...` in the repo root, with results under tmp_path."""

    def run_invoke(*args: str, env: dict[str, str] | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
        full_env = {**os.environ, "INVOKE_OMNIBENCH_RESULTS": str(tmp_path / "results"), **(env or {})}
        return subprocess.run([sys.executable, "-m", "invoke", *args], cwd=REPO, env=full_env,
                              capture_output=True, text=True, timeout=timeout)

    return run_invoke


def invoke_run_into(results: Path, *workloads: str, timeout: float = 900,
                    extra: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    """One real `invoke run` of ``workloads`` on the local target, results under ``results``;
    ``extra``: more flags, as a user would add them."""
    argv = [sys.executable, "-m", "invoke", "run", "--port", str(free_port()), *extra]
    for workload in workloads:
        argv += ["--workload", workload]
    return subprocess.run(argv, cwd=REPO, env={**os.environ, "INVOKE_OMNIBENCH_RESULTS": str(results)},
                          capture_output=True, text=True, timeout=timeout)


def write_fake_nvidia_smi(folder: Path, values_mib: list[int], *, fail: bool = False) -> Path:
    """A fake `nvidia-smi`: prints the next memory value on each memory query (the last one
    repeats), no compute processes, and logs its argv to calls.log next to it."""
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "nvidia-smi"
    script.write_text(textwrap.dedent(f"""\
        #!{sys.executable}
        import json, pathlib, sys
        here = pathlib.Path(__file__).parent
        calls = here / "calls.log"
        with calls.open("a") as f:
            f.write(json.dumps(sys.argv[1:]) + "\\n")
        n = sum("--query-gpu=memory.used" in line for line in calls.read_text().splitlines()) - 1
        values = {json.dumps(values_mib)}
        if {fail!r}:
            print("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver", file=sys.stderr)
            sys.exit(9)
        if "--query-gpu=memory.used" in sys.argv:
            ids = sys.argv[sys.argv.index("-i") + 1].split(",")
            for _ in ids:
                print(values[min(n, len(values) - 1)])
        elif any(a.startswith("--query-compute-apps") for a in sys.argv):
            pass  # no compute process on the GPUs
        else:
            sys.exit(6)
        """))
    script.chmod(0o755)
    return script


def fake_calls(folder: Path) -> list[list[str]]:
    """The argv of every call the fake nvidia-smi received."""
    log = folder / "calls.log"
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def make_fake_checkout(root: Path) -> Path:
    """A git work tree shaped like an sglang-omni checkout with an `omni` venv."""
    root.mkdir(parents=True)
    bin_dir = root / "omni" / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "python").symlink_to(sys.executable)
    serve = bin_dir / "sgl-omni"
    serve.write_text("#!/bin/sh\necho fake sgl-omni \"$@\"\n")
    serve.chmod(0o755)
    (root / "README.md").write_text("fake checkout\n")
    git = ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    subprocess.run([*git, "add", "README.md"], check=True)
    subprocess.run([*git, "commit", "-qm", "init"], check=True)
    return root
