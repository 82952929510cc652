"""Video-AMME metrics with the runbook's names, and its coverage rules (broken rules named,
missing or corrupt files never raise)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from omnibench_core.plugin import Collected, RuleResult, field, load_doc, sample_rules, zero
from omnibench_plugins.common import SPEED_METRICS, WER_METRICS

# What only the score phase makes (the workload's quality_metrics): the text-audio consistency WER.
QUALITY = ("wer.",)


def collect(workload_dir: Path, prefix: str = "videoamme", scored: bool = True) -> Collected:
    """``videoamme.*`` metrics; the sample count is the data set's own (the runbook's 10).
    ``scored`` False (the score phase was skipped): the answers' metrics and rules, no WER."""
    problems: list[RuleResult] = []
    v = load_doc(workload_dir, "videoamme_results.json", problems)
    n = field(load_doc(workload_dir, "dataset.json", problems), "samples")
    metrics: dict[str, Any] = {f"{prefix}.accuracy": field(v, "summary", "accuracy"),
                               f"{prefix}.failed": field(v, "summary", "failed")}
    for key in SPEED_METRICS:
        metrics[f"{prefix}.{key}"] = field(v, "speed", key)
    per = field(v, "per_sample")
    per = [r for r in per if isinstance(r, dict)] if isinstance(per, list) else []
    wavs = list((workload_dir / "audio").glob("*.wav"))
    counts = {"per_sample": len(per), "total_samples": field(v, "summary", "total_samples")}
    rules = [zero("failed requests", metrics[f"{prefix}.failed"], "failed")]
    notes = []
    if scored:
        vw = load_doc(workload_dir, "wer_summary.json", problems)
        for key in WER_METRICS:
            metrics[f"{prefix}.wer.{key}"] = field(vw, key)
        counts["WER evaluated"] = field(vw, "evaluated")
        rules.append(zero("skipped in WER", metrics[f"{prefix}.wer.skipped"], "skipped"))
        asr = field(load_doc(workload_dir, "wer_per_sample.json", []), "config", "asr")  # omnibench's scorer only
        if isinstance(asr, str) and "substitute" in asr:
            notes.append(f"{prefix}.wer: {asr}")
    rules += sample_rules(samples=n, ids=[r.get("sample_id") for r in per], wav_count=len(wavs), counts=counts,
                          scored_label="every sample answered and scored" if scored else "every sample answered")
    method = field(v, "config", "answer_method")
    if isinstance(method, str) and method:  # "" when the real model answers
        notes.append(f"{prefix}.accuracy: {method}")
    # each answered sample's latency (upstream's per_sample ``latency_s``): the run's percentiles of it
    latencies = [float(r["latency_s"]) for r in per if r.get("is_success") is True
                 and isinstance(r.get("latency_s"), (int, float)) and not isinstance(r.get("latency_s"), bool)]
    samples = {f"{prefix}.latency_s": latencies} if latencies else {}
    return Collected(metrics, frozenset(), tuple(problems + rules), tuple(notes), samples)
