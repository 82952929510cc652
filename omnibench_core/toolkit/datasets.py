"""Data sets a project makes once into a cache folder: built aside, then renamed into place."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

from ..errors import SettingsError
from ..store.names import path_problem


def default_cache_dir() -> Path:
    """``$OMNIBENCH_CACHE`` or ``~/.cache/omnibench``."""
    return Path(os.environ.get("OMNIBENCH_CACHE") or Path.home() / ".cache" / "omnibench")


def dataset_folder(configured: str | os.PathLike[str] | None, set_name: str, option: str) -> Path:
    """Where the set ``set_name`` lives: ``configured`` (a workload's ``data_dir`` option, named
    ``option`` in errors), else ``<cache>/<set_name>``. A set is built aside and renamed into
    place, so a configured folder needs a name of its own: the file system's root (``/``) or a
    file is a SettingsError naming the option, before any step runs."""
    if not configured:
        return default_cache_dir() / set_name
    if path_problem(configured):
        raise SettingsError(f"-o {option}={str(configured)[:60]}... refused: {path_problem(configured)}",
                            evidence={"option": option}, hint="name a folder of its own for the set")
    folder = Path(configured).expanduser()
    resolved = folder.resolve()
    why = ("is the file system's root: a set is made as a folder of its own" if not resolved.name else
           "is a file, not a folder" if resolved.exists() and not resolved.is_dir() else "")
    if why:
        raise SettingsError(f"-o {option}={configured} refused: {resolved} {why}",
                            evidence={"option": option, "given": str(configured)},
                            hint=f"name a folder of its own for the set, e.g. {default_cache_dir() / set_name}")
    return folder


def build_once(folder: Path, name: str, build: Callable[[Path], int]) -> Path:
    """Make the set ``name`` in ``folder`` unless a complete one is there.

    ``build(work)`` fills a temporary sibling folder and returns the sample count; it is renamed
    into place only once complete, with ``dataset.json`` (name, samples) as the completion mark,
    so an interrupted build leaves nothing half-made behind.
    """
    if is_complete(folder, name):
        return folder
    folder.parent.mkdir(parents=True, exist_ok=True)
    # Two processes making the same set at once (two runs, or test workers) take turns: the second
    # waits for the first and then finds the set complete.
    with open(folder.with_name(f".{folder.name}.lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if is_complete(folder, name):
            return folder
        return _build(folder, name, build)


def _build(folder: Path, name: str, build: Callable[[Path], int]) -> Path:
    if folder.exists():
        raise FileExistsError(f"{folder} exists but is not a complete {name}; remove it to rebuild")
    work = folder.with_name(f".{folder.name}.tmp-{os.getpid()}")
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    try:
        samples = build(work)
        (work / "dataset.json").write_text(json.dumps({"name": name, "samples": samples}, indent=2))
        os.rename(work, folder)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    return folder


def is_complete(folder: Path, name: str) -> bool:
    """True when ``folder`` holds a finished build of ``name``."""
    try:
        info = json.loads((folder / "dataset.json").read_text())
    except (OSError, ValueError):
        return False
    return info.get("name") == name and isinstance(info.get("samples"), int)
