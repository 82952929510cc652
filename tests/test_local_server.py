"""The embedded local server, for real: a process on loopback with real speech engines.

One module-scoped server serves every test here (startup costs a few seconds); its flags are
set small (context length, media size, audio length, timeouts) so the limits are cheap to reach.
"""

from __future__ import annotations

import base64
import io
import json
import os
import socket
import sys
import time
import types
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
import requests
import soundfile as sf
from run_helpers import free_port

from omnibench_core.local.media import REFUSED
from omnibench_core.local.vision import Sampling, summarize_video
from omnibench_core.process.processes import start_group
from omnibench_core.run.gates import wait_ready
from omnibench_core.toolkit.audio import to_wav_bytes, wav_data_uri
from omnibench_core.toolkit.speech import (
    ASR_RATE,
    DECODER_SEARCH,
    TTS_RATE,
    VOICE_F0_BY_VERSION,
    Recognizer,
    Synthesizer,
    estimate_f0,
)
from omnibench_core.toolkit.synthetic import PALETTE, write_color_video

READ = "Please read the following text out loud in English: "
IDLE_S = 1.5  # the idle test's own server's --idle-timeout and --body-timeout (the shared one keeps its
# defaults: a body a loaded host reads slowly must not get a 408 in a test about something else)


def _wav(rate=16000, seconds=0.5, subtype="PCM_16", fill=None) -> bytes:
    samples = np.zeros(int(rate * seconds), np.float32) if fill is None else fill
    buffer = io.BytesIO()
    sf.write(buffer, samples, rate, format="WAV", subtype=subtype)
    return buffer.getvalue()


NAN_WAV = _wav(subtype="FLOAT", fill=np.full(1600, np.nan, np.float32))
INF_WAV = _wav(subtype="FLOAT", fill=np.full(1600, np.inf, np.float32))
SLOW_WAV = _wav(rate=2, seconds=2000)  # 8 KB declaring 2 Hz: once 199 s and 1 GB of resampling
FAST_WAV = _wav(rate=500000, seconds=0.01)
LONG_WAV = _wav(rate=1000, seconds=30)  # over the test server's --max-audio-seconds 20
EMPTY_WAV = _wav(seconds=0)


def _start(args: list[str], log: Path):
    port = free_port()
    proc = start_group([sys.executable, "-m", "omnibench_core.local", "serve", "--model-name", "minicpmo",
                        "--port", str(port), *args], log_path=log, env=dict(os.environ))
    return proc, port


@pytest.fixture(scope="module")
def media(tmp_path_factory) -> Path:
    """The test server's one allowed media folder, with good and bad files in it."""
    root = tmp_path_factory.mktemp("media")
    write_color_video(root / "red.mp4", PALETTE["red"], fps=4, seconds=1)
    (root / "garbage.mp4").write_bytes(b"\x00\x00\x00\x18ftypmp42 not really a video")
    (root / "big.bin").write_bytes(b"\0" * (1024 * 1024 + 1))  # over --max-media-mb 1
    for name, data in (("nan.wav", NAN_WAV), ("slow.wav", SLOW_WAV), ("long.wav", LONG_WAV)):
        (root / name).write_bytes(data)
    (root / "folder").mkdir()
    os.mkfifo(root / "fifo.wav")
    secret = root.parent / f"{root.name}-outside" / "secret.wav"  # a sibling folder: reachable by ../
    secret.parent.mkdir()
    secret.write_bytes(_wav())
    (root / "link-out.wav").symlink_to(secret)
    (root / "link-dev.wav").symlink_to("/dev/zero")
    locked = root / "locked.wav"
    locked.write_bytes(_wav())
    locked.chmod(0)
    return root


@pytest.fixture(scope="module")
def server(tmp_path_factory, media):
    log = tmp_path_factory.mktemp("local") / "server.log"
    proc, port = _start(["--thinker.factory.max_seq_len", "300", "--talker.engine.mem_fraction_static", "0.15",
                         "--allowed-local-media-path", str(media), "--max-media-mb", "1",
                         "--max-audio-seconds", "20"], log)  # idle/body timeouts: their own server's
    # While the engines load the port is closed: connection refused, not a 503.
    deadline = time.monotonic() + 600
    while "loading speech engines" not in log.read_text():
        assert time.monotonic() < deadline, log.read_text()
        time.sleep(0.01)
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    wait_ready(proc, f"http://127.0.0.1:{port}/health", timeout_s=600)
    yield f"http://127.0.0.1:{port}", log
    proc.stop(10)


def chat(url, text="Hello there.", **extra):
    body = {"model": "minicpmo", "messages": [{"role": "user", "content": READ + text}],
            "modalities": ["text", "audio"], "audio": {"format": "wav"}, "max_tokens": 256, "temperature": 0.7,
            "stream": False, **extra}
    return requests.post(f"{url}/v1/chat/completions", json=body, timeout=600)


def wav_of(reply: dict) -> tuple[np.ndarray, int]:
    data = base64.b64decode(reply["choices"][0]["message"]["audio"]["data"])
    samples, rate = sf.read(io.BytesIO(data))
    return samples, rate


