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
    DEFAULT_ARRIVAL_SEED,
    PROGRESS_PREFIX,
    ChatReply,
    Endpoint,
    Progress,
    add_argument,
    by_name,
    default_of,
    lateness_summary,
    planned_offsets,
    post_chat,
    speed_summary,
    wav_data_uri,
    wav_duration_s,
    write_json,
)

from . import playback
from .data import Sample, load_meta
from .files import RESULTS_CSV_COLUMNS, generated_entry, ordered_config, per_request_entry, raw_result, results_csv_row
from .options import OPTIONS
from .sse import StreamReply, post_stream

OPTION = by_name(OPTIONS)  # the workload's schema: the one place the defaults and ranges live

PROMPT = "Please read the following text out loud in English: "
WARMUP_DIR = "warmup"  # the separate warm-up set's results.json and audio/, as upstream's


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
    warmup_meta: str | None = None  # a separate warm-up set; None: replay the first measured sample
    max_samples: int | None = None
    timeout_s: float = default_of(OPTION, "timeout_s", float)
    stream: bool = default_of(OPTION, "stream", bool)
    request_rate: float | None = None  # None: every request at once (upstream's inf)
    arrival_seed: int | None = DEFAULT_ARRIVAL_SEED  # None: a fresh schedule each run, as upstream's client

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
    """The body sglang-omni's client sends (seed only when given).

    Voice clone with ``audio.ref_audio``: the reference WAV as a data URI in ``audio``; with
    ``audios``: the reference's path in ``audios`` and a prompt that quotes its transcript
    (``VoiceCloneOmni.generate_speech``, benchmarks/tasks/tts.py, stevejake007/sglang-omni at
    8a6fc24123ced2516b6d0acd9278f4771ab0e6b6)."""
    prompt = PROMPT + sample.target_text
    if cfg.voice_clone and cfg.reference_audio_field == "audios":
        prompt = (f'Listen to the audio above. The speaker is reading: "{sample.ref_text}". '
                  f"Now please read the following text out loud in the same voice and style: {sample.target_text}")
    body: dict[str, Any] = {"model": cfg.model, "messages": [{"role": "user", "content": prompt}],
                            "modalities": ["text", "audio"], "audio": {"format": "wav"},
                            "max_tokens": cfg.max_new_tokens, "temperature": cfg.temperature, "stream": cfg.stream}
    if cfg.seed is not None:
        body["seed"] = cfg.seed
    if cfg.voice_clone and cfg.reference_audio_field == "audios":
        body["audios"] = [sample.ref_audio]
    elif ref_uri is not None:
        _set_field(body, cfg.reference_audio_field, ref_uri)
    return body


def preload_references(cfg: ClientConfig, samples: list[Sample]) -> dict[str, str | OSError]:
    """Every reference WAV read and base64-encoded once, before any request is timed (as
    upstream's ``preload_reference_audio``); an unreadable one is kept as its error, so only its
    requests fail. Only voice clone with ``audio.ref_audio`` sends the audio itself."""
    if not (cfg.voice_clone and cfg.reference_audio_field == "audio.ref_audio"):
        return {}
    refs: dict[str, str | OSError] = {}
    for sample in samples:
        if sample.ref_audio not in refs:
            try:
                refs[sample.ref_audio] = wav_data_uri(Path(sample.ref_audio).read_bytes())
            except OSError as exc:
                refs[sample.ref_audio] = exc
    return refs


