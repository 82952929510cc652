"""The local target's recogniser, its search settings against pocketsphinx's defaults, side by side:
CPU-seconds an utterance and word error rate on the seed-tts sentences as the local synthesizer says
them (the audio scoring transcribes on the local target).

    python benchmarks/bench_recogniser.py [--sentences 20] [--repeat 2]

Each way decodes the same audio with a decoder of its own, ``--repeat`` times in turn (the CPU a
way is the mean); WER with sglang-omni's normaliser (omnibench_core.scoring.wer).
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from omnibench_core.scoring.wer import score_pair  # noqa: E402
from omnibench_core.toolkit.audio import resample  # noqa: E402
from omnibench_core.toolkit.speech import ASR_RATE, DECODER_SEARCH, TTS_RATE, Synthesizer  # noqa: E402
from omnibench_plugins.seedtts.data import TARGET_SENTENCES  # noqa: E402

WAYS = {"pocketsphinx's defaults": {}, "omnibench's (DECODER_SEARCH)": DECODER_SEARCH}


def decode_all(settings: dict[str, object], pcms: list[bytes]) -> tuple[float, list[str]]:
    """Mean CPU-seconds an utterance and the transcripts, one decoder for all."""
    from pocketsphinx import Decoder

    decoder = Decoder(samprate=ASR_RATE, loglevel="FATAL", **settings)
    start, said = time.process_time(), []
    for pcm in pcms:
        decoder.start_utt()
        decoder.process_raw(pcm, full_utt=True)
        decoder.end_utt()
        hyp = decoder.hyp()
        said.append(hyp.hypstr if hyp is not None else "")
    return (time.process_time() - start) / len(pcms), said


def corpus_wer(references: list[str], hypotheses: list[str]) -> float:
    """Errors over reference words, summed over the sentences."""
    counts = [c for c in (score_pair(r, h) for r, h in zip(references, hypotheses, strict=True)) if c is not None]
    errors = sum(c.substitutions + c.deletions + c.insertions for c in counts)
    return errors / max(sum(len(c.ref_norm.split()) for c in counts), 1)


def main(argv: list[str] | None = None) -> int:
    """Synthesize, decode each way, print CPU and WER a way and the ratio."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sentences", type=int, default=20, help="the first N seed-tts sentences")
    parser.add_argument("--repeat", type=int, default=2, help="decodes of the whole set per way, in turn")
    args = parser.parse_args(argv)
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    texts = list(TARGET_SENTENCES[:args.sentences])
    voice = Synthesizer(1)
    pcms = [(np.clip(resample(voice.synthesize(t, seed=0), TTS_RATE, ASR_RATE), -1, 1) * 32767).astype("<i2").tobytes()
            for t in texts]
    cpu: dict[str, list[float]] = {name: [] for name in WAYS}
    wer: dict[str, float] = {}
    for _ in range(args.repeat):
        for name, settings in WAYS.items():
            seconds, said = decode_all(settings, pcms)
            cpu[name].append(seconds)
            wer[name] = corpus_wer(texts, said)
    print(f"{len(texts)} sentences, {args.repeat} decodes a way; CPU-s an utterance (mean), corpus WER")
    for name in WAYS:
        print(f"{name:30s} {sum(cpu[name]) / len(cpu[name]):6.3f}   WER {wer[name]:.3f}")
    base, ours = (sum(cpu[n]) / len(cpu[n]) for n in WAYS)
    print(f"ratio, defaults / omnibench's: {base / ours:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
