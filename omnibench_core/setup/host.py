"""The set-up steps as the tasks call them: settings in, gates and files out."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path

from ..errors import OmnibenchError, SettingsError
from ..settings import Settings
from .checkout import VENV_SCRIPT, build_venv, check_venv, checkout_commit
from .checkout_layout import check_checkout
from .container import ContainerPlan, create_container, plan_container, read_env_file
from .cpus import CpuGroups, cpu_groups, read_topology
from .pins import download, load_pins, run_prepare, verify

Progress = Callable[[str], None]


def cpus_env_path(settings: Settings) -> Path:
    """``$BENCH_DIR/cpus.env``."""
    return Path(settings.host.bench_dir) / "cpus.env"


def make_cpu_groups(settings: Settings, *, gpu_a: str | None = None, gpu_b: str | None = None,
                    cores_per_gpu: int | None = None, skip_cores: str | None = None,
                    out: Path | None = None) -> CpuGroups:
    """CPUS_OK: compute the pair's groups from this host and write ``BENCH_CPUS``/``CI_CPUS`` to ``out``."""
    topo = read_topology(lscpu=settings.tools.lscpu, nvidia_smi=settings.tools.nvidia_smi, sysfs=settings.host.sysfs)
    skip = [int(c) for c in (skip_cores if skip_cores is not None else settings.host.skip_cores).split(",") if c.strip()]
    groups = cpu_groups(topo, gpu_a or settings.host.gpu_a, gpu_b or settings.host.gpu_b,
                        cores_per_gpu or settings.host.cores_per_gpu, skip)
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_name(f".{out.name}.tmp")
        tmp.write_text(groups.env_text())
        os.replace(tmp, out)
    return groups


def container(settings: Settings, env_file: Path | None = None) -> ContainerPlan:
    """The container commands, with ``CI_CPUS`` from ``cpus.env``."""
    env_file = env_file or cpus_env_path(settings)
    ci_cpus = read_env_file(env_file).get("CI_CPUS", "")
    if not ci_cpus:
        raise OmnibenchError(f"{env_file} has no CI_CPUS", hint="make it: invoke setup.cpus --out " + str(env_file))
    host = settings.host
    return plan_container(bench_dir=host.bench_dir, gpu_a=host.gpu_a, gpu_b=host.gpu_b, ci_cpus=ci_cpus,
                          env_file=env_file, image=host.image, name=host.container_name, docker=settings.tools.docker)


def container_running(settings: Settings) -> bool:
    """True when the container exists and runs (``docker inspect``)."""
    try:
        done = subprocess.run([settings.tools.docker, "inspect", "-f", "{{.State.Running}}", settings.host.container_name],
                              capture_output=True, text=True, timeout=60, check=False)
    except FileNotFoundError:
        return False
    return done.returncode == 0 and done.stdout.strip() == "true"


def checkout(settings: Settings, commit: str | None = None, progress: Progress = print) -> str:
    """Clone or fetch the checkout and detach at the commit."""
    return checkout_commit(Path(settings.run.checkout), commit or settings.host.commit, repo_url=settings.host.repo_url,
                           git=settings.tools.git, progress=progress)


def at_commit(settings: Settings, commit: str | None = None) -> bool:
    """True when the checkout exists and HEAD is ``commit``."""
    path = Path(settings.run.checkout)
    if not (path / ".git").exists():
        return False
    args = [settings.tools.git, "-C", str(path), "rev-parse"]
    head = subprocess.run([*args, "HEAD"], capture_output=True, text=True, check=False).stdout.strip()
    want = subprocess.run([*args, "--verify", "--end-of-options", f"{commit or settings.host.commit}^{{commit}}"],
                          capture_output=True, text=True, check=False).stdout.strip()
    return bool(head) and head == want


def venv(settings: Settings, progress: Progress = print) -> str:
    """Build the venv with CI's script, then VENV_OK."""
    root = Path(settings.run.checkout)
    if not (root / VENV_SCRIPT).is_file():  # before any folder is made: a missing checkout was a traceback
        raise SettingsError(f"no sglang-omni checkout with {VENV_SCRIPT} at {root}",
                            evidence={"setting": "omnibench.checkout"},
                            hint="clone it first (invoke setup.checkout), or set omnibench.checkout in invoke.yaml "
                                 "or INVOKE_OMNIBENCH_CHECKOUT in the environment")
    log = Path(settings.host.bench_dir) / "logs" / "prepare_omni_venv.log"
    progress(f"building the venv in {settings.ci.omni_ci_home} (log {log}); this takes a while")
    build_venv(root, Path(settings.ci.omni_ci_home), bash=settings.tools.bash, log=log)
    return check_venv(root, Path(settings.ci.omni_ci_home), settings.tools.bash)


def venv_ok(settings: Settings) -> str:
    """VENV_OK alone."""
    return check_venv(Path(settings.run.checkout), Path(settings.ci.omni_ci_home), settings.tools.bash)


def download_all(settings: Settings, progress: Progress = print) -> None:
    """Pinned downloads, refs/main, then the checkout's preparation commands."""
    pins = load_pins(settings.host.pins_file or None)
    download(pins, cache_dir=settings.host.hf_cache or None, progress=progress)
    co = check_checkout(settings)
    run_prepare(pins, python=co.python, checkout=co.root, logs=Path(settings.host.bench_dir) / "logs", progress=progress)


def verify_all(settings: Settings, progress: Progress = print) -> list[str]:
    """REVISIONS_OK, with the seed-tts count from the checkout's loader."""
    co = check_checkout(settings)
    return verify(load_pins(settings.host.pins_file or None), cache_dir=settings.host.hf_cache or None, python=co.python,
                  checkout=co.root, progress=progress)


def in_container() -> bool:
    """Inside a Docker container (where the runbook's checkout, venv and download steps run)."""
    return Path("/.dockerenv").exists()


SIDES: tuple[str, ...] = ("auto", "host", "container")  # `invoke setup --where`; auto: container when in one


def setup_all(settings: Settings, where: str = "auto", progress: Progress = print) -> None:
    """Every set-up step for this side (host: CPU groups and container; container: checkout,
    venv, downloads, verify), skipping what is already done."""
    if where not in SIDES:
        raise SettingsError(f"unknown --where {where!r}", hint=f"use {', '.join(SIDES)}")
    side = ("container" if in_container() else "host") if where == "auto" else where
    if side == "host":
        env_file = cpus_env_path(settings)
        if "BENCH_CPUS" in read_env_file(env_file) if env_file.exists() else False:
            progress(f"CPUS_OK (kept {env_file})")
        else:
            progress(make_cpu_groups(settings, out=env_file).env_text().rstrip() + "\nCPUS_OK")
        if container_running(settings):
            progress(f"container {settings.host.container_name} is running")
        else:
            progress(f"container {create_container(container(settings))[:12]} started")
        return
    if at_commit(settings):
        progress(f"checkout at {settings.host.commit} already")
    else:
        checkout(settings, progress=progress)
    try:
        progress(f"VENV_OK {venv_ok(settings)[:16]}")
    except OmnibenchError:
        progress(f"VENV_OK {venv(settings, progress)[:16]}")
    try:
        verify_all(settings, progress=lambda m: None)
        progress("REVISIONS_OK (everything was downloaded already)")
    except OmnibenchError:
        download_all(settings, progress)
        verify_all(settings, progress)
        progress("REVISIONS_OK")
