"""The embedded local server, for real: a process on loopback with real speech engines."""

from __future__ import annotations

import base64
import io
import json
import os
import socket
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import requests
import soundfile as sf
from conftest import free_port

from omnibench_core.audio import to_wav_bytes, wav_data_uri
from omnibench_core.gates import wait_ready
from omnibench_core.local.speech import TTS_RATE, estimate_f0
from omnibench_core.processes import start_group

READ = "Please read the following text out loud in English: "


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    port = free_port()
    log = tmp_path_factory.mktemp("local") / "server.log"
    proc = start_group([sys.executable, "-m", "omnibench_core.local", "serve", "--model-name", "minicpmo",
                        "--port", str(port), "--thinker.factory.max_seq_len", "300",
                        "--talker.engine.mem_fraction_static", "0.15"], log_path=log, env=dict(os.environ))
    # While the engines load the port is closed: connection refused, not a 503.
    deadline = time.monotonic() + 30
    while "loading speech engines" not in log.read_text():
        assert time.monotonic() < deadline, log.read_text()
        time.sleep(0.01)
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    wait_ready(proc, f"http://127.0.0.1:{port}/health", timeout_s=120)
    yield f"http://127.0.0.1:{port}", log
    proc.stop(10)


def chat(url, text="Hello there.", **extra):
    body = {"model": "minicpmo", "messages": [{"role": "user", "content": READ + text}],
            "modalities": ["text", "audio"], "audio": {"format": "wav"}, "max_tokens": 256, "temperature": 0.7,
            "stream": False, **extra}
    return requests.post(f"{url}/v1/chat/completions", json=body, timeout=60)


def wav_of(reply: dict) -> tuple[np.ndarray, int]:
    data = base64.b64decode(reply["choices"][0]["message"]["audio"]["data"])
    samples, rate = sf.read(io.BytesIO(data))
    return samples, rate


def transcribe(url, samples, rate, model="minicpmo"):
    files = {"file": ("a.wav", to_wav_bytes(samples, rate), "audio/wav")}
    return requests.post(f"{url}/v1/audio/transcriptions", files=files,
                         data={"model": model, "language": "en", "response_format": "json"}, timeout=60)


def test_health_and_models(server):
    url, log = server
    health = requests.get(f"{url}/health", timeout=5)
    assert health.status_code == 200 and health.json() == {"status": "healthy"}
    model = requests.get(f"{url}/v1/models", timeout=5).json()["data"][0]
    assert model["id"] == model["root"] == "minicpmo" and model["created"] == 0
    assert "ignoring sglang-omni engine flags: --talker.engine.mem_fraction_static 0.15" in log.read_text()


def test_speech_reply_is_real_24khz_audio_with_usage(server):
    url, _ = server
    reply = chat(url, "Please call Stella and ask her to bring these things with her from the store.")
    assert reply.status_code == 200, reply.text
    body = reply.json()
    message = body["choices"][0]["message"]
    assert message["content"] == "Please call Stella and ask her to bring these things with her from the store."
    samples, rate = wav_of(body)
    assert rate == TTS_RATE and samples.ndim == 1 and len(samples) / rate > 2.0
    usage = body["usage"]
    assert usage["prompt_tokens"] == 26  # words and punctuation and usage["completion_tokens"] > 16
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    assert body["choices"][0]["finish_reason"] == "stop" and body["id"].startswith("chatcmpl-")


def test_text_only_reply_has_no_audio(server):
    url, _ = server
    reply = chat(url, modalities=["text"]).json()
    assert "audio" not in reply["choices"][0]["message"]


def test_voice_clone_reference_moves_the_voice(server):
    url, _ = server
    low = chat(url, "A short test sentence for the voice.", temperature=0).json()
    low_ref, rate = wav_of(low)
    # a higher-pitched reference made from the server's own speech, sped up by 1.2
    from omnibench_core.local.speech import shift_pitch
    high_ref = shift_pitch(low_ref, 1.2)
    cloned = chat(url, "A short test sentence for the voice.", temperature=0,
                  audio={"format": "wav", "ref_audio": wav_data_uri(to_wav_bytes(high_ref, rate))}).json()
    f0_plain = estimate_f0(low_ref, rate)
    f0_cloned = estimate_f0(wav_of(cloned)[0], rate)
    assert f0_cloned > f0_plain * 1.08
    assert cloned["usage"]["prompt_tokens"] > low["usage"]["prompt_tokens"]  # the reference audio counts


