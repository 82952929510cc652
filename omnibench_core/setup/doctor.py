"""``invoke doctor``: every prerequisite of a run on this host, each OK or FAIL with its fix.

A stand-in checkout (``invoke standin``) is judged for what it is: it runs on CPU without a
container or pinned downloads (docker, lscpu and REVISIONS_OK do not apply; an empty CPU set
pins nothing), its venv's stamp is its own (``.standin/omni_ci``) until ``invoke setup.venv``
writes CI's, and its GPU checks ask whatever ``nvidia-smi`` is on PATH (its fake, on a machine
without a GPU).
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from ..errors import OmnibenchError
from ..process.gpu import call_timeout, query_memory_used
from ..process.ports import port_holder, port_in_use
from ..run.ownership import port_lock_holder
from ..settings import Settings
from .checkout import check_venv
from .checkout_layout import check_checkout, is_standin, omni_ci_home
from .pins import load_pins, verify


@dataclass(frozen=True)
class Check:
    """One line of the doctor's table."""

    name: str
    ok: bool
    detail: str
    fix: str = ""
    needed: bool = True  # False: the target does not use it (shown as n/a, never a failure)

    @property
    def status(self) -> str:
        """OK, FAIL, or n/a for a check the target does not need."""
        return "n/a" if not self.needed else ("OK" if self.ok else "FAIL")


def _tool(name: str, command: str, fix: str) -> Check:
    path = shutil.which(command)
    return Check(name, path is not None, path or f"{command} not found", "" if path else fix)


def _guard(name: str, fix: str, fn: Callable[[], str]) -> Check:
    try:
        return Check(name, True, fn())
    except OmnibenchError as exc:
        return Check(name, False, exc.message, exc.hint or fix)


def diagnose(settings: Settings, *, gpu_host: bool = True, checkout: bool = True, why_not: str = "") -> list[Check]:
    """Run every check; none raises. ``gpu_host``: the target's servers use GPUs (nvidia-smi,
    docker, GPU memory and the CPU set matter); ``checkout``: it runs a checkout's programs
    (checkout, venv, pins matter). Checks that do not apply are marked not needed, with ``why_not``."""
    checks = _all_checks(settings)
    gpu_only = {"nvidia-smi", "docker", "GPU memory free", "CPU set (BENCH_CPUS)", "lscpu"}
    checkout_only = {"checkout and commit", "venv hash (VENV_OK)", "model and data pins (REVISIONS_OK)"}
    out = []
    for check in checks:
        needed = not ((check.name in gpu_only and not gpu_host) or (check.name in checkout_only and not checkout))
        out.append(check if needed else replace(check, needed=False, fix=why_not or "not needed for this target"))
    return out


STANDIN_NA = {  # check -> why the stand-in does not need it
    "lscpu": "the stand-in's slots need it only with --slot-cpus rule; runs read no topology",
    "docker": "the stand-in runs on this machine, without a container",
    "model and data pins (REVISIONS_OK)": "the stand-in serves omnibench's local sets offline; it loads no pinned model",
}
FAKE_GPUS = "on a machine without a GPU: invoke standin --fake-gpus DIR, and put DIR first on PATH"


