"""sglang-omni's seed-tts transcription files, key for key: ``wer_results.json``'s per-sample rows,
``wer_results.csv`` and ``asr_speed_results.json`` (``save_wer_results`` and
``run_seedtts_transcribe`` of ``benchmarks/tasks/tts.py``, stevejake007/sglang-omni at
8a6fc24123ce; ``calculate_asr_speed_metrics`` of ``benchmarks/metrics/wer.py``, sgl-project at
01782f8f471c; recorded in ``tests/fixtures/upstream/output-keys.json``).

Pure functions of what the scorer already has: each generated row, its transcript or error, its
ASR request's latency, and the sample's alignment counts when it was evaluated. As for the WER
summary, omnibench writes None where upstream writes 0.0 for "nothing evaluated".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..stats.percentiles import mean, median, percentile

PER_SAMPLE_KEYS = ("id", "target_text", "whisper_text", "ref_norm", "hyp_norm", "wer", "substitutions", "deletions",
                   "insertions", "hits", "audio_duration_s", "latency_s", "is_success", "error")
CSV_COLUMNS = ("id", "target_text", "whisper_text", "wer", "substitutions", "deletions", "insertions", "hits",
               "audio_duration_s", "latency_s", "is_success", "error")
ASR_SPEED_KEYS = ("total_samples", "evaluated", "skipped", "asr_latency_mean_s", "asr_latency_median_s",
                  "asr_latency_p95_s", "asr_latency_p99_s", "asr_total_time_s", "asr_latency_sum_s",
                  "asr_throughput_samples_per_s", "asr_rtf_mean", "asr_rtf_median", "asr_audio_processed_s",
                  "asr_model", "asr_concurrency")
# the transcription's ``config``: upstream's keys (its seed-tts ``wer_config``), then omnibench's
CONFIG_KEYS = ("model", "tts_model", "asr_model", "speaker", "voice_clone", "meta", "max_samples", "asr_concurrency")
OWN_CONFIG_KEYS = ("asr", "lang", "normalizer", "aligner")
EMPTY_REFERENCE = "Empty reference after normalization"  # upstream's apply_wer


@dataclass(frozen=True)
class Heard:
    """One generated row as the scorer saw it: the transcript (None when there is none), the ASR
    error, the ASR request's seconds (0 when none was sent)."""

    transcript: str | None
    error: str
    asr_latency_s: float = 0.0


def _number(row: Mapping[str, Any], key: str) -> float:
    value = row.get(key)
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0.0


def per_sample_row(row: Mapping[str, Any], reference: str, heard: Heard, record: Mapping[str, Any],
                   *, id_field: str = "sample_id") -> dict[str, Any]:
    """One ``per_sample`` row: ``record`` is omnibench's scored record (``wer`` in it when the sample
    was evaluated). Generation's latency and audio length to 4 places; WER to 6; counts null unless
    evaluated; upstream's error texts for a failed generation, a missing transcript, an empty reference."""
    evaluated = "wer" in record
    if not row.get("is_success"):
        error: str | None = f"Generation failed: {row.get('error') or 'unknown'}"
    elif heard.transcript is None:
        error = heard.error or "No transcription"
    else:
        error = None if evaluated else EMPTY_REFERENCE
    hyp_norm = record.get("hyp_norm", "")
    if heard.transcript is not None and not evaluated and row.get("is_success"):
        from .wer import normalize  # upstream normalises the hypothesis before it checks the reference

        hyp_norm = normalize(heard.transcript)
    counts = {key: record[key] if evaluated else None for key in ("substitutions", "deletions", "insertions", "hits")}
    return {"id": row.get(id_field), "target_text": reference,
            "whisper_text": heard.transcript if heard.transcript is not None and row.get("is_success") else "",
            "ref_norm": record.get("ref_norm", ""), "hyp_norm": hyp_norm,
            "wer": round(float(record["wer"]), 6) if evaluated else None, **counts,
            "audio_duration_s": round(_number(row, "audio_duration_s"), 4),
            "latency_s": round(_number(row, "latency_s"), 4), "is_success": evaluated, "error": error}


def csv_row(sample: Mapping[str, Any]) -> list[Any]:
    """One ``wer_results.csv`` row from a ``per_sample`` row: WER as ``%.6f``, times as ``%.4f``,
    an empty cell where the sample was not evaluated."""
    ok = sample["is_success"]
    return [sample["id"], sample["target_text"], sample["whisper_text"], f"{sample['wer']:.6f}" if ok else "",
            *(sample[k] if ok else "" for k in ("substitutions", "deletions", "insertions", "hits")),
            f"{sample['audio_duration_s']:.4f}", f"{sample['latency_s']:.4f}", ok, sample["error"] or ""]


def asr_speed(per_sample: Sequence[Mapping[str, Any]], heard: Sequence[Heard], wall_time_s: float, *,
              asr_model: str, asr_concurrency: int) -> dict[str, Any]:
    """``asr_speed_results.json``: over evaluated samples whose ASR request took time, the ASR
    latencies, their sum, the transcription window (else the sum), samples per second, ASR
    latency over the generated audio's length, and that audio's total."""
    ok = [(h.asr_latency_s, float(s["audio_duration_s"])) for s, h in zip(per_sample, heard, strict=True)
          if s["is_success"] and h.asr_latency_s > 0]
    latencies = [latency for latency, _ in ok]
    total = float(wall_time_s) if wall_time_s > 0 else sum(latencies)
    rtfs = [latency / audio for latency, audio in ok if audio > 0]
    audio = [a for _, a in ok if a > 0]
    out = {"total_samples": len(per_sample), "evaluated": len(ok), "skipped": len(per_sample) - len(ok),
           "asr_latency_mean_s": mean(latencies), "asr_latency_median_s": median(latencies),
           "asr_latency_p95_s": percentile(latencies, 95), "asr_latency_p99_s": percentile(latencies, 99),
           "asr_total_time_s": total if ok else None, "asr_latency_sum_s": sum(latencies) if ok else None,
           "asr_throughput_samples_per_s": len(ok) / total if ok and total > 0 else None,
           "asr_rtf_mean": mean(rtfs), "asr_rtf_median": median(rtfs),
           "asr_audio_processed_s": sum(audio) if ok else None, "asr_model": asr_model,
           "asr_concurrency": asr_concurrency}
    return {key: out[key] for key in ASR_SPEED_KEYS}


def transcription_config(generation: Mapping[str, Any], own: Mapping[str, Any], *, asr_model: str,
                         asr_concurrency: int) -> dict[str, Any]:
    """The ``config``: upstream's keys from the generation's own config (its ``model`` is also the
    TTS model; null where the generation recorded none), then omnibench's ``own`` keys."""
    values = {"model": generation.get("model"), "tts_model": generation.get("model"), "asr_model": asr_model,
              "speaker": generation.get("speaker"), "voice_clone": generation.get("voice_clone"),
              "meta": generation.get("meta"), "max_samples": generation.get("max_samples"),
              "asr_concurrency": asr_concurrency}
    return {**{key: values[key] for key in CONFIG_KEYS}, **{key: own[key] for key in OWN_CONFIG_KEYS}}
