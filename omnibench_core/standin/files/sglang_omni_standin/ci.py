"""What the stand-in's CI stage files share: start ``sgl-omni serve``, ask it, score, print.

Each stage asks a few questions of the kind its name says and prints ``Accuracy: <x>`` (stage 2
prints its WER), then compares with its threshold in ``tests/test_model/omni_ci_config.py``
(this commit's ``standin.json`` can move one, e.g. to plant a failing stage).
"""

from __future__ import annotations

import base64
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

MODEL_PATH, MODEL_NAME = "openbmb/MiniCPM-o-4_5", "minicpmo"
READ_ALOUD = "Please read the following text out loud in English: "


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def server(*args: str, timeout_s: float = 180.0) -> Iterator[str]:
    """``sgl-omni serve`` (the venv's, next to this python) on a free port; yields its base URL."""
    port = _free_port()
    argv = [str(Path(sys.executable).parent / "sgl-omni"), "serve", "--model-path", MODEL_PATH,
            "--model-name", MODEL_NAME, "--port", str(port), *args]
    proc = subprocess.Popen(argv, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"sgl-omni exited with {proc.returncode} before it was healthy")
            try:
                with urllib.request.urlopen(f"{base}/health", timeout=2) as reply:
                    if reply.status == 200 and b"healthy" in reply.read():
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"sgl-omni was not healthy after {timeout_s} s")
            time.sleep(0.1)
        yield base
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


def post(base: str, path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    """POST JSON; returns the status and the JSON reply (errors included)."""
    request = urllib.request.Request(base + path, data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=300) as reply:
            return reply.status, json.loads(reply.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read() or b"{}")


def chat(base: str, content: str, *, talker: bool, **extra: Any) -> dict[str, Any]:
    """One non-streaming chat completion; speech out when ``talker``."""
    body: dict[str, Any] = {"model": MODEL_NAME, "messages": [{"role": "user", "content": content}],
                            "max_tokens": 256, "temperature": 0, "stream": False, **extra}
    if talker:
        body.update(modalities=["text", "audio"], audio={**body.get("audio", {}), "format": "wav"})
    status, reply = post(base, "/v1/chat/completions", body)
    if status != 200:
        raise AssertionError(f"HTTP {status}: {reply}")
    return reply


def letter_questions(base: str, *, talker: bool) -> list[bool]:
    """Multiple-choice questions whose prompt carries the answer: the server must say it back."""
    results = []
    for letter in "ABCD":
        reply = chat(base, f"{READ_ALOUD}The answer is {letter}. Answer: {letter}", talker=talker)
        message = reply["choices"][0]["message"]
        spoken = bool((message.get("audio") or {}).get("data"))
        results.append(f"Answer: {letter}" in (message.get("content") or "") and (spoken or not talker))
    return results


def video_questions(base: str, *, talker: bool, count: int = 2) -> list[bool]:
    """The first questions of omnibench's local Video-AMME set (video and spoken question in)."""
    from omnibench_plugins.videoamme.answers import choices_of, fallback_rng, parse_multi_choice_response
    from omnibench_plugins.videoamme.client import VideoClientConfig, request_body
    from omnibench_plugins.videoamme.data import ensure_local_set, load_samples, local_set_dir

    folder = ensure_local_set(local_set_dir())
    cfg = VideoClientConfig(data=folder, output_dir=Path("."), enable_audio=talker)
    results, rng = [], fallback_rng()
    for sample in load_samples(folder, count):
        status, reply = post(base, "/v1/chat/completions", request_body(cfg, sample))
        message = reply["choices"][0]["message"] if status == 200 else {}
        spoken = bool((message.get("audio") or {}).get("data"))
        letters, index2ans = choices_of(sample.options)
        letter, _ = parse_multi_choice_response(message.get("content") or "", letters, index2ans, rng)
        results.append(status == 200 and letter == sample.answer and (spoken or not talker))
    return results


def tts_wer(base: str, count: int = 2) -> float:
    """Voice clone on the first seed-tts samples, transcribed by the same server: corpus WER."""
    from omnibench_core.scoring import wer
    from omnibench_core.scoring.asr_client import transcribe_files
    from omnibench_core.toolkit.audio import wav_data_uri
    from omnibench_plugins.seedtts.data import ensure_local_set, load_meta, local_set_dir

    ensure_local_set(local_set_dir())
    samples = load_meta(local_set_dir() / "meta.lst", count)
    with tempfile.TemporaryDirectory(prefix="standin-tts-") as folder:  # gone after (42 were left in /tmp)
        out = Path(folder)
        paths = []
        for s in samples:
            reply = chat(base, READ_ALOUD + s.target_text, talker=True,
                         audio={"ref_audio": wav_data_uri(Path(s.ref_audio).read_bytes())})
            path = out / f"{s.sample_id}.wav"
            path.write_bytes(base64.b64decode(reply["choices"][0]["message"]["audio"]["data"]))
            paths.append(path)
        heard = transcribe_files(paths, url=f"{base}/v1/audio/transcriptions", model=MODEL_NAME)
    scored = wer.score_transcripts([({}, s.target_text, text, error, wer.Timing())
                                    for s, (text, error) in zip(samples, heard, strict=True)])
    return scored.summary()["wer_corpus"]


def contract(base: str) -> None:
    """Stage 1: /v1/models, usage counts, and a prompt over the context length refused with 400."""
    with urllib.request.urlopen(f"{base}/v1/models", timeout=10) as reply:
        models = json.loads(reply.read())
    assert models["data"][0]["id"] == MODEL_NAME, models
    usage = chat(base, "Hello there.", talker=False)["usage"]
    assert usage["prompt_tokens"] > 0 and usage["total_tokens"] >= usage["prompt_tokens"], usage
    status, reply = post(base, "/v1/chat/completions", {
        "model": MODEL_NAME, "messages": [{"role": "user", "content": "word " * 400}], "max_tokens": 8})
    assert status == 400 and "detail" in reply, (status, reply)
    print("thinker length contract: ok", flush=True)


def report(stage: str, results: list[bool]) -> None:
    """Print the accuracy line and hold it to the stage's threshold."""
    from omni_ci_config import threshold

    accuracy = sum(results) / len(results)
    print(f"Accuracy: {accuracy:.4f}", flush=True)
    assert accuracy >= threshold(stage), f"{stage}: accuracy {accuracy:.4f} below {threshold(stage)}"
