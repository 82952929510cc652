"""The local UTMOS substitute discriminates: clean synthetic speech scores 5 and each degradation a
streamed answer meets (noise, clipping, zero-filled dropouts) moves it (issue 46: it was 5.0 in
every run, so it told nothing)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import soundfile as sf

from omnibench_core.scoring import voice
from omnibench_core.toolkit.speech import TTS_RATE, Synthesizer
from omnibench_plugins.seedtts import score

SENTENCES = ("The quick brown fox jumps over the lazy dog.", "Please call Stella and ask her to bring these things.",
             "A stop, a pause; then the cat sat. Papa picked peppers.")


@pytest.fixture(scope="module")
def speech() -> list[np.ndarray]:
    synth = Synthesizer(workers=1)
    return [synth.synthesize(text, seed=0) for text in SENTENCES]


def noisy(x: np.ndarray, snr_db: float) -> np.ndarray:
    rng = np.random.default_rng(0)
    return (x + rng.normal(0, np.sqrt(np.mean(x ** 2) / 10 ** (snr_db / 10)), len(x))).astype(np.float32)


def clipped(x: np.ndarray, share: float) -> np.ndarray:
    """Clipped at the level ``share`` of samples pass, then scaled down (a gain after the clip)."""
    level = float(np.quantile(np.abs(x), 1 - share))
    return (np.clip(x, -level, level) / level * 0.9).astype(np.float32)


def dropped(x: np.ndarray, every_s: float = 0.1, gap_s: float = 0.01) -> np.ndarray:
    """A lost 10 ms chunk every 100 ms, filled with zeros."""
    y = x.copy()
    step, gap = int(every_s * TTS_RATE), int(gap_s * TTS_RATE)
    for start in range(step // 2, len(y), step):
        y[start:start + gap] = 0
    return y


def old_quality(x: np.ndarray) -> float:
    """The substitute before issue 46 (noise floor and full-scale clipping only), to show what it missed."""
    energy = (voice._frames(voice.resample(x, TTS_RATE, voice.RATE)) ** 2).sum(axis=1)
    snr_db = 10 * np.log10(max(np.percentile(energy, 90), 1e-12) / max(np.percentile(energy, 10), 1e-12))
    return float(np.clip(1 + 4 * np.clip(snr_db / 45.0, 0, 1) - 10 * float(np.mean(np.abs(x) >= 0.999)), 1, 5))


def test_clean_speech_scores_5_and_every_degradation_moves_the_score(speech):
    for x in speech:
        assert voice.quality(x, TTS_RATE) == 5.0
        assert voice.flat_top_fraction(x) == 0.0 and voice.dropouts(x, TTS_RATE) == 0
        for name, bad in (("noise 20 dB", noisy(x, 20)), ("clipped 1%", clipped(x, 0.01)), ("dropouts", dropped(x))):
            got = voice.quality(bad, TTS_RATE)
            assert got is not None and got <= 4.5, (name, got)
        # what the old measure could not see: it scored clipped and dropped audio as clean
        assert old_quality(clipped(x, 0.01)) == 5.0 and old_quality(dropped(x)) == 5.0


def test_the_utmos_file_scores_a_degraded_wav_lower_than_its_clean_twin(speech, tmp_path):
    x = speech[0]
    (tmp_path / "audio").mkdir()
    rows = []
    for sample_id, audio in (("clean", x), ("clipped", clipped(x, 0.01)), ("dropped", dropped(x))):
        wav = tmp_path / "audio" / f"{sample_id}.wav"
        sf.write(wav, audio, TTS_RATE)
        rows.append({"sample_id": sample_id, "is_success": True, "wav_path": str(wav)})
    (tmp_path / "generated.json").write_text(json.dumps(rows))
    result = score.utmos(tmp_path, model="minicpmo")
    by_id = {r["id"]: r["utmos_score"] for r in result["per_sample"]}
    assert by_id["clean"] == 5.0 and by_id["clipped"] < 4.5 and by_id["dropped"] < 4.5, by_id
    assert "dropout" in result["config"]["method"]