class SeedTtsClient:
    """Sends every sample once at the configured concurrency and writes the result files."""

    def __init__(self, cfg: ClientConfig):
        self.cfg = cfg
        self.audio_dir = cfg.output_dir / "audio"
        self._refs: dict[str, str | OSError] = {}

    async def _send(self, session: aiohttp.ClientSession, sample: Sample, save: Path | None) -> dict[str, Any]:
        """One request. Timed as upstream's ``make_send_fn``: RTF, ``engine_time_s`` and the token
        rate end when the reply is read and its audio measured; ``latency_s`` also covers writing
        the WAV. The reference was encoded before the timed window."""
        row: dict[str, Any] = {"id": sample.sample_id, "text": sample.target_text, "is_success": False,
                               "latency_s": None, "audio_duration_s": None, "rtf": None, "prompt_tokens": None,
                               "completion_tokens": None, "output_token_rate": None, "wav_path": None, "error": "",
                               "engine_time_s": None, "waited_for_slot": False}
        ref = self._refs.get(sample.ref_audio)
        if isinstance(ref, OSError):  # an unreadable reference WAV: this request fails, untimed
            row.update(error=f"{type(ref).__name__}: {ref}", latency_s=0.0)
            return row
        body = request_body(self.cfg, sample, ref)
        t0 = time.perf_counter()
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
            elapsed = time.perf_counter() - t0  # reply read and measured; the WAV write is not in it
            row.update(is_success=duration > 0, audio_duration_s=duration, engine_time_s=elapsed,
                       rtf=elapsed / duration if duration > 0 else None,
                       output_token_rate=(row["completion_tokens"] or 0) / elapsed if row["completion_tokens"] else None,
                       error="" if duration > 0 else f"Invalid audio ({len(reply.wav)} bytes)")
            if save is not None:  # the folder its WAV goes to
                path = save / f"{sample.sample_id}.wav"
                path.write_bytes(reply.wav)
                row["wav_path"] = str(path)
        row["latency_s"] = time.perf_counter() - t0  # send to reply saved (upstream's latency_s)
        return row

    async def _separate_warmup(self, session: aiohttp.ClientSession, warm_set: list[Sample],
                               config: dict[str, Any]) -> None:
        """The warm-up set sent at the run's concurrency, untimed, its answers kept apart in
        ``warmup/results.json`` and ``warmup/audio`` (upstream's ``run_separate_warmup``): the
        measured samples meet a warm server but none of their own answers cached. Written
        before a failure stops the client."""
        folder = self.cfg.output_dir / WARMUP_DIR
        (folder / "audio").mkdir(parents=True, exist_ok=True)
        print(f"{PROGRESS_PREFIX}warmup: {len(warm_set)} requests from {self.cfg.warmup_meta}", flush=True)
        gate = asyncio.Semaphore(self.cfg.max_concurrency)

        async def one(sample: Sample) -> dict[str, Any]:
            async with gate:
                return await self._send(session, sample, save=folder / "audio")

        t0 = time.perf_counter()
        rows = await asyncio.gather(*(one(s) for s in warm_set))
        done = sum(1 for r in rows if r["is_success"])
        write_json(folder / "results.json", {"config": config, "completed": done, "requested": len(warm_set),
                                             "wall_clock_s": time.perf_counter() - t0,
                                             "results": [raw_result(r) for r in rows]})
        if done != len(warm_set):
            first = next(r["error"] for r in rows if not r["is_success"])
            raise WarmupFailed(f"the warm-up set completed {done}/{len(warm_set)}; first error: {first}")

    async def run(self, samples: list[Sample]) -> dict[str, Any]:
        """References encoded, health check, warmup, timed window; returns ``speed_results.json``'s content."""
        cfg = self.cfg
        self.audio_dir.mkdir(parents=True, exist_ok=True)
        warmup = cfg.max_concurrency if cfg.warmup is None else cfg.warmup
        warm_set = warmup_samples(cfg.warmup_meta, warmup)
        # before the warmup and the timed window, as upstream (the warm-up set's references too)
        self._refs = preload_references(cfg, samples + warm_set)
        # upstream's keys (its lang and speaker defaults, no talker sampling: omnibench sends none) and
        # omnibench's; request_rate None is upstream's inf, which JSON cannot hold
        config = ordered_config({
            "model": cfg.model, "base_url": cfg.endpoint.base_url, "meta": cfg.meta, "voice_clone": cfg.voice_clone,
            "reference_audio_field": cfg.reference_audio_field, "stream": cfg.stream, "lang": "en", "speaker": "Ethan",
            "max_samples": cfg.max_samples, "max_new_tokens": cfg.max_new_tokens, "temperature": cfg.temperature,
            "seed": cfg.seed, "talker_temperature": None, "talker_top_p": None, "talker_top_k": None,
            "talker_repetition_penalty": None, "warmup": warmup, "warmup_meta": cfg.warmup_meta,
            "max_concurrency": cfg.max_concurrency, "request_rate": cfg.request_rate, "client": "omnibench-native",
            "timeout_s": cfg.timeout_s, "port": cfg.port, "arrival_seed": cfg.arrival_seed if cfg.request_rate else None})
        timeout = aiohttp.ClientTimeout(total=cfg.timeout_s)
        connector = aiohttp.TCPConnector(limit=cfg.max_concurrency)
        async with aiohttp.ClientSession(timeout=timeout, connector=connector) as session:
            async with session.get(cfg.endpoint.health_url) as health:
                if health.status != 200:
                    raise RuntimeError(f"server not healthy: HTTP {health.status}")
            if warm_set:
                await self._separate_warmup(session, warm_set, config)
            elif warmup and samples:
                print(f"{PROGRESS_PREFIX}warmup: {warmup} requests with {samples[0].sample_id}", flush=True)
                rows = await asyncio.gather(*(self._send(session, samples[0], save=None) for _ in range(warmup)))
                failed = [r["error"] for r in rows if not r["is_success"]]
                if failed:
                    raise WarmupFailed(f"{len(failed)} of {warmup} warmup requests failed; first: {failed[0]}")
            gate = asyncio.Semaphore(cfg.max_concurrency)
            progress = Progress(len(samples), "requests")
            loop = asyncio.get_running_loop()
            offsets = planned_offsets(cfg.request_rate, len(samples), cfg.arrival_seed)

            async def one(sample: Sample, due: float | None) -> dict[str, Any]:
                if due is not None:  # open loop: arrives when the schedule says, not when a slot frees
                    await asyncio.sleep(max(0.0, due - loop.time()))
                waited = gate.locked()  # every slot busy when it arrived: its clock starts late
                async with gate:
                    sent = loop.time()
                    row = await self._send(session, sample, save=self.audio_dir)
                row["waited_for_slot"] = waited
                if due is not None:
                    row["dispatch_lateness_s"] = sent - due
                progress.tick(row["is_success"])
                return row

            t0 = time.perf_counter()
            start = loop.time()
            dues = [None] * len(samples) if offsets is None else [start + o for o in offsets]
            with progress:
                rows = await asyncio.gather(*(one(s, d) for s, d in zip(samples, dues, strict=True)))
            wall = time.perf_counter() - t0
        summary = {**speed_summary(rows, wall), "max_concurrency": cfg.max_concurrency, "warmup_requests": warmup}
        if cfg.stream:
            summary.update(playback.stream_summary(rows))
        if cfg.request_rate is not None:
            summary.update(request_rate=cfg.request_rate, arrival_seed=cfg.arrival_seed,
                           **lateness_summary([r["dispatch_lateness_s"] for r in rows]))
        return {"summary": summary, "config": config, "per_request": [per_request_entry(r) for r in rows]}


