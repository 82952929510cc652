"""What a manifest records about the host: name, CPUs, GPUs and driver, package versions."""

from __future__ import annotations

import importlib.metadata as md
import os
import platform
import socket
import sys
from collections.abc import Iterable
from typing import Any

from ..process.gpu import CALL_TIMEOUT_S, describe_gpus
from ..settings import format_cpu_list

CORE_PACKAGES = ("omnibench", "invoke", "nox", "pluggy", "huggingface_hub", "requests", "numpy",
                 "soundfile", "tabulate")
# Their versions change the local target's numbers and scores: a new version is a new baseline.
SPEECH_VIDEO_PACKAGES = ("aiohttp", "hibari-tts", "pocketsphinx", "jiwer", "whisper-normalizer", "av")


def package_versions(names: Iterable[str]) -> dict[str, str]:
    """Installed versions of ``names``; ``"not installed"`` for missing ones."""
    out = {}
    for name in names:
        try:
            out[name] = md.version(name)
        except md.PackageNotFoundError:
            out[name] = "not installed"
    return out


def capture(nvidia_smi: str = "nvidia-smi", extra_packages: Iterable[str] = (),
            gpu_timeout_s: float = CALL_TIMEOUT_S) -> dict[str, Any]:
    """The environment section of a manifest. ``nvidia_smi`` empty: the target uses no GPU, and
    no GPU tool is run; its call takes at most ``gpu_timeout_s``."""
    try:
        cpus = format_cpu_list(sorted(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        cpus = ""
    return {
        "host": socket.gethostname(),
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "cpu_count": os.cpu_count(),
        "cpu_set": cpus,
        "gpus": describe_gpus(nvidia_smi, gpu_timeout_s) if nvidia_smi else "not applicable: the target uses no GPU",
        "packages": package_versions([*CORE_PACKAGES, *SPEECH_VIDEO_PACKAGES, *extra_packages]),
    }
