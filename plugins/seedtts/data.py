"""seed-tts data: the local set omnibench makes, and the ``meta.lst`` reader.

The local set is 30 English sentences written for omnibench, each with a reference voice the
local speech stack synthesizes (one of six pitch-shifted "speakers"), in the format
sglang-omni's client reads from a local ``meta.lst``: ``id|ref_text|ref_wav|target_text`` per
line, the WAV path relative to the file's folder. It is made once into a cache directory and
reused; a half-made set is never left in place.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import soundfile as sf

from omnibench_core.plugin import build_once, dataset_folder

SET_NAME = "seedtts-local-v1"

TARGET_SENTENCES = (
    "The morning train to the coast leaves at half past seven.",
    "Please put the green folder on the shelf beside the window.",
    "Our neighbours planted three apple trees along the fence last spring.",
    "The museum will stay open late on Thursday evenings this summer.",
    "She poured the warm soup into a large blue bowl.",
    "A strong wind blew the paper boats across the pond.",
    "He checked the map twice before turning onto the narrow road.",
    "The children laughed when the puppy chased its own tail.",
    "Fresh bread from the bakery smells wonderful in the early hours.",
    "The meeting was moved to the small room on the second floor.",
    "Rain fell softly on the roof for most of the night.",
    "Turn off the lights when you leave the kitchen.",
    "The old bridge was painted bright red by the town council.",
    "We counted twelve boats sailing past the harbour wall.",
    "The teacher asked everyone to read the first chapter by Monday.",
    "A quiet garden is a good place to think about the day.",
    "The library lends books, music and maps to every visitor.",
    "My brother fixed the broken chair with glue and a few nails.",
    "The baker sold out of cherry pies before noon.",
    "Snow covered the hills and the valley looked very peaceful.",
    "Keep the receipt in case the shoes do not fit.",
    "The singer thanked the crowd and walked slowly off the stage.",
    "Water the plants on the balcony every other day.",
    "The cat slept in a patch of sunlight on the carpet.",
    "They built a small cabin near the edge of the forest.",
    "Bring a warm coat because the evenings are getting colder.",
    "The pilot announced that we would land in twenty minutes.",
    "A bowl of ripe peaches sat in the middle of the table.",
    "The farmer drove the tractor slowly through the muddy field.",
    "Lunch will be served in the hall after the last lecture.",
)

REFERENCE_SENTENCES = (
    "I have always enjoyed long walks by the river.",
    "This is how my voice sounds on an ordinary day.",
    "Thank you for calling, I will be with you shortly.",
    "We should start the project early next week.",
    "The weather has been lovely for the past few days.",
    "Let me tell you a short story about my grandmother.",
)

# Six reference "speakers": the local voice at six pitches (omnibench_core.toolkit.synthetic.Speaker).
SPEAKER_PITCH = (0.86, 0.91, 0.96, 1.0, 1.05, 1.1)
REFERENCE_RATE = 16000


@dataclass(frozen=True)
class Sample:
    """One seed-tts sample: the reference voice and the text to speak with it."""

    sample_id: str
    ref_text: str
    ref_audio: str  # absolute path
    target_text: str


def load_meta(path: str | os.PathLike[str], max_samples: int | None = None) -> list[Sample]:
    """Read a seed-tts ``meta.lst`` as sglang-omni does (lines with fewer than 4 fields skipped)."""
    base = Path(path).resolve().parent
    samples = []
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        parts = line.strip().split("|")
        if len(parts) < 4:
            continue
        samples.append(Sample(parts[0], parts[1], str(base / parts[2]), parts[3]))
        if max_samples is not None and len(samples) >= max_samples:
            break
    return samples


@dataclass(frozen=True)
class MissingReference:
    """A meta line whose reference audio is not a regular file: where it is named and what it names."""

    line: int  # 1-based, as an editor shows it
    path: str  # absolute, resolved against the meta's folder as :func:`load_meta` does


def missing_references(path: str | os.PathLike[str], max_samples: int | None = None) -> list[MissingReference]:
    """The samples :func:`load_meta` would give (the first ``max_samples``) whose reference audio is
    missing or not a regular file (a folder, a FIFO that would hang its reader), by line."""
    base = Path(path).resolve().parent
    missing, samples = [], 0
    for number, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), start=1):
        parts = line.strip().split("|")
        if len(parts) < 4:
            continue
        ref = base / parts[2]
        if not ref.is_file():
            missing.append(MissingReference(number, str(ref)))
        samples += 1
        if max_samples is not None and samples >= max_samples:
            break
    return missing


def local_set_dir(cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """Where the local set lives: ``<cache>/seedtts-local-v1``."""
    return dataset_folder(cache_dir, SET_NAME, "seedtts.data_dir")  # "/" or a file: refused, naming the option


def ensure_local_set(folder: Path, progress=lambda message: None) -> Path:
    """Make the local set in ``folder`` unless a complete one is there; return its ``meta.lst``."""

    def build(work: Path) -> int:
        from omnibench_core.plugin import SPEECH_RATE, Speaker, resample  # loads a voice: only when building

        (work / "wavs").mkdir()
        progress(f"loading the local voice to make {len(TARGET_SENTENCES)} reference voices")
        speaker_voice = Speaker()
        lines = []
        for i, target in enumerate(TARGET_SENTENCES):
            sample_id = f"local_en_{i:03d}"
            speaker = i % len(SPEAKER_PITCH)
            ref_text = REFERENCE_SENTENCES[speaker]
            audio = speaker_voice.say(ref_text, pitch=SPEAKER_PITCH[speaker], seed=i)
            rel = f"wavs/{sample_id}_ref.wav"
            sf.write(work / rel, resample(audio, SPEECH_RATE, REFERENCE_RATE), REFERENCE_RATE, subtype="PCM_16")
            lines.append(f"{sample_id}|{ref_text}|{rel}|{target}")
            if i == 0 or (i + 1) % 5 == 0:  # a fraction of a second each: every fifth is often enough
                progress(f"made reference {i + 1}/{len(TARGET_SENTENCES)}")
        (work / "meta.lst").write_text("\n".join(lines) + "\n", encoding="utf-8")
        return len(lines)

    return build_once(folder, SET_NAME, build) / "meta.lst"
