"""WER as sglang-omni computes it: Whisper's English normaliser, jiwer's per-sample counts.

``wer_corpus`` = sum(S+D+I) / sum(S+D+H) over evaluated samples; ``wer_below_50_corpus`` the
same over samples whose own WER is at most 0.5; ``n_above_50_pct_wer`` counts the others. The
summary has exactly the keys of sglang-omni's ``calculate_wer_metrics`` (``SUMMARY_KEYS``), its
speed fields included; omnibench writes None where sglang-omni writes 0 for "nothing evaluated".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from typing import Any

import jiwer

from ..stats.percentiles import mean, median, percentile, std

# sglang-omni's WER summary (benchmarks/metrics/wer.py, calculate_wer_metrics), key for key.
SUMMARY_KEYS = ("lang", "total_samples", "evaluated", "skipped", "wer_corpus", "wer_per_sample_mean",
                "wer_per_sample_median", "wer_per_sample_std", "wer_per_sample_p95", "wer_per_sample_max",
                "wer_below_50_corpus", "n_above_50_pct_wer", "pct_above_50_pct_wer", "latency_mean_s",
                "latency_median_s", "latency_p95_s", "rtf_mean", "audio_duration_mean_s")


@lru_cache(maxsize=1)
def _normalizer():
    from whisper_normalizer.english import EnglishTextNormalizer

    return EnglishTextNormalizer()


def normalize(text: str) -> str:
    """Whisper's English text normalisation (lower case, numbers, spelling, punctuation)."""
    return " ".join(_normalizer()(text or "").split())


@dataclass(frozen=True)
class WerCounts:
    """One sample's alignment counts against its reference."""

    ref_norm: str
    hyp_norm: str
    substitutions: int
    deletions: int
    insertions: int
    hits: int

    @property
    def wer(self) -> float:
        """(S+D+I) / (S+D+H)."""
        return (self.substitutions + self.deletions + self.insertions) / max(1, self.substitutions + self.deletions + self.hits)


def score_pair(reference: str, hypothesis: str) -> WerCounts | None:
    """Counts for one pair after normalisation; None when the normalised reference is empty."""
    ref, hyp = normalize(reference), normalize(hypothesis)
    if not ref:
        return None
    if not hyp:
        return WerCounts(ref, hyp, 0, len(ref.split()), 0, 0)
    out = jiwer.process_words(ref, hyp)
    return WerCounts(ref, hyp, out.substitutions, out.deletions, out.insertions, out.hits)


@dataclass(frozen=True)
class Timing:
    """A scored sample's generation figures: the client's request latency and its audio length."""

    latency_s: float = 0.0
    audio_duration_s: float = 0.0

    @classmethod
    def of(cls, row: Mapping[str, Any]) -> Timing:
        """From a client row's ``latency_s`` and ``audio_duration_s`` (missing or null: 0)."""
        def number(key: str) -> float:
            value = row.get(key)
            return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0.0

        return cls(number("latency_s"), number("audio_duration_s"))


def speed_fields(timings: Sequence[Timing]) -> dict[str, Any]:
    """The speed fields of a WER summary over the evaluated samples, as sglang-omni computes them:
    latency mean/median/p95 over all of them, ``rtf_mean`` over those with latency and audio,
    ``audio_duration_mean_s`` over those with audio."""
    latency = [t.latency_s for t in timings]
    audio = [t.audio_duration_s for t in timings if t.audio_duration_s > 0]
    rtf = [t.latency_s / t.audio_duration_s for t in timings if t.audio_duration_s > 0 and t.latency_s > 0]
    return {"latency_mean_s": mean(latency), "latency_median_s": median(latency),
            "latency_p95_s": percentile(latency, 95), "rtf_mean": mean(rtf), "audio_duration_mean_s": mean(audio)}


def per_sample_record(counts: WerCounts) -> dict[str, Any]:
    """The per-sample fields sglang-omni writes."""
    return {**asdict(counts), "wer": counts.wer}


def summarize(counts: Sequence[WerCounts], *, total: int, skipped: int, lang: str = "en",
              timings: Sequence[Timing] = ()) -> dict[str, Any]:
    """The WER summary (``SUMMARY_KEYS``); ``timings`` are the evaluated samples' figures."""
    def corpus(items: Sequence[WerCounts]) -> float | None:
        errors = sum(c.substitutions + c.deletions + c.insertions for c in items)
        words = sum(c.substitutions + c.deletions + c.hits for c in items)
        return errors / words if words else None

    per = [c.wer for c in counts]
    below = [c for c in counts if c.wer <= 0.5]
    above = len(counts) - len(below)
    summary = {
        "lang": lang,
        "total_samples": total,
        "evaluated": len(counts),
        "skipped": skipped,
        "wer_corpus": corpus(counts),
        "wer_per_sample_mean": mean(per),
        "wer_per_sample_median": median(per),
        "wer_per_sample_std": std(per),
        "wer_per_sample_p95": percentile(per, 95),
        "wer_per_sample_max": max(per) if per else None,
        "wer_below_50_corpus": corpus(below),
        "n_above_50_pct_wer": above,
        "pct_above_50_pct_wer": 100.0 * above / len(counts) if counts else None,
        **speed_fields(timings),
    }
    return {key: summary[key] for key in SUMMARY_KEYS}  # sglang-omni's keys, in its order


@dataclass(frozen=True)
class Scored:
    """A scored set: the evaluated samples' counts and timings, every record, the skipped count."""

    counts: list[WerCounts] = field(default_factory=list)
    timings: list[Timing] = field(default_factory=list)
    records: list[dict[str, Any]] = field(default_factory=list)
    skipped: int = 0

    def summary(self, lang: str = "en") -> dict[str, Any]:
        """The WER summary over every record."""
        return summarize(self.counts, total=len(self.records), skipped=self.skipped, lang=lang, timings=self.timings)


def score_transcripts(items: Sequence[tuple[dict[str, Any], str, str | None, str, Timing]]) -> Scored:
    """Score ``(record, reference, transcript or None, error, timing)`` per sample.

    Each record is completed with its WER fields (or its error); a sample is skipped when it has
    no transcript or an empty normalised reference.
    """
    counts: list[WerCounts] = []
    timings: list[Timing] = []
    records: list[dict[str, Any]] = []
    skipped = 0
    for record, reference, transcript, error, timing in items:
        scored = score_pair(reference, transcript) if transcript is not None else None
        record = {**record, "error": error}
        if scored is None:
            skipped += 1
            record["error"] = error or "empty normalised reference"
        else:
            counts.append(scored)
            timings.append(timing)
            record.update(per_sample_record(scored))
        records.append(record)
    return Scored(counts, timings, records, skipped)
