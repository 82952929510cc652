"""The stand-in's Video-AMME client: the functions the runbook's ``python -c`` block imports.

``add_video_eval_args(parser, repo_help=...)``, ``video_eval_config_from_args(args)`` and
``await run_videoamme_eval(cfg, compute_wer=False)``, with sglang-omni's flags, writing
``videoamme_results.json`` and ``audio/<sample_id>.wav`` in ``--output-dir`` through omnibench's
native Video-AMME client, sending ``VIDEOAMME_REQUEST_TEXT`` from ``benchmarks.tasks.video_understanding``
as sglang-omni's client does. ``--repo-id zhaochenyang20/Video_AMME_ci`` resolves to omnibench's
local set (``benchmarks.dataset.videomme``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.dataset.videomme import DEFAULT_VIDEOAMME_REPO_ID, load_videoamme_samples
from benchmarks.tasks.video_understanding import VIDEOAMME_REQUEST_TEXT


@dataclass(frozen=True)
class VideoEvalConfig:
    """The client's settings, named as its flags."""

    model: str
    host: str
    port: int
    repo_id: str | None
    split: str
    max_samples: int | None
    video_fps: float | None
    video_max_frames: int | None
    video_max_pixels: int | None
    video_min_pixels: int | None
    video_total_pixels: int | None
    max_tokens: int
    temperature: float
    seed: int | None
    warmup: int | None
    timeout_s: int
    max_concurrency: int
    enable_audio: bool
    output_dir: Path | None
    asr_concurrency: int
    lang: str


def add_video_eval_args(parser: argparse.ArgumentParser, *, repo_help: str) -> argparse.ArgumentParser:
    """sglang-omni's Video-AMME flags: names, types and defaults as upstream's
    (``tests/fixtures/upstream/benchmark_omni_videoamme.json``); ``--timeout-s`` an int."""
    parser.add_argument("--base-url", default=None, help="accepted; the stand-in builds the URL from --host/--port")
    parser.add_argument("--model", default="qwen3-omni")
    parser.add_argument("--host", default="localhost")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--repo-id", default=None, help=repo_help or f"default {DEFAULT_VIDEOAMME_REPO_ID}")
    parser.add_argument("--split", default="test")
    parser.add_argument("--output-dir", type=Path, default=None, help="no results file without it")
    parser.add_argument("--max-samples", type=int)
    parser.add_argument("--max-tokens", type=int, default=256)
    parser.add_argument("--temperature", type=float, default=0.0)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--video-fps", type=float, default=None)
    parser.add_argument("--video-max-frames", type=int, default=None)
    parser.add_argument("--video-min-pixels", type=int, default=None)
    parser.add_argument("--video-max-pixels", type=int, default=None)
    parser.add_argument("--video-total-pixels", type=int, default=None)
    parser.add_argument("--warmup", type=int, default=None)
    parser.add_argument("--max-concurrency", type=int, default=1)
    parser.add_argument("--timeout-s", type=int, default=300)
    parser.add_argument("--enable-audio", action="store_true")
    parser.add_argument("--asr-concurrency", type=int, default=32)
    parser.add_argument("--lang", choices=["en", "zh"], default="en")
    return parser


def video_eval_config_from_args(args: argparse.Namespace) -> VideoEvalConfig:
    """The parsed flags as a config."""
    return VideoEvalConfig(**{name: getattr(args, name) for name in VideoEvalConfig.__dataclass_fields__})


async def run_videoamme_eval(cfg: VideoEvalConfig, *, samples: list[Any] | None = None,
                             compute_wer: bool = True) -> dict[str, Any]:
    """Ask every question once; write ``videoamme_results.json`` (and ``wer_summary.json`` with
    ``compute_wer``, on an ASR server at the same port); return the results document."""
    from omnibench_core.toolkit.synthetic import (
        LOCAL_VIDEO_ANSWER_METHOD as LOCAL_ANSWER_METHOD,  # the server is omnibench's local one
    )
    from omnibench_plugins.videoamme.client import VideoClientConfig, run
    from omnibench_plugins.videoamme.data import VideoSample
    from omnibench_plugins.videoamme.prompt import DEFINED_IN

    repo_id = cfg.repo_id or DEFAULT_VIDEOAMME_REPO_ID
    # as upstream: without --output-dir the audio goes to results/videoamme_audio and no results file is written
    out = cfg.output_dir or Path("results/videoamme_audio")
    samples = samples if samples is not None else [VideoSample(s.sample_id, s.video_path, s.audio_path, s.question, s.options, s.answer, s.duration,
                           s.domain, s.task_type)
               for s in load_videoamme_samples(cfg.max_samples, repo_id=repo_id)]
    client = VideoClientConfig(data=Path(repo_id), output_dir=out, model=cfg.model, host=cfg.host,
                               port=cfg.port, max_samples=cfg.max_samples, video_fps=cfg.video_fps,
                               video_max_frames=cfg.video_max_frames, video_max_pixels=cfg.video_max_pixels,
                               video_min_pixels=cfg.video_min_pixels, video_total_pixels=cfg.video_total_pixels,
                               max_tokens=cfg.max_tokens, temperature=cfg.temperature, timeout_s=cfg.timeout_s,
                               max_concurrency=cfg.max_concurrency, enable_audio=cfg.enable_audio,
                               answer_method=LOCAL_ANSWER_METHOD, request_text=VIDEOAMME_REQUEST_TEXT,
                               request_text_source=DEFINED_IN)
    out.mkdir(parents=True, exist_ok=True)
    results = await run(client, samples)
    results["config"].update(client="sglang-omni stand-in (omnibench native client)", repo_id=repo_id)
    if cfg.output_dir is not None:
        (cfg.output_dir / "videoamme_results.json").write_text(json.dumps(results, indent=2))
    s = results["summary"]
    print(f"Accuracy: {s['accuracy']:.4f} ({s['correct']}/{s['total_samples']}), failed {s['failed']}", flush=True)
    if compute_wer and cfg.enable_audio and cfg.output_dir is not None:
        from benchmarks.tasks.asr import compute_text_audio_consistency_from_records

        wer = await asyncio.to_thread(compute_text_audio_consistency_from_records, results["per_sample"], "en",
                                      "cpu", asr_router_port=cfg.port, asr_concurrency=cfg.asr_concurrency)
        (cfg.output_dir / "wer_summary.json").write_text(json.dumps(wer["summary"], indent=2))
    return results


def main(argv: list[str] | None = None) -> int:
    """``python -m benchmarks.eval.benchmark_omni_videoamme`` with the same flags."""
    parser = add_video_eval_args(argparse.ArgumentParser(prog="benchmark_omni_videoamme"), repo_help="")
    # upstream's main asks for WER without an ASR port, which its newer asr.py refuses; the stand-in skips it
    asyncio.run(run_videoamme_eval(video_eval_config_from_args(parser.parse_args(argv)), compute_wer=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
