"""Pinned models and data: download at the pins, write ``refs/main``, and REVISIONS_OK offline."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..errors import GateError, OmnibenchError
from ..process.processes import log_tail

DEFAULT_PINS = Path(__file__).with_name("pins.json")


class RevisionsNotOk(GateError):
    """REVISIONS_OK: a pin does not resolve offline to its own revision's snapshot."""

    gate = "REVISIONS_OK"


@dataclass(frozen=True)
class Pin:
    """A Hugging Face repository at a revision (``split``/``samples`` for the seed-tts check)."""

    repo: str
    type: str
    revision: str
    split: str = ""
    samples: int = 0

    @property
    def cache_folder(self) -> str:
        """``models--org--name`` as the hub cache names it."""
        return f"{self.type}s--{self.repo.replace('/', '--')}"


@dataclass(frozen=True)
class Pins:
    """The pins and the checkout's preparation commands (python arguments)."""

    pins: tuple[Pin, ...]
    prepare: tuple[tuple[str, ...], ...]


def load_pins(path: str | Path | None = None) -> Pins:
    """Read a pins file (default: the runbook's pins, shipped with omnibench)."""
    path = Path(path) if path else DEFAULT_PINS
    try:
        data = json.loads(path.read_text())
        return Pins(tuple(Pin(**p) for p in data["pins"]), tuple(tuple(c) for c in data.get("prepare", [])))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise OmnibenchError(f"cannot read the pins file {path}: {exc}", hint="fix omnibench.pins_file") from exc


def hub_cache(cache_dir: str | None = None) -> Path:
    """The hub cache: ``cache_dir`` or huggingface_hub's own (``HF_HUB_CACHE``/``HF_HOME``)."""
    from huggingface_hub import constants

    return Path(cache_dir or constants.HF_HUB_CACHE)


def write_ref(cache: Path, pin: Pin) -> Path:
    """``refs/main`` = the pin (a download by revision does not set it; offline loading needs it)."""
    ref = cache / pin.cache_folder / "refs" / "main"
    ref.parent.mkdir(parents=True, exist_ok=True)
    ref.write_text(pin.revision)  # no newline, as `echo -n`
    return ref


def download(pins: Pins, *, cache_dir: str | None = None, downloader: Callable[..., str] | None = None,
             progress: Callable[[str], None] = print) -> list[str]:
    """Download every pin at its revision (huggingface_hub shows progress), then write its ref."""
    if downloader is None:
        from huggingface_hub import snapshot_download

        downloader = snapshot_download
    cache = hub_cache(cache_dir)
    paths = []
    for i, pin in enumerate(pins.pins, start=1):
        progress(f"[{i}/{len(pins.pins)}] {pin.repo} ({pin.type}) at {pin.revision}")
        paths.append(downloader(pin.repo, repo_type=pin.type, revision=pin.revision, cache_dir=str(cache)))
        write_ref(cache, pin)
    return paths


def run_prepare(pins: Pins, *, python: Path, checkout: Path, logs: Path, progress: Callable[[str], None] = print) -> None:
    """The checkout's dataset-preparation and cache-warming commands, one log each."""
    logs.mkdir(parents=True, exist_ok=True)
    for i, args in enumerate(pins.prepare, start=1):
        name = "_".join(a.strip("-").replace(".", "_") for a in args[1:])[:80]
        log = logs / f"prepare-{i}-{name}.log"
        progress(f"[{i}/{len(pins.prepare)}] python {' '.join(args)} (log {log})")
        with open(log, "w", encoding="utf-8") as handle:
            code = subprocess.run([str(python), *args], cwd=checkout, stdout=handle, stderr=subprocess.STDOUT,
                                  check=False).returncode
        if code != 0:
            raise OmnibenchError(f"python {' '.join(args)} exited with {code}",
                                 evidence={"log": str(log), "log tail": log_tail(log)})


def verify(pins: Pins, *, cache_dir: str | None = None, python: Path | None = None, checkout: Path | None = None,
           progress: Callable[[str], None] = print) -> list[str]:
    """REVISIONS_OK: each pin resolves offline, through ``refs/main``, to its own snapshot; the
    seed-tts split (counted by the checkout's loader when ``python`` is given) has its count."""
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    cache = hub_cache(cache_dir)
    lines = []
    for pin in pins.pins:
        try:
            path = snapshot_download(pin.repo, repo_type=pin.type, cache_dir=str(cache), local_files_only=True)
        except (LocalEntryNotFoundError, FileNotFoundError, OSError, ValueError) as exc:
            raise RevisionsNotOk(f"{pin.repo} has no snapshot offline", evidence={"cache": str(cache), "error": str(exc)},
                                 hint="download it: invoke setup.download") from exc
        if Path(path).name != pin.revision:
            raise RevisionsNotOk(f"{pin.repo} resolves to {Path(path).name}, not the pinned {pin.revision}",
                                 evidence={"snapshot": path, "refs/main": str(cache / pin.cache_folder / "refs" / "main")},
                                 hint="invoke setup.download writes refs/main for each pin")
        lines.append(f"{pin.repo} {pin.revision}")
        progress(lines[-1])
        if pin.samples and python is not None:
            count = _count_split(pin, python, checkout)
            if count != pin.samples:
                raise RevisionsNotOk(f"{pin.repo} split {pin.split} has {count} samples, not {pin.samples}",
                                     hint="download the pinned revision again: invoke setup.download")
            progress(f"{pin.repo} split {pin.split}: {count} samples")
    return lines


def _count_split(pin: Pin, python: Path, checkout: Path | None) -> int:
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    done = subprocess.run([str(python), str(Path(__file__).with_name("seedtts_count.py")), pin.repo, pin.split],
                          cwd=checkout, env=env, capture_output=True, text=True, timeout=1800, check=False)
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines or not lines[-1].isdigit():
        raise RevisionsNotOk(f"the checkout could not load {pin.repo} split {pin.split} offline",
                             evidence={"output": (done.stdout + done.stderr).strip()[-2000:]},
                             hint="download it: invoke setup.download")
    return int(lines[-1])
