"""omnibench's native Video-AMME client: ``videoamme_results.json`` with sglang-omni's fields and
``audio/<sample_id>.wav``. Before the timed window, ``--warmup`` untimed requests (default: the
concurrency, as the runbook and sglang-omni's client since 8a6fc24), all with the first sample; a
failed one stops the client (exit 2). The other defaults are the workload's options (``options.py``:
the runbook's flags). A timed request that fails or a reply without audio is counted as failed (and
wrong), never fatal. Each request body has the fields sglang-omni's client sends,
with its request text (``prompt.py``: the plan passes the checkout's, or omnibench's copy).

    python -m omnibench_plugins.videoamme.client --data DIR --port 8000 --output-dir out
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import aiohttp

from omnibench_core.plugin import (
    PROGRESS_PREFIX,
    Endpoint,
    Progress,
    add_argument,
    by_name,
    default_of,
    post_chat,
    round_or_none,
    speed_summary,
    wav_duration_s,
    write_json,
)
from omnibench_plugins.seedtts.sse import post_stream

from .answers import choices_of, fallback_rng, parse_multi_choice_response
from .data import VideoSample, load_samples
from .options import CLIENT_FLAGS, OPTIONAL_FLAGS, OPTIONS
from .prompt import OWN_COPY, REQUEST_TEXT, sha256
from .token_timing import token_timing

OPTION = by_name(OPTIONS)  # the workload's schema: the one place the defaults and ranges live
# ``config`` as upstream's ``run_video_eval`` writes it (stevejake007/sglang-omni
# ``benchmarks/eval/benchmark_omni_videomme.py`` at 8a6fc24123ce), in its order; then omnibench's own.
CONFIG_KEYS = ("model", "base_url", "repo_id", "split", "max_samples", "max_tokens", "temperature", "seed",
               "video_fps", "video_max_frames", "video_min_pixels", "video_max_pixels", "video_total_pixels",
               "max_concurrency", "warmup", "request_rate", "enable_audio", "asr_device", "asr_concurrency", "lang")
OWN_CONFIG_KEYS = ("client", "data", "output_dir", "host", "port", "timeout_s", "answer_method", "request_text",
                   "request_text_source", "request_text_sha256")
# omnibench's own keys written only when set: a run with stream off writes config as before.
ONLY_WHEN_ON_CONFIG_KEYS = ("stream",)
# The video fields sglang-omni's client sends when set, in its order.
VIDEO_FIELDS = ("video_fps", "video_max_frames", "video_min_pixels", "video_max_pixels", "video_total_pixels")


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
    warmup: int | None = None  # None: max_concurrency, as the runbook and sglang-omni's client since 8a6fc24
    enable_audio: bool = True
    answer_method: str = ""  # how the server picks answers, when known (the local target's substitute)
    request_text: str = REQUEST_TEXT
    request_text_source: str = OWN_COPY
    stream: bool = False  # ask ``stream: true`` and time the text's content chunks (token_timing.py)

    @property
    def endpoint(self) -> Endpoint:
        """Where the server listens (``--host``, ``--port``): its URLs are built there."""
        return Endpoint(self.port, self.host)

    @property
    def warmup_requests(self) -> int:
        """How many warmup requests are sent (upstream's ``resolve_warmup``: an explicit count, 0
        included, wins; unset is the concurrency)."""
        return self.max_concurrency if self.warmup is None else self.warmup


class WarmupFailed(RuntimeError):
    """A warmup request failed: the timed window would absorb cold work, so the client stops."""


def request_body(cfg: VideoClientConfig, sample: VideoSample) -> dict[str, Any]:
    """sglang-omni's Video-AMME request: its request text, the video and the spoken question as file
    paths, speech asked for with ``enable_audio``, each ``video_*`` field that is set."""
    body: dict[str, Any] = {"model": cfg.model, "messages": [{"role": "user", "content": cfg.request_text}],
                            "modalities": ["text", "audio"] if cfg.enable_audio else ["text"],
                            "max_tokens": cfg.max_tokens, "temperature": cfg.temperature, "stream": cfg.stream,
                            "videos": [sample.video], "audios": [sample.audio]}
    if cfg.enable_audio:
        body["audio"] = {"format": "wav"}
    if cfg.stream:  # OpenAI's way to ask for usage in a stream; sglang-omni sends it unasked (docs/fidelity.md)
        body["stream_options"] = {"include_usage": True}
    for key in VIDEO_FIELDS:
        if getattr(cfg, key) is not None:
            body[key] = getattr(cfg, key)
    return body


async def _one(session: aiohttp.ClientSession, cfg: VideoClientConfig, sample: VideoSample,
               save: bool = True) -> dict[str, Any]:
    """One request, timed as upstream's ``make_video_send_fn``: ``engine_time_s`` (RTF and token
    rate) ends after the reply's audio is measured and written; ``latency_s`` after that too.
    ``save`` False (a warmup): the reply's WAV is not written, so only a timed answer lands in
    ``audio/``."""
    row: dict[str, Any] = {"sample_id": sample.sample_id, "text": "", "is_success": False, "latency_s": None,
                           "prompt_tokens": 0, "completion_tokens": 0, "audio_duration_s": 0.0, "rtf": None,
                           "engine_time_s": None, "output_token_rate": None, "wav_path": "", "error": "",
                           "waited_for_slot": False}
    body = request_body(cfg, sample)
    t0 = time.perf_counter()
    if cfg.stream:
        streamed = await post_stream(session, cfg.endpoint.chat_url, body, cfg.timeout_s)
        reply = streamed
        row["token_timing"] = None if streamed.error else token_timing(t0, streamed.text_arrivals,
                                                                        streamed.completion_tokens)
    else:
        reply = await post_chat(session, cfg.endpoint.chat_url, body, cfg.timeout_s)
    row.update(text=reply.text or "", prompt_tokens=reply.prompt_tokens or 0,
               completion_tokens=reply.completion_tokens or 0, error=reply.error)
    if not reply.error and cfg.enable_audio and not reply.wav:
        row["error"] = "No audio in response"
    if not row["error"]:
        if reply.wav:
            row["audio_duration_s"] = wav_duration_s(reply.wav)
        if reply.wav and save:
            path = cfg.output_dir / "audio" / f"{sample.sample_id}.wav"
            path.write_bytes(reply.wav)
            row["wav_path"] = str(path)
        elapsed = time.perf_counter() - t0
        row.update(is_success=True, engine_time_s=elapsed,
                   rtf=elapsed / row["audio_duration_s"] if row["audio_duration_s"] > 0 else None,
                   output_token_rate=row["completion_tokens"] / elapsed if row["completion_tokens"] else None)
    row["latency_s"] = time.perf_counter() - t0
    return row


def records(samples: list[VideoSample], rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``per_sample`` as upstream's ``build_videomme_result_records`` writes it, in sample order:
    the answer parsed from each successful reply (seeded guesses drawn in that order), times to 4
    places, ``""`` for no answer, no audio or no error; omnibench's ``engine_time_s`` and
    ``waited_for_slot`` after upstream's fields."""
    rng = fallback_rng()
    out = []
    for sample, row in zip(samples, rows, strict=True):
        rate, duration, rtf = row["output_token_rate"], row["audio_duration_s"], row["rtf"]
        record: dict[str, Any] = {
            "sample_id": sample.sample_id, "video_path": sample.video, "url": "", "video_id": "",
            "question_id": sample.sample_id, "duration": sample.duration, "domain": sample.domain,
            "sub_category": "", "task_type": sample.task_type, "expected": sample.answer,
            "latency_s": round(row["latency_s"], 4), "prompt_tokens": row["prompt_tokens"],
            "completion_tokens": row["completion_tokens"], "output_token_rate": round(rate, 1) if rate else None,
            "audio_duration_s": round(duration, 4) if duration > 0 else None,
            "rtf": round(rtf, 4) if rtf else None, "wav_path": row["wav_path"] or "", "predicted": "",
            "raw_response": row["error"], "is_correct": False, "is_success": False, "is_mc_fallback": False,
            "error": row["error"], "engine_time_s": round_or_none(row["engine_time_s"], 4),
            "waited_for_slot": row["waited_for_slot"]}
        if "token_timing" in row:  # streamed: each answer's text timing (docs/workloads.md)
            record.update(_timing_fields(row["token_timing"]))
        if row["is_success"]:
            letters, index2ans = choices_of(sample.options)
            predicted, guessed = parse_multi_choice_response(row["text"], letters, index2ans, rng)
            record.update(predicted=predicted, raw_response=row["text"], is_correct=predicted == sample.answer,
                          is_success=True, is_mc_fallback=guessed, error="")
        out.append(record)
    return out


