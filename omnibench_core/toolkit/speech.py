"""Real CPU speech: synthesis (hibari-tts), recognition (pocketsphinx), pitch and voice matching.

MiniCPM-o clones a voice from reference audio; no CPU model here can. The local substitute,
``voice match``, estimates the reference's median pitch and shifts the synthetic voice toward it
(bounded to a factor of 0.8..1.25) while keeping the speaking rate. Reports name it as such.
"""

from __future__ import annotations

import queue
import threading
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from .audio import change_length, resample

TTS_RATE = 24000  # MiniCPM-o's output rate too
ASR_RATE = 16000
VOICE_MATCH_RANGE = (0.8, 1.25)
REFERENCE_PITCH_SECONDS = 60.0  # a median pitch needs no more; bounds the work a long reference costs
CALIBRATION_TEXT = "This sentence calibrates the voice pitch."
# The voice's median pitch (estimate_f0 of CALIBRATION_TEXT, seed 0) by hibari-tts version, measured
# once: a lag of 79 samples at 16 kHz for the pinned 0.2.1, so a start does not synthesize it again;
# another version measures it at start. The synthesis differs in its last bits from one CPU to another
# (its ONNX kernels): on an AMD EPYC host (2026-12-07) the median fell between lags 78 and 79, 203.8 Hz.
# One figure a version keeps the pitch factor a reference gets the same on every host;
# tests/test_local_server.py measures it again and holds this table to it within one lag.
VOICE_F0_BY_VERSION = {"0.2.1": ASR_RATE / 79}
WARM_UP_TEXT = "Ready."


def estimate_f0(samples: np.ndarray, rate: int, fmin: float = 60.0, fmax: float = 400.0) -> float | None:
    """Median fundamental frequency (Hz) of the voiced frames, by normalised autocorrelation.

    Frames of 40 ms every 10 ms; a frame is voiced when it is loud (above 10% of the 95th
    percentile energy) and its autocorrelation peak is at least 0.5. None when nothing is voiced.
    """
    x = resample(np.asarray(samples, dtype=np.float32), rate, ASR_RATE).astype(np.float64)
    frame, hop = int(0.04 * ASR_RATE), int(0.01 * ASR_RATE)
    if len(x) < frame:
        return None
    starts = np.arange(0, len(x) - frame + 1, hop)
    frames = np.stack([x[s:s + frame] for s in starts])
    frames = frames - frames.mean(axis=1, keepdims=True)
    energy = (frames ** 2).sum(axis=1)
    loud = energy > 0.1 * np.percentile(energy, 95)
    if not loud.any():
        return None
    frames = frames[loud] * np.hanning(frame)
    spec = np.fft.rfft(frames, n=2 * frame, axis=1)
    ac = np.fft.irfft(np.abs(spec) ** 2, axis=1)[:, :frame]
    ac /= np.maximum(ac[:, :1], 1e-12)
    lo, hi = int(ASR_RATE / fmax), int(ASR_RATE / fmin)
    lags = np.argmax(ac[:, lo:hi], axis=1) + lo
    peaks = ac[np.arange(len(ac)), lags]
    voiced = peaks >= 0.5
    if voiced.sum() < 3:
        return None
    return float(np.median(ASR_RATE / lags[voiced]))


def shift_pitch(samples: np.ndarray, factor: float) -> np.ndarray:
    """Raise pitch by ``factor`` (and shorten by it): a band-limited change of length."""
    if abs(factor - 1.0) < 1e-3:
        return np.asarray(samples, dtype=np.float32)
    return change_length(samples, max(1, int(round(len(samples) / factor))))


class _Pool:
    """At most ``size`` engine instances shared by request threads (the recogniser's decoders are
    not thread-safe), made one by one when a request finds every made one busy."""

    def __init__(self, make: Callable[[], Any], size: int):
        self._items: queue.Queue[Any] = queue.Queue()
        self._make, self._left, self._lock = make, size, threading.Lock()

    def _add(self) -> None:
        self._items.put(self._make())
        self._left -= 1

    @contextmanager
    def take(self) -> Iterator[Any]:  # the engines are untyped C extensions
        try:
            item = self._items.get_nowait()
        except queue.Empty:
            with self._lock:  # one thread makes the next instance; the others wait for a free one
                if self._left > 0:
                    self._add()
            item = self._items.get()
        try:
            yield item
        finally:
            self._items.put(item)


