"""seed-tts scoring for targets without sglang-omni's scorers: the SIM and UTMOS substitutes
(see omnibench_core.scoring.voice), with the same files and fields as sglang-omni's
``--similarity-only`` and ``--utmos-only``. WER is the ``asr-wer`` scorer's.

    python -m omnibench_plugins.seedtts.score similarity --output-dir out --meta meta.lst
    python -m omnibench_plugins.seedtts.score utmos --output-dir out
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import soundfile as sf

from omnibench_core.plugin import Progress, mean, median, percentile, read_json, voice, write_json

from .data import load_meta


def generated(output_dir: Path) -> list[dict[str, Any]]:
    """The rows of ``generated.json`` the client wrote."""
    return read_json(output_dir / "generated.json")


def wav_for(output_dir: Path, row: dict[str, Any]) -> Path:
    """The sample's WAV: ``wav_path`` if it exists, else ``audio/<id>.wav`` (a run moved aside)."""
    path = Path(row.get("wav_path") or "")
    return path if row.get("wav_path") and path.is_file() else output_dir / "audio" / f"{row['sample_id']}.wav"


def read_audio(path: Path) -> tuple[np.ndarray, int]:
    """Mono float samples and rate."""
    samples, rate = sf.read(path, dtype="float32", always_2d=True)
    return samples.mean(axis=1), int(rate)


def _score_each(output_dir: Path, key: str, compute: Callable[[dict[str, Any]], float | None],
                none_means: str) -> tuple[list[dict[str, Any]], list[float]]:
    """Run ``compute`` on each generated row; a failure or None is that sample's recorded error."""
    per_sample, values = [], []
    rows = generated(output_dir)
    with Progress(len(rows), f"{key} scored") as progress:
        for row in rows:
            record: dict[str, Any] = {"id": row["sample_id"], key: None, "error": ""}
            try:
                if not row.get("is_success"):
                    raise ValueError("generation failed")
                record[key] = compute(row)
                if record[key] is None:
                    raise ValueError(none_means)
                values.append(record[key])
            except (KeyError, ValueError, RuntimeError, OSError) as exc:
                record["error"] = f"{type(exc).__name__}: {exc}"
            per_sample.append(record)
            progress.tick(not record["error"])
    return per_sample, values


def _counts(per_sample: list[dict[str, Any]], values: list[float]) -> dict[str, int]:
    return {"total_samples": len(per_sample), "evaluated": len(values), "skipped": len(per_sample) - len(values)}


def similarity(output_dir: Path, *, meta: str) -> dict[str, Any]:
    """Speaker similarity of each generated WAV to its reference; ``similarity_results.json``."""
    refs = {s.sample_id: s.ref_audio for s in load_meta(meta)}

    def compute(row: dict[str, Any]) -> float | None:
        ref = voice.speaker_embedding(*read_audio(Path(refs[row["sample_id"]])))
        return voice.similarity(ref, voice.speaker_embedding(*read_audio(wav_for(output_dir, row))))

    per_sample, values = _score_each(output_dir, "similarity", compute, "silent or empty audio")
    summary = {"speaker_similarity_mean": mean(values), **_counts(per_sample, values), "method": voice.SIM_METHOD}
    result = {"summary": summary, "config": {"method": voice.SIM_METHOD, "meta": meta}, "per_sample": per_sample}
    write_json(output_dir / "similarity_results.json", result)
    return result


def utmos(output_dir: Path) -> dict[str, Any]:
    """Speech quality of each generated WAV (the local substitute); ``utmos_results.json``."""
    per_sample, values = _score_each(output_dir, "utmos", lambda row: voice.quality(*read_audio(wav_for(output_dir, row))),
                                     "silent, empty or non-finite audio")
    summary = {"utmos_mean": mean(values), "utmos_median": median(values), "utmos_p5": percentile(values, 5),
               "utmos_p95": percentile(values, 95), **_counts(per_sample, values), "method": voice.QUALITY_METHOD}
    result = {"summary": summary, "config": {"method": voice.QUALITY_METHOD}, "per_sample": per_sample}
    write_json(output_dir / "utmos_results.json", result)
    return result


def main(argv: list[str] | None = None) -> int:
    """``similarity`` or ``utmos`` on a client's output directory."""
    parser = argparse.ArgumentParser(prog="python -m omnibench_plugins.seedtts.score")
    sub = parser.add_subparsers(dest="mode", required=True)
    s = sub.add_parser("similarity", help="speaker similarity to the references (local substitute)")
    s.add_argument("--meta", required=True)
    sub.add_parser("utmos", help="speech quality (local substitute)")
    for p in (s, sub.choices["utmos"]):
        p.add_argument("--output-dir", required=True, type=Path)
    a = parser.parse_args(argv)
    if a.mode == "similarity":
        out = similarity(a.output_dir, meta=a.meta)
    else:
        out = utmos(a.output_dir)
    print({k: v for k, v in out["summary"].items() if not isinstance(v, str)}, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
