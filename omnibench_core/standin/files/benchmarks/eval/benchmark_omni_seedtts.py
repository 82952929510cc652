"""The stand-in's seed-tts client: ``python -m benchmarks.eval.benchmark_omni_seedtts --<mode>``.

The four modes of sglang-omni's client, one per call, with its flags and output files, written
with omnibench's own code: ``--generate-only`` (omnibench's native client: ``speed_results.json``,
``generated.json``, ``results.csv``, ``audio/<id>.wav``; with ``--stream`` the streaming fields
sglang-omni's client records, under its names), ``--transcribe-only`` (omnibench's ASR
WER on the server at ``--port``: ``wer_results.json``), ``--similarity-only`` and ``--utmos-only``
(omnibench's local SIM and UTMOS substitutes: ``similarity_results.json``, ``utmos_results.json``).
``--meta`` takes a ``meta.lst`` or a known Hugging Face id (see ``sglang_omni_standin.data``).

With ``--generate-only``, ``--concurrencies 1,4`` and ``--repeats N`` sweep the one server at
``--port`` as upstream's ``run_sweep`` does (stevejake007/sglang-omni
``benchmarks/eval/benchmark_omni_seedtts.py`` and ``benchmarks/benchmarker/conditions.py`` at
8a6fc24123ced2516b6d0acd9278f4771ab0e6b6): each level ``--repeats`` times into
``<output-dir>/c<level>_r<repeat>/``, then ``<output-dir>/sweep.json`` with the base run's config
(plus ``concurrencies`` and ``repeats``) and per level the counts summed and, per metric of
:data:`SWEEP_METRIC_NAMES`, ``{mean, min, max, n}`` over the repeats, with every repeat's summary.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
from pathlib import Path
from typing import Any

from sglang_omni_standin.data import UnknownDataSet, seedtts_meta

ASR_MODEL = "Qwen/Qwen3-ASR-1.7B"
DEFAULT_META = "zhaochenyang20/seed-tts-eval-arrow"
REQUEST_TIMEOUT_S = 300  # upstream's fixed per-request timeout: it has no flag for it
# upstream's SWEEP_METRIC_NAMES (benchmarks/benchmarker/conditions.py): aggregated per level
SWEEP_METRIC_NAMES = ("throughput_qps", "audio_throughput_s_per_s", "latency_mean_s", "latency_median_s",
                      "latency_p95_s", "latency_p99_s", "audio_ttfp_mean_s", "audio_ttfp_p95_s", "rtf_mean",
                      "audio_duration_mean_s", "warmup")


def parse_concurrencies(text: str) -> list[int]:
    """``1,4`` -> [1, 4]; upstream's rule: positive whole numbers, at least one."""
    try:
        levels = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        levels = []
    if not levels or any(level <= 0 for level in levels):
        raise argparse.ArgumentTypeError(f"concurrencies must be positive integers, got {text!r}")
    return levels


def build_parser() -> argparse.ArgumentParser:
    """sglang-omni's flags for this client: names, types, choices and defaults as upstream's
    (``tests/fixtures/upstream/benchmark_omni_seedtts.json``). Upstream has no ``--timeout-s``: a
    request may take 300 s (``REQUEST_TIMEOUT_S``)."""
    p = argparse.ArgumentParser(prog="python -m benchmarks.eval.benchmark_omni_seedtts")
    mode = p.add_mutually_exclusive_group()  # none: generate, then transcribe on the same port
    for name in ("generate", "transcribe", "similarity", "utmos"):
        mode.add_argument(f"--{name}-only", action="store_true")
    p.add_argument("--meta", "--testset", dest="meta", default=DEFAULT_META,
                   help="a meta.lst, or a Hugging Face data set id")
    p.add_argument("--model", default="qwen3-omni", help="model name for the API request")
    p.add_argument("--host", default="localhost")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--lang", choices=("en", "zh"), default="en")
    clone = p.add_mutually_exclusive_group()
    clone.add_argument("--voice-clone", dest="voice_clone", action="store_true")
    clone.add_argument("--no-ref-audio", dest="no_ref_audio", action="store_true", help="legacy: no voice clone")
    p.add_argument("--reference-audio-field", choices=["audios", "audio.ref_audio"], default="audios", help="where the reference goes: audios (Qwen3-Omni) or audio.ref_audio (MiniCPM-o)")
    p.add_argument("--max-concurrency", type=int, default=16)
    p.add_argument("--output-dir", default="results/omni_seedtts", type=Path)
    p.add_argument("--asr-concurrency", type=int, default=32)
    p.add_argument("--asr-model-path", default=ASR_MODEL, help="the model the ASR server at --port serves")
    p.add_argument("--max-new-tokens", type=int, default=256)
    p.add_argument("--temperature", type=float, default=0.7)
    p.add_argument("--seed", type=int)
    p.add_argument("--warmup", type=int, help="warmup requests (default: --max-concurrency)")
    p.add_argument("--max-samples", type=int)
    p.add_argument("--warmup-meta", help="a separate seed-tts meta.lst for the warmup")
    p.add_argument("--request-rate", type=float, default=float("inf"), help="requests per second (inf = all at once)")
    p.add_argument("--concurrencies", type=parse_concurrencies, default=None,
                   help="comma-separated concurrency levels to sweep with --generate-only: each level --repeats "
                        "times into <output-dir>/c<level>_r<repeat>, aggregates in <output-dir>/sweep.json")
    p.add_argument("--repeats", type=int, default=1, help="runs per concurrency level in a sweep")
    p.add_argument("--stream", action="store_true",
                   help="streaming chat completions: per request audio_ttfp_s, inter_chunk_s, text_ttft_s")
    return p


