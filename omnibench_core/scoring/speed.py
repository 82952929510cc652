"""Speed fields as sglang-omni's clients define them (successful requests only)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .percentiles import mean, median, percentile


def speed_summary(rows: Sequence[Mapping[str, Any]], wall_time_s: float) -> dict[str, Any]:
    """``throughput_qps``, latency, RTF, audio duration and token fields over the successes.

    ``rows`` carry ``is_success``, ``latency_s``, ``audio_duration_s``, ``rtf``,
    ``prompt_tokens`` and ``completion_tokens``; ``wall_time_s`` is the timed window.
    """
    ok = [r for r in rows if r.get("is_success")]
    latency = [r["latency_s"] for r in ok]
    audio = [r["audio_duration_s"] for r in ok if r.get("audio_duration_s")]
    rtf = [r["rtf"] for r in ok if r.get("rtf") is not None]
    completion = [r.get("completion_tokens") or 0 for r in ok]
    prompt = [r.get("prompt_tokens") or 0 for r in ok]
    wall = max(wall_time_s, 1e-9)
    return {
        "completed_requests": len(ok),
        "failed_requests": len(rows) - len(ok),
        "total_requests": len(rows),
        "wall_time_s": wall_time_s,
        "throughput_qps": len(ok) / wall,
        "latency_mean_s": mean(latency),
        "latency_median_s": median(latency),
        "latency_p95_s": percentile(latency, 95),
        "latency_p99_s": percentile(latency, 99),
        "rtf_mean": mean(rtf),
        "rtf_median": median(rtf),
        "rtf_p95": percentile(rtf, 95),
        "rtf_p99": percentile(rtf, 99),
        "audio_duration_mean_s": mean(audio),
        "audio_throughput_s_per_s": sum(audio) / wall,
        "output_tokens_total": sum(completion),
        "output_tokens_mean": mean(completion),
        "prompt_tokens_total": sum(prompt),
        "prompt_tokens_mean": mean(prompt),
    }
