"""What the runbook says about each metric: which direction is better, and its notes, applied as
flags (seed-tts throughput moving with output length; Video-AMME throughput is one batch)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from ..stats.estimators import correlation

Direction = Literal["higher", "lower", "context"]

# "Higher is better for Accuracy, throughput, SIM and UTMOS. Lower is better for latency, RTF and
# WER. Audio throughput shows whether a req/s change comes with shorter or longer speech."
# Failures and skips are counts of things that went wrong: lower is better. First match wins.
_RULES: tuple[tuple[str, Direction], ...] = (
    # Streaming (docs/streaming.md): sooner first audio and text, shorter gaps and underruns, fewer
    # stalls and fewer answers that did not stream are better; more continuous requests (c100) are.
    ("audio_ttfp", "lower"), ("text_ttft", "lower"), ("inter_chunk", "lower"), ("underrun", "lower"),
    ("stalls", "lower"), ("not_streamed", "lower"), ("audio_chunks", "context"),
    ("audio_throughput", "context"),
    ("audio_duration", "context"),
    ("completion_tokens", "context"),
    ("audio.files", "context"),
    ("failed", "lower"), ("skipped", "lower"), ("empty_or_nan", "lower"), ("n_above_50", "lower"),
    ("accuracy", "higher"), ("throughput", "higher"), ("sim", "higher"), ("utmos", "higher"),
    ("matched", "higher"),
    ("latency", "lower"), ("rtf", "lower"), ("wer", "lower"),
    ("server_ready", "lower"),  # a server's spawn to READY (run.collection.SERVER_READY): a slower load is worse
)

SPREAD_FLAG = 0.01  # a relative spread above 1 % is a spread worth reading
ONE_BATCH = ("Video-AMME Talker is one batch: ten requests do not fill 16 slots, so its throughput is mostly the "
             "completion time of that one batch; small changes in one request move it (runbook, Notes)")


# Whole names, not parts of one: sglang-omni's continuity rates (percent of multi-chunk requests
# whose worst underrun stayed within 50, 100, 200 ms).
_EXACT: dict[str, Direction] = {"c50": "higher", "c100": "higher", "c200": "higher"}


def direction(metric: str) -> Direction:
    """higher, lower or context (no better side), from the runbook's "What is Measured"."""
    leaf = metric.split(".", 1)[-1]
    if leaf in _EXACT:
        return _EXACT[leaf]
    for needle, kind in _RULES:
        if needle in leaf:
            return kind
    return "context"


# Metrics that cannot go below 0 (error rates, counts, times, rates): an interval of their mean
# stops at 0 rather than promising a negative word error rate.
_FLOORED = ("wer", "cer", "latency", "rtf", "failed", "skipped", "empty_or_nan", "n_above_50", "ttfp", "ttft",
            "inter_chunk", "underrun", "stalls", "not_streamed", "throughput", "qps", "tokens", "requests",
            "duration", "_s")


def floor(metric: str) -> float | None:
    """The least value ``metric`` can take (0 for a rate, count or time), or None when unknown."""
    leaf = metric.split(".", 1)[-1]
    return 0.0 if any(needle in leaf for needle in _FLOORED) else None


@dataclass(frozen=True)
class Flag:
    """A runbook note that applies to a metric of these runs."""

    metric: str
    note: str


def flags(values: Mapping[str, Sequence[float]], rel_spread: Mapping[str, float | None]) -> list[Flag]:
    """The runbook's notes that apply to these values (by metric)."""
    out = []
    if "videoamme.throughput_qps" in values:
        out.append(Flag("videoamme.throughput_qps", ONE_BATCH))
    qps, tokens = values.get("seedtts.throughput_qps"), values.get("seedtts.completion_tokens_sum")
    if qps and tokens and (rel_spread.get("seedtts.throughput_qps") or 0) > SPREAD_FLAG \
            and (rel_spread.get("seedtts.completion_tokens_sum") or 0) > SPREAD_FLAG:
        r = correlation(qps, tokens)
        if r is not None and abs(r) >= 0.5:
            out.append(Flag("seedtts.throughput_qps",
                            f"the throughput spread goes with a seedtts.completion_tokens_sum spread "
                            f"({rel_spread['seedtts.completion_tokens_sum']:.1%}, r = {r:+.2f}): output length "
                            "varies at temperature 0.7 without a seed; read it before the throughput (runbook, Notes)"))
    return out
