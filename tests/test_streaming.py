"""Issue 22: streaming speech latency. The native client against small scripted servers (per-event
timestamps, the player model, every bad-input rule), a local streaming campaign's runs, a
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
from run_helpers import REPO, free_port
from scale_helpers import invoke_standin

from omnibench_core.process.processes import start_group
from omnibench_core.run.gates import wait_ready
from omnibench_core.toolkit.audio import to_wav_bytes
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


def run_client(meta: Path, port: int, out: Path, timeout_s: float = 600) -> dict:
    """The native client as the workload runs it, with --stream; its speed_results.json."""
    argv = [sys.executable, "-m", "omnibench_plugins.seedtts.client", "--meta", str(meta), "--port", str(port),
            "--output-dir", str(out), "--warmup", "0", "--max-concurrency", "1", "--timeout-s", f"{timeout_s:g}",
            "--stream"]
    done = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=timeout_s + 600)
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
@pytest.mark.slow
def test_each_event_is_timed_as_it_arrives_not_when_the_body_ends(scripted, meta, tmp_path):
    """Chunks 1 s apart show gaps over 100 ms: the client timed each event as it came, not a
    buffer or the whole body. (1 s, not less: a busy machine that reads one event late shortens
    the gap after it, and only a delay near the spacing could hide it.)"""
    script = Script([(0, event({"role": "assistant", "content": "Read this out loud."}))]
                    + [(1.0, event({"audio": {"data": wav_b64(0.5)}})) for _ in range(4)] + [(0, USAGE), (0, DONE)])
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


@pytest.mark.slow
def test_slow_chunks_are_underruns_and_stalls(scripted, meta, tmp_path):
    # 0.1 s chunks 1 s apart: each underrun is about 0.9 s; one event read late by a busy machine
    # shortens the next gap, and only a delay of over 0.6 s would bring it under the bound
    script = Script([(1.0, event({"audio": {"data": wav_b64(0.1)}})) for _ in range(3)] + [(0, DONE)])
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
    assert row["inter_chunk_s"] is None and row["max_playback_underrun_s"] is None  # upstream: null
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


@pytest.mark.slow
def test_a_stalled_stream_is_cut_by_the_request_timeout(scripted, meta, tmp_path):
    script = Script([(0, event({"audio": {"data": wav_b64(0.2)}}))], hold=True)
    # 30 s: the first chunk (sent at once) must arrive before the cut, even on a loaded host
    row = only_row(run_client(meta, scripted(script), tmp_path / "out", timeout_s=30))
    assert not row["is_success"] and "timed out after 30 s (1 audio chunk(s) had arrived)" in row["error"], row


# -- the local server: a delay planted on the first chunk -------------------------------------------
@pytest.mark.slow
def test_the_local_server_plants_a_delay_on_the_first_chunk(meta, tmp_path):
    """`--delay-ms 2000 --delay-on first-chunk`: the text comes at once, the first audio 2 s later.
    (2 s: a client that a busy host stalls reading the text shrinks the two's difference by the stall;
    only one of over 1 s could bring it under the bound.)"""
    port = free_port()
    proc = start_group([sys.executable, "-m", "omnibench_core.local", "serve", "--model-name", "minicpmo",
                        "--port", str(port), "--delay-ms", "2000", "--delay-on", "first-chunk"],
                       log_path=tmp_path / "server.log", env=dict(os.environ))
    try:
        wait_ready(proc, f"http://127.0.0.1:{port}/health", timeout_s=600)
        row = only_row(run_client(meta, port, tmp_path / "out"))
    finally:
        proc.stop(10)
    assert row["is_success"] and row["streamed"] and row["audio_chunk_count"] >= 2, row
    assert row["audio_ttfp_s"] >= 2.0, row  # from the request's start: a bound no load can break
    assert row["audio_ttfp_s"] - row["text_ttft_s"] > 1.0, row  # on the first chunk, not the request


def test_a_bad_stream_delay_setting_is_refused_before_anything_starts(invoke):
    done = invoke("run", "--workload", "seedtts", env={"INVOKE_OMNIBENCH_LOCAL_STREAM_DELAY": "sometimes"})
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stdout + done.stderr
    assert "local_stream_delay 'sometimes' is not one of first, every or empty" in done.stdout + done.stderr
    assert "RUN_READY" not in done.stdout


# -- end to end, as a user runs it ---------------------------------------------------------------------
STREAM = ("--opt", "seedtts.stream=true")


def only_run(results: Path) -> Path:
    (run,) = results.glob("*/run0")
    return run


def measure(results: Path, name: str, env: dict[str, str] | None = None, runs: int = 3) -> subprocess.CompletedProcess:
    argv = [sys.executable, "-m", "invoke", "measure", "--workload", "seedtts", *STREAM, "--opt",
            "seedtts.max_samples=2", "--opt", "seedtts.max_concurrency=2", "--opt", "seedtts.warmup=0",
            "--runs", str(runs), "--name", name, "--port", str(free_port())]
    return subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=900,
                          env={**os.environ, "INVOKE_OMNIBENCH_RESULTS": str(results), **(env or {})})


# The base campaign and the planted one are two module fixtures, the first test needing only the
# first, so that neither test's setup takes over a minute (issue 40).
@pytest.fixture(scope="module")
def base(tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess]:
    """A small streaming campaign on the local target: its results root and its output."""
    results = tmp_path_factory.mktemp("planted") / "results"
    done = measure(results, "base")
    assert done.returncode == 0, done.stdout + done.stderr
    return results, done


@pytest.fixture(scope="module")
def cand(base) -> Path:
    """A second campaign beside ``base``'s, with 0.8 s planted before every audio chunk (longer than a
    0.5 s piece plays, so the player starves; far above the base's gaps, which a busy machine
    stretches to a p95 of 0.2 s); its report. Two runs: the plant, sleep, is most of each gap and
    spreads little; the base's spread, a busy host's, is what needs three (its setup took 63 s with
    three, 2026-12-05)."""
    results, _ = base
    done = measure(results, "cand", {"INVOKE_OMNIBENCH_LOCAL_DELAY_MS": "800",
                                     "INVOKE_OMNIBENCH_LOCAL_STREAM_DELAY": "every"}, runs=2)
    assert done.returncode == 0, done.stdout + done.stderr
    return next(results.glob("*/campaigns/cand/report.json"))


@pytest.fixture(scope="module")
def planted(base, cand):
    """`invoke compare` of the base and the planted campaign."""
    results, done = base
    compared = subprocess.run([sys.executable, "-m", "invoke", "compare", "base", "cand", "--fail-on", "worse"],
                              cwd=REPO, capture_output=True, text=True, timeout=600,
                              env={**os.environ, "INVOKE_OMNIBENCH_RESULTS": str(results)})
    return results, done, compared


@pytest.mark.slow
def test_each_run_of_the_streaming_campaign_streams_every_request(base):
    """A measured run of the base campaign (stream on, as `invoke run` runs it): every first audio
    before its request's end, the first-audio mean below the mean latency, an unstalled stream's
    underrun measured, samples for the plots. (Issue 40: read from the campaign's run1, not a run
    of its own, which cost as much as a quarter of the campaign.)"""
    results, _ = base
    (run,) = results.glob("*/run1")
    rows = json.loads((run / "seedtts" / "speed_results.json").read_text())["per_request"]
    assert len(rows) == 2  # seedtts.max_samples=2
    for row in rows:
        assert row["streamed"] and row["audio_chunk_count"] >= 2, row
        assert 0 < row["audio_ttfp_s"] < row["latency_s"] and row["text_ttft_s"] <= row["audio_ttfp_s"]
    doc = json.loads((run / "metrics.json").read_text())
    metrics = doc["metrics"]
    assert metrics["seedtts.audio_ttfp_mean_s"] < metrics["seedtts.latency_mean_s"]
    # upstream's summary p99s of two requests: kept in metrics as upstream wrote them, marked thin (issue 45)
    for name in ("seedtts.audio_ttfp_p99_s", "seedtts.inter_chunk_p99_s"):
        assert doc["thin_percentiles"][name]["kept"] is True and doc["thin_percentiles"][name]["needed"] == 300
        assert doc["thin_percentiles"][name]["value"] == metrics[name]
    # measured (a number), not bounded: the server sends its chunks back to back, but a client that a
    # loaded host stalls between two of them records a real underrun (the planted test shows one found)
    assert metrics["seedtts.max_playback_underrun_mean_s"] >= 0 and metrics["seedtts.not_streamed_requests"] == 0
    samples = json.loads((run / "request_samples.json").read_text())
    assert len(samples["seedtts.audio_ttfp_s"]) == 2 and len(samples["seedtts.inter_chunk_s"]) >= 2


@pytest.mark.slow
def test_a_streaming_campaign_reports_distribution_plots(base):
    results, done = base
    assert "seedtts.audio_ttfp_mean_s" in done.stdout and "seedtts.c100" in done.stdout
    report = json.loads(next(results.glob("*/campaigns/base/report.json")).read_text())
    assert report["metrics"]["seedtts.max_playback_underrun_mean_s"]["direction"] == "lower"
    assert report["metrics"]["seedtts.max_playback_underrun_mean_s"]["mean"] >= 0  # measured: a number, not a gap
    pytest.importorskip("matplotlib")
    names = {Path(p).name for p in report["plots"]}
    assert {"distribution-seedtts.audio_ttfp_s.png", "distribution-seedtts.inter_chunk_s.png"} <= names


@pytest.mark.slow
def test_every_gap_of_the_planted_campaign_carries_the_plant(cand):
    metrics = json.loads(cand.read_text())["metrics"]
    assert metrics["seedtts.inter_chunk_p95_s"]["mean"] >= 0.8  # 0.8 s planted before every chunk
    assert metrics["seedtts.max_playback_underrun_mean_s"]["mean"] > 0  # longer than a piece plays: starved


@pytest.mark.slow
def test_a_planted_per_chunk_delay_is_found_worse(planted):
    results, _, compared = planted
    assert compared.returncode == 1, compared.stdout + compared.stderr  # --fail-on worse
    doc = json.loads(next((results / "comparisons").glob("*/compare.json")).read_text())
    verdicts = {m["name"]: m["verdict"] for m in doc["metrics"]}
    assert verdicts["seedtts.inter_chunk_mean_s"] == "worse", compared.stdout
    # The underrun: base's is 0 in every run (sd 0), so Welch's degrees of freedom are B's two runs
    # less one; a busy host's stalls spread B's 0.35 s underrun by 61 ms in a whole-suite run
    # (2026-12-06), t 8 against a critical t of about 100 at one degree: "inconclusive, about 4 runs
    # a side would resolve it" is then the honest answer (four runs cost this fixture 25 s more). What
    # must hold: never better or the same, every run of B starved and none of A, and an inconclusive
    # row says how many runs would decide it.
    row = next(m for m in doc["metrics"] if m["name"] == "seedtts.max_playback_underrun_mean_s")
    assert row["verdict"] in ("worse", "inconclusive"), compared.stdout
    assert row["verdict"] == "worse" or row["needed"] > 2, row  # "about N runs a side would resolve it"
    assert row["a_mean"] == 0 and row["b_mean"] >= 0.25, row  # 0.8 s before each 0.5 s piece: 0.3 s starved
    # A p95 of two requests' gaps is nearly their largest gap: one of base's three runs slowed by a
    # busy host spreads base's p95 so wide that three runs (and B's two) cannot tell (seen at load 7:
    # [-151 %, +2022 %], "about 4 runs a side would resolve it"). That answer is honest; what must
    # hold is that it never says better or the same, and that every gap of B carries the plant.
    b_means = {m["name"]: m["b_mean"] for m in doc["metrics"]}
    for name in ("seedtts.inter_chunk_p95_s", "seedtts.max_playback_underrun_p95_s"):
        assert verdicts[name] in ("worse", "inconclusive"), f"{name}: {verdicts[name]}\n{compared.stdout}"
    assert b_means["seedtts.inter_chunk_p95_s"] >= 0.8, compared.stdout  # 0.8 s planted before every chunk
    # a p99 of a few requests' gaps is nearly their largest gap: upstream's value, kept in metrics.json,
    # is a thin percentile, not measured, so neither judged nor counted by --fail-on (issue 45)
    p99 = next(m for m in doc["metrics"] if m["name"] == "seedtts.inter_chunk_p99_s")
    assert p99["verdict"] == "not comparable" and "thin percentile" in p99["why"], p99
    assert "seedtts.inter_chunk_p99_s" not in compared.stderr, compared.stderr
    assert verdicts["seedtts.wer.wer_corpus"] != "worse"  # the same speech, only later


@pytest.mark.slow
def test_the_standins_own_client_streams(tmp_path):
    """`--client sglang` on the stand-in: its benchmark_omni_seedtts gets --stream and writes
    sglang-omni's streaming fields, which omnibench reads."""
    made = invoke_standin(tmp_path / "sglang-omni", "--fake-gpus", str(tmp_path / "fakegpu"))
    assert made.fake_gpus is not None
    results = tmp_path / "results"
    argv = [sys.executable, "-m", "invoke", "run", "--target", "sglang-omni", "--checkout", str(made.root),
            "--client", "sglang", "--port", str(free_port()), "--workload", "seedtts", *STREAM,
            "--opt", "seedtts.max_samples=2"]
    done = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=900,
                          env={**os.environ, "INVOKE_OMNIBENCH_RESULTS": str(results),
                               "PATH": f"{made.fake_gpus}{os.pathsep}{os.environ['PATH']}"})
    assert done.returncode == 0 and "RUN_COMPLETE" in done.stdout, done.stdout + done.stderr
    run = only_run(results)
    steps = {s["step"]: s for s in json.loads((run / "manifest.json").read_text())["steps"]}
    command = steps["seedtts.generate"]["command"]
    assert command[1:4] == ["-m", "benchmarks.eval.benchmark_omni_seedtts", "--generate-only"] and "--stream" in command
    speed = json.loads((run / "seedtts" / "speed_results.json").read_text())
    assert speed["config"]["stream"] is True and all(r["streamed"] for r in speed["per_request"])
    metrics = json.loads((run / "metrics.json").read_text())["metrics"]
    assert 0 < metrics["seedtts.audio_ttfp_mean_s"] < metrics["seedtts.latency_mean_s"]