def test_speech_transcribes_back_and_asr_checks_model(server):
    url, _ = server
    text = "The quick brown fox jumps over the lazy dog."
    samples, rate = wav_of(chat(url, text).json())
    heard = transcribe(url, samples, rate)
    assert heard.status_code == 200
    words = set(heard.json()["text"].split())
    assert len(words & {"quick", "brown", "fox", "over", "lazy", "dog"}) >= 4
    wrong = transcribe(url, samples, rate, model="whisper-1")
    assert wrong.status_code == 404 and "minicpmo" in wrong.json()["detail"]


def test_streaming_sends_text_audio_chunks_usage_and_done(server):
    url, _ = server
    reply = chat(url, "First sentence here. And a second one.", stream=True)
    assert reply.status_code == 200 and reply.headers["Content-Type"].startswith("text/event-stream")
    events = [line[6:] for line in reply.text.splitlines() if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    assert chunks[0]["choices"][0]["delta"]["content"] == "First sentence here. And a second one."
    audio = [c["choices"][0]["delta"]["audio"]["data"] for c in chunks if "audio" in c["choices"][0]["delta"]]
    assert len(audio) == 2
    for data in audio:
        assert sf.info(io.BytesIO(base64.b64decode(data))).samplerate == TTS_RATE
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop" and chunks[-1]["usage"]["completion_tokens"] > 0


def _post_raw(url, data, content_type="application/json"):
    return requests.post(f"{url}/v1/chat/completions", data=data, headers={"Content-Type": content_type}, timeout=30)


BAD_CHATS = [
    ("malformed JSON", lambda url: _post_raw(url, b"{not json"), 400, "not valid JSON"),
    ("missing messages", lambda url: requests.post(f"{url}/v1/chat/completions", json={"model": "minicpmo"}, timeout=30),
     400, "'messages' is required"),
    ("wrong model", lambda url: chat(url, model="gpt-4o"), 404, "not served here"),
    ("bad base64", lambda url: chat(url, audio={"format": "wav", "ref_audio": "data:audio/wav;base64,@@@"}), 400,
     "invalid base64"),
    ("non-WAV reference", lambda url: chat(url, audio={"format": "wav", "ref_audio": "data:audio/wav;base64,"
                                                       + base64.b64encode(b"ID3 this is an mp3").decode()}),
     400, "not a WAV file"),
    ("unknown modality", lambda url: chat(url, modalities=["text", "video"]), 400, "unknown modality 'video'"),
    ("over-long prompt", lambda url: chat(url, "word " * 400), 400, "longer than the model's context length (300"),
    ("bad max_tokens", lambda url: chat(url, max_tokens=0), 400, "'max_tokens'"),
]


@pytest.mark.parametrize(("case", "send", "status", "detail"), BAD_CHATS, ids=[c[0] for c in BAD_CHATS])
def test_bad_chat_requests_get_4xx_detail_and_server_keeps_serving(server, case, send, status, detail):
    url, _ = server
    reply = send(url)
    assert reply.status_code == status, reply.text
    assert detail in reply.json()["detail"]
    assert requests.get(f"{url}/health", timeout=5).status_code == 200


@pytest.mark.parametrize(("case", "files", "detail"), [
    ("empty upload", {"file": ("a.wav", b"", "audio/wav")}, "'file' is empty"),
    ("non-audio upload", {"file": ("a.txt", b"just some text, not audio", "text/plain")}, "not a WAV file"),
    ("no file", None, "'file' is required"),
])
def test_bad_asr_uploads(server, case, files, detail):
    url, _ = server
    reply = requests.post(f"{url}/v1/audio/transcriptions", files=files or {"x": ("x", b"1")},
                          data={"model": "minicpmo"}, timeout=30)
    assert reply.status_code == 400 and detail in reply.json()["detail"]
    assert requests.get(f"{url}/health", timeout=5).status_code == 200


def test_sixteen_concurrent_requests(server):
    url, _ = server
    with ThreadPoolExecutor(16) as pool:
        replies = list(pool.map(lambda i: chat(url, f"Sentence number {i} is spoken now."), range(16)))
    assert [r.status_code for r in replies] == [200] * 16
    assert len({r.json()["choices"][0]["message"]["content"] for r in replies}) == 16
