"""Issue 22: streaming speech latency. The native client against small scripted servers (per-event
timestamps, the player model, every bad-input rule), a local streaming run through `invoke run`, a
planted per-chunk delay that `invoke compare` calls worse, and the stand-in's own client with
`--stream`."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pytest
from conftest import REPO, free_port, invoke_run_into
from scale_helpers import invoke_standin

from omnibench_core.audio import to_wav_bytes
from omnibench_plugins.seedtts.playback import simulate_player

RATE = 24000


def wav_b64(seconds: float) -> str:
    """A WAV chunk of ``seconds`` of a quiet tone, base64 as a delta carries it."""
    t = np.arange(int(seconds * RATE)) / RATE
    return base64.b64encode(to_wav_bytes(0.1 * np.sin(2 * np.pi * 220 * t), RATE)).decode("ascii")


def event(delta: dict, **extra) -> bytes:
    return f"data: {json.dumps({'choices': [{'index': 0, 'delta': delta, 'finish_reason': None}], **extra})}\n\n".encode()


DONE = b"data: [DONE]\n\n"
USAGE = event({}, usage={"prompt_tokens": 5, "completion_tokens": 7})


class Script:
    """What the scripted server answers a chat request with: a list of (seconds to wait, bytes to
    send); ``content_type`` of the reply; ``hold`` set means block after the last part until released."""

    def __init__(self, parts: list[tuple[float, bytes]], content_type: str = "text/event-stream",
                 hold: bool = False):
        self.parts, self.content_type, self.hold = parts, content_type, hold
        self.bodies: list[dict] = []


@pytest.fixture
def scripted() -> Iterator[Callable[[Script], int]]:
    """A real HTTP server on loopback (a thread) that plays one Script per test; its port."""
    servers: list[ThreadingHTTPServer] = []
    release = threading.Event()

    def start(script: Script) -> int:
        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def do_GET(self):
                self.send_response(200)
                self.end_headers()
                self.wfile.write(b'{"status": "healthy"}')

            def do_POST(self):
                script.bodies.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
                self.send_response(200)
                self.send_header("Content-Type", script.content_type)
                self.end_headers()  # HTTP/1.0: the body ends when the connection closes
                for wait, data in script.parts:
                    release.wait(wait)
                    self.wfile.write(data)
                    self.wfile.flush()
                if script.hold:
                    release.wait(60)

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        server.daemon_threads = True
        servers.append(server)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        return server.server_address[1]

    yield start
    release.set()
    for server in servers:
        server.shutdown()
        server.server_close()


@pytest.fixture
def meta(tmp_path) -> Path:
    """A one-sample seed-tts meta.lst (its reference WAV is not sent: no --voice-clone)."""
    (tmp_path / "ref.wav").write_bytes(to_wav_bytes(np.zeros(RATE // 10), RATE))
    path = tmp_path / "meta.lst"
    path.write_text("s1|a reference|ref.wav|Read this out loud.\n")
    return path


def run_client(meta: Path, port: int, out: Path, timeout_s: float = 20) -> dict:
    """The native client as the workload runs it, with --stream; its speed_results.json."""
    argv = [sys.executable, "-m", "omnibench_plugins.seedtts.client", "--meta", str(meta), "--port", str(port),
            "--output-dir", str(out), "--warmup", "0", "--max-concurrency", "1", "--timeout-s", f"{timeout_s:g}",
            "--stream"]
    done = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads((out / "speed_results.json").read_text())


def only_row(results: dict) -> dict:
    (row,) = results["per_request"]
    return row


# -- the player model ----------------------------------------------------------------------------
def test_the_player_starts_at_the_first_chunk_and_plays_at_the_audio_rate():
    # 0.5 s chunks arriving every 0.2 s: the buffer only grows, nothing starves.
    assert simulate_player([0.0, 0.2, 0.4, 0.6], [0.5] * 4).max_underrun_s == 0.0
    # 0.1 s chunks every 0.4 s: each one waited for 0.3 s after the one before ran out.
    player = simulate_player([0.0, 0.4, 0.8], [0.1] * 3)
    assert player.max_underrun_s == pytest.approx(0.3) and player.stalls == 2
    # A wait of 50 ms is an underrun, not a stall a listener hears (over 100 ms).
    assert simulate_player([0.0, 0.15], [0.1, 0.1]).stalls == 0
    # One chunk: nothing to starve between (None, as sglang-omni's max_playback_underrun_s).
    assert simulate_player([0.3], [2.0]).max_underrun_s is None


# -- the native client against scripted servers ----------------------------------------------------
def test_each_event_is_timed_as_it_arrives_not_when_the_body_ends(scripted, meta, tmp_path):
    """Chunks 200 ms apart show gaps over 100 ms (a busy machine only lengthens them): the client
    timed each event as it came, not a buffer or the whole body."""
    script = Script([(0, event({"role": "assistant", "content": "Read this out loud."}))]
                    + [(0.2, event({"audio": {"data": wav_b64(0.5)}})) for _ in range(4)] + [(0, USAGE), (0, DONE)])
    results = run_client(meta, scripted(script), tmp_path / "out")
    row = only_row(results)
    assert script.bodies[0]["stream"] is True
    assert row["is_success"] and row["streamed"] is True and row["audio_chunk_count"] == 4, row
    assert len(row["inter_chunk_s"]) == 3 and all(gap > 0.1 for gap in row["inter_chunk_s"]), row["inter_chunk_s"]
    assert row["text_ttft_s"] < row["audio_ttfp_s"] and row["audio_ttfp_s"] > 0.1
    assert row["audio_ttfp_s"] + sum(row["inter_chunk_s"]) <= row["latency_s"]
    assert row["audio_duration_s"] == pytest.approx(2.0, abs=0.01) and row["completion_tokens"] == 7
    summary = results["summary"]
    assert summary["inter_chunk_mean_s"] > 0.1 and summary["not_streamed_requests"] == 0
    assert summary["playback_continuity_requests"] == 1 and results["config"]["stream"] is True


def test_slow_chunks_are_underruns_and_stalls(scripted, meta, tmp_path):
    script = Script([(0.4, event({"audio": {"data": wav_b64(0.1)}})) for _ in range(3)] + [(0, DONE)])
    row = only_row(run_client(meta, scripted(script), tmp_path / "out"))
    assert row["is_success"] and row["max_playback_underrun_s"] > 0.25 and row["playback_stalls_100ms"] == 2, row


def test_a_whole_json_body_is_one_chunk_that_did_not_stream(scripted, meta, tmp_path):
    """A server that ignores stream: true is measured as one chunk, when its whole body came."""
    body = {"choices": [{"index": 0, "message": {"role": "assistant", "content": "Read this out loud.",
                                                 "audio": {"data": wav_b64(1.0)}}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 5, "completion_tokens": 7}}
    script = Script([(0.3, json.dumps(body).encode())], content_type="application/json")
    results = run_client(meta, scripted(script), tmp_path / "out")
    row = only_row(results)
    assert row["is_success"] and row["streamed"] is False and row["audio_chunk_count"] == 1, row
    assert row["audio_ttfp_s"] > 0.2  # the whole answer's time, not a fast first chunk
    assert row["inter_chunk_s"] == [] and row["max_playback_underrun_s"] is None
    summary = results["summary"]
    assert summary["not_streamed_requests"] == 1 and summary["playback_continuity_na_requests"] == 1


@pytest.mark.parametrize(("parts", "reason"), [
    ([event({"audio": {"data": wav_b64(0.2)}}), b"data: {not json\n\n", DONE], "event 1 is not valid JSON"),
    ([event({"audio": {"data": base64.b64encode(b"RIFF....WAVEjunk").decode()}}), DONE],
     "audio chunk 0 does not decode"),
    ([event({"audio": {"data": wav_b64(0.2)}}), USAGE], "the stream ended without [DONE] after 2 event(s)"),
], ids=["bad-json", "bad-audio", "no-done"])
def test_a_broken_stream_is_a_failed_request_with_its_reason(scripted, meta, tmp_path, parts, reason):
    results = run_client(meta, scripted(Script([(0, p) for p in parts])), tmp_path / "out")
    row = only_row(results)
    assert not row["is_success"] and reason in row["error"], row
    assert results["summary"]["failed_requests"] == 1 and not (tmp_path / "out" / "audio" / "s1.wav").exists()


def test_a_stalled_stream_is_cut_by_the_request_timeout(scripted, meta, tmp_path):
    script = Script([(0, event({"audio": {"data": wav_b64(0.2)}}))], hold=True)
    row = only_row(run_client(meta, scripted(script), tmp_path / "out", timeout_s=1))
    assert not row["is_success"] and "timed out after 1 s (1 audio chunk(s) had arrived)" in row["error"], row
