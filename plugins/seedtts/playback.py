"""Streaming speech metrics: a real-time player's underrun per request, and the run's summary.

Pure functions over arrival times, so every rule is tested without a server. Field names are
sglang-omni's (``benchmark_omni_seedtts --stream`` and its playback-continuity block) where it
has them; ``playback_stalls_100ms`` and ``not_streamed_requests`` are omnibench's
(docs/streaming.md defines each).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from omnibench_core.plugin import mean, median, percentile

STALL_S = 0.100  # a stall a listener hears (vLLM-Omni's continuity threshold, sglang-omni's c100)
CONTINUITY_MS = (50, 100, 200)  # sglang-omni's c50, c100, c200


@dataclass(frozen=True)
class Playback:
    """What a player that starts at the first chunk and plays at the audio's rate goes through."""

    max_underrun_s: float | None  # the longest wait for audio after playback began; None: under two chunks
    stalls: int  # waits longer than STALL_S


def simulate_player(arrivals_s: Sequence[float], durations_s: Sequence[float]) -> Playback:
    """Play chunk i (``durations_s[i]`` seconds of audio) as soon as it has arrived and the one
    before it has finished: the deficit at chunk i is how long the buffer was empty before it came.

    One chunk (or a reply that did not stream) has no gap to starve in: ``None``, as sglang-omni's
    ``max_playback_underrun_s`` (such requests are counted apart, never as continuous).
    """
    if len(arrivals_s) != len(durations_s):
        raise ValueError(f"{len(arrivals_s)} arrival times for {len(durations_s)} chunks")
    if len(arrivals_s) < 2:
        return Playback(None, 0)
    plays_until = arrivals_s[0] + durations_s[0]
    worst, stalls = 0.0, 0
    for arrival, duration in zip(arrivals_s[1:], durations_s[1:], strict=True):
        deficit = max(0.0, arrival - plays_until)
        worst = max(worst, deficit)
        stalls += deficit > STALL_S
        plays_until = max(plays_until, arrival) + duration
    return Playback(worst, stalls)


def request_fields(start: float, arrivals: Sequence[float], durations: Sequence[float],
                   text_first: float | None, first_payload_bytes: int | None, streamed: bool) -> dict[str, Any]:
    """One request's streaming fields, from ``time.perf_counter()`` readings taken as each event was parsed."""
    player = simulate_player(arrivals, durations)
    return {
        "streamed": streamed,
        "audio_ttfp_s": arrivals[0] - start if arrivals else None,
        "text_ttft_s": text_first - start if text_first is not None else None,
        "inter_chunk_s": [b - a for a, b in zip(arrivals, arrivals[1:], strict=False)],
        "audio_chunk_count": len(arrivals),
        "chunk_audio_duration_s": list(durations),
        "first_audio_payload_bytes": first_payload_bytes,
        "max_playback_underrun_s": player.max_underrun_s,
        "playback_stalls_100ms": player.stalls,
    }


def _numbers(rows: Sequence[Mapping[str, Any]], key: str) -> list[float]:
    return [float(r[key]) for r in rows if isinstance(r.get(key), (int, float)) and not isinstance(r.get(key), bool)]


def _spread(prefix: str, values: Sequence[float], points: Sequence[str]) -> dict[str, float | None]:
    at = {"mean": mean, "median": median, "p95": lambda v: percentile(v, 95), "p99": lambda v: percentile(v, 99)}
    return {f"{prefix}_{p}_s": at[p](values) for p in points}


def distributions(rows: Sequence[Mapping[str, Any]]) -> dict[str, list[float]]:
    """The successful requests' first-audio latencies and every chunk gap, pooled over requests."""
    ok = [r for r in rows if r.get("is_success")]
    gaps = [float(g) for r in ok for g in (r.get("inter_chunk_s") or [])
            if isinstance(g, (int, float)) and not isinstance(g, bool)]
    return {"audio_ttfp_s": _numbers(ok, "audio_ttfp_s"), "inter_chunk_s": gaps}


def stream_summary(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The summary's streaming block over the successful requests.

    ``inter_chunk_*`` pool every gap of every request (one slow request's gaps weigh as many as
    it has); the underrun block counts only requests of two or more chunks, the rest are
    ``playback_continuity_na_requests``.
    """
    ok = [r for r in rows if r.get("is_success")]
    dist = distributions(ok)
    underruns = _numbers(ok, "max_playback_underrun_s")
    out: dict[str, Any] = {
        **_spread("audio_ttfp", dist["audio_ttfp_s"], ("mean", "median", "p95", "p99")),
        **_spread("text_ttft", _numbers(ok, "text_ttft_s"), ("mean", "median", "p95", "p99")),
        **_spread("inter_chunk", dist["inter_chunk_s"], ("mean", "p95", "p99")),
        "audio_chunks_mean": mean(_numbers(ok, "audio_chunk_count")),
        "audio_chunks_p95": percentile(_numbers(ok, "audio_chunk_count"), 95),
        "playback_continuity_requests": len(underruns),
        "playback_continuity_na_requests": len(ok) - len(underruns),
        **_spread("max_playback_underrun", underruns, ("mean", "p95", "p99")),
        "playback_stalls_100ms": int(sum(_numbers(ok, "playback_stalls_100ms"))),
        "not_streamed_requests": sum(1 for r in ok if r.get("streamed") is False),
    }
    for ms in CONTINUITY_MS:  # percent of multi-chunk requests whose worst wait stayed within ms
        out[f"c{ms}"] = 100.0 * sum(u <= ms / 1000 for u in underruns) / len(underruns) if underruns else None
    return out
