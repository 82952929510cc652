"""The seed-tts client's files as sglang-omni's client of the runbook's era writes them, key for key
and column for column, from the client's unrounded rows; omnibench's own keys follow upstream's.

Upstream's definitions (facts, recorded in ``tests/fixtures/upstream/output-keys.json``):
``_request_result_to_dict`` and ``RequestResult`` (stevejake007/sglang-omni
``benchmarks/metrics/performance.py`` and ``benchmarks/benchmarker/data.py`` at 1e1301bd0c6a),
``save_speed_results``, ``_request_result_to_generated_entry`` (``benchmarks/tasks/tts.py``) and
``_build_results_config`` (``benchmarks/eval/benchmark_omni_seedtts.py``), both at 8a6fc24123ce.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

TEXT_PREVIEW = 60  # upstream's TEXT_PREVIEW_LENGTH: per_request keeps the text's first 60 characters

# ``per_request`` entries: upstream's keys in its order (streaming fields null when not streaming,
# ``dispatch_lateness_s`` null when closed loop), then omnibench's own.
PER_REQUEST_KEYS = ("id", "text", "is_success", "latency_s", "audio_duration_s", "rtf", "prompt_tokens",
                    "completion_tokens", "output_token_rate", "wav_path", "error", "audio_ttfp_s", "text_ttft_s",
                    "inter_chunk_s", "chunk_audio_duration_s", "max_playback_underrun_s", "audio_chunk_count",
                    "first_audio_payload_bytes", "waited_for_slot", "dispatch_lateness_s")
OWN_PER_REQUEST_KEYS = ("engine_time_s", "streamed", "playback_stalls_100ms")

# ``results.csv``: upstream's columns in its order, nothing else (omnibench's keys are in the JSON).
RESULTS_CSV_COLUMNS = ("id", "text", "latency_s", "audio_duration_s", "rtf", "prompt_tokens", "completion_tokens",
                       "output_token_rate", "audio_ttfp_s", "audio_chunk_count", "first_audio_payload_bytes",
                       "is_success", "error")

# ``generated.json`` entries: upstream's keys (``error`` only when there is one), then omnibench's.
GENERATED_KEYS = ("sample_id", "target_text", "wav_path", "is_success", "latency_s", "audio_duration_s", "error")
OWN_GENERATED_KEYS = ("ref_audio",)

# ``warmup/results.json``'s ``results``: upstream writes each raw ``RequestResult`` (``asdict``),
# unrounded, with its zero defaults; omnibench's own keys follow.
RAW_RESULT_KEYS = ("request_id", "text", "is_success", "latency_s", "audio_duration_s", "rtf", "prompt_tokens",
                   "completion_tokens", "engine_time_s", "tok_per_s", "wav_path", "error", "audio_ttfp_s",
                   "inter_chunk_s", "chunk_audio_duration_s", "max_playback_underrun_s", "text_ttft_s",
                   "audio_chunk_count", "first_audio_payload_bytes", "waited_for_slot", "dispatch_lateness_s")
OWN_RAW_RESULT_KEYS = ("streamed", "playback_stalls_100ms")

# ``speed_results.json``'s ``config``: upstream's keys in its order, then omnibench's own.
CONFIG_KEYS = ("model", "base_url", "meta", "voice_clone", "reference_audio_field", "stream", "lang", "speaker",
               "max_samples", "max_new_tokens", "temperature", "seed", "talker_temperature", "talker_top_p",
               "talker_top_k", "talker_repetition_penalty", "warmup", "warmup_meta", "max_concurrency",
               "request_rate")
OWN_CONFIG_KEYS = ("client", "timeout_s", "port", "arrival_seed")


def _r(value: Any, places: int) -> float | None:
    return None if value is None else round(float(value), places)


def _number(row: Mapping[str, Any], key: str) -> float:
    """A timing upstream keeps as a float with a 0.0 default (a failed request's audio, its RTF)."""
    value = row.get(key)
    return 0.0 if value is None else float(value)


def _rounded_list(values: Sequence[float] | None) -> list[float] | None:
    return [round(float(v), 4) for v in values] if values else None


def per_request_entry(row: Mapping[str, Any]) -> dict[str, Any]:
    """One ``per_request`` entry (upstream's ``_request_result_to_dict``): times to 4 places, the
    token rate to 1; zero counts, empty lists, paths and errors as null; a failed request's audio
    duration and RTF 0.0 as upstream's defaults."""
    rate = row.get("output_token_rate")
    entry = {
        "id": row["id"], "text": row["text"][:TEXT_PREVIEW], "is_success": bool(row["is_success"]),
        "latency_s": round(_number(row, "latency_s"), 4), "audio_duration_s": round(_number(row, "audio_duration_s"), 4),
        "rtf": round(_number(row, "rtf"), 4), "prompt_tokens": row.get("prompt_tokens") or None,
        "completion_tokens": row.get("completion_tokens") or None,
        "output_token_rate": round(rate, 1) if rate else None, "wav_path": row.get("wav_path") or None,
        "error": row.get("error") or None, "audio_ttfp_s": _r(row.get("audio_ttfp_s"), 4),
        "text_ttft_s": _r(row.get("text_ttft_s"), 4), "inter_chunk_s": _rounded_list(row.get("inter_chunk_s")),
        "chunk_audio_duration_s": _rounded_list(row.get("chunk_audio_duration_s")),
        "max_playback_underrun_s": _r(row.get("max_playback_underrun_s"), 4),
        "audio_chunk_count": row.get("audio_chunk_count") or None,
        "first_audio_payload_bytes": row.get("first_audio_payload_bytes") or None,
        "waited_for_slot": bool(row.get("waited_for_slot")), "dispatch_lateness_s": _r(row.get("dispatch_lateness_s"), 4),
        "engine_time_s": _r(row.get("engine_time_s"), 4), "streamed": row.get("streamed"),
        "playback_stalls_100ms": row.get("playback_stalls_100ms"),
    }
    return {key: entry[key] for key in (*PER_REQUEST_KEYS, *OWN_PER_REQUEST_KEYS)}


def results_csv_row(row: Mapping[str, Any]) -> list[Any]:
    """One ``results.csv`` row (upstream's ``save_speed_results``): times as ``%.4f``, the token
    rate as ``%.1f``, an absent count, rate or first-audio time as an empty cell."""
    rate, ttfp = row.get("output_token_rate"), row.get("audio_ttfp_s")
    return [row["id"], row["text"][:TEXT_PREVIEW], f"{_number(row, 'latency_s'):.4f}",
            f"{_number(row, 'audio_duration_s'):.4f}", f"{_number(row, 'rtf'):.4f}", row.get("prompt_tokens") or "",
            row.get("completion_tokens") or "", f"{rate:.1f}" if rate else "",
            f"{ttfp:.4f}" if ttfp is not None else "", row.get("audio_chunk_count") or "",
            row.get("first_audio_payload_bytes") or "", bool(row["is_success"]), row.get("error") or ""]


def generated_entry(row: Mapping[str, Any], target_text: str, ref_audio: str) -> dict[str, Any]:
    """One ``generated.json`` entry (upstream's ``_request_result_to_generated_entry``): the WAV's
    path ("" when none), times to 4 places, ``error`` only when there is one; then ``ref_audio``."""
    entry: dict[str, Any] = {"sample_id": row["id"], "target_text": target_text, "wav_path": row.get("wav_path") or "",
                             "is_success": bool(row["is_success"]), "latency_s": round(_number(row, "latency_s"), 4),
                             "audio_duration_s": round(_number(row, "audio_duration_s"), 4)}
    if row.get("error"):
        entry["error"] = row["error"]
    entry["ref_audio"] = ref_audio
    return entry


def raw_result(row: Mapping[str, Any]) -> dict[str, Any]:
    """One ``warmup/results.json`` result as upstream's ``asdict(RequestResult)``: unrounded, its
    zero defaults (0.0, 0, "", []) where omnibench's row has none."""
    lists = ("inter_chunk_s", "chunk_audio_duration_s")
    raw = {"request_id": row["id"], "text": row["text"][:TEXT_PREVIEW], "is_success": bool(row["is_success"]),
           "latency_s": _number(row, "latency_s"), "audio_duration_s": _number(row, "audio_duration_s"),
           "rtf": _number(row, "rtf"), "prompt_tokens": row.get("prompt_tokens") or 0,
           "completion_tokens": row.get("completion_tokens") or 0, "engine_time_s": _number(row, "engine_time_s"),
           "tok_per_s": row.get("output_token_rate") or 0.0, "wav_path": row.get("wav_path") or "",
           "error": row.get("error") or "", "audio_ttfp_s": row.get("audio_ttfp_s"),
           **{key: list(row.get(key) or []) for key in lists},
           "max_playback_underrun_s": row.get("max_playback_underrun_s"), "text_ttft_s": row.get("text_ttft_s"),
           "audio_chunk_count": row.get("audio_chunk_count") or 0,
           "first_audio_payload_bytes": row.get("first_audio_payload_bytes") or 0,
           "waited_for_slot": bool(row.get("waited_for_slot")), "dispatch_lateness_s": row.get("dispatch_lateness_s"),
           "streamed": row.get("streamed"), "playback_stalls_100ms": row.get("playback_stalls_100ms")}
    return {key: raw[key] for key in (*RAW_RESULT_KEYS, *OWN_RAW_RESULT_KEYS)}


def ordered_config(values: Mapping[str, Any]) -> dict[str, Any]:
    """``speed_results.json``'s ``config``: upstream's keys in its order, then omnibench's; every
    key must be given (a missing one is a KeyError, never a silent gap)."""
    return {key: values[key] for key in (*CONFIG_KEYS, *OWN_CONFIG_KEYS)}