# -- Video-AMME token timing (videoamme.stream): the thinker's text timed chunk by chunk --------------
def test_token_timing_maths_on_a_planted_arrival_schedule():
    """TTFT, ITL and TPOT from arrival times: usage's count when sent, else the content chunks."""
    from omnibench_plugins.videoamme.token_timing import TokensFrom, token_timing

    t = token_timing(10.0, [10.5, 11.5, 11.6], 7)
    assert t.ttft_s == pytest.approx(0.5) and t.itl_s == pytest.approx((1.0, 0.1))
    assert t.output_tokens == 7 and t.tokens_from is TokensFrom.USAGE and t.tpot_s == pytest.approx(1.1 / 6)
    assert t.output_tokens_per_s == pytest.approx(7 / 1.6)
    counted = token_timing(10.0, [10.5, 11.5, 11.6], None)  # no usage: the chunks are the tokens
    assert counted.output_tokens == 3 and counted.tokens_from is TokensFrom.CHUNKS and counted.tpot_s == pytest.approx(0.55)
    assert token_timing(10.0, [10.2], None).tpot_s is None  # one token: no time per output token
    assert token_timing(10.0, [], 7) is None  # no text: nothing to time, never zeros


def run_video_client(port: int, tmp_path: Path) -> dict:
    """omnibench's Video-AMME client with --stream, one question (the scripted server reads no file)."""
    data = tmp_path / "set"
    data.mkdir()
    (data / "samples.json").write_text(json.dumps([{"sample_id": "q0", "video": "v.mp4", "audio": "q.wav",
                                                    "question": "?", "options": ["red", "green"], "answer": "B",
                                                    "duration": "short"}]))
    argv = [sys.executable, "-m", "omnibench_plugins.videoamme.client", "--data", str(data), "--port", str(port),
            "--output-dir", str(tmp_path / "out"), "--warmup", "0", "--max-concurrency", "1", "--stream"]
    done = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads((tmp_path / "out" / "videoamme_results.json").read_text())


