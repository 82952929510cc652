"""omnibench's native Video-AMME client: ``videoamme_results.json`` with sglang-omni's fields and
``audio/<sample_id>.wav``. No warmup (video's default); the other defaults are the workload's
options (``options.py``: the runbook's flags). A failed request or a reply without audio is counted
as failed (and wrong), never fatal. Each request body has the fields sglang-omni's client sends,
with its request text (``prompt.py``: the plan passes the checkout's, or omnibench's copy).

    python -m omnibench_plugins.videoamme.client --data DIR --port 8000 --output-dir out
"""

from __future__ import annotations

import argparse
import asyncio
import re
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import aiohttp

from omnibench_core.plugin import (
    Endpoint,
    Progress,
    add_argument,
    by_name,
    default_of,
    post_chat,
    speed_summary,
    wav_duration_s,
    write_json,
)

from .data import VideoSample, load_samples
from .options import CLIENT_FLAGS, OPTIONAL_FLAGS, OPTIONS
from .prompt import OWN_COPY, REQUEST_TEXT, sha256

OPTION = by_name(OPTIONS)  # the workload's schema: the one place the defaults and ranges live
# The video fields sglang-omni's client sends when set, in its order.
VIDEO_FIELDS = ("video_fps", "video_max_frames", "video_min_pixels", "video_max_pixels", "video_total_pixels")
_ANSWER = re.compile(r"Answer\s*:\s*\(?([A-D])\b", re.I)
_FALLBACK = re.compile(r"\b([A-D])\b")


@dataclass(frozen=True)
class VideoClientConfig:
    """The client's settings, named as sglang-omni's flags."""

    data: Path
    output_dir: Path
    model: str = "minicpmo"
    host: str = "127.0.0.1"
    port: int = 8000
    max_samples: int | None = default_of(OPTION, "max_samples", int)
    video_fps: float = default_of(OPTION, "video_fps", float)
    video_max_frames: int = default_of(OPTION, "video_max_frames", int)
    video_max_pixels: int = default_of(OPTION, "video_max_pixels", int)
    video_min_pixels: int | None = None
    video_total_pixels: int | None = None
    max_tokens: int = default_of(OPTION, "max_tokens", int)
    temperature: float = default_of(OPTION, "temperature", float)
    timeout_s: float = default_of(OPTION, "timeout_s", float)
    max_concurrency: int = default_of(OPTION, "max_concurrency", int)
    enable_audio: bool = True
    answer_method: str = ""  # how the server picks answers, when known (the local target's substitute)
    request_text: str = REQUEST_TEXT
    request_text_source: str = OWN_COPY

    @property
    def endpoint(self) -> Endpoint:
        """Where the server listens (``--host``, ``--port``): its URLs are built there."""
        return Endpoint(self.port, self.host)


def parse_letter(text: str | None) -> tuple[str | None, bool]:
    """The answer letter: ``Answer: X`` (last one), else a lone letter (an ``mc_fallback``)."""
    if not text:
        return None, False
    found = _ANSWER.findall(text)
    if found:
        return found[-1].upper(), False
    lone = _FALLBACK.findall(text)
    return (lone[-1], True) if lone else (None, False)


def request_body(cfg: VideoClientConfig, sample: VideoSample) -> dict[str, Any]:
    """sglang-omni's Video-AMME request: its request text, the video and the spoken question as file
    paths, speech asked for with ``enable_audio``, each ``video_*`` field that is set."""
    body: dict[str, Any] = {"model": cfg.model, "messages": [{"role": "user", "content": cfg.request_text}],
                            "modalities": ["text", "audio"] if cfg.enable_audio else ["text"],
                            "max_tokens": cfg.max_tokens, "temperature": cfg.temperature, "stream": False,
                            "videos": [sample.video], "audios": [sample.audio]}
    if cfg.enable_audio:
        body["audio"] = {"format": "wav"}
    for key in VIDEO_FIELDS:
        if getattr(cfg, key) is not None:
            body[key] = getattr(cfg, key)
    return body