def transcribe(url, samples, rate, model="minicpmo"):
    files = {"file": ("a.wav", to_wav_bytes(samples, rate), "audio/wav")}
    return requests.post(f"{url}/v1/audio/transcriptions", files=files,
                         data={"model": model, "language": "en", "response_format": "json"}, timeout=600)


@pytest.mark.slow
def test_health_and_models(server):
    url, log = server
    health = requests.get(f"{url}/health", timeout=600)
    assert health.status_code == 200 and health.json() == {"status": "healthy"}
    model = requests.get(f"{url}/v1/models", timeout=600).json()["data"][0]
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
    assert usage["prompt_tokens"] == 26  # words and punctuation
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    assert body["choices"][0]["finish_reason"] == "stop" and body["id"].startswith("chatcmpl-")


def test_text_only_reply_has_no_audio(server):
    url, _ = server
    reply = chat(url, modalities=["text"]).json()
    assert "audio" not in reply["choices"][0]["message"]


def test_the_voice_pitch_a_server_starts_with_is_the_one_it_would_measure():
    """The table of voice pitches by hibari-tts version (a server start skips the calibration's
    synthesis) holds the figure the installed version gives when measured: within one lag of the
    autocorrelation, since the synthesis differs in its last bits between CPUs (on an AMD EPYC host
    the median fell between lags 78 and 79: 203.8 Hz against the table's 202.5, 2026-12-07)."""
    synth = Synthesizer(1)
    assert synth.version in VOICE_F0_BY_VERSION, f"hibari-tts {synth.version}: add its measured voice pitch"
    tabled, measured = VOICE_F0_BY_VERSION[synth.version], synth.measure_voice_f0()
    lag = ASR_RATE / tabled
    assert synth.voice_f0 == tabled and ASR_RATE / (lag + 1) <= measured <= ASR_RATE / (lag - 1), (tabled, measured)


