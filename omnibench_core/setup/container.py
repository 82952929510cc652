"""The runbook's container: ``docker run`` for the GPU pair, and the ``docker exec`` line."""

from __future__ import annotations

import shlex
import subprocess
from dataclasses import dataclass
from pathlib import Path

from ..errors import OmnibenchError

IMAGE = "hongccc/sglang-omni@sha256:ebe4239e29a764ee3a2806385c061c5fd438a26f01458e503d3822dcba5790df"
# host folder under BENCH_DIR -> path in the container
MOUNTS = (("hf", "/root/.cache/huggingface"), ("omni-cache", "/root/.cache/sglang-omni"),
          ("results", "/results"), ("sglang-omni", "/sglang-omni"))


@dataclass(frozen=True)
class ContainerPlan:
    """The commands that make and enter the container."""

    folders: tuple[Path, ...]
    run_argv: tuple[str, ...]
    exec_argv: tuple[str, ...]

    def shell_lines(self) -> str:
        """The commands, quoted for copying into a shell."""
        return "\n".join([f"mkdir -p {' '.join(shlex.quote(str(f)) for f in self.folders)}",
                          shlex.join(self.run_argv), shlex.join(self.exec_argv)])


def plan_container(*, bench_dir: str | Path, gpu_a: str, gpu_b: str, ci_cpus: str, env_file: str | Path,
                   image: str = IMAGE, name: str = "omni-bench", docker: str = "docker") -> ContainerPlan:
    """``docker run -d --init --ipc host --cap-add=SYS_PTRACE --gpus ... --cpuset-cpus ... IMAGE sleep infinity``."""
    bench = Path(bench_dir)
    argv = [docker, "run", "-d", "--init", "--ipc", "host", "--cap-add=SYS_PTRACE",
            "--gpus", f'"device={gpu_a},{gpu_b}"', "--cpuset-cpus", ci_cpus, "--env-file", str(env_file)]
    for folder, target in MOUNTS:
        argv += ["-v", f"{bench / folder}:{target}"]
    argv += ["--name", name, image, "sleep", "infinity"]
    return ContainerPlan(tuple(bench / f for f, _ in MOUNTS), tuple(argv), (docker, "exec", "-it", name, "bash"))


def read_env_file(path: str | Path) -> dict[str, str]:
    """``KEY=VALUE`` lines (``cpus.env``)."""
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise OmnibenchError(f"cannot read {path}", hint="make it first: invoke setup.cpus --out FILE") from exc
    return dict(line.split("=", 1) for line in text.splitlines() if "=" in line)


def create_container(plan: ContainerPlan) -> str:
    """Make the folders and run ``docker run``; returns the container id."""
    for folder in plan.folders:
        folder.mkdir(parents=True, exist_ok=True)
    try:
        done = subprocess.run(list(plan.run_argv), capture_output=True, text=True, timeout=600, check=False)
    except FileNotFoundError as exc:
        raise OmnibenchError(f"{plan.run_argv[0]} was not found", hint="install Docker with the NVIDIA runtime") from exc
    if done.returncode != 0:
        raise OmnibenchError(f"docker run exited with {done.returncode}", evidence={"output": done.stderr.strip()},
                             hint="a container of that name may exist: `docker start omni-bench`, or remove it")
    return done.stdout.strip()
