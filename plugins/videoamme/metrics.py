"""Video-AMME metrics with the runbook's names, and its coverage rules (broken rules named,
missing or corrupt files never raise)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from omnibench_core.records import Collected, RuleResult
from omnibench_core.scoring.documents import field, load_doc, rule
from omnibench_plugins.common import SPEED_METRICS, WER_METRICS


def collect(workload_dir: Path, prefix: str = "videoamme") -> Collected:
    """``videoamme.*`` metrics; the sample count is the data set's own (the runbook's 10)."""
    problems: list[RuleResult] = []
    v = load_doc(workload_dir, "videoamme_results.json", problems)
    vw = load_doc(workload_dir, "wer_summary.json", problems)
    n = field(load_doc(workload_dir, "dataset.json", problems), "samples")
    metrics: dict[str, Any] = {f"{prefix}.accuracy": field(v, "summary", "accuracy"),
                               f"{prefix}.failed": field(v, "summary", "failed")}
    for key in SPEED_METRICS:
        metrics[f"{prefix}.{key}"] = field(v, "speed", key)
    for key in WER_METRICS:
        metrics[f"{prefix}.wer.{key}"] = field(vw, key)
    per = field(v, "per_sample") or []
    ids = {r.get("sample_id") for r in per}
    wavs = list((workload_dir / "audio").glob("*.wav"))
    total, evaluated = field(v, "summary", "total_samples"), field(vw, "evaluated")
    rules = [
        rule("0 failed requests", lambda: metrics[f"{prefix}.failed"] == 0, f"failed = {metrics[f'{prefix}.failed']}"),
        rule("0 skipped in WER", lambda: metrics[f"{prefix}.wer.skipped"] == 0,
             f"skipped = {metrics[f'{prefix}.wer.skipped']}"),
        rule("unique sample ids", lambda: len(ids) == len(per) == n,
             f"{len(ids)} unique ids in {len(per)} samples, {n} expected"),
        rule("one WAV per sample", lambda: len(wavs) == n, f"{len(wavs)} WAVs for {n} samples"),
        rule("every sample answered and scored", lambda: len(per) == total == evaluated == n,
             f"per_sample {len(per)}, total_samples {total}, WER evaluated {evaluated}, samples {n}"),
    ]
    notes = []
    if isinstance(field(vw, "asr"), str) and "substitute" in field(vw, "asr"):
        notes.append(f"{prefix}.wer: {field(vw, 'asr')}")
    method = field(v, "config", "answer_method")
    if isinstance(method, str):
        notes.append(f"{prefix}.accuracy: {method}")
    return Collected(metrics, frozenset(), tuple(problems + rules), tuple(notes))
