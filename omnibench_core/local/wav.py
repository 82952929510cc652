"""Audio a request brings (reference voice, ``audios`` files, transcription uploads), checked
against the server's limits before any costly work.

Resampling and recognition cost grows with the number of samples, and a WAV header can declare
any rate: an 8 KB file at 2 Hz once cost 199 s and 1 GB. So the header is read first and absurd
rates, over-long audio and too many samples are refused before the samples are decoded.
"""

from __future__ import annotations

import io
from dataclasses import dataclass

import numpy as np
import soundfile as sf

from ..toolkit.audio import AudioError, read_wav_bytes
from .errors import RequestError


@dataclass(frozen=True)
class AudioLimits:
    """What the server accepts as input audio."""

    max_seconds: float = 600.0
    min_rate: int = 1000
    max_rate: int = 384000
    max_frames: int = 600 * 48000  # ten minutes at 48 kHz: bounds resampling work at any rate


def decode_wav(data: bytes, what: str, limits: AudioLimits) -> tuple[np.ndarray, int]:
    """Mono float32 samples and the rate of WAV ``data``, or a 400 naming ``what``."""
    if len(data) < 12 or data[:4] != b"RIFF" or data[8:12] != b"WAVE":
        raise RequestError(400, f"{what}: not a WAV file (no RIFF/WAVE header)")
    try:
        info = sf.info(io.BytesIO(data))
    except (RuntimeError, sf.LibsndfileError) as exc:
        raise RequestError(400, f"{what}: unreadable WAV: {exc}") from exc
    rate = int(info.samplerate)
    if not limits.min_rate <= rate <= limits.max_rate:
        raise RequestError(400, f"{what}: sample rate {rate} Hz is outside {limits.min_rate}..{limits.max_rate} Hz")
    if info.frames > limits.max_frames or info.frames / rate > limits.max_seconds:
        raise RequestError(400, f"{what}: audio longer than the server's limit ({limits.max_seconds:g} s, "
                                f"{limits.max_frames} samples)")
    try:
        samples, rate = read_wav_bytes(data)
    except AudioError as exc:
        raise RequestError(400, f"{what}: {exc}") from exc
    if samples.size == 0:
        raise RequestError(400, f"{what} holds no audio samples")
    if not np.isfinite(samples).all():
        raise RequestError(400, f"{what} holds non-finite samples (NaN or infinity)")
    return samples, rate
