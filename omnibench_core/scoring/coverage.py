"""The runbook's standard coverage rules for a workload's samples, in one place.

Every workload that sends samples, writes one WAV per sample and scores them checks the same
things: nothing failed, nothing skipped, unique ids, one WAV each, every count equal to the data
set's. A value that is missing (a file that was not written) breaks the rule, never raises.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..records import RuleResult
from .documents import rule


def zero(label: str, value: Any, field_name: str) -> RuleResult:
    """``0 <label>``: the value must be exactly 0 (None, a bool or a string is broken)."""
    return rule(f"0 {label}", lambda: type(value) is int and value == 0, f"{field_name} = {value!r}")


def sample_rules(*, samples: Any, ids: Sequence[Any], wav_count: int, counts: Mapping[str, Any],
                 scored_label: str = "every sample generated and scored") -> list[RuleResult]:
    """Unique ids, one WAV per sample, and every count equal to the data set's ``samples``.

    ``ids`` are the per-request ids the client wrote; ``counts`` names each stage's count
    (requests, completed, WER evaluated, ...).
    """
    count_text = ", ".join(f"{k} {v}" for k, v in counts.items())
    return [
        rule("unique sample ids", lambda: len(set(ids)) == len(ids) == samples,
             f"{len(set(ids))} unique ids in {len(ids)} rows, {samples} samples"),
        rule("one WAV per sample", lambda: wav_count == samples, f"{wav_count} WAVs for {samples} samples"),
        rule(scored_label, lambda: all(type(c) is int and c == samples for c in counts.values()),
             f"{count_text}, samples {samples}"),
    ]
