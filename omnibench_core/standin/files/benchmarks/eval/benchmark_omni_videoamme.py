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
    repo_id: str
    max_samples: int | None
    video_fps: float
    video_max_frames: int
    video_max_pixels: int
    video_min_pixels: int | None
    video_total_pixels: int | None
    max_tokens: int
    temperature: float
    timeout_s: float
    max_concurrency: int
    enable_audio: bool
    output_dir: Path
    asr_concurrency: int


def add_video_eval_args(parser: argparse.ArgumentParser, repo_help: str = "") -> argparse.ArgumentParser:
    """sglang-omni's Video-AMME flags."""
    parser.add_argument("--model", default="minicpmo")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--repo-id", default=DEFAULT_VIDEOAMME_REPO_ID, help=repo_help or "Hugging Face data set id")
    parser.add_argument("--max-samples", type=int)
    parser.add_argument("--video-fps", type=float, default=2.0)
    parser.add_argument("--video-max-frames", type=int, default=128)
    parser.add_argument("--video-max-pixels", type=int, default=401408)
    parser.add_argument("--video-min-pixels", type=int)
    parser.add_argument("--video-total-pixels", type=int)
    parser.add_argument("--max-tokens", type=int, default=256)
    parser.add_argument("--temperature", type=float, default=0.0)
    parser.add_argument("--timeout-s", type=float, default=500.0)
    parser.add_argument("--max-concurrency", type=int, default=16)
    parser.add_argument("--enable-audio", action="store_true")
    parser.add_argument("--output-dir", type=Path, default=Path("results/videoamme"))
    parser.add_argument("--asr-concurrency", type=int, default=4)
    return parser


def video_eval_config_from_args(args: argparse.Namespace) -> VideoEvalConfig:
    """The parsed flags as a config."""
    return VideoEvalConfig(**{name: getattr(args, name) for name in VideoEvalConfig.__dataclass_fields__})


async def run_videoamme_eval(cfg: VideoEvalConfig, compute_wer: bool = False) -> dict[str, Any]:
    """Ask every question once; write ``videoamme_results.json`` (and ``wer_summary.json`` with
    ``compute_wer``, on an ASR server at the same port); return the results document."""
    from omnibench_core.toolkit.synthetic import (
        LOCAL_VIDEO_ANSWER_METHOD as LOCAL_ANSWER_METHOD,  # the server is omnibench's local one
    )
    from omnibench_plugins.videoamme.client import VideoClientConfig, run
    from omnibench_plugins.videoamme.data import VideoSample
    from omnibench_plugins.videoamme.prompt import DEFINED_IN

    samples = [VideoSample(s.sample_id, s.video_path, s.audio_path, s.question, s.options, s.answer, s.duration,
                           s.domain, s.task_type)
               for s in load_videoamme_samples(cfg.max_samples, repo_id=cfg.repo_id)]
    client = VideoClientConfig(data=Path(cfg.repo_id), output_dir=cfg.output_dir, model=cfg.model, host=cfg.host,
                               port=cfg.port, max_samples=cfg.max_samples, video_fps=cfg.video_fps,
                               video_max_frames=cfg.video_max_frames, video_max_pixels=cfg.video_max_pixels,
                               video_min_pixels=cfg.video_min_pixels, video_total_pixels=cfg.video_total_pixels,
                               max_tokens=cfg.max_tokens, temperature=cfg.temperature, timeout_s=cfg.timeout_s,
                               max_concurrency=cfg.max_concurrency, enable_audio=cfg.enable_audio,
                               answer_method=LOCAL_ANSWER_METHOD, request_text=VIDEOAMME_REQUEST_TEXT,
                               request_text_source=DEFINED_IN)
    cfg.output_dir.mkdir(parents=True, exist_ok=True)
    results = await run(client, samples)
    results["config"].update(client="sglang-omni stand-in (omnibench native client)", repo_id=cfg.repo_id)
    (cfg.output_dir / "videoamme_results.json").write_text(json.dumps(results, indent=2))
    s = results["summary"]
    print(f"Accuracy: {s['accuracy']:.4f} ({s['correct']}/{s['total_samples']}), failed {s['failed']}", flush=True)
    if compute_wer:
        from benchmarks.tasks.asr import compute_text_audio_consistency_from_records

        wer = await asyncio.to_thread(compute_text_audio_consistency_from_records, results["per_sample"], "en",
                                      "cpu", asr_router_port=cfg.port, asr_concurrency=cfg.asr_concurrency)
        (cfg.output_dir / "wer_summary.json").write_text(json.dumps(wer["summary"], indent=2))
    return results


def main(argv: list[str] | None = None) -> int:
    """``python -m benchmarks.eval.benchmark_omni_videoamme`` with the same flags."""
    parser = add_video_eval_args(argparse.ArgumentParser(prog="benchmark_omni_videoamme"))
    asyncio.run(run_videoamme_eval(video_eval_config_from_args(parser.parse_args(argv))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
