"""Local substitutes for SIM (speaker similarity) and UTMOS (speech quality).

sglang-omni scores SIM with WavLM-ECAPA embeddings and quality with UTMOS; neither runs here
without downloading models. These are real, documented signal measures instead, and every
report that uses them names them:

* SIM substitute: cosine x 100 of spectral speaker embeddings: the mean over loud frames of
  20 mel-cepstral coefficients (c1..c20, no energy term), each file at 16 kHz.
* UTMOS substitute: an SNR-based quality estimate on 1..5: the ratio of the 90th to the 10th
  percentile of frame energies in dB (speech peaks against the noise floor in pauses), mapped
  linearly from [0 dB, 45 dB] to [1, 5], minus 1 point per 10% of clipped samples.
"""

from __future__ import annotations

import numpy as np

from ..toolkit.audio import resample

RATE = 16000
SIM_METHOD = "local substitute: cosine x100 of mean mel-cepstra (c1..c20) over loud frames, 16 kHz (not WavLM-ECAPA)"
QUALITY_METHOD = ("local substitute: p90/p10 frame-energy ratio in dB mapped from [0, 45] to [1, 5], "
                  "minus 1 per 10% clipped samples (not UTMOS)")
_FRAME, _HOP, _MELS, _CEPS = 400, 160, 40, 20


def _frames(x: np.ndarray) -> np.ndarray:
    if len(x) < _FRAME:
        x = np.pad(x, (0, _FRAME - len(x)))
    starts = np.arange(0, len(x) - _FRAME + 1, _HOP)
    return np.stack([x[s:s + _FRAME] for s in starts]) * np.hamming(_FRAME)


def _mel_matrix(n_fft: int = 512) -> np.ndarray:
    def mel(f):
        return 2595 * np.log10(1 + f / 700)

    def hz(m):
        return 700 * (10 ** (m / 2595) - 1)

    edges = hz(np.linspace(mel(60), mel(7600), _MELS + 2))
    bins = np.floor((n_fft + 1) * edges / RATE).astype(int)
    fb = np.zeros((_MELS, n_fft // 2 + 1))
    for i in range(_MELS):
        lo, mid, hi = bins[i], bins[i + 1], max(bins[i + 2], bins[i + 1] + 1)
        fb[i, lo:mid] = (np.arange(lo, mid) - lo) / max(1, mid - lo)
        fb[i, mid:hi] = (hi - np.arange(mid, hi)) / max(1, hi - mid)
    return fb


_MEL = _mel_matrix()
_DCT = np.cos(np.pi / _MELS * (np.arange(_MELS)[None, :] + 0.5) * np.arange(1, _CEPS + 1)[:, None])


def _loud(energy: np.ndarray) -> np.ndarray:
    return energy > 0.05 * np.percentile(energy, 95)


def speaker_embedding(samples: np.ndarray, rate: int) -> np.ndarray | None:
    """Mean mel-cepstrum (c1..c20) of the loud frames; None for silent or empty audio."""
    x = resample(np.asarray(samples, dtype=np.float32), rate, RATE)
    if x.size == 0 or not np.isfinite(x).all() or not np.any(x):
        return None
    frames = _frames(x)
    power = np.abs(np.fft.rfft(frames, n=512, axis=1)) ** 2
    energy = power.sum(axis=1)
    keep = _loud(energy)
    if keep.sum() < 3:
        return None
    logmel = np.log(power[keep] @ _MEL.T + 1e-10)
    return (logmel @ _DCT.T).mean(axis=0)


def similarity(a: np.ndarray | None, b: np.ndarray | None) -> float | None:
    """Cosine x 100 of two embeddings; None when either is missing."""
    if a is None or b is None:
        return None
    denom = float(np.linalg.norm(a) * np.linalg.norm(b))
    return 100.0 * float(a @ b) / denom if denom else None


def quality(samples: np.ndarray, rate: int) -> float | None:
    """The SNR-based 1..5 quality estimate; None for empty, silent or non-finite audio."""
    x = np.asarray(samples, dtype=np.float32)
    if x.size == 0 or not np.isfinite(x).all() or not np.any(x):
        return None
    energy = (_frames(resample(x, rate, RATE)) ** 2).sum(axis=1)
    snr_db = 10 * np.log10(max(np.percentile(energy, 90), 1e-12) / max(np.percentile(energy, 10), 1e-12))
    score = 1 + 4 * np.clip(snr_db / 45.0, 0, 1)
    clipped = float(np.mean(np.abs(x) >= 0.999))
    return float(np.clip(score - 10 * clipped, 1, 5))