def _timing_fields(timing: Any) -> dict[str, Any]:
    """A streamed record's token timing fields (None each when no text arrived)."""
    if timing is None:
        return {"ttft_s": None, "tpot_s": None, "itl_s": [], "output_tokens": None, "output_tokens_from": None,
                "output_tokens_per_s": None}
    return {"ttft_s": timing.ttft_s, "tpot_s": timing.tpot_s, "itl_s": list(timing.itl_s),
            "output_tokens": timing.output_tokens, "output_tokens_from": timing.tokens_from.value,
            "output_tokens_per_s": timing.output_tokens_per_s}


def _breakdown(per_sample: list[dict[str, Any]], key: str) -> dict[str, dict[str, Any]]:
    groups: dict[str, dict[str, Any]] = {}
    for record in per_sample:
        group = groups.setdefault(record[key], {"total": 0, "correct": 0})
        group["total"] += 1
        group["correct"] += record["is_success"] and record["is_correct"]
    return {name: {**g, "accuracy": round(g["correct"] / g["total"], 4) if g["total"] else 0.0}
            for name, g in sorted(groups.items())}


def accuracy_summary(per_sample: list[dict[str, Any]]) -> dict[str, Any]:
    """The ``summary`` block as upstream's ``compute_videomme_metrics``: failures counted wrong,
    accuracy to 4 places, ``mc_fallback`` = the seeded guesses, ``per_duration``/``per_domain``/
    ``per_task_type`` breakdowns sorted by name."""
    correct = sum(1 for r in per_sample if r["is_success"] and r["is_correct"])
    total = len(per_sample)
    return {"total_samples": total, "correct": correct, "accuracy": round(correct / total, 4) if total else 0.0,
            "failed": sum(1 for r in per_sample if not r["is_success"]),
            "mc_fallback": sum(1 for r in per_sample if r["is_mc_fallback"]),
            "per_duration": _breakdown(per_sample, "duration"), "per_domain": _breakdown(per_sample, "domain"),
            "per_task_type": _breakdown(per_sample, "task_type")}


