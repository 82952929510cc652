"""omnibench's native seed-tts client: the same files and fields as sglang-omni's
``benchmark_omni_seedtts --generate-only``, but a failed request is recorded and counted, never
fatal (sglang-omni's client stops on the first HTTP error or reply without audio).

asyncio with aiohttp: one event loop holds every in-flight request, so concurrency is a
semaphore, not a thread per request (see the README's performance section for its overhead).

    python -m omnibench_plugins.seedtts.client --meta meta.lst --port 8000 --output-dir out --voice-clone
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp

from omnibench_core.plugin import (
    PROGRESS_PREFIX,
    ChatReply,
    Endpoint,
    Progress,
    add_argument,
    by_name,
    default_of,
    post_chat,
    speed_summary,
    wav_data_uri,
    wav_duration_s,
    write_json,
)

from . import playback
from .data import Sample, load_meta
from .options import OPTIONS
from .sse import StreamReply, post_stream

OPTION = by_name(OPTIONS)  # the workload's schema: the one place the defaults and ranges live

PROMPT = "Please read the following text out loud in English: "


class WarmupFailed(RuntimeError):
    """A warmup request failed: the timed window would absorb cold work, so the client stops."""


@dataclass(frozen=True)
class ClientConfig:
    """The client's flags, named as sglang-omni's."""

    meta: str
    output_dir: Path
    model: str = "minicpmo"
    host: str = "127.0.0.1"
    port: int = 8000
    voice_clone: bool = True
    reference_audio_field: str = "audio.ref_audio"
    max_concurrency: int = default_of(OPTION, "max_concurrency", int)
    max_new_tokens: int = default_of(OPTION, "max_new_tokens", int)
    temperature: float = default_of(OPTION, "temperature", float)
    seed: int | None = None
    warmup: int | None = None  # None: max_concurrency, as sglang-omni
    max_samples: int | None = None
    timeout_s: float = default_of(OPTION, "timeout_s", float)
    stream: bool = default_of(OPTION, "stream", bool)

    @property
    def endpoint(self) -> Endpoint:
        """Where the server listens (``--host``, ``--port``): its URLs are built there."""
        return Endpoint(self.port, self.host)


def _set_field(body: dict[str, Any], dotted: str, value: Any) -> None:
    *parents, leaf = dotted.split(".")
    node = body
    for key in parents:
        node = node.setdefault(key, {})
    node[leaf] = value


def request_body(cfg: ClientConfig, sample: Sample, ref_uri: str | None) -> dict[str, Any]:
    """The exact body sglang-omni's client sends (seed only when given)."""
    body: dict[str, Any] = {"model": cfg.model, "messages": [{"role": "user", "content": PROMPT + sample.target_text}],
                            "modalities": ["text", "audio"], "audio": {"format": "wav"},
                            "max_tokens": cfg.max_new_tokens, "temperature": cfg.temperature, "stream": cfg.stream}
    if ref_uri is not None:
        _set_field(body, cfg.reference_audio_field, ref_uri)
    if cfg.seed is not None:
        body["seed"] = cfg.seed
    return body


