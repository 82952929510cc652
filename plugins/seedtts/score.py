"""seed-tts scoring for targets without sglang-omni's scorers: the SIM and UTMOS substitutes
(see omnibench_core.scoring.voice), written as sglang-omni's ``--similarity-only`` and
``--utmos-only`` write theirs, key for key (:mod:`.voice_files`). WER is the ``asr-wer`` scorer's.

    python -m omnibench_plugins.seedtts.score similarity --output-dir out --meta meta.lst
    python -m omnibench_plugins.seedtts.score utmos --output-dir out
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import soundfile as sf

from omnibench_core.plugin import Progress, mean, median, percentile, read_json, voice, write_json

from . import voice_files
from .data import load_meta


def generated(output_dir: Path) -> list[dict[str, Any]]:
    """The rows of ``generated.json`` the client wrote."""
    return read_json(output_dir / "generated.json")


def wav_for(output_dir: Path, row: dict[str, Any]) -> Path:
    """The sample's WAV: ``wav_path`` if it exists, else ``audio/<id>.wav`` (a run moved aside)."""
    path = Path(row.get("wav_path") or "")
    return path if row.get("wav_path") and path.is_file() else output_dir / "audio" / f"{row.get('sample_id')}.wav"


def read_audio(path: Path) -> tuple[np.ndarray, int]:
    """Mono float samples and rate."""
    samples, rate = sf.read(path, dtype="float32", always_2d=True)
    return samples.mean(axis=1), int(rate)


def _generation_model(output_dir: Path) -> str | None:
    """The model the client asked, from its ``speed_results.json`` (upstream records its ``--model``)."""
    try:
        config = read_json(output_dir / "speed_results.json").get("config") or {}
    except (OSError, ValueError, AttributeError):
        return None
    model = config.get("model")
    return model if isinstance(model, str) else None


def _score(key: str, output_dir: Path, rows: list[dict[str, Any]], skip: Callable[[dict[str, Any], Path | None], str | None],
           compute: Callable[[dict[str, Any], Path], float | None], none_means: str,
           refs: dict[str, str] | None = None) -> list[voice_files.Scored]:
    """Each row with its score, or why it has none: upstream's skip reason, else the substitute
    that could not read or measure the audio (``none_means`` when it measured nothing)."""
    out: list[voice_files.Scored] = []
    with Progress(len(rows), f"{key} scored") as progress:
        for row in rows:
            wav = wav_for(output_dir, row)
            found = wav if wav.is_file() else None
            ref = (refs or {}).get(str(row.get("sample_id")))
            scored = voice_files.Scored(row, str(found or ""), skipped=skip(row, found), ref=ref)
            if found is not None and scored.skipped is None:
                try:
                    value = compute(row, found)
                    scored = replace(scored, value=value, failed=none_means if value is None else None)
                except (KeyError, ValueError, RuntimeError, OSError) as exc:
                    scored = replace(scored, failed=f"{type(exc).__name__}: {exc}")
            out.append(scored)
            progress.tick(scored.ok)
    return out


def similarity(output_dir: Path, *, meta: str, model: str | None = None,
               max_samples: int | None = None) -> dict[str, Any]:
    """Speaker similarity of each generated WAV to its reference; ``similarity_results.json``.
    ``model`` (upstream's ``--model``) defaults to the generation's; ``max_samples`` keeps the first
    N entries of ``generated.json``, as upstream's."""
    refs = {s.sample_id: s.ref_audio for s in load_meta(meta)}

    def compute(row: dict[str, Any], wav: Path) -> float | None:
        ref = voice.speaker_embedding(*read_audio(Path(refs[row["sample_id"]])))
        return voice.similarity(ref, voice.speaker_embedding(*read_audio(wav)))

    scored = _score("similarity", output_dir, generated(output_dir)[:max_samples],
                    lambda row, wav: voice_files.similarity_skip_reason(row, wav, refs), compute, voice_files.SILENT,
                    refs)
    values = [s.value for s in scored if s.ok and s.value is not None]
    result = {"summary": voice_files.similarity_summary(mean(values), len(scored), len(values), voice.SIM_METHOD),
              "config": voice_files.similarity_config(model or _generation_model(output_dir), meta, max_samples,
                                                      voice.SIM_METHOD),
              "per_sample": voice_files.similarity_rows(scored)}
    write_json(output_dir / "similarity_results.json", result)
    return result


def utmos(output_dir: Path, *, model: str | None = None) -> dict[str, Any]:
    """Speech quality of each generated WAV (the local substitute); ``utmos_results.json``.
    ``model`` (upstream's ``--model``) defaults to the generation's."""
    scored = _score("utmos", output_dir, generated(output_dir), voice_files.utmos_skip_reason,
                    lambda row, wav: voice.quality(*read_audio(wav)), voice_files.SILENT_OR_NON_FINITE)
    values = [s.value for s in scored if s.ok and s.value is not None]
    summary = voice_files.utmos_summary(mean(values), median(values), percentile(values, 5), percentile(values, 95),
                                        len(scored), len(values), voice.QUALITY_METHOD)
    result = {"summary": summary, "config": voice_files.utmos_config(model or _generation_model(output_dir),
                                                                    voice.QUALITY_METHOD),
              "per_sample": [voice_files.utmos_row(s) for s in scored]}
    write_json(output_dir / "utmos_results.json", result)
    return result


def main(argv: list[str] | None = None) -> int:
    """``similarity`` or ``utmos`` on a client's output directory."""
    parser = argparse.ArgumentParser(prog="python -m omnibench_plugins.seedtts.score")
    sub = parser.add_subparsers(dest="mode", required=True)
    s = sub.add_parser("similarity", help="speaker similarity to the references (local substitute)")
    s.add_argument("--meta", required=True)
    s.add_argument("--max-samples", type=int, default=None, help="the first N generated entries only")
    sub.add_parser("utmos", help="speech quality (local substitute)")
    for p in (s, sub.choices["utmos"]):
        p.add_argument("--output-dir", required=True, type=Path)
        p.add_argument("--model", default=None, help="recorded in config (default: the generation's model)")
    a = parser.parse_args(argv)
    if a.mode == "similarity":
        out = similarity(a.output_dir, meta=a.meta, model=a.model, max_samples=a.max_samples)
    else:
        out = utmos(a.output_dir, model=a.model)
    print({k: v for k, v in out["summary"].items() if not isinstance(v, str)}, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
