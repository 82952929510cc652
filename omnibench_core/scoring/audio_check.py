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