def test_one_voice_is_loaded_and_has_synthesized_once_before_the_port_opens(monkeypatch):
    """A voice's first synthesis is 0.2 s of lazy loading: done at start, so no request pays it. One
    voice serves every worker thread (a voice a thread cost 0.13 CPU-s a start more, issue 40)."""
    made: list = []

    class Voice:  # hibari's voice, counting its syntheses
        def __init__(self, threads: int):
            self.calls = 0
            made.append(self)

        def __call__(self, text: str, speed: float, seed: int | None) -> np.ndarray:
            self.calls += 1
            return np.zeros(TTS_RATE // 10, dtype=np.float32)

    monkeypatch.setitem(sys.modules, "hibari", types.SimpleNamespace(Hibari=Voice, __version__="0.2.1"))
    synth = Synthesizer(3)
    assert [voice.calls for voice in made] == [1]
    synth.synthesize("One.", seed=0)
    synth.synthesize("Two.", seed=0)
    assert len(made) == 1 and made[0].calls == 3


@pytest.mark.slow  # 2 to 6 s in the fast tier (issue 40: that tier within a minute)
def test_the_shared_voice_says_from_many_threads_at_once_what_it_says_alone():
    """The one voice is called from the server's threads at once (onnxruntime's session run is
    thread-safe; the G2P is read-only; each call seeds its own generator): every concurrent
    synthesis is the serial one, sample for sample. Four threads, each text four times, in two orders."""
    synth = Synthesizer(4)
    texts = [f"The video is mostly {colour}. Answer: {letter}" for colour, letter in
             zip(("red", "green", "blue", "yellow"), "ABCD", strict=True)] + ["A longer sentence, so that two runs overlap."]
    alone = {text: synth.synthesize(text, seed=7) for text in texts}
    order = texts * 2 + texts[::-1] * 2
    with ThreadPoolExecutor(4) as pool:
        together = list(pool.map(lambda text: synth.synthesize(text, seed=7), order))
    assert all(np.array_equal(audio, alone[text]) for text, audio in zip(order, together, strict=True))


def test_the_recogniser_loads_a_decoder_only_when_a_transcription_finds_none_free(monkeypatch):
    """Either server's recogniser: no decoder at start; the first transcription loads one, and a
    second is loaded only while the first is busy, up to the workers' count."""
    made: list = []

    class Decoder:  # pocketsphinx's, counting how many were loaded
        def __init__(self, samprate: int, loglevel: str, **search: object):
            assert search == DECODER_SEARCH  # the search the recogniser's benchmark measured
            made.append(self)

        def get_cmn(self, update: bool) -> str:
            return "40,3,-1"

        def __getattr__(self, name: str):
            return lambda *args, **kwargs: None

    monkeypatch.setitem(sys.modules, "pocketsphinx", types.SimpleNamespace(Decoder=Decoder))

    lazy = Recognizer(3)
    assert made == []
    tone = np.sin(np.arange(ASR_RATE) * 0.05).astype(np.float32)
    lazy.transcribe(tone, ASR_RATE)
    lazy.transcribe(tone, ASR_RATE)
    assert len(made) == 1  # one after another: the one decoder serves both
    with lazy._pool.take(), lazy._pool.take(), lazy._pool.take():
        assert len(made) == 3  # three at once: three decoders, and no more
    lazy.transcribe(tone, ASR_RATE)
    assert len(made) == 3


def test_voice_clone_reference_moves_the_voice(server):
    url, _ = server
    low = chat(url, "A short test sentence for the voice.", temperature=0).json()
    low_ref, rate = wav_of(low)
    # a higher-pitched reference made from the server's own speech, sped up by 1.2
    from omnibench_core.toolkit.speech import shift_pitch
    high_ref = shift_pitch(low_ref, 1.2)
    cloned = chat(url, "A short test sentence for the voice.", temperature=0,
                  audio={"format": "wav", "ref_audio": wav_data_uri(to_wav_bytes(high_ref, rate))}).json()
    f0_plain = estimate_f0(low_ref, rate)
    f0_cloned = estimate_f0(wav_of(cloned)[0], rate)
    assert f0_cloned > f0_plain * 1.08
    assert cloned["usage"]["prompt_tokens"] > low["usage"]["prompt_tokens"]  # the reference audio counts


# An older sglang-omni seed-tts client's voice clone: the reference as `audios: [path]`, this prompt.
OLD_CLONE = ('Listen to the audio above. The speaker is reading: "{ref}". '
             "Now please read the following text out loud in the same voice and style: {target}")


def test_an_audios_voice_clone_reads_the_target_text_in_the_references_voice(server, media):
    url, _ = server
    ref_text, target = "Seven green apples sat on a wooden table.", "The quick brown fox jumps over the lazy dog."
    plain, rate = wav_of(chat(url, ref_text, temperature=0).json())
    from omnibench_core.toolkit.speech import shift_pitch
    reference = media / "old-client-ref.wav"
    reference.write_bytes(to_wav_bytes(shift_pitch(plain, 1.2), rate))  # a higher voice reading ref_text
    body = {"model": "minicpmo", "messages": [{"role": "user", "content": OLD_CLONE.format(ref=ref_text, target=target)}],
            "modalities": ["text", "audio"], "audio": {"format": "wav"}, "max_tokens": 256, "temperature": 0,
            "stream": False, "audios": [str(reference)]}
    reply = requests.post(f"{url}/v1/chat/completions", json=body, timeout=600)
    assert reply.status_code == 200, reply.text
    message = reply.json()["choices"][0]["message"]
    assert message["content"] == target and message["audio"]["transcript"] == target
    samples, rate = wav_of(reply.json())
    heard = set(transcribe(url, samples, rate).json()["text"].split())
    assert len(heard & {"quick", "brown", "fox", "over", "lazy", "dog"}) >= 3  # a raised voice is heard less well
    assert not heard & {"seven", "green", "apples", "wooden", "table"}  # never the reference's words
    assert estimate_f0(samples, rate) > estimate_f0(wav_of(chat(url, target, temperature=0).json())[0], rate) * 1.08


@pytest.mark.parametrize("prompt", ["Listen to the audio above. Then say something nice.",
                                    OLD_CLONE.format(ref="Seven green apples.", target="")])
def test_an_audios_voice_clone_without_text_to_read_is_a_400_naming_the_supported_fields(server, media, prompt):
    url, _ = server
    reference = media / "old-client-ref-400.wav"
    reference.write_bytes(_wav(rate=24000, seconds=1))
    body = {"model": "minicpmo", "messages": [{"role": "user", "content": prompt}], "modalities": ["text", "audio"],
            "audio": {"format": "wav"}, "audios": [str(reference)]}
    reply = requests.post(f"{url}/v1/chat/completions", json=body, timeout=600)
    assert reply.status_code == 400, reply.text
    detail = reply.json()["detail"]
    assert "'audio.ref_audio'" in detail and "'audios'" in detail and "same voice and style:" in detail


def test_speech_transcribes_back(server):
    url, _ = server
    text = "The quick brown fox jumps over the lazy dog."
    samples, rate = wav_of(chat(url, text).json())
    heard = transcribe(url, samples, rate)
    assert heard.status_code == 200
    words = set(heard.json()["text"].split())
    assert len(words & {"quick", "brown", "fox", "over", "lazy", "dog"}) >= 4


@pytest.mark.slow  # 2 to 4 CPU-s in the fast tier (issue 40: that tier within a minute)
def test_an_asr_only_server_transcribes_keeps_it_for_the_next_and_refuses_chat_naming_the_flag(server, tmp_path):
    url, _ = server
    samples, rate = wav_of(chat(url, "The quick brown fox jumps over the lazy dog.").json())
    log, kept = tmp_path / "asr.log", ["--heard-dir", str(tmp_path / "heard")]
    proc, port = _start(["--engines", "asr", *kept], log)
    try:
        asr = f"http://127.0.0.1:{port}"
        wait_ready(proc, f"{asr}/health", timeout_s=600)
        assert "recogniser only (--engines asr)" in log.read_text()
        heard = transcribe(asr, samples, rate)
        assert heard.status_code == 200
        assert heard.json()["text"] == transcribe(url, samples, rate).json()["text"]  # the same recogniser
        # the same audio again (a campaign's next run of a deterministic synthesizer): the same text,
        # transcribed once per server
        assert transcribe(asr, samples, rate).json()["text"] == heard.json()["text"]
        stats = requests.get(f"{asr}/local/stats", timeout=600).json()
        assert stats["requests"]["transcriptions"] == 2 and (stats["transcribed"], stats["recalled"]) == (1, 0), stats
        refused = chat(asr)
        assert refused.status_code == 400 and "--engines asr" in refused.text and "--engines speech" in refused.text
    finally:
        proc.stop(10)
    # the next run's scoring server, on the same folder: the kept transcript is read, not heard anew
    proc, port = _start(["--engines", "asr", *kept], tmp_path / "asr-next.log")
    try:
        asr = f"http://127.0.0.1:{port}"
        wait_ready(proc, f"{asr}/health", timeout_s=600)
        assert transcribe(asr, samples, rate).json()["text"] == heard.json()["text"]
        stats = requests.get(f"{asr}/local/stats", timeout=600).json()
        assert (stats["transcribed"], stats["recalled"]) == (0, 1), stats
    finally:
        proc.stop(10)


def test_any_model_name_is_answered_as_the_served_model_and_recorded(server):
    url, log = server
    reply = chat(url, "Any name will do.", model="gpt-4o", modalities=["text"])
    assert reply.status_code == 200 and reply.json()["model"] == "minicpmo"
    heard = transcribe(url, np.zeros(8000, np.float32), 16000, model="whisper-1")
    assert heard.status_code == 200 and "text" in heard.json()
    stats = requests.get(f"{url}/local/stats", timeout=600).json()
    assert stats["served_model"] == "minicpmo"
    assert stats["model_names_asked"]["gpt-4o"] >= 1 and stats["model_names_asked"]["whisper-1"] >= 1
    assert stats["requests"]["chat"] >= 1 and stats["requests"]["transcriptions"] >= 1
    assert "a request names model 'gpt-4o'; answering as 'minicpmo'" in log.read_text()


@pytest.mark.slow
def test_recognition_is_deterministic_in_any_order_and_at_concurrency_8(server):
    url, _ = server
    clips = [wav_of(chat(url, text, temperature=0).json())[0][:int(1.2 * TTS_RATE)] for text in
             ("Rain fell softly on the roof.", "Turn off the lights when you leave.")]
    # Faint noise is what made a pooled decoder disagree with itself: its noise statistics (and
    # cepstral mean) carried over from one utterance to the next.
    noisy = clips[0] + np.random.default_rng(0).normal(0, 0.01, len(clips[0]))
    wavs = [to_wav_bytes(w, TTS_RATE) for w in (noisy, clips[1], np.zeros(TTS_RATE // 2))]

    def hear(i: int) -> str:
        reply = requests.post(f"{url}/v1/audio/transcriptions", files={"file": ("a.wav", wavs[i], "audio/wav")},
                              data={"model": "minicpmo"}, timeout=600)
        assert reply.status_code == 200, reply.text
        return reply.json()["text"]

    sequential = [0, 1, 0, 2, 0, 0]  # the same WAV after different ones, and after itself, on both decoders
    at_once = [0, 1, 0, 2, 0, 1, 0, 0]
    heard = [(i, hear(i)) for i in sequential]
    with ThreadPoolExecutor(8) as pool:
        heard += list(zip(at_once, pool.map(hear, at_once), strict=True))
    texts: dict[int, set[str]] = {}
    for i, text in heard:
        texts.setdefault(i, set()).add(text)
    assert all(len(seen) == 1 for seen in texts.values()), texts


def test_streaming_sends_text_audio_chunks_usage_and_done(server):
    url, _ = server
    reply = chat(url, "First sentence here. And a second one.", stream=True)
    assert reply.status_code == 200 and reply.headers["Content-Type"].startswith("text/event-stream")
    events = [line[6:] for line in reply.text.splitlines() if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    # the text a token a chunk, as a thinker streams it (upstream: one delta.content per text chunk),
    # the role on the first; joined, the whole answer
    texts = [c["choices"][0]["delta"]["content"] for c in chunks if "content" in c["choices"][0]["delta"]]
    assert "".join(texts) == "First sentence here. And a second one." and len(texts) == 9, texts
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant" and "role" not in chunks[1]["choices"][0]["delta"]
    audio = [c["choices"][0]["delta"]["audio"]["data"] for c in chunks if "audio" in c["choices"][0]["delta"]]
    assert len(audio) >= 2  # in pieces of at most 0.5 s (--stream-chunk-ms)
    for data in audio:
        info = sf.info(io.BytesIO(base64.b64decode(data)))
        assert info.samplerate == TTS_RATE and 0 < info.frames <= TTS_RATE // 2
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop" and chunks[-1]["usage"]["completion_tokens"] > 0
    # the pieces are the very audio the same request without stream gets (temperature 0: one
    # answer): streamed and non-streamed quality are like for like
    text = "First sentence here. And a second one."
    events = [json.loads(line[6:]) for line in chat(url, text, stream=True, temperature=0).text.splitlines()
              if line.startswith("data: {")]
    streamed = np.concatenate([sf.read(io.BytesIO(base64.b64decode(e["choices"][0]["delta"]["audio"]["data"])),
                                       dtype="int16")[0] for e in events if "audio" in e["choices"][0]["delta"]])
    whole = chat(url, text, temperature=0).json()
    assert np.array_equal(streamed, sf.read(io.BytesIO(base64.b64decode(whole["choices"][0]["message"]["audio"]["data"])),
                                            dtype="int16")[0])
    assert events[-1]["usage"] == whole["usage"]


@pytest.mark.slow
def test_video_question_from_allowed_media(server, media):
    url, _ = server
    question = wav_of(chat(url, "What colour is it? A, blue. B, red.", temperature=0).json())
    (media / "question.wav").write_bytes(to_wav_bytes(*question))
    body = {"messages": [{"role": "user", "content": "Answer: $LETTER"}], "videos": [str(media / "red.mp4")],
            "audios": [str(media / "question.wav")], "video_max_frames": 2, "temperature": 0}
    reply = requests.post(f"{url}/v1/chat/completions", json=body, timeout=600)
    assert reply.status_code == 200, reply.text
    assert "mostly red" in reply.json()["choices"][0]["message"]["content"]
    full = reply.json()["usage"]["prompt_tokens"]
    # video_total_pixels too small for two frames at video_min_pixels: one frame is kept, 64 tokens fewer.
    capped = requests.post(f"{url}/v1/chat/completions", json={**body, "video_min_pixels": 10000,
                                                               "video_total_pixels": 15000}, timeout=600)
    assert capped.status_code == 200, capped.text
    assert capped.json()["usage"]["prompt_tokens"] == full - 64


def test_video_pixel_fields_shape_the_sampled_frames(media):
    data = (media / "red.mp4").read_bytes()  # 1 s at 4 fps, 160x120 = 19200 pixels a frame
    plain = summarize_video(data, Sampling(fps=4))
    assert plain.frames == 4 and plain.pixels == 4 * 19200 and plain.color == "red"
    small = summarize_video(data, Sampling(fps=4, max_pixels=4800))
    assert small.pixels <= 4 * 4800 and small.frames == 4
    upscaled = summarize_video(data, Sampling(fps=4, min_pixels=4 * 19200))
    assert upscaled.pixels >= 4 * 4 * 19200 and upscaled.color == "red"
    shrunk = summarize_video(data, Sampling(fps=4, total_pixels=40000))  # per-frame pixels give way first
    assert shrunk.frames == 4 and shrunk.pixels <= 40000
    fewer = summarize_video(data, Sampling(fps=4, min_pixels=15000, total_pixels=40000))  # then frames do
    assert fewer.frames == 2 and fewer.pixels <= 40000


def test_a_video_is_decoded_once_per_content_and_sampling(media):
    """The server keeps a video's summary by its bytes and the request's sampling (seen.py): the same
    file under another name (a local set past ten questions hard-links its ten videos) is not decoded
    again; another sampling is; a video that cannot be decoded is refused every time, never kept."""
    from omnibench_core.local.seen import SeenVideos
    from omnibench_core.local.vision import VideoError

    seen, data = SeenVideos(), (media / "red.mp4").read_bytes()
    assert seen.summarize(data, Sampling(fps=4), "videos[0]") == summarize_video(data, Sampling(fps=4))
    assert seen.summarize(bytes(data), Sampling(fps=4), "a hard link's name").color == "red" and seen.decoded == 1
    assert seen.summarize(data, Sampling(fps=2)).frames == 2 and seen.decoded == 2
    for _ in range(2):
        with pytest.raises(VideoError):
            seen.summarize((media / "garbage.mp4").read_bytes(), Sampling(fps=4))
    assert seen.decoded == 2


def test_a_fresh_wav_outside_the_allowed_folders_reads_as_missing(server, media, tmp_path):
    url, _ = server
    outside = tmp_path / "fresh.wav"
    outside.write_bytes(_wav())

    def detail(path: str) -> str:
        reply = requests.post(f"{url}/v1/chat/completions", json={
            "messages": [{"role": "user", "content": "hi"}], "audios": [path]}, timeout=600)
        assert reply.status_code == 400
        return reply.json()["detail"]

    assert detail(str(outside)) == detail(str(media / "missing.wav")) == detail("/etc/hostname") \
        == detail(str(media / ".." / outside.parent.name / "fresh.wav")) == f"audios[0]: {REFUSED}"


@pytest.mark.slow
def test_read_aloud_prefix_is_a_flag(tmp_path):
    proc, port = _start(["--read-aloud-prefix", "Say:", "--read-aloud-prefix", "Repeat after me:"],
                        tmp_path / "server.log")
    try:
        url = f"http://127.0.0.1:{port}"
        wait_ready(proc, f"{url}/health", timeout_s=600)

        def reply(prompt: str) -> str:
            body = {"messages": [{"role": "user", "content": prompt}], "modalities": ["text"]}
            return requests.post(f"{url}/v1/chat/completions", json=body, timeout=600).json()["choices"][0][
                "message"]["content"]

        assert reply("say: good morning") == "good morning"
        assert reply("Repeat after me:  well done ") == "well done"
        assert reply(READ + "hello") == READ + "hello"  # the flag replaced the default
    finally:
        proc.stop(10)


@pytest.mark.slow
def test_idle_connections_and_stalled_bodies_are_closed(tmp_path):
    proc, port = _start(["--idle-timeout", str(IDLE_S), "--body-timeout", str(IDLE_S)], tmp_path / "server.log")
    url = f"http://127.0.0.1:{port}"
    try:
        wait_ready(proc, f"{url}/health", timeout_s=600)
        # The sockets wait far longer than the server's idle limit: an answer at all (b"", a 408) is
        # the server's doing, whatever the load; a server that never closed would hang the test.
        with socket.create_connection(("127.0.0.1", port), timeout=600) as idle:
            assert idle.recv(1) == b""  # closed by the server, having sent nothing
        for path, content_type in (("/v1/chat/completions", "application/json"),
                                   ("/v1/audio/transcriptions", "multipart/form-data; boundary=x")):
            with socket.create_connection(("127.0.0.1", port), timeout=600) as stalled:
                stalled.sendall(f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: {content_type}\r\n"
                                "Content-Length: 1000\r\n\r\n--x".encode())
                head = stalled.recv(4096)
                assert head.startswith(b"HTTP/1.1 408"), head
        assert requests.get(f"{url}/health", timeout=600).status_code == 200
    finally:
        proc.stop(10)


def test_sixteen_concurrent_requests(server):
    url, _ = server
    with ThreadPoolExecutor(16) as pool:
        replies = list(pool.map(lambda i: chat(url, f"Sentence number {i} is spoken now."), range(16)))
    assert [r.status_code for r in replies] == [200] * 16
    assert len({r.json()["choices"][0]["message"]["content"] for r in replies}) == 16


# --- Bad input: every route, every safety rule. Each must be a 4xx with {"detail": ...}. ---

def _raw(path, data, content_type="application/json", method="POST"):
    return lambda url, media: requests.request(method, f"{url}{path}", data=data,
                                               headers={"Content-Type": content_type}, timeout=600)


def _chat(**fields):
    base = {"model": "minicpmo", "messages": [{"role": "user", "content": READ + "Hi."}],
            "modalities": ["text", "audio"]}
    return lambda url, media: requests.post(f"{url}/v1/chat/completions", json={**base, **fields}, timeout=600)


def _chat_text(text):
    return _raw("/v1/chat/completions", text)


def _ref(data: bytes):
    return _chat(audio={"format": "wav", "ref_audio": wav_data_uri(data)})


def _media(key, name, **fields):
    """A chat request naming ``name`` (relative to the media folder, or absolute) in ``key``."""
    def send(url, media):
        given = name.format(root=media.name)
        path = given if given.startswith(("/", "rel:")) else str(media / given)
        body = {"messages": [{"role": "user", "content": "Answer: $LETTER"}], key: [path.removeprefix("rel:")],
                "video_max_frames": 2, **fields}
        return requests.post(f"{url}/v1/chat/completions", json=body, timeout=600)
    return send


def _asr(files=None, data=None):
    fields = {"model": "minicpmo"} if data is None else data
    return lambda url, media: requests.post(f"{url}/v1/audio/transcriptions", files=files, data=fields, timeout=600)


def _upload(data: bytes, **fields):
    return _asr(files={"file": ("a.wav", data, "audio/wav")}, data={"model": "minicpmo", **fields})


ROOT_READS_ANYTHING = os.geteuid() == 0
BAD = [
    # /health, /v1/models, unknown routes and methods
    ("POST /health", _raw("/health", b""), 405, "Method Not Allowed"),
    ("PUT /health", _raw("/health", b"", method="PUT"), 405, "Method Not Allowed"),
    ("POST /v1/models", _raw("/v1/models", b"{}"), 405, "Method Not Allowed"),
    ("DELETE /v1/models", _raw("/v1/models", b"", method="DELETE"), 405, "Method Not Allowed"),
    ("GET chat", _raw("/v1/chat/completions", b"", method="GET"), 405, "Method Not Allowed"),
    ("PATCH chat", _raw("/v1/chat/completions", b"{}", method="PATCH"), 405, "Method Not Allowed"),
    ("GET transcriptions", _raw("/v1/audio/transcriptions", b"", method="GET"), 405, "Method Not Allowed"),
    ("POST stats", _raw("/local/stats", b""), 405, "Method Not Allowed"),
    ("unknown route", _raw("/v1/audio/speech", b"{}"), 404, "Not Found"),
    ("unknown GET", _raw("/admin", b"", method="GET"), 404, "Not Found"),
    # chat: the body
    ("malformed JSON", _chat_text(b"{not json"), 400, "not valid JSON"),
    ("empty body", _chat_text(b""), 400, "not valid JSON"),
    ("non-UTF-8 body", _chat_text(b"\xff\xfe{}"), 400, "not valid JSON"),
    ("bogus charset", _raw("/v1/chat/completions", b"{}", "application/json; charset=bogus-42"), 400,
     "unknown charset 'bogus-42'"),
    ("JSON nested 1000 deep", _chat_text(b"[" * 1000 + b"]" * 1000), 400, "nested too deeply"),
    ("JSON nested 100000 deep", _chat_text(b'{"a":' * 100000), 400, "nested too deeply"),
    ("JSON array body", _chat_text(b"[1, 2]"), 400, "must be a JSON object"),
    ("JSON string body", _chat_text(b'"hello"'), 400, "must be a JSON object"),
    # chat: fields
    ("missing messages", _chat(messages=None), 400, "'messages' is required"),
    ("empty messages", _chat(messages=[]), 400, "'messages' is required"),
    ("messages not a list", _chat(messages="hello"), 400, "'messages' is required"),
    ("null message", _chat(messages=[None]), 400, "messages[0] must be an object"),
    ("unknown role", _chat(messages=[{"role": "robot", "content": "hi"}]), 400, "role system, user or assistant"),
    ("content object", _chat(messages=[{"role": "user", "content": {"a": 1}}]), 400, "string or a list of parts"),
    ("content part not an object", _chat(messages=[{"role": "user", "content": ["hi"]}]), 400, "must be objects"),
    ("no user message", _chat(messages=[{"role": "system", "content": "hi"}]), 400, "no user message"),
    ("model not a string", _chat(model=7), 400, "'model' must be a string"),
    ("empty modalities", _chat(modalities=[]), 400, "'modalities' must be a non-empty list"),
    ("modalities a string", _chat(modalities="audio"), 400, "'modalities' must be a non-empty list"),
    ("unknown modality", _chat(modalities=["text", "video"]), 400, "unknown modality 'video'"),
    ("max_tokens 0", _chat(max_tokens=0), 400, "'max_tokens'"),
    ("max_tokens string", _chat(max_tokens="9"), 400, "'max_tokens'"),
    ("max_tokens bool", _chat(max_tokens=True), 400, "'max_tokens'"),
    ("temperature NaN", _chat_text(b'{"messages": [{"role": "user", "content": "hi"}], "temperature": NaN}'), 400,
     "'temperature' must be a number, finite"),
    ("temperature Infinity", _chat_text(b'{"messages": [{"role": "user", "content": "hi"}], "temperature": Infinity}'),
     400, "'temperature' must be a number, finite"),
    ("temperature -Infinity", _chat_text(b'{"messages": [{"role": "user", "content": "hi"}], '
                                         b'"temperature": -Infinity}'), 400, "'temperature' must be a number, finite"),
    ("temperature negative", _chat(temperature=-0.1), 400, "'temperature'"),
    ("temperature string", _chat(temperature="hot"), 400, "'temperature'"),
    ("stream a string", _chat(stream="yes"), 400, "'stream' must be true or false"),
    ("stream 1", _chat(stream=1), 400, "'stream' must be true or false"),
    ("stream null", _chat(stream=None), 400, "'stream' must be true or false"),
    ("seed -1 with audio", _chat(seed=-1), 400, "'seed' must be an integer from 0"),
    ("seed 2**64", _chat(seed=2**64), 400, "'seed' must be an integer from 0"),
    ("seed float", _chat(seed=1.5), 400, "'seed'"),
    ("seed bool", _chat(seed=False), 400, "'seed'"),
    ("over-long prompt", _chat(messages=[{"role": "user", "content": "word " * 400}]), 400,
     "longer than the model's context length (300"),
    ("streaming with NaN temperature", _chat_text(b'{"messages": [{"role": "user", "content": "hi"}], '
                                                  b'"stream": true, "temperature": NaN}'), 400, "'temperature'"),
    ("streaming with bad reference", _chat(stream=True, audio={"format": "wav", "ref_audio": "data:,@@"}), 400,
     "invalid base64"),
    # chat: reference audio
    ("audio not an object", _chat(audio="wav"), 400, "'audio' must be an object"),
    ("audio format mp3", _chat(audio={"format": "mp3"}), 400, "audio format 'mp3' is not supported"),
    ("ref_audio bad base64", _chat(audio={"format": "wav", "ref_audio": "data:audio/wav;base64,@@@"}), 400,
     "invalid base64"),
    ("ref_audio not WAV", _ref(b"ID3 this is an mp3"), 400, "not a WAV file"),
    ("ref_audio empty string", _chat(audio={"format": "wav", "ref_audio": ""}), 400, "must be a data URI"),
    ("ref_audio a number", _chat(audio={"format": "wav", "ref_audio": 5}), 400, "must be a data URI"),
    ("ref_audio NaN samples", _ref(NAN_WAV), 400, "non-finite samples"),
    ("ref_audio Inf samples", _ref(INF_WAV), 400, "non-finite samples"),
    ("ref_audio at 2 Hz", _ref(SLOW_WAV), 400, "sample rate 2 Hz is outside"),
    ("ref_audio at 500 kHz", _ref(FAST_WAV), 400, "sample rate 500000 Hz is outside"),
    ("ref_audio over-long", _ref(LONG_WAV), 400, "longer than the server's limit"),
    ("ref_audio without samples", _ref(EMPTY_WAV), 400, "holds no audio samples"),
    ("ref_audio truncated header", _ref(b"RIFF\x10\x00\x00\x00WAVEfmt "), 400, "unreadable WAV"),
    # chat: local media files
    ("videos not a list", _chat(videos="a.mp4"), 400, "'videos' must be a list of file paths"),
    ("videos holds a number", _chat(videos=[3]), 400, "'videos' must be a list of file paths"),
    ("too many videos", _chat(videos=["/a.mp4"] * 17), 400, "more than 16 files"),
    ("relative video path", _media("videos", "rel:red.mp4"), 400, REFUSED),
    ("missing video", _media("videos", "missing.mp4"), 400, REFUSED),
    ("video outside the roots", _media("videos", "/etc/hostname"), 400, REFUSED),
    ("video is a folder", _media("videos", "folder"), 400, REFUSED),
    ("video is the root itself", _media("videos", "."), 400, REFUSED),
    ("video symlink to outside", _media("videos", "link-out.wav"), 400, REFUSED),
    ("video symlink to a device", _media("videos", "link-dev.wav"), 400, REFUSED),
    ("video .. escape", _media("videos", "folder/../../{root}-outside/secret.wav"), 400, REFUSED),
    ("video FIFO", _media("videos", "fifo.wav"), 400, REFUSED),
    ("video NUL in path", _media("videos", "red.mp4\x00.txt"), 400, REFUSED),
    ("video /dev/zero", _media("videos", "/dev/zero"), 400, REFUSED),
    pytest.param("unreadable video", _media("videos", "locked.wav"), 400, REFUSED,
                 marks=pytest.mark.skipif(ROOT_READS_ANYTHING, reason="root reads a mode-0 file")),
    ("video over the size cap", _media("videos", "big.bin"), 400, "larger than the server's limit"),
    ("video not a video", _media("videos", "garbage.mp4"), 400, "cannot decode videos[0]"),
    ("audio file NaN samples", _media("audios", "nan.wav"), 400, "audios[0] holds non-finite samples"),
    ("audio file at 2 Hz", _media("audios", "slow.wav"), 400, "sample rate 2 Hz"),
    ("audio file over-long", _media("audios", "long.wav"), 400, "longer than the server's limit"),
    ("audio file not a WAV", _media("audios", "red.mp4"), 400, "not a WAV file"),
    ("missing audio file", _media("audios", "missing.wav"), 400, REFUSED),
    ("video_fps NaN", _chat_text(b'{"messages": [{"role": "user", "content": "hi"}], "video_fps": NaN}'), 400,
     "'video_fps' must be a number, finite"),
    ("video_max_pixels negative", _chat(video_max_pixels=-1), 400, "'video_max_pixels'"),
    ("video_total_pixels a string", _chat(video_total_pixels="many"), 400, "'video_total_pixels'"),
    ("video_min_pixels over max", _chat(video_min_pixels=500, video_max_pixels=100), 400,
     "'video_min_pixels' must not exceed"),
    # /v1/audio/transcriptions
    ("transcription as JSON", _raw("/v1/audio/transcriptions", b"{}"), 400, "multipart/form-data"),
    ("transcription urlencoded", _raw("/v1/audio/transcriptions", b"model=x", "application/x-www-form-urlencoded"),
     400, "multipart/form-data"),
    ("multipart without boundary", _raw("/v1/audio/transcriptions", b"junk", "multipart/form-data"), 400,
     "malformed multipart body"),
    ("junk multipart", _raw("/v1/audio/transcriptions", b"--x\r\njunk\r\n\r\n", "multipart/form-data; boundary=x"),
     400, "malformed multipart body"),
    ("multipart bogus charset", _raw("/v1/audio/transcriptions", b'--x\r\nContent-Disposition: form-data; '
                                     b'name="model"\r\n\r\nm\r\n--x--\r\n', "multipart/form-data; boundary=x; "
                                     "charset=bogus-42"), 400, "'file' is required"),
    ("no model", _asr(files={"file": ("a.wav", _wav())}, data={}), 400, "'model' is required"),
    ("model as a file", _asr(files={"file": ("a.wav", _wav()), "model": ("m", b"x")}, data={}), 400,
     "'model' is required"),
    ("no file", _asr(files={"x": ("x", b"1")}), 400, "'file' is required"),
    ("file as a text field", _asr(data={"model": "minicpmo", "file": "abc"}, files={"x": ("x", b"1")}), 400,
     "'file' is required"),
    ("empty upload", _upload(b""), 400, "'file' is empty"),
    ("non-WAV upload", _upload(b"just some text, not audio"), 400, "not a WAV file"),
    ("NaN upload", _upload(NAN_WAV), 400, "'file' holds non-finite samples"),
    ("2 Hz upload", _upload(SLOW_WAV), 400, "sample rate 2 Hz is outside"),
    ("500 kHz upload", _upload(FAST_WAV), 400, "sample rate 500000 Hz is outside"),
    ("over-long upload", _upload(LONG_WAV), 400, "longer than the server's limit"),
    ("upload without samples", _upload(EMPTY_WAV), 400, "holds no audio samples"),
    ("language fr", _upload(_wav(), language="fr"), 400, "language 'fr' is not supported"),
    ("language as a file", _asr(files={"file": ("a.wav", _wav()), "language": ("l", b"en")}), 400,
     "language '(a file)' is not supported"),
]


def _case_id(case) -> str:
    return case.values[0] if hasattr(case, "values") else case[0]


@pytest.mark.parametrize(("case", "send", "status", "detail"), BAD, ids=[_case_id(c) for c in BAD])
def test_bad_input_gets_a_4xx_detail_and_the_server_keeps_serving(server, media, case, send, status, detail):
    url, _ = server
    reply = send(url, media)
    assert reply.status_code == status, reply.text
    assert detail in reply.json()["detail"]
    assert requests.get(f"{url}/health", timeout=600).status_code == 200


def test_there_are_enough_bad_input_cases():
    assert len(BAD) >= 60
