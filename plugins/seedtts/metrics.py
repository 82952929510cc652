"""seed-tts metrics with the runbook's names, and its coverage rules.

A missing or corrupt result file never raises here: its metrics are None and the rule that
needed it is reported broken by name, so the run is marked incomplete, not crashed.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from omnibench_core.plugin import Collected, RuleResult, at_concurrency, field, load_doc, sample_rules, zero
from omnibench_plugins.common import SPEED_METRICS, WER_METRICS

from . import playback

# With ``stream`` on, these of the summary's streaming block join the metrics (sglang-omni's names,
# and omnibench's stall and did-not-stream counts); off, the runbook's keys alone, exactly.
STREAM_METRICS = ("audio_ttfp_mean_s", "audio_ttfp_p95_s", "audio_ttfp_p99_s", "inter_chunk_mean_s",
                  "inter_chunk_p95_s", "inter_chunk_p99_s", "text_ttft_mean_s", "text_ttft_p95_s",
                  "max_playback_underrun_mean_s", "max_playback_underrun_p95_s", "c100", "playback_stalls_100ms",
                  "not_streamed_requests")

FILES = {"speed": "speed_results.json", "wer": "wer_results.json", "sim": "similarity_results.json",
         "utmos": "utmos_results.json", "dataset": "dataset.json"}


# What only the score phase makes (the workload's quality_metrics): a --decide on one scores every round.
QUALITY = ("wer.", "sim", "sim_skipped", "utmos", "utmos_skipped")
SCORED_FILES = ("wer", "sim", "utmos")


def names() -> tuple[str, ...]:
    """Every metric name (less the prefix) :func:`collect` and :func:`collect_sweep` can write: the
    workload's declared ``metrics``."""
    return tuple(dict.fromkeys(("failed", "completion_tokens_sum", *SPEED_METRICS, *QUALITY, *STREAM_METRICS,
                                *SWEEP_METRICS)))


def collect(workload_dir: Path, prefix: str = "seedtts", stream: bool = False, scored: bool = True) -> Collected:
    """Metrics and RUN_COMPLETE rules for a seed-tts output folder.

    The expected sample count is the dataset's own (``dataset.json``), in place of the
    runbook's 1088. Empty or NaN audio is the run-wide ``audio`` check's rule. With ``stream``,
    the streaming metrics and per-request samples too (:func:`stream_part`). ``scored`` False
    (the run's score phase was skipped): the generation's metrics and rules only, no WER, SIM or
    UTMOS file is read.
    """
    problems: list[RuleResult] = []
    docs = {key: load_doc(workload_dir, name, problems) for key, name in FILES.items()
            if scored or key not in SCORED_FILES}
    speed = docs["speed"]
    per_request = _rows(field(speed, "per_request"))
    metrics: dict[str, Any] = {
        f"{prefix}.failed": field(speed, "summary", "failed_requests"),
        f"{prefix}.completion_tokens_sum": _token_sum(per_request) if speed else None,
    }
    for key in SPEED_METRICS:
        metrics[f"{prefix}.{key}"] = field(speed, "summary", key)
    wavs = list((workload_dir / "audio").glob("*.wav"))
    counts = {"requests": len(per_request), "completed": field(speed, "summary", "completed_requests")}
    rules = [zero("failed requests", metrics[f"{prefix}.failed"], "failed_requests")]
    notes: list[str] = []
    if scored:
        wer_doc, sim, ut = docs["wer"], docs["sim"], docs["utmos"]
        metrics |= {f"{prefix}.sim": field(sim, "summary", "speaker_similarity_mean"),
                    f"{prefix}.sim_skipped": field(sim, "summary", "skipped"),
                    f"{prefix}.utmos": field(ut, "summary", "utmos_mean"),
                    f"{prefix}.utmos_skipped": field(ut, "summary", "skipped")}
        for key in WER_METRICS:
            metrics[f"{prefix}.wer.{key}"] = field(wer_doc, "summary", key)
        counts |= {"WER evaluated": field(wer_doc, "summary", "evaluated"),
                   "SIM evaluated": field(sim, "summary", "evaluated"), "UTMOS evaluated": field(ut, "summary", "evaluated")}
        rules += [zero("skipped in WER", metrics[f"{prefix}.wer.skipped"], "skipped"),
                  zero("skipped in SIM", metrics[f"{prefix}.sim_skipped"], "skipped"),
                  zero("skipped in UTMOS", metrics[f"{prefix}.utmos_skipped"], "skipped")]
        notes = [f"{prefix}.{key}: {text}" for key, text in (("wer", field(wer_doc, "config", "asr")),
                                                               ("sim", field(sim, "config", "method")),
                                                               ("utmos", field(ut, "config", "method")))
                 if isinstance(text, str) and "substitute" in text]
    rules += sample_rules(samples=field(docs["dataset"], "samples"), ids=[r.get("id") for r in per_request],
                          wav_count=len(wavs), counts=counts,
                          **({} if scored else {"scored_label": "every sample generated"}))
    samples: dict[str, list[float]] = {}
    if stream:
        more, samples = stream_part(speed, per_request, prefix)
        metrics.update(more)
    return Collected(metrics, frozenset(), tuple(problems + rules), tuple(notes), samples,
                     by_request(per_request, prefix, stream))


