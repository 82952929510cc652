"""What a manifest records about the host: name, CPUs, GPUs and driver, package versions (this
interpreter's, and those of the target's own Python where it brings one: a checkout's venv)."""

from __future__ import annotations

import importlib.metadata as md
import json
import os
import platform
import socket
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path
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


# Run by the target's Python: every installed distribution's name and version, as JSON. The first
# Name and Version headers of each one's metadata file (METADATA, PKG-INFO, or an egg-info file), as
# `metadata['Name']` and `version` give them, without the email parser those run over the whole file
# (its long description): 0.07 CPU-s against 0.15 in a venv of 111 distributions, paid once per
# process and venv (issue 40; tests/test_served_model.py holds the two to the same list).
LIST_DISTRIBUTIONS = """\
import importlib.metadata as m, json
def head(d):
    found = {}
    for line in (d.read_text('METADATA') or d.read_text('PKG-INFO') or d.read_text('') or '').splitlines():
        if not line.strip():
            break
        key, sep, value = line.partition(':')
        if sep and key.strip().lower() in ('name', 'version'):
            found.setdefault(key.strip().lower(), value.strip())
    return found.get('name') or '?', found.get('version')
print(json.dumps(sorted(dict(head(d) for d in m.distributions()).items())))
"""
TARGET_PACKAGES_TIMEOUT_S = 60.0  # a venv on a cold network disk: seconds, never minutes
TARGET_PACKAGES_MAX_BYTES = 1 << 20  # thousands of packages fit; more is not a package list


def _venv_stamp(python: str) -> tuple[tuple[str, int], ...] | None:
    """When each site-packages folder of ``python``'s venv last changed (an install or removal
    adds or drops a ``.dist-info`` there); None where the venv's layout is not the usual one."""
    found = sorted(Path(python).parent.parent.glob("lib*/python*/site-packages"))
    try:
        return tuple((str(f), f.stat().st_mtime_ns) for f in found) or None
    except OSError:
        return None


# One listing per venv and state in a process: a campaign's runs, a matrix's or an A/B's each
# started the venv's interpreter for the same list (0.11 CPU-s a run).
_LISTED: dict[tuple[str, tuple[tuple[str, int], ...]], dict[str, str]] = {}


def target_packages(python: str, timeout_s: float = TARGET_PACKAGES_TIMEOUT_S) -> dict[str, str] | str:
    """``{name: version}`` of every distribution in the venv of ``python`` (a checkout's ``omni``
    venv: its torch, transformers, sglang-omni), or why it could not be read (a string, never an
    error: the fingerprint is evidence, not a gate). Listed once a process while the venv's
    site-packages folders are unchanged (an install there lists again)."""
    stamp = _venv_stamp(python)
    if stamp is not None and (python, stamp) in _LISTED:
        return dict(_LISTED[(python, stamp)])
    found = _list_packages(python, timeout_s)
    if stamp is not None and isinstance(found, dict):
        _LISTED[(python, stamp)] = dict(found)
    return found


def _list_packages(python: str, timeout_s: float) -> dict[str, str] | str:
    try:
        done = subprocess.run([python, "-c", LIST_DISTRIBUTIONS], capture_output=True, text=True, timeout=timeout_s,
                              check=False, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return f"unavailable: {python} did not list its packages within {timeout_s:g} s"
    except OSError as exc:
        return f"unavailable: {python}: {exc}"
    if done.returncode != 0 or len(done.stdout) > TARGET_PACKAGES_MAX_BYTES:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1][:200]
        return f"unavailable: {python} exited {done.returncode} listing its packages ({tail})"
    try:
        pairs = json.loads(done.stdout)
        return {str(name): str(version) for name, version in pairs}
    except (ValueError, TypeError):
        return f"unavailable: {python} printed no package list"


def capture(nvidia_smi: str = "nvidia-smi", extra_packages: Iterable[str] = (),
            gpu_timeout_s: float = CALL_TIMEOUT_S, target_python: str = "") -> dict[str, Any]:
    """The environment section of a manifest. ``nvidia_smi`` empty: the target uses no GPU, and
    no GPU tool is run; its call takes at most ``gpu_timeout_s``. ``target_python``: the target's
    own interpreter (a checkout's venv), whose packages are listed too."""
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
        **({"target_packages": target_packages(target_python)} if target_python else {}),
    }