async def warm_up(session: aiohttp.ClientSession, cfg: VideoClientConfig, samples: list[VideoSample]) -> None:
    """The warmup: ``cfg.warmup_requests`` copies of the first sample at the run's concurrency,
    untimed and unrecorded (upstream's ``BenchmarkRunner._warmup``); any failure raises
    :class:`WarmupFailed` before a timed request is sent."""
    count = cfg.warmup_requests if samples else 0
    if not count:
        return
    print(f"{PROGRESS_PREFIX}warmup: {count} requests with {samples[0].sample_id}", flush=True)
    gate = asyncio.Semaphore(cfg.max_concurrency)

    async def one() -> dict[str, Any]:
        async with gate:
            return await _one(session, cfg, samples[0], save=False)

    rows = await asyncio.gather(*(one() for _ in range(count)))
    failed = [r["error"] for r in rows if not r["is_success"]]
    if failed:
        raise WarmupFailed(f"{len(failed)} of {count} warmup requests (sample {samples[0].sample_id}) failed; "
                           f"first: {failed[0]}")


async def run(cfg: VideoClientConfig, samples: list[VideoSample]) -> dict[str, Any]:
    """Warm up, then send every sample once at the configured concurrency; returns the results document."""
    (cfg.output_dir / "audio").mkdir(parents=True, exist_ok=True)
    gate, progress = asyncio.Semaphore(cfg.max_concurrency), Progress(len(samples), "questions")
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=cfg.timeout_s)) as session:
        await warm_up(session, cfg, samples)

        async def one(sample: VideoSample) -> dict[str, Any]:
            waited = gate.locked()  # every client slot busy when it arrived (upstream's waited_for_slot)
            async with gate:
                row = await _one(session, cfg, sample)
            row["waited_for_slot"] = waited
            progress.tick(row["is_success"])
            return row

        t0 = time.perf_counter()
        with progress:
            rows = await asyncio.gather(*(one(s) for s in samples))
        wall = time.perf_counter() - t0
    per_sample = records(samples, rows)
    return {"summary": accuracy_summary(per_sample), "speed": speed_summary(rows, wall), "config": results_config(cfg),
            "per_sample": per_sample}


def results_config(cfg: VideoClientConfig) -> dict[str, Any]:
    """``config``: upstream's keys in its order, then omnibench's own. What the native client has
    no setting for is null: no data-set repository or split (a local set: ``data``), no seed
    (none is sent), no arrival rate (all at once: upstream's ``inf``), no ASR (the ``asr-wer``
    scorer transcribes and records its own); ``warmup`` is the count sent."""
    mine = {k: str(v) if isinstance(v, Path) else v for k, v in asdict(cfg).items()}
    upstream = {**dict.fromkeys(CONFIG_KEYS), **{k: mine[k] for k in CONFIG_KEYS if k in mine},
                "base_url": cfg.endpoint.base_url, "warmup": cfg.warmup_requests}
    own = {**mine, "client": "omnibench-native", "request_text_sha256": sha256(cfg.request_text)}
    keys = (*OWN_CONFIG_KEYS, *ONLY_WHEN_ON_CONFIG_KEYS) if cfg.stream else OWN_CONFIG_KEYS
    return {**upstream, **{k: own[k] for k in keys}}


def main(argv: list[str] | None = None) -> int:
    """Run the client; exit 0 even when timed requests failed (they are counted), 2 on a failed warmup."""
    p = argparse.ArgumentParser(prog="python -m omnibench_plugins.videoamme.client", description=__doc__.split("\n")[0])
    p.add_argument("--data", required=True, type=Path, help="a local Video-AMME set (samples.json)")
    p.add_argument("--output-dir", required=True, type=Path)
    p.add_argument("--model", default="minicpmo")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    for name in (*CLIENT_FLAGS, *OPTIONAL_FLAGS):
        add_argument(p, OPTION[name])
    p.add_argument("--enable-audio", action="store_true")
    p.add_argument("--stream", action="store_true", help="stream each answer and time its text (TTFT, TPOT, ITL)")
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
    try:
        results = asyncio.run(run(cfg, samples))
    except WarmupFailed as exc:
        print(f"warmup failed: {exc}; no timed request was sent", file=sys.stderr)
        return 2
    write_json(cfg.output_dir / "videoamme_results.json", results)
    s = results["summary"]
    print(f"done: accuracy {s['accuracy']:.3f} ({s['correct']}/{s['total_samples']}), {s['failed']} failed", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
