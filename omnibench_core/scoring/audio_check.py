"""The runbook's audio checks (files, empty or NaN, sample rates) without decoding every file.

An integer PCM WAV cannot hold NaN, so its header answers both questions; only float WAVs (and
unreadable ones) are decoded. Headers are read on a small thread pool (the work is I/O).
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import soundfile as sf

_FLOAT_SUBTYPES = {"FLOAT", "DOUBLE"}


@dataclass(frozen=True)
class FileCheck:
    """One file: its rate, and whether it is empty, NaN or unreadable."""

    path: str
    rate: int = 0
    frames: int = 0
    bad: str = ""  # "", "empty", "nan" or "unreadable: ..."


@dataclass(frozen=True)
class AudioCheck:
    """All files of a check."""

    files: int
    empty_or_nan: int
    rates: tuple[int, ...]
    problems: tuple[FileCheck, ...] = field(default=())


def check_file(path: str | Path) -> FileCheck:
    """Header first; decode only when the subtype can hold NaN."""
    try:
        info = sf.info(str(path))
        if info.frames == 0:
            return FileCheck(str(path), int(info.samplerate), 0, "empty")
        if info.subtype in _FLOAT_SUBTYPES:
            data, _ = sf.read(str(path), dtype="float32")
            if np.isnan(data).any():
                return FileCheck(str(path), int(info.samplerate), int(info.frames), "nan")
        return FileCheck(str(path), int(info.samplerate), int(info.frames))
    except (RuntimeError, sf.LibsndfileError, OSError) as exc:
        return FileCheck(str(path), bad=f"unreadable: {exc}")


def check_files(paths: Sequence[str | Path], workers: int = 8) -> AudioCheck:
    """Check every file; unreadable files count as empty (their audio cannot be used)."""
    with ThreadPoolExecutor(max_workers=workers) as pool:
        results = list(pool.map(check_file, paths))
    problems = tuple(r for r in results if r.bad)
    rates = tuple(sorted({r.rate for r in results if r.rate}))
    return AudioCheck(len(results), len(problems), rates, problems)


def run_audio_summary(run_dir: Path) -> tuple[dict[str, int], tuple[int, ...], tuple[tuple[str, bool, str], ...]]:
    """The runbook's run-wide audio figures over ``<run>/*/audio/*.wav``.

    Returns ``audio.files`` and ``audio.empty_or_nan``, the sample rates, and the rules
    (name, ok, detail): at least one file, and no empty or NaN audio. Empty when no workload
    of the run has an ``audio`` folder.
    """
    if not any(p.is_dir() for p in run_dir.glob("*/audio")):
        return {}, (), ()
    check = check_files(sorted(run_dir.glob("*/audio/*.wav")))
    bad = "; ".join(f"{Path(p.path).parent.parent.name}/{Path(p.path).name}: {p.bad}" for p in check.problems[:5])
    rules = (("speech files exist", check.files > 0, f"{check.files} WAVs"),
             ("no empty or NaN audio", check.empty_or_nan == 0, bad))
    return {"audio.files": check.files, "audio.empty_or_nan": check.empty_or_nan}, check.rates, rules
