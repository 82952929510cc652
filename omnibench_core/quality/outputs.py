"""A run's per-sample outputs, read from the files its workloads already write.

- Video-AMME: ``videoamme/videoamme_results.json``'s ``per_sample`` (the answer letter and whether
  it is right);
- seed-tts: ``wer_results.json``'s ``per_sample`` (the transcript, its WER, its reference words)
  and the similarity file's ``per_sample`` (the speaker similarity), wherever under the run they are.

A sample that failed, or was not scored, is left out (it has no output to compare).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

VIDEOAMME = "videoamme"
SEEDTTS = "seedtts"


@dataclass(frozen=True)
class SampleOutput:
    """One sample's output in one run: ``text`` is what is compared between runs (an answer letter,
    a transcript); ``correct``, ``wer``, ``words`` and ``sim`` are None where the workload has none."""

    text: str
    correct: bool | None = None
    wer: float | None = None
    words: int | None = None  # reference words (hits + substitutions + deletions): corpus WER's weight
    sim: float | None = None


def _rows(path: Path) -> list[Mapping[str, Any]]:
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError):
        return []
    rows = doc.get("per_sample") if isinstance(doc, dict) else None
    return [r for r in rows if isinstance(r, dict)] if isinstance(rows, list) else []


def _videoamme(run_dir: Path) -> dict[str, SampleOutput]:
    out = {}
    for r in _rows(run_dir / VIDEOAMME / "videoamme_results.json"):
        if r.get("is_success") and r.get("sample_id") is not None:
            out[str(r["sample_id"])] = SampleOutput(str(r.get("predicted") or ""), bool(r.get("is_correct")))
    return out


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _seedtts(run_dir: Path) -> dict[str, SampleOutput]:
    found = sorted(run_dir.glob(f"{SEEDTTS}*/**/wer_results.json")) or sorted(run_dir.glob("**/wer_results.json"))
    if not found:
        return {}
    sims = {}
    for path in sorted(found[0].parent.glob("similarity_results.json")):
        sims = {str(r.get("id")): _number(r.get("speaker_similarity")) for r in _rows(path) if r.get("is_success")}
    out = {}
    for r in _rows(found[0]):
        wer = _number(r.get("wer"))
        if r.get("id") is None or wer is None:
            continue
        counts = [_number(r.get(k)) for k in ("hits", "substitutions", "deletions")]
        words = int(sum(c for c in counts if c is not None)) if all(c is not None for c in counts) else None
        out[str(r["id"])] = SampleOutput(str(r.get("hyp_norm") or r.get("whisper_text") or ""), None, wer, words,
                                         sims.get(str(r["id"])))
    return out


def read_outputs(run_dir: Path) -> dict[str, dict[str, SampleOutput]]:
    """Each workload's outputs in the run, by sample id (workloads with none are left out)."""
    found = {VIDEOAMME: _videoamme(run_dir), SEEDTTS: _seedtts(run_dir)}
    return {w: rows for w, rows in found.items() if rows}
