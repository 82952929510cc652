"""Speed fields as sglang-omni's clients define, round and name them.

Taken from ``benchmarks/metrics/performance.py`` (``compute_speed_metrics``,
``_compute_token_metrics``, ``_request_result_to_dict``) and ``benchmarks/benchmarker/runner.py``
(``waited_for_slot``), stevejake007/sglang-omni at 1e1301bd0c6a1f52bfa3fd3793dafea3be9d3bbe, the
newest stored versions (docs/fidelity.md). Facts only: which requests count, what each field
divides by, and how many places it keeps.

- Latency, RTF and audio fields are over successful requests; RTF only where 0 < rtf < inf;
  audio duration only where > 0 (``0``, not None, when there is none).
- ``output_tok_per_req_s`` = completion tokens / the summed per-request engine time (CI's speed
  gate key); ``output_throughput`` = completion tokens / the timed window. Both only when there
  are tokens, rounded to 1 place; token means to 0 places.
- ``client_slot_waits``: requests (all, not only successes) that found every client slot busy.
- With no successful request, only the three counts (as upstream).

omnibench adds ``wall_time_s`` (the timed window) to every summary; upstream writes none.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np


def _round(value: Any, places: int) -> float:
    return round(float(value), places)


def _token_fields(ok: Sequence[Mapping[str, Any]], wall_time_s: float) -> dict[str, Any]:
    tokens = [r.get("completion_tokens") or 0 for r in ok]
    tokens = [t for t in tokens if t > 0]
    total = sum(tokens)
    engine = sum(r.get("engine_time_s") or 0.0 for r in ok if (r.get("engine_time_s") or 0.0) > 0)
    prompt = [p for p in (r.get("prompt_tokens") or 0 for r in ok) if p > 0]
    out: dict[str, Any] = {}
    if engine > 0 and total > 0:
        out["output_tok_per_req_s"] = _round(total / engine, 1)
    if wall_time_s > 0 and total > 0:
        out["output_throughput"] = _round(total / wall_time_s, 1)
    if tokens:
        out["output_tokens_mean"] = _round(np.mean(tokens), 0)
        out["output_tokens_total"] = total
    if prompt:
        out["prompt_tokens_mean"] = _round(np.mean(prompt), 0)
        out["prompt_tokens_total"] = sum(prompt)
    return out


def speed_summary(rows: Sequence[Mapping[str, Any]], wall_time_s: float) -> dict[str, Any]:
    """The summary block of a results file, from unrounded per-request rows.

    ``rows`` carry ``is_success``, ``latency_s``, ``audio_duration_s``, ``rtf``, ``prompt_tokens``,
    ``completion_tokens``, ``engine_time_s`` (send to reply read, the RTF and tokens-per-second
    denominator) and ``waited_for_slot``; ``wall_time_s`` is the timed window.
    """
    ok = [r for r in rows if r.get("is_success")]
    counts = {"total_requests": len(rows), "completed_requests": len(ok), "failed_requests": len(rows) - len(ok)}
    if not ok:
        return {**counts, "wall_time_s": wall_time_s}
    latency = [float(r["latency_s"]) for r in ok]
    rtf = [float(r["rtf"]) for r in ok if r.get("rtf") is not None and 0 < r["rtf"] < float("inf")]
    audio = [float(r["audio_duration_s"]) for r in ok if (r.get("audio_duration_s") or 0) > 0]
    if wall_time_s > 0:
        throughput = _round(len(ok) / wall_time_s, 3)
    else:  # as upstream without a window: successes over summed latency
        throughput = _round(len(ok) / sum(latency), 3) if sum(latency) > 0 else 0
    summary: dict[str, Any] = {
        **counts,
        "client_slot_waits": sum(1 for r in rows if r.get("waited_for_slot")),
        "latency_mean_s": _round(np.mean(latency), 3),
        "latency_median_s": _round(np.median(latency), 3),
        "latency_p95_s": _round(np.percentile(latency, 95), 3),
        "latency_p99_s": _round(np.percentile(latency, 99), 3),
        "audio_duration_mean_s": _round(np.mean(audio), 3) if audio else 0,
        "rtf_mean": _round(np.mean(rtf), 4) if rtf else None,
        "rtf_median": _round(np.median(rtf), 4) if rtf else None,
        "rtf_p95": _round(np.percentile(rtf, 95), 4) if rtf else None,
        "rtf_p99": _round(np.percentile(rtf, 99), 4) if rtf else None,
        "throughput_qps": throughput,
        **_token_fields(ok, wall_time_s),
    }
    if audio and wall_time_s > 0:
        summary["audio_throughput_s_per_s"] = _round(sum(audio) / wall_time_s, 3)
    summary["wall_time_s"] = wall_time_s
    return summary


def round_or_none(value: float | None, places: int) -> float | None:
    """``value`` rounded as upstream writes a per-request field; None stays None."""
    return None if value is None else round(float(value), places)
