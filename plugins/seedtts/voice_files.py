"""``similarity_results.json`` and ``utmos_results.json`` as sglang-omni's ``--similarity-only`` and
``--utmos-only`` of the runbook's era write them, key for key, with their skip reasons; omnibench's
own keys (the substitute's ``method``) follow upstream's.

Upstream's definitions (facts, recorded in ``tests/fixtures/upstream/output-keys.json`` as
``seedtts_similarity_results`` and ``seedtts_utmos_results``): ``run_seedtts_similarity`` and
``run_seedtts_utmos``, stevejake007/sglang-omni ``benchmarks/tasks/tts.py`` at 8a6fc24123ce.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# The substitutes are numpy on the CPU, and load no checkpoint (upstream: --device, WavLM weights).
DEVICE = "cpu"
SILENT = "silent or empty audio"
SILENT_OR_NON_FINITE = "silent, empty or non-finite audio"

SIM_SUMMARY_KEYS = ("speaker_similarity_mean", "total_samples", "evaluated", "skipped")
SIM_CONFIG_KEYS = ("model", "meta", "device", "max_samples", "similarity_checkpoint")
SIM_SAMPLE_KEYS = ("id", "ref_audio", "wav_path", "speaker_similarity", "is_success", "error")
UTMOS_SUMMARY_KEYS = ("utmos_mean", "utmos_median", "utmos_p5", "utmos_p95", "total_samples", "evaluated", "skipped")
UTMOS_CONFIG_KEYS = ("model", "device")
UTMOS_SAMPLE_KEYS = ("id", "wav_path", "utmos_score", "is_success", "error")
# omnibench's own, after upstream's: what the substitute measures (reports name it).
OWN_SUMMARY_KEYS = ("method",)
OWN_CONFIG_KEYS = ("method",)


def _failed_generation(row: Mapping[str, Any]) -> str:
    return str(row.get("error") or "generation reported is_success=False")


def _missing_wav(row: Mapping[str, Any]) -> str:
    wav_path = row.get("wav_path")
    if not (isinstance(wav_path, str) and wav_path):
        return "wav_path missing from generated.json entry"
    return f"wav file not on disk: {wav_path}"


def similarity_skip_reason(row: Mapping[str, Any], wav: Path | None, refs: Mapping[str, str]) -> str | None:
    """Why upstream would not score this ``generated.json`` entry (None: it would): a failed
    generation, no WAV (``wav``: the file found, None when none is), no reference for the id in
    the meta, or a reference that is not on disk; its texts, in its order."""
    sample_id = row.get("sample_id")
    if not row.get("is_success"):
        return _failed_generation(row)
    if wav is None:
        return _missing_wav(row)
    if sample_id not in refs:
        return f"no reference audio in meta for sample_id {sample_id!r}"
    if not os.path.isfile(refs[sample_id]):
        return f"reference audio not on disk: {refs[sample_id]}"
    return None


@dataclass(frozen=True)
class Scored:
    """One ``generated.json`` entry as a scorer saw it: the WAV it found (``""`` when none), the
    score, and why there is none: ``skipped`` (upstream's checks refused the entry) or ``failed``
    (the substitute could not read or measure the audio). ``ref``: the meta's reference (SIM)."""

    row: Mapping[str, Any]
    wav: str
    value: float | None = None
    skipped: str | None = None
    failed: str | None = None
    ref: str | None = None

    @property
    def error(self) -> str | None:
        """The row's ``error``: the skip reason or the substitute's failure."""
        return self.skipped or self.failed

    @property
    def ok(self) -> bool:
        """Scored: neither skipped nor failed, with a value."""
        return self.error is None and self.value is not None


def similarity_rows(scored: Sequence[Scored]) -> list[dict[str, Any]]:
    """``per_sample``: the scored rows first (absolute paths), then the others, as upstream orders
    them; an entry upstream's checks skip keeps its own ``wav_path`` and the meta's reference (null
    when none), one the substitute could not measure the absolute paths it read."""
    done, skipped = [], []
    for s in scored:
        paths = (s.ref, s.row.get("wav_path")) if s.skipped else (os.path.abspath(s.ref or ""), os.path.abspath(s.wav))
        record = dict(zip(SIM_SAMPLE_KEYS, (s.row.get("sample_id"), *paths, s.value if s.ok else None, s.ok,
                                            s.error), strict=True))
        (done if s.ok else skipped).append(record)
    return done + skipped


def similarity_summary(similarity_mean: float | None, total: int, evaluated: int, method: str) -> dict[str, Any]:
    """The ``summary``: upstream's keys (the mean unrounded, null when none was scored), then ``method``."""
    return {**dict(zip(SIM_SUMMARY_KEYS, (similarity_mean, total, evaluated, total - evaluated), strict=True)),
            "method": method}


def similarity_config(model: str | None, meta: str, max_samples: int | None, method: str) -> dict[str, Any]:
    """The ``config``: upstream's keys (no checkpoint: the substitute loads none), then ``method``."""
    return {**dict(zip(SIM_CONFIG_KEYS, (model, meta, DEVICE, max_samples, None), strict=True)), "method": method}


def utmos_skip_reason(row: Mapping[str, Any], wav: Path | None) -> str | None:
    """Why upstream would not score this entry (None: it would): no sample id, a failed
    generation, no WAV; its texts, in its order."""
    sample_id = row.get("sample_id")
    if not (isinstance(sample_id, str) and sample_id):
        return "sample_id missing from generated.json entry"
    if not row.get("is_success"):
        return _failed_generation(row)
    if wav is None:
        return _missing_wav(row)
    return None


def utmos_row(s: Scored) -> dict[str, Any]:
    """One ``per_sample`` row, in ``generated.json``'s order: the score to 4 places; a skipped
    entry keeps its own ``wav_path`` (``id`` falls back to it, as upstream's)."""
    wav_path = s.row.get("wav_path") if s.skipped else s.wav
    score = round(s.value, 4) if s.ok and s.value is not None else None
    return dict(zip(UTMOS_SAMPLE_KEYS, (s.row.get("sample_id") or s.row.get("wav_path"), wav_path, score, s.ok,
                                        s.error), strict=True))


def _r4(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


def utmos_summary(utmos_mean: float | None, utmos_median: float | None, p5: float | None, p95: float | None,
                  total: int, evaluated: int, method: str) -> dict[str, Any]:
    """The ``summary``: upstream's keys (the scores to 4 places, null when none was scored), then ``method``."""
    values = (_r4(utmos_mean), _r4(utmos_median), _r4(p5), _r4(p95), total, evaluated, total - evaluated)
    return {**dict(zip(UTMOS_SUMMARY_KEYS, values, strict=True)), "method": method}


def utmos_config(model: str | None, method: str) -> dict[str, Any]:
    """The ``config``: upstream's keys, then ``method``."""
    return {**dict(zip(UTMOS_CONFIG_KEYS, (model, DEVICE), strict=True)), "method": method}