class SeedTtsClient:
    """Sends every sample once at the configured concurrency and writes the result files."""

    def __init__(self, cfg: ClientConfig):
        self.cfg = cfg
        self.audio_dir = cfg.output_dir / "audio"
        self._refs: dict[str, str] = {}

    def _ref_uri(self, sample: Sample) -> str | None:
        if not self.cfg.voice_clone:
            return None
        if sample.ref_audio not in self._refs:  # the whole reference WAV file, as sglang-omni sends it
            self._refs[sample.ref_audio] = wav_data_uri(Path(sample.ref_audio).read_bytes())
        return self._refs[sample.ref_audio]

    async def _send(self, session: aiohttp.ClientSession, sample: Sample, save: bool) -> dict[str, Any]:
        row: dict[str, Any] = {"id": sample.sample_id, "text": sample.target_text, "is_success": False,
                               "latency_s": None, "audio_duration_s": None, "rtf": None, "prompt_tokens": None,
                               "completion_tokens": None, "output_token_rate": None, "wav_path": None, "error": ""}
        t0 = time.perf_counter()
        try:
            body = request_body(self.cfg, sample, self._ref_uri(sample))
        except OSError as exc:  # an unreadable reference WAV
            row.update(error=f"{type(exc).__name__}: {exc}", latency_s=0.0)
            return row
        reply: ChatReply | StreamReply
        if self.cfg.stream:
            reply = await post_stream(session, self.cfg.endpoint.chat_url, body, self.cfg.timeout_s)
            row.update(playback.request_fields(t0, reply.arrivals, reply.durations, reply.text_first,
                                               reply.first_payload_bytes, reply.streamed))
        else:
            reply = await post_chat(session, self.cfg.endpoint.chat_url, body, self.cfg.timeout_s)
        row.update(prompt_tokens=reply.prompt_tokens, completion_tokens=reply.completion_tokens,
                   error=reply.error or ("" if reply.wav else "reply has no audio"))
        if reply.wav and not reply.error:
            duration = wav_duration_s(reply.wav)
            if save:
                path = self.audio_dir / f"{sample.sample_id}.wav"
                path.write_bytes(reply.wav)
                row["wav_path"] = str(path)
            latency = time.perf_counter() - t0  # send to reply received (its [DONE], streaming) and saved
            row.update(is_success=duration > 0, latency_s=latency, audio_duration_s=duration,
                       rtf=latency / duration if duration else None,
                       output_token_rate=(row["completion_tokens"] or 0) / latency,
                       error="" if duration > 0 else "reply audio is empty or unreadable")
        if row["latency_s"] is None:
            row["latency_s"] = time.perf_counter() - t0
        return row

    async def run(self, samples: list[Sample]) -> dict[str, Any]:
        """Health check, warmup, timed window; returns ``speed_results.json``'s content."""
        cfg = self.cfg
        self.audio_dir.mkdir(parents=True, exist_ok=True)
        timeout = aiohttp.ClientTimeout(total=cfg.timeout_s)
        connector = aiohttp.TCPConnector(limit=cfg.max_concurrency)
        async with aiohttp.ClientSession(timeout=timeout, connector=connector) as session:
            async with session.get(cfg.endpoint.health_url) as health:
                if health.status != 200:
                    raise RuntimeError(f"server not healthy: HTTP {health.status}")
            warmup = cfg.max_concurrency if cfg.warmup is None else cfg.warmup
            if warmup and samples:
                print(f"{PROGRESS_PREFIX}warmup: {warmup} requests with {samples[0].sample_id}", flush=True)
                rows = await asyncio.gather(*(self._send(session, samples[0], save=False) for _ in range(warmup)))
                failed = [r["error"] for r in rows if not r["is_success"]]
                if failed:
                    raise WarmupFailed(f"{len(failed)} of {warmup} warmup requests failed; first: {failed[0]}")
            gate = asyncio.Semaphore(cfg.max_concurrency)
            progress = Progress(len(samples), "requests")

            async def one(sample: Sample) -> dict[str, Any]:
                async with gate:
                    row = await self._send(session, sample, save=True)
                progress.tick(row["is_success"])
                return row

            t0 = time.perf_counter()
            with progress:
                rows = await asyncio.gather(*(one(s) for s in samples))
            wall = time.perf_counter() - t0
        summary = {**speed_summary(rows, wall), "max_concurrency": cfg.max_concurrency, "warmup_requests": warmup}
        if cfg.stream:
            summary.update(playback.stream_summary(rows))
        config = {"client": "omnibench-native", "model": cfg.model, "meta": cfg.meta, "max_concurrency": cfg.max_concurrency,
                  "max_new_tokens": cfg.max_new_tokens, "temperature": cfg.temperature, "seed": cfg.seed,
                  "voice_clone": cfg.voice_clone, "reference_audio_field": cfg.reference_audio_field,
                  "timeout_s": cfg.timeout_s, "warmup": warmup, "port": cfg.port, "stream": cfg.stream}
        return {"summary": summary, "config": config, "per_request": rows}


def write_outputs(output_dir: Path, samples: list[Sample], results: dict[str, Any]) -> None:
    """``speed_results.json``, ``generated.json`` and ``results.csv`` as sglang-omni names them."""
    rows = results["per_request"]
    write_json(output_dir / "speed_results.json", results)
    by_id = {s.sample_id: s for s in samples}
    write_json(output_dir / "generated.json", [
        {"sample_id": r["id"], "target_text": r["text"], "ref_audio": by_id[r["id"]].ref_audio, "wav_path": r["wav_path"],
         "is_success": r["is_success"], "latency_s": r["latency_s"], "audio_duration_s": r["audio_duration_s"],
         "error": r["error"]} for r in rows])
    with open(output_dir / "results.csv", "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]) if rows else ["id"])
        writer.writeheader()
        writer.writerows(rows)


def parse_args(argv: list[str] | None = None) -> ClientConfig:
    """The command line, with sglang-omni's flag names."""
    p = argparse.ArgumentParser(prog="python -m omnibench_plugins.seedtts.client", description=__doc__.split("\n")[0])
    p.add_argument("--meta", required=True, help="a seed-tts meta.lst")
    p.add_argument("--output-dir", required=True, type=Path)
    p.add_argument("--model", default="minicpmo")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--voice-clone", action="store_true")
    p.add_argument("--reference-audio-field", default="audio.ref_audio")
    p.add_argument("--stream", action="store_true", help="stream each answer and time its events (sglang-omni's flag)")
    for name in ("max_concurrency", "max_new_tokens", "temperature", "seed", "warmup", "max_samples", "timeout_s"):
        add_argument(p, OPTION[name])
    a = p.parse_args(argv)
    return ClientConfig(meta=a.meta, output_dir=a.output_dir, model=a.model, host=a.host, port=a.port,
                        voice_clone=a.voice_clone, reference_audio_field=a.reference_audio_field,
                        max_concurrency=a.max_concurrency, max_new_tokens=a.max_new_tokens, temperature=a.temperature,
                        seed=a.seed, warmup=a.warmup, max_samples=a.max_samples, timeout_s=a.timeout_s,
                        stream=a.stream)


def main(argv: list[str] | None = None) -> int:
    """Run the client; exit 0 even when requests failed (they are counted), 2 on a failed warmup."""
    cfg = parse_args(argv)
    samples = load_meta(cfg.meta, cfg.max_samples)
    if not samples:
        print(f"no samples in {cfg.meta}", file=sys.stderr)
        return 2
    cfg.output_dir.mkdir(parents=True, exist_ok=True)
    try:
        results = asyncio.run(SeedTtsClient(cfg).run(samples))
    except WarmupFailed as exc:
        print(f"warmup failed: {exc}", file=sys.stderr)
        return 2
    write_outputs(cfg.output_dir, samples, results)
    s = results["summary"]
    print(f"done: {s['completed_requests']} ok, {s['failed_requests']} failed, {s['throughput_qps']:.2f} req/s",
          flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
