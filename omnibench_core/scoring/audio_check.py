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


# Where a run's WAVs are: each workload's ``audio`` folder, and the folder of each level and repeat
# of sglang-omni's own sweep (``seedtts/c<level>_r<k>/audio``, docs/sweep.md), which has no other.
AUDIO_FOLDERS = ("*/audio", "*/c*_r*/audio")


def run_audio_summary(run_dir: Path) -> tuple[dict[str, int], tuple[int, ...], tuple[tuple[str, bool, str], ...]]:
    """The runbook's run-wide audio figures over the run's WAVs (:data:`AUDIO_FOLDERS`).

    Returns ``audio.files`` and ``audio.empty_or_nan``, the sample rates, and the rules
    (name, ok, detail): at least one file, and no empty or NaN audio. Empty when no workload
    of the run has an ``audio`` folder.
    """
    folders = sorted({d for pattern in AUDIO_FOLDERS for d in run_dir.glob(pattern) if d.is_dir()})
    if not folders:
        return {}, (), ()
    check = check_files(sorted(p for d in folders for p in d.glob("*.wav")))
    bad = "; ".join(f"{Path(p.path).relative_to(run_dir).parent.parent}/{Path(p.path).name}: {p.bad}"
                    for p in check.problems[:5])
    rules = (("speech files exist", check.files > 0, f"{check.files} WAVs"),
             ("no empty or NaN audio", check.empty_or_nan == 0, bad))
    return {"audio.files": check.files, "audio.empty_or_nan": check.empty_or_nan}, check.rates, rules
