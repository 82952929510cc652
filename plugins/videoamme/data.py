"""The local Video-AMME-style set: ten short H.264 videos, each with a spoken question (local
speech stack), four options and the expected letter. Made once into the cache folder.

Each video is a coloured field with a white square moving across it; the question asks for the
main colour and reads four colour options aloud.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import soundfile as sf

from omnibench_core.datasets import build_once, default_cache_dir
from omnibench_core.local.vision import LETTERS, PALETTE

SET_NAME = "videoamme-local-v1"
SAMPLES = 10
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


def local_set_dir(cache_dir: str | Path | None = None) -> Path:
    """``<cache>/videoamme-local-v1``."""
    return Path(cache_dir) if cache_dir else default_cache_dir() / SET_NAME


def load_samples(folder: Path, max_samples: int | None = None) -> list[VideoSample]:
    """The set's ``samples.json``, paths made absolute."""
    rows = json.loads((folder / "samples.json").read_text())[:max_samples]
    return [VideoSample(**{**r, "video": str(folder / r["video"]), "audio": str(folder / r["audio"]),
                           "options": tuple(r["options"])}) for r in rows]


def write_video(path: Path, rgb: tuple[int, int, int]) -> None:
    """A 3 s, 8 fps, 160x120 H.264 MP4: the colour, and a white square crossing it."""
    import av

    with av.open(str(path), "w") as container:
        stream = container.add_stream("h264", rate=FPS)
        stream.width, stream.height, stream.pix_fmt = WIDTH, HEIGHT, "yuv420p"
        for i in range(FPS * SECONDS):
            img = np.empty((HEIGHT, WIDTH, 3), np.uint8)
            img[:] = rgb
            x = 5 + i * (WIDTH - 40) // (FPS * SECONDS)
            img[45:75, x:x + 30] = 255
            for packet in stream.encode(av.VideoFrame.from_ndarray(img, format="rgb24")):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)


def ensure_local_set(folder: Path, progress=lambda message: None) -> Path:
    """Make the set unless a complete one is there; returns the folder."""

    def build(work: Path) -> int:
        from omnibench_core.local.speech import TTS_RATE, Synthesizer

        (work / "videos").mkdir()
        (work / "questions").mkdir()
        synth, colors, rows = Synthesizer(workers=1), list(PALETTE), []
        rng = np.random.default_rng(7)
        for i in range(SAMPLES):
            color = colors[i % len(colors)]
            others = [c for c in colors if c != color]
            options = [color, *rng.choice(others, size=3, replace=False)]
            rng.shuffle(options)
            question = ("What is the main color of this video? "
                        + " ".join(f"{letter}, {name}." for letter, name in zip(LETTERS, options, strict=True)))
            sample_id = f"local_vamme_{i:03d}"
            write_video(work / "videos" / f"{sample_id}.mp4", PALETTE[color])
            sf.write(work / "questions" / f"{sample_id}.wav", synth.synthesize(question, seed=i), TTS_RATE,
                     subtype="PCM_16")
            rows.append({"sample_id": sample_id, "video": f"videos/{sample_id}.mp4",
                         "audio": f"questions/{sample_id}.wav", "question": question, "options": list(options),
                         "answer": LETTERS[options.index(color)]})
            progress(f"made question {i + 1}/{SAMPLES}")
        (work / "samples.json").write_text(json.dumps(rows, indent=2))
        return len(rows)

    return build_once(folder, SET_NAME, build)
