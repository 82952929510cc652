"""``load_seedtts_samples``: the seed-tts loader omnibench's set-up and native-client staging call.

A ``meta.lst`` path or a known Hugging Face id (mapped offline to omnibench's local set).
"""

from __future__ import annotations

from dataclasses import dataclass

from sglang_omni_standin.data import seedtts_meta


@dataclass
class SampleInput:
    """One sample: id, reference transcript, reference WAV path, text to speak."""

    sample_id: str
    ref_text: str
    ref_audio: str
    target_text: str


def load_seedtts_samples(source: str, max_samples: int | None = None, *, split: str = "en",
                         revision: str | None = None) -> list[SampleInput]:
    """The samples of ``source`` (``split`` and ``revision`` are accepted; the local set has one of each)."""
    from omnibench_plugins.seedtts.data import load_meta

    return [SampleInput(s.sample_id, s.ref_text, s.ref_audio, s.target_text)
            for s in load_meta(seedtts_meta(source), max_samples)]