# The summary's means over the requests that succeeded, and the per-request field each averages:
# an A/B matches these by request id across its sides (docs/verdicts.md, "A round's estimate").
BY_REQUEST = {"latency_mean_s": "latency_s", "rtf_mean": "rtf"}
STREAM_BY_REQUEST = {"audio_ttfp_mean_s": "audio_ttfp_s"}


def by_request(rows: list[dict[str, Any]], prefix: str, stream: bool) -> dict[str, dict[str, float]]:
    """Each mean metric's per-request values by request id, over the requests that succeeded
    with a positive number for it (a request whose id repeats is left out: it cannot be matched)."""
    ids = Counter(r.get("id") for r in rows)
    out: dict[str, dict[str, float]] = {}
    for metric, key in (BY_REQUEST | (STREAM_BY_REQUEST if stream else {})).items():
        values = {str(r["id"]): float(r[key]) for r in rows
                  if r.get("is_success") is True and ids[r.get("id")] == 1 and r.get("id") is not None
                  and isinstance(r.get(key), (int, float)) and not isinstance(r.get(key), bool) and r[key] > 0}
        if values:
            out[f"{prefix}.{metric}"] = values
    return out


# sglang-omni's SWEEP_METRIC_NAMES less its warmup count (stevejake007/sglang-omni
# benchmarks/benchmarker/conditions.py at 8a6fc24): each level's mean over its repeats is a metric.
SWEEP_METRICS = ("throughput_qps", "audio_throughput_s_per_s", "latency_mean_s", "latency_median_s", "latency_p95_s",
                 "latency_p99_s", "audio_ttfp_mean_s", "audio_ttfp_p95_s", "rtf_mean", "audio_duration_mean_s")
SWEEP_FILE = "sweep.json"


def collect_sweep(workload_dir: Path, prefix: str, levels: list[int], repeats: int) -> Collected:
    """Metrics and rules of sglang-omni's own sweep (``--concurrencies``/``--repeats``): from its
    ``sweep.json``, per level ``<prefix>@c<level>.<metric>`` (the mean over the level's repeats,
    as upstream aggregates it) and ``<prefix>@c<level>.failed``; the rules: every level asked for
    is there with every repeat, none failed, and each repeat completed the data set's samples."""
    problems: list[RuleResult] = []
    report = load_doc(workload_dir, SWEEP_FILE, problems)
    samples = field(load_doc(workload_dir, FILES["dataset"], problems), "samples")
    found = {r.get("concurrency"): r for r in _rows(field(report, "results"))}
    metrics: dict[str, Any] = {}
    rules: list[RuleResult] = []
    for level in levels:
        row = found.get(level)
        head = at_concurrency(prefix, level)
        for key in SWEEP_METRICS:
            metrics[f"{head}.{key}"] = field(row, key, "mean")
        metrics[f"{head}.failed"] = field(row, "failed_requests")
        rules += [RuleResult(f"c{level} measured {repeats} times", field(row, "repeats") == repeats,
                             f"repeats = {field(row, 'repeats')!r}"),
                  zero(f"failed requests at c{level}", metrics[f"{head}.failed"], "failed_requests"),
                  RuleResult(f"every sample completed at c{level}",
                             type(samples) is int and field(row, "completed_requests") == samples * repeats,
                             f"completed_requests = {field(row, 'completed_requests')!r}, {samples!r} samples x "
                             f"{repeats} repeats")]
    return Collected(metrics, frozenset(), tuple(problems + rules))


def stream_part(speed: Any, rows: list[dict[str, Any]], prefix: str) -> tuple[dict[str, Any], dict[str, list[float]]]:
    """The streaming metrics, from the summary a client wrote; a key its version does not write
    comes from its per-request fields by omnibench's definition (None when those are missing too)."""
    computed = playback.stream_summary(rows)
    metrics = {}
    for key in STREAM_METRICS:
        value = field(speed, "summary", key)
        metrics[f"{prefix}.{key}"] = computed.get(key) if value is None else value
    samples = {f"{prefix}.{key}": values for key, values in playback.distributions(rows).items()}
    return metrics, samples


def _rows(value: object) -> list[dict[str, Any]]:
    """The per-request rows that are objects; a malformed list breaks the rules, not collection."""
    return [r for r in value if isinstance(r, dict)] if isinstance(value, list) else []


def _token_sum(rows: list[dict[str, Any]]) -> int | None:
    tokens = [r.get("completion_tokens") for r in rows]
    if not all(t is None or (type(t) is int) for t in tokens):
        return None
    return sum(t or 0 for t in tokens)
