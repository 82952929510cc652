"""The local Video-AMME-style set: short H.264 videos, each with a spoken question (local speech
stack), four options and the expected letter. Made once into the cache folder: ten questions, or
as many as ``max_samples`` asks (a set of its own, ``videoamme-local-v1-<N>``, whose first ten are
the ten-question set's), so a paired quality test has the samples it needs.

Each video is a coloured field with a white square moving across it; the question asks for the
main colour and reads four colour options aloud.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import soundfile as sf

from omnibench_core.plugin import LETTERS, PALETTE, build_once, dataset_folder, write_color_video

SET_NAME = "videoamme-local-v1"
SAMPLES = 10  # the set's size unless more are asked
FPS, SECONDS, WIDTH, HEIGHT = 8, 3, 160, 120


@dataclass(frozen=True)
class VideoSample:
    """One question: absolute video and question paths, options and the expected letter."""

    sample_id: str
    video: str
    audio: str
    question: str
    options: tuple[str, ...]
    answer: str
    duration: str = "short"
    domain: str = "synthetic"
    task_type: str = "colour recognition"


def set_size(max_samples: int | None) -> int:
    """How many questions the local set holds for ``max_samples``: at least :data:`SAMPLES`."""
    return max(SAMPLES, max_samples or 0)


def local_set_dir(cache_dir: str | Path | None = None, samples: int = SAMPLES) -> Path:
    """``<cache>/videoamme-local-v1``, or ``...-<N>`` for a set of N > 10 questions."""
    folder = dataset_folder(cache_dir, SET_NAME, "videoamme.data_dir")  # "/" or a file: refused, naming the option
    return folder if samples <= SAMPLES else folder.with_name(f"{folder.name}-{samples}")


def load_samples(folder: Path, max_samples: int | None = None) -> list[VideoSample]:
    """The set's ``samples.json``, paths made absolute."""
    rows = json.loads((folder / "samples.json").read_text())[:max_samples]
    return [VideoSample(**{**r, "video": str(folder / r["video"]), "audio": str(folder / r["audio"]),
                           "options": tuple(r["options"])}) for r in rows]


def write_video(path: Path, rgb: tuple[int, int, int]) -> None:
    """A 3 s, 8 fps, 160x120 H.264 MP4: the colour, and a white square crossing it."""
    write_color_video(path, rgb, fps=FPS, seconds=SECONDS, width=WIDTH, height=HEIGHT)


def _link(source: Path, target: Path) -> None:
    """``target`` as a hard link to ``source``, or a copy where links are not possible."""
    try:
        os.link(source, target)
    except OSError:
        shutil.copyfile(source, target)


def ensure_local_set(folder: Path, progress=lambda message: None, samples: int = SAMPLES) -> Path:
    """Make the set of ``samples`` questions unless a complete one is there; returns the folder."""

    def build(work: Path) -> int:
        from omnibench_core.plugin import SPEECH_RATE, Speaker  # loads a voice: only when building

        (work / "videos").mkdir()
        (work / "questions").mkdir()
        progress(f"loading the local voice to make {samples} videos with spoken questions")
        voice, colors, rows = Speaker(), list(PALETTE), []
        rng = np.random.default_rng(7)
        for i in range(min(samples, SAMPLES)):
            color = colors[i % len(colors)]
            others = [c for c in colors if c != color]
            options = [color, *rng.choice(others, size=3, replace=False)]
            rng.shuffle(options)
            question = ("What is the main color of this video? "
                        + " ".join(f"{letter}, {name}." for letter, name in zip(LETTERS, options, strict=True)))
            sample_id = f"local_vamme_{i:03d}"
            write_video(work / "videos" / f"{sample_id}.mp4", PALETTE[color])
            sf.write(work / "questions" / f"{sample_id}.wav", voice.say(question, seed=i), SPEECH_RATE,
                     subtype="PCM_16")
            rows.append({"sample_id": sample_id, "video": f"videos/{sample_id}.mp4",
                         "audio": f"questions/{sample_id}.wav", "question": question, "options": list(options),
                         "answer": LETTERS[options.index(color)]})
            progress(f"made video and question {i + 1}/{samples}")
        # Past the first ten, each sample is question i % 10 again under its own id and file names
        # (hard links): a sample of its own to pair across sides, made in a moment, and the
        # server hears each spoken question once (omnibench_core/local/heard.py).
        for i in range(SAMPLES, samples):
            source, sample_id = rows[i % SAMPLES], f"local_vamme_{i:03d}"
            video, audio = f"videos/{sample_id}.mp4", f"questions/{sample_id}.wav"
            _link(work / source["video"], work / video)
            _link(work / source["audio"], work / audio)
            rows.append({**source, "sample_id": sample_id, "video": video, "audio": audio})
        progress(f"made {samples} questions")
        (work / "samples.json").write_text(json.dumps(rows, indent=2))
        return len(rows)

    return build_once(folder, SET_NAME, build)
