"""Text-audio consistency WER, as CI stage 10 and the runbook call it.

``compute_text_audio_consistency_from_records(records, lang, device, asr_router_port=...,
asr_concurrency=...)``: the reference is each record's own text reply (``raw_response``), the
hypothesis the ASR server's transcript of its WAV (``wav_path``). Written with omnibench's ASR
client and WER code; ``device`` is accepted and unused (the ASR is a server).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

ASR_MODEL = "Qwen/Qwen3-ASR-1.7B"


def _wav(record: dict[str, Any]) -> Path | None:
    path = record.get("wav_path")
    return Path(path) if record.get("is_success") and path else None


def compute_text_audio_consistency_from_records(records: list[dict[str, Any]], lang: str, device: str, *,
                                                asr_router_port: int = 8000, asr_concurrency: int = 4,
                                                asr_model: str = ASR_MODEL, host: str = "127.0.0.1"
                                                ) -> dict[str, Any]:
    """``{"summary": {...}, "per_sample": [...]}``; the summary has sglang-omni's keys, speed fields
    from each record's ``latency_s`` and ``audio_duration_s``."""
    from omnibench_core.scoring import wer
    from omnibench_core.scoring.asr_client import transcribe_files

    heard = transcribe_files([_wav(r) for r in records], url=f"http://{host}:{asr_router_port}/v1/audio/transcriptions",
                             model=asr_model, lang=lang, concurrency=asr_concurrency)
    scored = wer.score_transcripts([
        ({"sample_id": r.get("sample_id"), "reference": r.get("raw_response"), "transcript": text},
         r.get("raw_response") or "", text, error, wer.Timing.of(r))
        for r, (text, error) in zip(records, heard, strict=True)])
    return {"summary": scored.summary(lang), "per_sample": scored.records}
