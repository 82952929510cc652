"""The local target's answer to a video question. It is not a video model, and reports say so.

It decodes the video (PyAV) at the request's ``video_fps`` up to ``video_max_frames`` frames,
each scaled under ``video_max_pixels``, names the frames' mean colour from a small palette,
transcribes the spoken question (pocketsphinx) and picks the option whose colour it heard;
when it heard no matching colour, the letter falls back to the colour's palette position. So
the answer depends on both the video and the question, and the local data set can be answered.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..synthetic import LETTERS, PALETTE

TOKENS_PER_FRAME = 64  # the local target's count of video tokens per sampled frame


class VideoError(ValueError):
    """A video that cannot be opened or holds no frames."""


@dataclass(frozen=True)
class VideoSummary:
    """What the local target takes from a video."""

    color: str
    frames: int
    rgb: tuple[float, float, float]


def nearest_color(rgb: np.ndarray) -> str:
    """The palette colour closest to ``rgb``."""
    return min(PALETTE, key=lambda name: float(np.sum((np.asarray(PALETTE[name]) - rgb) ** 2)))


def summarize_video(path: str | Path, *, fps: float = 2.0, max_frames: int = 128, max_pixels: int = 401408
                    ) -> VideoSummary:
    """Decode frames at ``fps`` (at most ``max_frames``, each under ``max_pixels``) and name their colour."""
    import av

    try:
        container = av.open(str(path))
    except (av.error.FFmpegError, OSError) as exc:
        raise VideoError(f"cannot open video {path}: {exc}") from exc
    means, next_t = [], 0.0
    try:
        with container:
            if not container.streams.video:
                raise VideoError(f"{path} has no video stream")
            for frame in container.decode(video=0):
                t = float(frame.time) if frame.time is not None else next_t
                if fps > 0 and t + 1e-6 < next_t:
                    continue
                next_t = t + (1.0 / fps if fps > 0 else 0.0)
                img = frame.to_ndarray(format="rgb24")
                step = int(np.ceil(np.sqrt(img.shape[0] * img.shape[1] / max_pixels))) if max_pixels > 0 else 1
                means.append(img[::max(step, 1), ::max(step, 1)].reshape(-1, 3).mean(axis=0))
                if len(means) >= max_frames > 0:
                    break
    except av.error.FFmpegError as exc:
        raise VideoError(f"cannot decode video {path}: {exc}") from exc
    if not means:
        raise VideoError(f"video {path} holds no frames")
    rgb = np.mean(means, axis=0)
    return VideoSummary(nearest_color(rgb), len(means), tuple(float(v) for v in rgb))


def choose_option(transcript: str, color: str) -> tuple[str, bool]:
    """The letter of the option naming ``color`` in the heard question; ``(letter, heard)``."""
    heard = []
    for word in transcript.lower().replace(",", " ").replace(".", " ").split():
        if word in PALETTE and word not in heard:
            heard.append(word)
    if color in heard[:len(LETTERS)]:
        return LETTERS[heard.index(color)], True
    return LETTERS[list(PALETTE).index(color) % len(LETTERS)], False