def _all_checks(settings: Settings) -> list[Check]:
    co = None
    try:
        co = check_checkout(settings)
        found = Check("checkout and commit", True, f"{co.root} at {co.revision[:12]}" + (" (dirty)" if co.dirty.strip() else ""))
    except OmnibenchError as exc:
        found = Check("checkout and commit", False, exc.message, exc.hint)
    standin = co is not None and is_standin(co.root)
    checks = [
        Check("python3", sys.version_info >= (3, 10), sys.version.split()[0],
              "" if sys.version_info >= (3, 10) else "use Python 3.10 or newer"),
        _tool("lscpu", settings.tools.lscpu, "install util-linux"),
        _tool("nvidia-smi", settings.tools.nvidia_smi, "install the NVIDIA driver tools (or run inside the container)"),
        _tool("docker", settings.tools.docker, "install Docker with the NVIDIA container runtime (host only)"),
        found,
    ]
    if co is not None:
        checks.append(_guard("venv hash (VENV_OK)", "invoke setup.venv", lambda: _venv_hash(settings, co.root, standin)))
    pins = "model and data pins (REVISIONS_OK)"
    if standin:
        checks.append(Check(pins, True, "not checked"))
    else:
        checks.append(_guard(pins, "invoke setup.download",
                             lambda: f"{len(verify(load_pins(settings.host.pins_file or None), cache_dir=settings.host.hf_cache or None, progress=lambda m: None))} pins resolve offline"))
    port = settings.run.port
    locked = port_lock_holder(port)  # an omnibench run holds it (between its servers, too)
    busy = port_in_use(port)
    detail = (f"held by an omnibench run: {locked}" if locked
              else (port_holder(port) or "held") if busy else "free")
    checks.append(Check(f"port {port} free", not (busy or locked), detail,
                        "wait for that run (or campaign) to end, or pass another --port" if locked
                        else "stop the server holding it, or pass another --port" if busy else ""))
    checks.append(_guard("GPU memory free", "stop what holds the GPU (nvidia-smi), or set omnibench.gpus",
                         lambda: _gpu_memory(settings)))
    checks.append(_cpu_set(settings, standin))
    if standin:  # what the stand-in does not use is not needed, and says why
        checks = [replace(k, needed=False, fix=STANDIN_NA[k.name]) if k.name in STANDIN_NA else k for k in checks]
        checks = [replace(k, fix=FAKE_GPUS) if k.name in ("nvidia-smi", "GPU memory free") and not k.ok else k
                  for k in checks]
    return checks


def _venv_hash(settings: Settings, root: Path, standin: bool) -> str:
    """VENV_OK against CI's ``omni_ci_home``; a stand-in without CI's stamp there has its own."""
    home = Path(settings.ci.omni_ci_home)
    if standin and not (home / ".deps-hash").is_file():
        own = omni_ci_home(root)
        return f"{check_venv(root, own, settings.tools.bash)[:16]} (the stand-in's own stamp, {own})"
    return check_venv(root, home, settings.tools.bash)[:16]


def _gpu_memory(settings: Settings) -> str:
    used = query_memory_used(settings.run.gpu_list(), settings.tools.nvidia_smi,
                             call_timeout(settings.run.gpu_free_timeout_s))
    busy = {g: v for g, v in used.items() if v >= settings.run.gpu_free_mib}
    if busy:
        raise OmnibenchError(f"GPU memory in use: {busy} MiB (limit {settings.run.gpu_free_mib})",
                             hint="stop what holds the GPU (nvidia-smi shows it)")
    return ", ".join(f"GPU {g}: {v} MiB" for g, v in used.items())


def _cpu_set(settings: Settings, standin: bool = False) -> Check:
    wanted = set(settings.run.cpu_list())
    if not wanted and standin:
        return Check("CPU set (BENCH_CPUS)", True, "omnibench.cpus is empty: nothing is pinned", needed=False,
                     fix="the stand-in's numbers measure the harness; set omnibench.cpus (invoke run --cpus) to pin")
    if not wanted:
        return Check("CPU set (BENCH_CPUS)", False, "omnibench.cpus is empty",
                     "invoke setup.cpus, then set omnibench.cpus to its BENCH_CPUS")
    allowed = set(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else wanted
    outside = sorted(wanted - allowed)
    if outside:
        return Check("CPU set (BENCH_CPUS)", False, f"CPUs {outside[:8]} are outside this process's CPU set",
                     "run inside the container started with CI_CPUS, or fix omnibench.cpus")
    return Check("CPU set (BENCH_CPUS)", True, f"{len(wanted)} CPUs: {settings.run.cpus}")
