"""Write the stand-in's fake ``nvidia-smi`` (:mod:`.nvidia_smi`): a small launcher that runs it
with the stand-in's state folder, its number of GPUs and a call log next to it."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

from ..process.processes import COVERAGE_VARS
from ..setup.checkout_layout import STANDIN_STATE as STATE  # the folder git ignores
from . import nvidia_smi

DEFAULT_GPUS = 2  # a pair, as the runbook's host: `--slot-per pair` gets one slot


def state_dir(checkout: Path) -> Path:
    """Where the servers of ``checkout`` (and of its git worktrees) leave their pid files."""
    return Path(checkout).resolve() / STATE / "gpu"


def write_fake_nvidia_smi(folder: Path, checkout: Path, *, gpus: int = DEFAULT_GPUS, busy_mib: int = 20000,
                          idle_mib: int = 300) -> Path:
    """``folder/nvidia-smi``: ``gpus`` fake GPUs, each using ``busy_mib`` per live stand-in server of
    ``checkout`` on it plus ``idle_mib``; every call is logged to ``folder/calls.log``."""
    folder = Path(folder).expanduser().resolve()
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "nvidia-smi"
    argv = [sys.executable, nvidia_smi.__file__, "--standin-state", str(state_dir(checkout)), "--standin-gpus", str(gpus),
            "--standin-busy-mib", str(busy_mib), "--standin-idle-mib", str(idle_mib),
            "--standin-log", str(folder / "calls.log")]
    # exec: the caller's timeout and process-group kill reach the python that answers. -S (the
    # standard library is all it needs; a suite run makes some 700 calls) unless coverage.py's
    # subprocess hook, a .pth file, must measure it (processes.COVERAGE_VARS)
    cover = " || ".join(f'[ -n "${{{var}:-}}" ]' for var in COVERAGE_VARS)
    script.write_text(f"#!/bin/sh\n# omnibench standin's fake nvidia-smi for {checkout}\n"
                      f"if {cover}; then site=; else site=-S; fi\n"
                      f"exec {shlex.quote(argv[0])} $site {shlex.join(argv[1:])} \"$@\"\n")
    script.chmod(0o755)
    return script