async def _one(session: aiohttp.ClientSession, cfg: VideoClientConfig, sample: VideoSample) -> dict[str, Any]:
    t0 = time.perf_counter()
    reply = await post_chat(session, cfg.endpoint.chat_url, request_body(cfg, sample), cfg.timeout_s)
    row: dict[str, Any] = {"sample_id": sample.sample_id, "expected": sample.answer, "predicted": None,
                           "raw_response": reply.text, "is_correct": False, "is_success": False, "latency_s": None,
                           "prompt_tokens": reply.prompt_tokens, "completion_tokens": reply.completion_tokens,
                           "audio_duration_s": None, "rtf": None, "wav_path": None, "mc_fallback": False,
                           "error": reply.error, "duration": sample.duration, "domain": sample.domain,
                           "task_type": sample.task_type}
    if not reply.error and cfg.enable_audio and not reply.wav:
        row["error"] = "reply has no audio"
    if reply.wav and not row["error"]:
        path = cfg.output_dir / "audio" / f"{sample.sample_id}.wav"
        path.write_bytes(reply.wav)
        row.update(wav_path=str(path), audio_duration_s=wav_duration_s(reply.wav))
    row["latency_s"] = time.perf_counter() - t0
    if not row["error"]:
        row["predicted"], row["mc_fallback"] = parse_letter(reply.text)
        row.update(is_success=True, is_correct=row["predicted"] == sample.answer,
                   rtf=row["latency_s"] / row["audio_duration_s"] if row["audio_duration_s"] else None)
    return row


def _breakdown(rows: list[dict[str, Any]], key: str) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for row in rows:
        group = out.setdefault(row[key], {"total": 0, "correct": 0})
        group["total"] += 1
        group["correct"] += row["is_correct"]
    for group in out.values():
        group["accuracy"] = group["correct"] / group["total"]
    return out


async def run(cfg: VideoClientConfig, samples: list[VideoSample]) -> dict[str, Any]:
    """Send every sample once at the configured concurrency; returns the results document."""
    (cfg.output_dir / "audio").mkdir(parents=True, exist_ok=True)
    gate, progress = asyncio.Semaphore(cfg.max_concurrency), Progress(len(samples), "questions")
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=cfg.timeout_s)) as session:
        async def one(sample: VideoSample) -> dict[str, Any]:
            async with gate:
                row = await _one(session, cfg, sample)
            progress.tick(row["is_success"])
            return row

        t0 = time.perf_counter()
        with progress:
            rows = await asyncio.gather(*(one(s) for s in samples))
        wall = time.perf_counter() - t0
    correct = sum(r["is_correct"] for r in rows)
    summary = {"total_samples": len(rows), "correct": correct, "accuracy": correct / len(rows) if rows else 0.0,
               "failed": sum(not r["is_success"] for r in rows), "mc_fallback": sum(r["mc_fallback"] for r in rows),
               "by_duration": _breakdown(rows, "duration"), "by_domain": _breakdown(rows, "domain"),
               "by_task_type": _breakdown(rows, "task_type")}
    config = {"client": "omnibench-native", **{k: str(v) if isinstance(v, Path) else v for k, v in asdict(cfg).items()},
              "request_text_sha256": sha256(cfg.request_text)}
    return {"summary": summary, "speed": speed_summary(rows, wall), "config": config, "per_sample": rows}


def main(argv: list[str] | None = None) -> int:
    """Run the client; exit 0 even when requests failed (they are counted)."""
    p = argparse.ArgumentParser(prog="python -m omnibench_plugins.videoamme.client", description=__doc__.split("\n")[0])
    p.add_argument("--data", required=True, type=Path, help="a local Video-AMME set (samples.json)")
    p.add_argument("--output-dir", required=True, type=Path)
    p.add_argument("--model", default="minicpmo")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    for name in (*CLIENT_FLAGS, *OPTIONAL_FLAGS):
        add_argument(p, OPTION[name])
    p.add_argument("--enable-audio", action="store_true")
    p.add_argument("--answer-method", default="", help="recorded in config: how the server answers, if known")
    p.add_argument("--request-text", default=REQUEST_TEXT, help="the text sent with each video (sglang-omni's)")
    p.add_argument("--request-text-source", default=OWN_COPY, help="recorded: where the text was read")
    p.add_argument("--request-text-sha256", help="refuse to run unless the text has this hash")
    a = p.parse_args(argv)
    expected = a.request_text_sha256
    if expected and sha256(a.request_text) != expected:  # the text changed between plan and client
        print(f"error: --request-text has sha256 {sha256(a.request_text)}, not {expected} "
              f"(read from {a.request_text_source}); pass the text unchanged", file=sys.stderr)
        return 2
    cfg = VideoClientConfig(**{k: v for k, v in vars(a).items() if k != "request_text_sha256"})
    samples = load_samples(cfg.data, cfg.max_samples)
    results = asyncio.run(run(cfg, samples))
    write_json(cfg.output_dir / "videoamme_results.json", results)
    s = results["summary"]
    print(f"done: accuracy {s['accuracy']:.3f} ({s['correct']}/{s['total_samples']}), {s['failed']} failed", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
