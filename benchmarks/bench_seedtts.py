"""seed-tts harness overheads, measured side by side in one run (not a test).

1. Native client overhead: requests per second the asyncio client (omnibench_plugins.seedtts.client)
   sustains against a zero-work endpoint (a server process that answers every chat request at once
   with a fixed 0.1 s WAV) at concurrency 16, 64 and 256, against a thread-per-slot client using
   requests, the usual alternative; and the latency each adds per request at concurrency 1.
2. Collection check: omnibench's audio check (header reads on a thread pool, decoding only float
   WAVs) on 1088 generated WAVs, against the runbook's plain sequential read-everything loop.

    python benchmarks/bench_seedtts.py [--requests 2000] [--out bench.json]
    python benchmarks/bench_seedtts.py --smoke    # 8 requests, 16 WAVs: wiring only
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import requests
import soundfile as sf
from bench_ports import free_port  # ports below the ephemeral range (this folder: the script's own)
from tabulate import tabulate

from omnibench_core.process.processes import start_group
from omnibench_core.run.gates import wait_ready
from omnibench_core.scoring.audio_check import check_files
from omnibench_core.toolkit.audio import to_wav_bytes, wav_data_uri, wav_duration_s
from omnibench_plugins.seedtts.client import ClientConfig, SeedTtsClient, request_body
from omnibench_plugins.seedtts.data import Sample

ZERO_WORK_SERVER = """
import base64, io, json, sys
import numpy as np, soundfile as sf
from aiohttp import web
buf = io.BytesIO(); sf.write(buf, np.zeros(2400, dtype=np.float32), 24000, format="WAV", subtype="PCM_16")
reply = json.dumps({"id": "x", "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok",
    "audio": {"data": base64.b64encode(buf.getvalue()).decode()}}, "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}).encode()
async def chat(request):
    await request.read()
    return web.Response(body=reply, content_type="application/json")
async def health(request):
    return web.json_response({"status": "healthy"})
app = web.Application(client_max_size=2**26)
app.router.add_post("/v1/chat/completions", chat); app.router.add_get("/health", health)
web.run_app(app, host="127.0.0.1", port=int(sys.argv[1]), print=None, access_log=None)
"""


def asyncio_client(port: int, samples: list[Sample], concurrency: int, out: Path) -> tuple[float, float]:
    cfg = ClientConfig(meta="-", output_dir=out, port=port, max_concurrency=concurrency, warmup=0)
    result = asyncio.run(SeedTtsClient(cfg).run(samples))
    s = result["summary"]
    assert s["failed_requests"] == 0, result["per_request"][0]["error"]
    return s["throughput_qps"], s["latency_mean_s"]


def threads_client(port: int, samples: list[Sample], concurrency: int, out: Path) -> tuple[float, float]:
    """The alternative design: a thread per concurrency slot, requests.Session each."""
    cfg = ClientConfig(meta="-", output_dir=out, port=port, max_concurrency=concurrency)
    local = threading.local()
    refs = {path: wav_data_uri(Path(path).read_bytes()) for path in {s.ref_audio for s in samples}}  # read once
    (out / "audio").mkdir(parents=True, exist_ok=True)

    def one(sample: Sample) -> float:
        if not hasattr(local, "session"):  # one session per worker thread
            local.session = requests.Session()
        session, ref = local.session, refs[sample.ref_audio]
        t0 = time.perf_counter()
        reply = session.post(cfg.endpoint.chat_url, json=request_body(cfg, sample, ref), timeout=300)
        reply.raise_for_status()
        wav = base64.b64decode(reply.json()["choices"][0]["message"]["audio"]["data"])
        (out / "audio" / f"{sample.sample_id}.wav").write_bytes(wav)
        wav_duration_s(wav)
        return time.perf_counter() - t0

    t0 = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as pool:
        latencies = list(pool.map(one, samples))
    return len(samples) / (time.perf_counter() - t0), statistics.mean(latencies)


def bench_client(work: Path, n: int) -> list[dict[str, float]]:
    ref = work / "ref.wav"
    ref.write_bytes(to_wav_bytes(np.random.default_rng(0).normal(0, 0.1, 8000).astype(np.float32), 16000))
    samples = [Sample(f"s{i:05d}", "ref", str(ref), f"Sentence number {i}.") for i in range(n)]
    port = free_port()
    server = start_group([sys.executable, "-c", ZERO_WORK_SERVER, str(port)], log_path=work / "server.log",
                         env=dict(os.environ))
    rows = []
    try:
        wait_ready(server, f"http://127.0.0.1:{port}/health", timeout_s=60)
        for concurrency in (1, 16, 64, 256):
            count = min(n, 300) if concurrency == 1 else n
            a = asyncio_client(port, samples[:count], concurrency, work / f"a{concurrency}")
            t = threads_client(port, samples[:count], concurrency, work / f"t{concurrency}")
            rows.append({"concurrency": concurrency, "requests": count, "asyncio_req_s": a[0], "threads_req_s": t[0],
                         "asyncio_latency_ms": 1000 * a[1], "threads_latency_ms": 1000 * t[1]})
            print(f"concurrency {concurrency}: asyncio {a[0]:.0f} req/s, threads {t[0]:.0f} req/s", flush=True)
    finally:
        server.stop(5)
    return rows


def runbook_loop(paths: list[Path]) -> tuple[int, int]:
    """The runbook's check: read every file, look for empty or NaN."""
    audio = [sf.read(p) for p in paths]
    return len(audio), sum(int(a.size == 0 or bool(np.isnan(a).any())) for a, _ in audio)


def bench_collection(work: Path, files: int = 1088, rounds: int = 3) -> dict[str, float]:
    folder = work / "audio"
    folder.mkdir()
    rng = np.random.default_rng(0)
    for i in range(files):  # 2 to 6 s of 24 kHz PCM16, like the local target's replies
        sf.write(folder / f"s{i:05d}.wav", rng.normal(0, 0.1, int(24000 * rng.uniform(2, 6))).astype(np.float32),
                 24000, subtype="PCM_16")
    paths = sorted(folder.glob("*.wav"))
    ours, theirs = [], []
    for _ in range(rounds):  # alternate so neither gets a warmer page cache
        t0 = time.perf_counter()
        check = check_files(paths)
        ours.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        count, bad = runbook_loop(paths)
        theirs.append(time.perf_counter() - t0)
        assert (check.files, check.empty_or_nan) == (count, bad)
    return {"files": files, "omnibench_s": min(ours), "runbook_loop_s": min(theirs),
            "speedup_x": min(theirs) / min(ours)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--out")
    parser.add_argument("--smoke", action="store_true", help="8 requests and 16 WAVs once: the figures mean nothing")
    args = parser.parse_args()
    files, rounds = (16, 1) if args.smoke else (1088, 3)
    with tempfile.TemporaryDirectory() as tmp:
        client_rows = bench_client(Path(tmp), 8 if args.smoke else args.requests)
        collection = bench_collection(Path(tmp), files, rounds)
    print(tabulate([[r["concurrency"], r["requests"], f"{r['asyncio_req_s']:.0f}", f"{r['threads_req_s']:.0f}",
                     f"{r['asyncio_req_s'] / r['threads_req_s']:.2f}x", f"{r['asyncio_latency_ms']:.2f}",
                     f"{r['threads_latency_ms']:.2f}"] for r in client_rows],
                   headers=["concurrency", "requests", "asyncio req/s", "threads req/s", "asyncio/threads",
                            "asyncio ms/req", "threads ms/req"]))
    print()
    print(tabulate([[collection["files"], f"{collection['omnibench_s']:.3f}", f"{collection['runbook_loop_s']:.3f}",
                     f"{collection['speedup_x']:.1f}x"]],
                   headers=["WAVs", "omnibench check s", "runbook loop s", "faster"]))
    if args.out:
        Path(args.out).write_text(json.dumps({"client": client_rows, "collection": collection}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