@pytest.mark.slow
@pytest.mark.parametrize("usage, tokens, source", [(True, 7, "usage"), (False, 3, "chunks")])
def test_videoamme_text_chunks_are_timed_as_they_arrive(scripted, tmp_path, usage, tokens, source):
    """Three content chunks, the first 1 s after the request and the second 1 s after it: TTFT is
    at least the planted second (from the send: a bound no load breaks), the planted gap shows in
    ITL over 100 ms (1 s: only a read late by most of a second could hide it), and the text's
    tokens are usage's count when the server sends it, else the chunks."""
    parts = [(1.0, event({"role": "assistant", "content": "Answer"})), (1.0, event({"content": ": B"})),
             (0, event({"content": "."})), *([(0, USAGE)] if usage else []), (0, DONE)]
    script = Script(parts)
    results = run_video_client(scripted(script), tmp_path)
    body = script.bodies[0]
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    (row,) = results["per_sample"]
    assert row["is_success"] and row["raw_response"] == "Answer: B." and row["predicted"] == "B", row
    assert row["ttft_s"] >= 1.0 and len(row["itl_s"]) == 2 and row["itl_s"][0] > 0.1, row
    assert row["output_tokens"] == tokens and row["output_tokens_from"] == source
    e2e = row["ttft_s"] + sum(row["itl_s"])
    assert row["tpot_s"] == pytest.approx((e2e - row["ttft_s"]) / (tokens - 1))
    assert row["output_tokens_per_s"] == pytest.approx(tokens / e2e) and results["config"]["stream"] is True
