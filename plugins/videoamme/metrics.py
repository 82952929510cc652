"""Video-AMME metrics with the runbook's names, and its coverage rules (broken rules named,
missing or corrupt files never raise)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from omnibench_core.plugin import (
    Collected,
    RuleResult,
    field,
    load_doc,
    mean,
    percentile,
    sample_rules,
    samples_needed,
    zero,
)
from omnibench_plugins.common import SPEED_METRICS, WER_METRICS

# What only the score phase makes (the workload's quality_metrics): the text-audio consistency WER.
QUALITY = ("wer.",)
# The percentiles of output tokens/s (the run's own, of times, come from the samples; a rate is
# not a time, so its percentiles are made here, at the runbook-side default 50, 90, 99).
RATE_PERCENTILES = (50, 90, 99)


# Every metric name (less the prefix) collect can write: the workload's declared ``metrics``.
NAMES = ("accuracy", "failed", *SPEED_METRICS, *QUALITY, "ttft_mean_s", "tpot_mean_s", "itl_mean_s",
         "output_tokens_per_s_mean", *(f"output_tokens_per_s_p{q}" for q in RATE_PERCENTILES))


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
    answered = [r for r in per if r.get("is_success") is True]
    if any("ttft_s" in r for r in per):  # a streamed run (videoamme.stream); off, nothing here changes
        timing_metrics, timing_samples, source = token_timing_metrics(answered, prefix)
        metrics.update(timing_metrics)
        samples.update(timing_samples)
        notes.append(f"{prefix}.tpot: tokens counted from {source}")
    return Collected(metrics, frozenset(), tuple(problems + rules), tuple(notes), samples)


def _numbers(rows: list[dict[str, Any]], key: str) -> list[float]:
    return [float(r[key]) for r in rows if isinstance(r.get(key), (int, float)) and not isinstance(r.get(key), bool)]


def token_timing_metrics(answered: list[dict[str, Any]], prefix: str
                         ) -> tuple[dict[str, Any], dict[str, list[float]], str]:
    """A streamed run's text timing: the mean of each answered request's TTFT, TPOT and output
    tokens/s, and the mean of every inter-token gap (``<prefix>.ttft_mean_s`` ...), with their
    per-request samples (``<prefix>.ttft_s``, ``tpot_s``, ``itl_s``: the run adds their
    percentiles, ``<prefix>.ttft_p50_s`` ...); and where the token counts came from (usage or
    content chunks, as the records say)."""
    ttft, tpot, rate = _numbers(answered, "ttft_s"), _numbers(answered, "tpot_s"), _numbers(answered, "output_tokens_per_s")
    itl = [float(g) for r in answered if isinstance(r.get("itl_s"), list) for g in r["itl_s"]
           if isinstance(g, (int, float)) and not isinstance(g, bool)]
    metrics: dict[str, Any] = {f"{prefix}.ttft_mean_s": mean(ttft), f"{prefix}.tpot_mean_s": mean(tpot),
                               f"{prefix}.itl_mean_s": mean(itl), f"{prefix}.output_tokens_per_s_mean": mean(rate)}
    thin = []
    for q in RATE_PERCENTILES:  # one its sample count cannot support is named in a note, never printed as measured
        if len(rate) >= samples_needed(q):
            metrics[f"{prefix}.output_tokens_per_s_p{q}"] = percentile(rate, q)
        elif rate:
            thin.append(f"p{q} (needs {samples_needed(q)})")
    samples = {name: values for name, values in ((f"{prefix}.ttft_s", ttft), (f"{prefix}.tpot_s", tpot),
                                                 (f"{prefix}.itl_s", itl)) if values}
    sources = sorted({str(r.get("output_tokens_from")) for r in answered if r.get("output_tokens_from")})
    source = " and ".join(f"{s} (usage.completion_tokens)" if s == "usage" else f"{s} (content chunks counted)"
                          for s in sources) or "no answer"
    if thin:
        source += f"; output_tokens_per_s from {len(rate)} requests, too few for {', '.join(thin)}"
    return metrics, samples, source