def generate(a: argparse.Namespace, meta: Path) -> int:
    """``--generate-only``: omnibench's native client with these flags."""
    from omnibench_plugins.seedtts.client import ClientConfig, SeedTtsClient, WarmupFailed, write_outputs
    from omnibench_plugins.seedtts.data import load_meta

    cfg = ClientConfig(meta=str(meta), output_dir=a.output_dir, model=a.model, host=a.host, port=a.port,
                       voice_clone=a.voice_clone and not a.no_ref_audio, reference_audio_field=a.reference_audio_field,
                       max_concurrency=a.max_concurrency, max_new_tokens=a.max_new_tokens, temperature=a.temperature,
                       seed=a.seed, warmup=a.warmup, max_samples=a.max_samples, timeout_s=REQUEST_TIMEOUT_S,
                       stream=a.stream, warmup_meta=a.warmup_meta, arrival_seed=None,  # upstream's client draws an unseeded schedule
                       request_rate=None if a.request_rate == float("inf") else a.request_rate)
    samples = load_meta(meta, a.max_samples)
    a.output_dir.mkdir(parents=True, exist_ok=True)
    try:
        results = asyncio.run(SeedTtsClient(cfg).run(samples))
    except WarmupFailed as exc:  # as sglang-omni's client: a failed warmup aborts
        print(f"warmup failed: {exc}", file=sys.stderr)
        return 1
    results["config"]["client"] = "sglang-omni stand-in (omnibench native client)"
    write_outputs(a.output_dir, samples, results)
    s = results["summary"]
    print(f"completed {s['completed_requests']}, failed {s['failed_requests']}, {s.get('throughput_qps', 0):.2f} req/s",
          flush=True)
    return 0


def sweep(a: argparse.Namespace, meta: Path) -> int:
    """``--generate-only --concurrencies ... --repeats N``: every level ``N`` times against the one
    server, each repeat in ``c<level>_r<repeat>``, then ``sweep.json`` (upstream's ``run_sweep``)."""
    if a.repeats < 1:
        raise ValueError(f"repeats must be positive, got {a.repeats}")
    levels = a.concurrencies or [a.max_concurrency]
    aggregates, config = [], None
    for level in levels:
        summaries = []
        for repeat in range(1, a.repeats + 1):
            out = Path(a.output_dir) / f"c{level}_r{repeat}"
            code = generate(argparse.Namespace(**{**vars(a), "max_concurrency": level, "output_dir": out}), meta)
            if code:
                return code
            speed = json.loads((out / "speed_results.json").read_text())
            config = config or speed["config"]
            summaries.append({"repeat": repeat, "output_dir": str(out), **speed["summary"],
                              "warmup": a.warmup if a.warmup is not None else level})
        aggregates.append(_aggregate(level, summaries))
    base_warmup = a.warmup if a.warmup is not None else a.max_concurrency
    report = {"config": {**(config or {}), "max_concurrency": a.max_concurrency, "warmup": base_warmup,
                         "concurrencies": levels, "repeats": a.repeats},
              "results": aggregates}
    (Path(a.output_dir) / "sweep.json").write_text(json.dumps(report, indent=2))
    print(f"sweep: {len(levels)} levels x {a.repeats} repeats, {Path(a.output_dir) / 'sweep.json'}", flush=True)
    return 0


def _aggregate(level: int, summaries: list[dict[str, Any]]) -> dict[str, Any]:
    """One level as upstream's ``aggregate_repeats``: counts summed, each metric's mean, min, max
    and count over the repeats that have it, and every repeat's summary."""
    def numbers(name: str) -> dict[str, Any]:
        present = [float(s[name]) for s in summaries if s.get(name) is not None]
        if not present:
            return {"mean": None, "min": None, "max": None, "n": 0}
        return {"mean": statistics.mean(present), "min": min(present), "max": max(present), "n": len(present)}

    return {"concurrency": level, "repeats": len(summaries),
            "completed_requests": sum(s.get("completed_requests", 0) for s in summaries),
            "failed_requests": sum(s.get("failed_requests", 0) for s in summaries),
            **{name: numbers(name) for name in SWEEP_METRIC_NAMES}, "per_repeat": summaries}


def transcribe(a: argparse.Namespace) -> int:
    """``--transcribe-only``: WER of ``generated.json``'s WAVs on the ASR server at ``--port``."""
    from omnibench_core.records import Endpoint
    from omnibench_core.scoring.asr_wer import WerJob, score

    job = WerJob(rows="generated.json", reference_field="target_text", output="wer_results.json")
    summary = score(job, a.output_dir, endpoint=Endpoint(a.port, a.host), model=a.asr_model_path, lang=a.lang,
                    concurrency=a.asr_concurrency)
    print(f"wer_corpus {summary['wer_corpus']}, evaluated {summary['evaluated']}, skipped {summary['skipped']}",
          flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    """Run one mode."""
    parser = build_parser()
    a = parser.parse_args(argv)
    try:
        meta = seedtts_meta(a.meta)
    except UnknownDataSet as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if a.transcribe_only:
        return transcribe(a)
    is_sweep = a.concurrencies is not None or a.repeats > 1  # checked after the scoring modes, as upstream
    if is_sweep and not (a.generate_only or a.similarity_only or a.utmos_only):
        parser.error("--concurrencies and --repeats require --generate-only")
    if a.generate_only:
        return sweep(a, meta) if is_sweep else generate(a, meta)
    if not (a.similarity_only or a.utmos_only):  # upstream's full pipeline: generate, then WER
        return generate(a, meta) or transcribe(a)
    from omnibench_plugins.seedtts import score

    out = score.similarity(a.output_dir, meta=str(meta)) if a.similarity_only else score.utmos(a.output_dir)
    print({k: v for k, v in out["summary"].items() if not isinstance(v, str)}, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