class Synthesizer:
    """One hibari-tts voice shared by every request thread; 24 kHz float32 out.

    One voice, not one a worker thread: its ONNX session's ``run`` may be called from several
    threads at once (onnxruntime guarantees it: microsoft/onnxruntime commit 674afbe), its G2P is
    read-only once loaded and each synthesis draws from its own seeded generator, so concurrent
    syntheses give the bytes a serial one gives (tests/test_local_server.py holds it). A second
    voice cost a speech server's start 0.13 CPU-s more for no more throughput
    (benchmarks/bench_synth_start.py, 2026-12-07, issue 40). ``workers`` is kept for the callers'
    signature: the server's executor bounds how many syntheses run at once."""

    def __init__(self, workers: int = 2):
        import hibari  # imported here: loading is the server's "model load"

        del workers  # one voice serves any number of threads (above)
        self._tts = hibari.Hibari(threads=1)
        # The voice's first synthesis loads what it loads lazily (its G2P: 0.2 s, whatever the text;
        # later ones take 0.01-0.02 s): done here, while the port is closed, so no request pays it
        # (a timed one wherever no warm-up request took it first). Found 2026-12-05.
        self._tts(WARM_UP_TEXT, speed=1.0, seed=0)
        self.version = str(getattr(hibari, "__version__", "unknown"))
        self.voice_f0 = VOICE_F0_BY_VERSION.get(self.version) or self.measure_voice_f0()

    def measure_voice_f0(self) -> float:
        """The voice's median pitch (Hz), measured on a calibration sentence (200 if none is found)."""
        return estimate_f0(self.synthesize(CALIBRATION_TEXT, seed=0), TTS_RATE) or 200.0

    def synthesize(self, text: str, *, seed: int | None = None, speed: float = 1.0) -> np.ndarray:
        """Speech for ``text`` at ``speed`` (0.5..2.0); ``seed`` makes it reproducible."""
        return np.asarray(self._tts(text, speed=speed, seed=seed), dtype=np.float32)

    def match_factor(self, reference: np.ndarray, rate: int) -> float:
        """The pitch factor that moves this voice toward the reference's median pitch (its first minute)."""
        f0 = estimate_f0(reference[:int(REFERENCE_PITCH_SECONDS * rate)], rate)
        if f0 is None:
            return 1.0
        return float(np.clip(f0 / self.voice_f0, *VOICE_MATCH_RANGE))

    def speak_like(self, text: str, factor: float, *, seed: int | None = None) -> np.ndarray:
        """Speech for ``text`` with pitch ``factor`` at the natural speaking rate."""
        # Slow the synthesis by the factor, then shift pitch up by it: the duration cancels out.
        audio = self.synthesize(text, seed=seed, speed=float(np.clip(1.0 / factor, 0.5, 2.0)))
        return shift_pitch(audio, factor)


# One pass of the tree search, at most 3,000 active HMMs a frame (pocketsphinx's defaults: a second,
# flat pass and 30,000): 0.29 CPU-s an utterance against 0.43, corpus WER 0.080 against 0.090 on the
# first 20 seed-tts sentences as the synthesizer says them (benchmarks/bench_recogniser.py, 2026-12-07).
# Scoring transcribes every answer, so this is most of a local run's scoring time (issue 40).
DECODER_SEARCH = {"fwdflat": False, "maxhmmpf": 3000}


class Recognizer:
    """pocketsphinx with its bundled en-us model, one decoder per worker thread.

    Deterministic: the same audio gives the same text whichever pooled decoder gets it and
    whatever it heard before. A decoder carries state between utterances: its noise-removal
    statistics (the cause of most differences measured here) and its cepstral mean. Both are
    put back to a fresh decoder's before each utterance, which costs microseconds; a fresh
    decoder per request would cost about 0.25 s. Digital silence (every 16-bit sample zero) is
    answered with '' without decoding: it gives pocketsphinx NaN features, and then words that
    depend on what the decoder heard before.
    """

    def __init__(self, workers: int = 2):
        """Up to ``workers`` decoders, each loaded (0.26 CPU-s) when a transcription finds every
        loaded one busy: a local server hears only audio its heard cache does not hold (a spoken
        question, an answer never scored before), which most of its starts never meet (issue 40)."""
        from pocketsphinx import Decoder

        # start_stream() is the only public way to reset the noise statistics in 5.1.1; it
        # warns that it is "unnecessary", which is untrue for utterances from unrelated sources.
        warnings.filterwarnings("ignore", message=r"start_stream\(\) is deprecated", category=DeprecationWarning)
        self._initial_cmn: str | None = None

        def decoder() -> Any:
            made = Decoder(samprate=ASR_RATE, loglevel="FATAL", **DECODER_SEARCH)
            if self._initial_cmn is None:  # a fresh decoder's, read from the first one made
                self._initial_cmn = made.get_cmn(False)
            return made

        self._pool = _Pool(decoder, workers)

    def transcribe(self, samples: np.ndarray, rate: int) -> str:
        """Lower-case English words heard in the audio ('' for silence)."""
        x = resample(samples, rate, ASR_RATE)
        pcm16 = (np.clip(x, -1.0, 1.0) * 32767).astype("<i2")
        if not pcm16.any():
            return ""
        pcm = pcm16.tobytes()
        with self._pool.take() as decoder:
            decoder.start_stream()
            decoder.set_cmn(self._initial_cmn)
            decoder.start_utt()
            decoder.process_raw(pcm, full_utt=True)
            decoder.end_utt()
            hyp = decoder.hyp()
        return hyp.hypstr.strip() if hyp is not None else ""
