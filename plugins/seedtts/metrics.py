"""seed-tts metrics with the runbook's names, and its coverage rules.

A missing or corrupt result file never raises here: its metrics are None and the rule that
needed it is reported broken by name, so the run is marked incomplete, not crashed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from omnibench_core.records import Collected, RuleResult
from omnibench_core.scoring.documents import field, load_doc, rule
from omnibench_plugins.common import SPEED_METRICS, WER_METRICS

FILES = {"speed": "speed_results.json", "wer": "wer_results.json", "sim": "similarity_results.json",
         "utmos": "utmos_results.json", "dataset": "dataset.json"}


def collect(workload_dir: Path, prefix: str = "seedtts") -> Collected:
    """Metrics and RUN_COMPLETE rules for a seed-tts output folder.

    The expected sample count is the dataset's own (``dataset.json``), in place of the
    runbook's 1088. Empty or NaN audio is a run-wide rule (the runner's).
    """
    problems: list[RuleResult] = []
    docs = {key: load_doc(workload_dir, name, problems) for key, name in FILES.items()}
    speed, wer_doc, sim, ut = docs["speed"], docs["wer"], docs["sim"], docs["utmos"]
    per_request = field(speed, "per_request") or []
    metrics: dict[str, Any] = {
        f"{prefix}.failed": field(speed, "summary", "failed_requests"),
        f"{prefix}.sim": field(sim, "summary", "speaker_similarity_mean"),
        f"{prefix}.sim_skipped": field(sim, "summary", "skipped"),
        f"{prefix}.utmos": field(ut, "summary", "utmos_mean"),
        f"{prefix}.utmos_skipped": field(ut, "summary", "skipped"),
        f"{prefix}.completion_tokens_sum": sum(r.get("completion_tokens") or 0 for r in per_request) if speed else None,
    }
    for key in SPEED_METRICS:
        metrics[f"{prefix}.{key}"] = field(speed, "summary", key)
    for key in WER_METRICS:
        metrics[f"{prefix}.wer.{key}"] = field(wer_doc, "summary", key)
    wavs = list((workload_dir / "audio").glob("*.wav"))
    n = field(docs["dataset"], "samples")
    ids = {r.get("id") for r in per_request}
    evaluated = [field(speed, "summary", "completed_requests"), field(wer_doc, "summary", "evaluated"),
                 field(sim, "summary", "evaluated"), field(ut, "summary", "evaluated")]
    rules = [
        rule("0 failed requests", lambda: metrics[f"{prefix}.failed"] == 0, f"failed_requests = {metrics[f'{prefix}.failed']}"),
        rule("0 skipped in WER", lambda: metrics[f"{prefix}.wer.skipped"] == 0, f"skipped = {metrics[f'{prefix}.wer.skipped']}"),
        rule("0 skipped in SIM", lambda: metrics[f"{prefix}.sim_skipped"] == 0, f"skipped = {metrics[f'{prefix}.sim_skipped']}"),
        rule("0 skipped in UTMOS", lambda: metrics[f"{prefix}.utmos_skipped"] == 0,
             f"skipped = {metrics[f'{prefix}.utmos_skipped']}"),
        rule("unique sample ids", lambda: len(ids) == len(per_request) == n,
             f"{len(ids)} unique ids in {len(per_request)} requests, {n} samples"),
        rule("one WAV per sample", lambda: len(wavs) == n, f"{len(wavs)} WAVs for {n} samples"),
        rule("every sample generated and scored", lambda: all(e == len(per_request) == n for e in evaluated),
             f"requests {len(per_request)}, completed/WER/SIM/UTMOS {evaluated}, samples {n}"),
    ]
    notes = [f"{prefix}.{key}: {text}" for key, text in (("wer", field(wer_doc, "config", "asr")),
                                                           ("sim", field(sim, "config", "method")),
                                                           ("utmos", field(ut, "config", "method")))
             if isinstance(text, str) and "substitute" in text]
    return Collected(metrics, frozenset(), tuple(problems + rules), tuple(notes))
