"""Local substitutes for SIM (speaker similarity) and UTMOS (speech quality).

sglang-omni scores SIM with WavLM-ECAPA embeddings and quality with UTMOS; neither runs here
without downloading models. These are real, documented signal measures instead, and every
report that uses them names them:

* SIM substitute: cosine x 100 of spectral speaker embeddings: the mean over loud frames of
  20 mel-cepstral coefficients (c1..c20, no energy term), each file at 16 kHz.
* UTMOS substitute: a degradation score on 1..5: the ratio of the 90th to the 10th percentile
  of frame energies in dB (speech peaks against the noise floor in pauses), mapped linearly from
  [0 dB, 45 dB] to [1, 5]; minus 1 point per 1% of samples in clipped flat tops (two or more
  neighbours at the file's own peak, at any level: clipping before a gain change is found too);
  minus 1 point per dropout a second (a run of 1 to 100 ms of near-silence between loud audio on
  both sides, as a lost chunk filled with zeros leaves: speech never falls silent that fast).
  Clean synthetic speech scores 5: it was 5 with the first two terms alone in every run, so
  only a degraded file moves it (issue 46). Samples cut out with no gap are not seen.
"""

from __future__ import annotations

import numpy as np

from ..toolkit.audio import resample

RATE = 16000
SIM_METHOD = "local substitute: cosine x100 of mean mel-cepstra (c1..c20) over loud frames, 16 kHz (not WavLM-ECAPA)"
QUALITY_METHOD = ("local substitute: p90/p10 frame-energy ratio in dB mapped from [0, 45] to [1, 5], "
                  "minus 1 per 1% of samples in clipped flat tops, minus 1 per dropout a second (not UTMOS)")
# A dropout: this long a run of samples below _QUIET of the peak, with _LOUD of the peak (RMS) in the
# _EDGE_S before and after it. Measured on hibari speech (2026-12-06): no clean sentence has one;
# 10 ms zeroed every 100 ms gives 11-19 in 5 s.
_DROP_S, _EDGE_S, _QUIET, _LOUD = (0.001, 0.1), 0.0025, 3e-4, 0.02
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


def flat_top_fraction(x: np.ndarray) -> float:
    """The share of samples in flat tops: a sample at the file's peak (within 0.1%) beside another."""
    a = np.abs(x)
    top = a >= 0.999 * float(a.max())
    pairs = top[1:] & top[:-1] & (np.sign(x[1:]) == np.sign(x[:-1]))
    return float(np.count_nonzero(pairs)) / len(x)


def dropouts(x: np.ndarray, rate: int) -> int:
    """Runs of near-silence (1 to 100 ms) with loud audio right before and after: lost chunks."""
    peak = float(np.abs(x).max())
    quiet = np.abs(x) < _QUIET * peak
    edges = np.diff(np.concatenate(([0], quiet.astype(np.int8), [0])))
    starts, ends = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)
    shortest, longest, edge = int(_DROP_S[0] * rate), int(_DROP_S[1] * rate), max(1, int(_EDGE_S * rate))
    count = 0
    for a, b in zip(starts, ends, strict=True):
        if not shortest <= b - a <= longest or a < edge or b + edge > len(x):
            continue
        before, after = x[a - edge:a], x[b:b + edge]
        if min(np.sqrt(np.mean(before ** 2)), np.sqrt(np.mean(after ** 2))) > _LOUD * peak:
            count += 1
    return count


def quality(samples: np.ndarray, rate: int) -> float | None:
    """The 1..5 degradation score (noise floor, clipping, dropouts); None for empty, silent or non-finite audio."""
    x = np.asarray(samples, dtype=np.float32)
    if x.size == 0 or not np.isfinite(x).all() or not np.any(x):
        return None
    energy = (_frames(resample(x, rate, RATE)) ** 2).sum(axis=1)
    snr_db = 10 * np.log10(max(np.percentile(energy, 90), 1e-12) / max(np.percentile(energy, 10), 1e-12))
    score = 1 + 4 * np.clip(snr_db / 45.0, 0, 1)
    clipped = max(float(np.mean(np.abs(x) >= 0.999)), flat_top_fraction(x))
    per_second = dropouts(x, rate) / (len(x) / rate)
    return float(np.clip(score - 100 * clipped - per_second, 1, 5))
