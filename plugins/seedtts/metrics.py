"""seed-tts metrics with the runbook's names, and its coverage rules.

A missing or corrupt result file never raises here: its metrics are None and the rule that
needed it is reported broken by name, so the run is marked incomplete, not crashed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from omnibench_core.jsonio import read_json
from omnibench_core.records import Collected, RuleResult

SPEED = ("throughput_qps", "latency_mean_s", "latency_p95_s", "rtf_mean", "audio_duration_mean_s",
         "audio_throughput_s_per_s")
WER = ("wer_corpus", "wer_below_50_corpus", "n_above_50_pct_wer", "skipped")
FILES = {"speed": "speed_results.json", "wer": "wer_results.json", "sim": "similarity_results.json",
         "utmos": "utmos_results.json", "dataset": "dataset.json"}


def _load(folder: Path, name: str, problems: list[RuleResult]) -> Any:
    try:
        return read_json(folder / name)
    except FileNotFoundError:
        problems.append(RuleResult(f"{name} exists", False, f"{folder / name} is missing"))
    except ValueError as exc:
        problems.append(RuleResult(f"{name} is valid JSON", False, f"{folder / name}: {exc}"))
    return None


def _get(doc: Any, *keys: str) -> Any:
    for key in keys:
        if not isinstance(doc, Mapping) or key not in doc:
            return None
        doc = doc[key]
    return doc


def collect(workload_dir: Path, prefix: str = "seedtts") -> Collected:
    """Metrics and RUN_COMPLETE rules for a seed-tts output folder.

    The expected sample count is the dataset's own (``dataset.json``), in place of the
    runbook's 1088.
    """
    problems: list[RuleResult] = []
    docs = {key: _load(workload_dir, name, problems) for key, name in FILES.items()}
    speed, wer_doc, sim, ut = docs["speed"], docs["wer"], docs["sim"], docs["utmos"]
    per_request = _get(speed, "per_request") or []
    metrics: dict[str, Any] = {
        f"{prefix}.failed": _get(speed, "summary", "failed_requests"),
        f"{prefix}.sim": _get(sim, "summary", "speaker_similarity_mean"),
        f"{prefix}.sim_skipped": _get(sim, "summary", "skipped"),
        f"{prefix}.utmos": _get(ut, "summary", "utmos_mean"),
        f"{prefix}.utmos_skipped": _get(ut, "summary", "skipped"),
        f"{prefix}.completion_tokens_sum": sum(r.get("completion_tokens") or 0 for r in per_request) if speed else None,
    }
    for key in SPEED:
        metrics[f"{prefix}.{key}"] = _get(speed, "summary", key)
    for key in WER:
        metrics[f"{prefix}.wer.{key}"] = _get(wer_doc, "summary", key)

    wavs = sorted((workload_dir / "audio").glob("*.wav"))  # empty or NaN audio: a run-wide rule
    n = _get(docs["dataset"], "samples")
    rules: list[Rule] = [
        ("0 failed requests", lambda: metrics[f"{prefix}.failed"] == 0, f"failed_requests = {metrics[f'{prefix}.failed']}"),
        ("0 skipped in WER", lambda: metrics[f"{prefix}.wer.skipped"] == 0, f"skipped = {metrics[f'{prefix}.wer.skipped']}"),
        ("0 skipped in SIM", lambda: metrics[f"{prefix}.sim_skipped"] == 0, f"skipped = {metrics[f'{prefix}.sim_skipped']}"),
        ("0 skipped in UTMOS", lambda: metrics[f"{prefix}.utmos_skipped"] == 0,
         f"skipped = {metrics[f'{prefix}.utmos_skipped']}"),
        ("unique sample ids", lambda: len({r.get("id") for r in per_request}) == len(per_request) == n,
         f"{len({r.get('id') for r in per_request})} unique ids in {len(per_request)} requests, {n} samples"),
        ("one WAV per sample", lambda: len(wavs) == n, f"{len(wavs)} WAVs for {n} samples"),
        ("every sample generated and scored", lambda: len(per_request) == _get(speed, "summary", "completed_requests")
         == _get(wer_doc, "summary", "evaluated") == _get(sim, "summary", "evaluated")
         == _get(ut, "summary", "evaluated") == n,
         f"requests {len(per_request)}, completed {_get(speed, 'summary', 'completed_requests')}, WER "
         f"{_get(wer_doc, 'summary', 'evaluated')}, SIM {_get(sim, 'summary', 'evaluated')}, UTMOS "
         f"{_get(ut, 'summary', 'evaluated')}, samples {n}"),
    ]
    results = problems + [RuleResult(name, bool(_safe(check)), detail) for name, check, detail in rules]
    notes = [f"{prefix}.{key}: {text}" for key, text in (("wer", _get(wer_doc, "config", "asr")),
                                                           ("sim", _get(sim, "config", "method")),
                                                           ("utmos", _get(ut, "config", "method")))
             if isinstance(text, str) and "substitute" in text]
    return Collected(metrics, frozenset(), tuple(results), tuple(notes))


Rule = tuple[str, Callable[[], bool], str]


def _safe(check: Callable[[], bool]) -> bool:
    try:
        return bool(check())
    except (TypeError, KeyError):
        return False