def warmup_samples(meta: str | None, count: int) -> list[Sample]:
    """The separate warm-up set: the first ``count`` samples of ``meta`` (none without one or with
    no warmup); fewer than ``count`` there stops the client, as upstream's ``load_warmup_samples``."""
    if meta is None or count <= 0:
        return []
    found = load_meta(meta, count)
    if len(found) != count:
        raise WarmupFailed(f"{count} warmup requests need {count} samples in --warmup-meta {meta}; it holds {len(found)}")
    return found


def write_outputs(output_dir: Path, samples: list[Sample], results: dict[str, Any]) -> None:
    """``speed_results.json``, ``generated.json`` and ``results.csv`` as sglang-omni writes them
    (``save_speed_results``, ``save_generated_audio_metadata``), from the written entries."""
    rows = results["per_request"]
    write_json(output_dir / "speed_results.json", results)
    by_id = {s.sample_id: s for s in samples}
    write_json(output_dir / "generated.json",
               [generated_entry(r, by_id[r["id"]].target_text, by_id[r["id"]].ref_audio) for r in rows])
    with open(output_dir / "results.csv", "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(RESULTS_CSV_COLUMNS)
        writer.writerows(results_csv_row(r) for r in rows)


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
    p.add_argument("--warmup-meta", default=None, help="a separate seed-tts meta.lst for the warmup (sglang-omni's flag)")
    for name in ("max_concurrency", "max_new_tokens", "temperature", "seed", "warmup", "max_samples", "timeout_s",
                 "request_rate", "arrival_seed"):
        add_argument(p, OPTION[name])
    a = p.parse_args(argv)
    return ClientConfig(meta=a.meta, output_dir=a.output_dir, model=a.model, host=a.host, port=a.port,
                        voice_clone=a.voice_clone, reference_audio_field=a.reference_audio_field,
                        max_concurrency=a.max_concurrency, max_new_tokens=a.max_new_tokens, temperature=a.temperature,
                        seed=a.seed, warmup=a.warmup, max_samples=a.max_samples, timeout_s=a.timeout_s,
                        stream=a.stream, request_rate=a.request_rate, arrival_seed=a.arrival_seed,
                        warmup_meta=a.warmup_meta)


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
    print(f"done: {s['completed_requests']} ok, {s['failed_requests']} failed, {s.get('throughput_qps', 0):.2f} req/s",
          flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
