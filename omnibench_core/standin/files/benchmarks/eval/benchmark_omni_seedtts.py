"""The stand-in's seed-tts client: ``python -m benchmarks.eval.benchmark_omni_seedtts --<mode>``.

The four modes of sglang-omni's client, one per call, with its flags and output files, written
with omnibench's own code: ``--generate-only`` (omnibench's native client: ``speed_results.json``,
``generated.json``, ``results.csv``, ``audio/<id>.wav``; with ``--stream`` the streaming fields
sglang-omni's client records, under its names), ``--transcribe-only`` (omnibench's ASR
WER on the server at ``--port``: ``wer_results.json``), ``--similarity-only`` and ``--utmos-only``
(omnibench's local SIM and UTMOS substitutes: ``similarity_results.json``, ``utmos_results.json``).
``--meta`` takes a ``meta.lst`` or a known Hugging Face id (see ``sglang_omni_standin.data``).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

from sglang_omni_standin.data import UnknownDataSet, seedtts_meta

ASR_MODEL = "Qwen/Qwen3-ASR-1.7B"


def build_parser() -> argparse.ArgumentParser:
    """sglang-omni's flags for this client."""
    p = argparse.ArgumentParser(prog="python -m benchmarks.eval.benchmark_omni_seedtts")
    mode = p.add_mutually_exclusive_group(required=True)
    for name in ("generate", "transcribe", "similarity", "utmos"):
        mode.add_argument(f"--{name}-only", action="store_true")
    p.add_argument("--meta", required=True, help="a meta.lst, or a Hugging Face data set id")
    p.add_argument("--model", default="minicpmo")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--voice-clone", action="store_true")
    p.add_argument("--reference-audio-field", default="audio.ref_audio")
    p.add_argument("--max-concurrency", type=int, default=16)
    p.add_argument("--output-dir", required=True, type=Path)
    p.add_argument("--asr-concurrency", type=int, default=4)
    p.add_argument("--asr-model", default=ASR_MODEL, help="the ASR server's --model-name")
    p.add_argument("--lang", default="en")
    p.add_argument("--max-new-tokens", type=int, default=256)
    p.add_argument("--temperature", type=float, default=0.7)
    p.add_argument("--seed", type=int)
    p.add_argument("--warmup", type=int, help="warmup requests (default: --max-concurrency)")
    p.add_argument("--max-samples", type=int)
    p.add_argument("--timeout-s", type=float, default=300.0)
    p.add_argument("--stream", action="store_true",
                   help="streaming chat completions: per request audio_ttfp_s, inter_chunk_s, text_ttft_s")
    return p


def generate(a: argparse.Namespace, meta: Path) -> int:
    """``--generate-only``: omnibench's native client with these flags."""
    from omnibench_plugins.seedtts.client import ClientConfig, SeedTtsClient, WarmupFailed, write_outputs
    from omnibench_plugins.seedtts.data import load_meta

    cfg = ClientConfig(meta=str(meta), output_dir=a.output_dir, model=a.model, host=a.host, port=a.port,
                       voice_clone=a.voice_clone, reference_audio_field=a.reference_audio_field,
                       max_concurrency=a.max_concurrency, max_new_tokens=a.max_new_tokens, temperature=a.temperature,
                       seed=a.seed, warmup=a.warmup, max_samples=a.max_samples, timeout_s=a.timeout_s,
                       stream=a.stream)
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


def transcribe(a: argparse.Namespace) -> int:
    """``--transcribe-only``: WER of ``generated.json``'s WAVs on the ASR server at ``--port``."""
    from omnibench_core.records import Endpoint
    from omnibench_core.scoring.asr_wer import WerJob, score

    job = WerJob(rows="generated.json", reference_field="target_text", output="wer_results.json")
    summary = score(job, a.output_dir, endpoint=Endpoint(a.port, a.host), model=a.asr_model, lang=a.lang,
                    concurrency=a.asr_concurrency)
    print(f"wer_corpus {summary['wer_corpus']}, evaluated {summary['evaluated']}, skipped {summary['skipped']}",
          flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    """Run one mode."""
    a = build_parser().parse_args(argv)
    try:
        meta = seedtts_meta(a.meta)
    except UnknownDataSet as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if a.generate_only:
        return generate(a, meta)
    if a.transcribe_only:
        return transcribe(a)
    from omnibench_plugins.seedtts import score

    out = score.similarity(a.output_dir, meta=str(meta)) if a.similarity_only else score.utmos(a.output_dir)
    print({k: v for k, v in out["summary"].items() if not isinstance(v, str)}, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
