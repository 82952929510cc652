"""WAV helpers shared by the local server, the clients and the scorers."""

from __future__ import annotations

import base64
import binascii
import io
import re

import numpy as np
import soundfile as sf

_DATA_URI = re.compile(r"^data:(?P<mime>[\w.+-]+/[\w.+-]+)?(?P<params>(;[\w.+-]+=[\w.+-]+)*);base64,(?P<data>.*)$", re.S)


class AudioError(ValueError):
    """Bytes that are not a readable audio file, or a malformed data URI."""


def to_wav_bytes(samples: np.ndarray, rate: int) -> bytes:
    """Encode mono float samples in [-1, 1] as a 16-bit PCM WAV file."""
    buffer = io.BytesIO()
    sf.write(buffer, np.clip(np.asarray(samples, dtype=np.float32), -1.0, 1.0), rate, format="WAV", subtype="PCM_16")
    return buffer.getvalue()


def read_wav_bytes(data: bytes) -> tuple[np.ndarray, int]:
    """Decode a WAV file's bytes to mono float32 samples and the sample rate.

    Raises :class:`AudioError` when the bytes are not a RIFF/WAVE file soundfile can read.
    """
    if len(data) < 12 or data[:4] != b"RIFF" or data[8:12] != b"WAVE":
        raise AudioError("not a WAV file (no RIFF/WAVE header)")
    try:
        samples, rate = sf.read(io.BytesIO(data), dtype="float32", always_2d=True)
    except (RuntimeError, sf.LibsndfileError) as exc:
        raise AudioError(f"unreadable WAV: {exc}") from exc
    return samples.mean(axis=1), int(rate)


def decode_data_uri(uri: str) -> bytes:
    """The bytes of a ``data:...;base64,...`` URI (a bare base64 string is accepted too)."""
    match = _DATA_URI.match(uri.strip())
    payload = match.group("data") if match else uri.strip()
    try:
        return base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise AudioError(f"invalid base64 audio: {exc}") from exc


def wav_data_uri(wav: bytes) -> str:
    """``data:audio/wav;base64,...`` for WAV bytes, as sglang-omni's clients send references."""
    return "data:audio/wav;base64," + base64.b64encode(wav).decode("ascii")


def resample(samples: np.ndarray, src_rate: int, dst_rate: int) -> np.ndarray:
    """Band-limited resampling through the FFT (no aliasing when going down)."""
    if src_rate == dst_rate or len(samples) == 0:
        return np.asarray(samples, dtype=np.float32)
    n_out = max(1, int(round(len(samples) * dst_rate / src_rate)))
    return change_length(samples, n_out)


def change_length(samples: np.ndarray, n_out: int) -> np.ndarray:
    """Stretch or squeeze a signal to ``n_out`` samples, keeping it band-limited.

    Played at the original rate, this changes pitch and duration together by len/n_out.
    """
    x = np.asarray(samples, dtype=np.float64)
    spectrum = np.fft.rfft(x)
    bins = n_out // 2 + 1
    if bins <= len(spectrum):
        spectrum = spectrum[:bins]
    else:
        spectrum = np.concatenate([spectrum, np.zeros(bins - len(spectrum), dtype=complex)])
    return (np.fft.irfft(spectrum, n=n_out) * (n_out / len(x))).astype(np.float32)


def wav_duration_s(data: bytes) -> float:
    """Duration of WAV bytes from their header (0.0 when unreadable)."""
    try:
        info = sf.info(io.BytesIO(data))
    except (RuntimeError, sf.LibsndfileError):
        return 0.0
    return info.frames / info.samplerate if info.samplerate else 0.0
