"""WER as sglang-omni computes it: Whisper's English normaliser, jiwer's per-sample counts.

``wer_corpus`` = sum(S+D+I) / sum(S+D+H) over evaluated samples; ``wer_below_50_corpus`` the
same over samples whose own WER is at most 0.5; ``n_above_50_pct_wer`` counts the others.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from functools import lru_cache
from typing import Any

import jiwer

from .stats import mean, median, percentile, std


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


def per_sample_record(counts: WerCounts) -> dict[str, Any]:
    """The per-sample fields sglang-omni writes."""
    return {**asdict(counts), "wer": counts.wer}


def summarize(counts: Sequence[WerCounts], *, total: int, skipped: int, lang: str = "en") -> dict[str, Any]:
    """The WER summary fields (``wer_corpus``, ``wer_below_50_corpus``, ...)."""
    def corpus(items: Sequence[WerCounts]) -> float | None:
        errors = sum(c.substitutions + c.deletions + c.insertions for c in items)
        words = sum(c.substitutions + c.deletions + c.hits for c in items)
        return errors / words if words else None

    per = [c.wer for c in counts]
    below = [c for c in counts if c.wer <= 0.5]
    above = len(counts) - len(below)
    return {
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
    }


def score_transcripts(items: Sequence[tuple[dict[str, Any], str, str | None, str]]
                      ) -> tuple[list[WerCounts], list[dict[str, Any]], int]:
    """Score ``(record, reference, transcript or None, error)`` per sample.

    Returns the counts of the evaluated samples, each record completed with its WER fields (or
    its error), and how many were skipped: no transcript, or an empty normalised reference.
    """
    counts, records, skipped = [], [], 0
    for record, reference, transcript, error in items:
        scored = score_pair(reference, transcript) if transcript is not None else None
        record = {**record, "error": error}
        if scored is None:
            skipped += 1
            record["error"] = error or "empty normalised reference"
        else:
            counts.append(scored)
            record.update(per_sample_record(scored))
        records.append(record)
    return counts, records, skipped
