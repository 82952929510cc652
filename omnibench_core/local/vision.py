"""The local target's answer to a video question. It is not a video model, and reports say so.

It decodes the video (PyAV) at the request's ``video_fps`` up to ``video_max_frames`` frames,
names the frames' mean colour from a small palette, transcribes the spoken question
(pocketsphinx) and picks the option whose colour it heard; when it heard no matching colour,
the letter falls back to the colour's palette position. So the answer depends on both the
video and the question, and the local data set can be answered.

Frame size follows the request like a real server's sampler: each frame is scaled to at most
``video_max_pixels`` and at least ``video_min_pixels``; ``video_total_pixels`` caps the sum over
all sampled frames, first by shrinking frames (not below the minimum), then by keeping fewer,
evenly spaced frames. Only the geometry is computed (a mean colour needs no upscaled copy).
"""

from __future__ import annotations

import io
import math
from dataclasses import dataclass

import numpy as np

from ..toolkit.synthetic import LETTERS, PALETTE

TOKENS_PER_FRAME = 64  # the local target's count of video tokens per sampled frame
MAX_SOURCE_PIXELS = 7680 * 4320  # 8K: larger coded frames are refused before decoding


@dataclass(frozen=True)
class Sampling:
    """How a request asks for video frames to be sampled (sglang-omni's ``video_*`` fields)."""

    fps: float = 2.0
    max_frames: int = 128
    max_pixels: int = 401408
    min_pixels: int = 0
    total_pixels: int = 0  # 0: no cap over all frames


class VideoError(ValueError):
    """A video that cannot be opened or holds no frames."""


@dataclass(frozen=True)
class VideoSummary:
    """What the local target takes from a video."""

    color: str
    frames: int
    rgb: tuple[float, float, float]
    pixels: int  # over all sampled frames, at their sampled size


def nearest_color(rgb: np.ndarray) -> str:
    """The palette colour closest to ``rgb``."""
    return min(PALETTE, key=lambda name: float(np.sum((np.asarray(PALETTE[name]) - rgb) ** 2)))


def frame_size(height: int, width: int, *, min_pixels: int, max_pixels: int) -> tuple[int, int]:
    """The sampled size of a ``height`` x ``width`` frame, aspect kept, within [min_pixels, max_pixels]."""
    area = height * width

    def scaled(pixels: int, rounding) -> tuple[int, int]:
        scale = math.sqrt(pixels / area)
        return max(1, rounding(height * scale)), max(1, rounding(width * scale))

    if max_pixels > 0 and area > max_pixels:
        return scaled(max_pixels, math.floor)
    if min_pixels > 0 and area < min_pixels:
        up = scaled(min_pixels, math.ceil)
        # Rounding up may overshoot a maximum equal to the minimum; the maximum wins.
        return up if max_pixels <= 0 or up[0] * up[1] <= max_pixels else scaled(max_pixels, math.floor)
    return height, width


def _budget(shapes: list[tuple[int, int]], sampling: Sampling) -> tuple[list[int], int]:
    """Which sampled frames to keep and the per-frame pixel cap that honours ``total_pixels``."""
    keep, cap = list(range(len(shapes))), sampling.max_pixels
    if sampling.total_pixels > 0:
        per_frame = sampling.total_pixels // len(shapes)
        floor = max(sampling.min_pixels, 1)
        if per_frame < floor:
            count = max(1, sampling.total_pixels // floor)
            keep = sorted({round(i) for i in np.linspace(0, len(shapes) - 1, count)})
            per_frame = sampling.total_pixels // len(keep)
        cap = min(cap, per_frame) if cap > 0 else per_frame
    return keep, cap


def summarize_video(data: bytes, sampling: Sampling, name: str = "video") -> VideoSummary:
    """Decode frames per ``sampling`` from the video file's bytes and name their colour."""
    import av

    means, shapes, next_t = [], [], 0.0
    try:
        with av.open(io.BytesIO(data)) as container:
            if not container.streams.video:
                raise VideoError(f"{name} has no video stream")
            codec = container.streams.video[0].codec_context
            if (codec.width or 0) * (codec.height or 0) > MAX_SOURCE_PIXELS:
                raise VideoError(f"{name}: frames of {codec.width}x{codec.height} are larger than 8K")
            fps = sampling.fps
            for frame in container.decode(video=0):
                t = float(frame.time) if frame.time is not None else next_t
                if fps > 0 and t + 1e-6 < next_t:
                    continue
                next_t = t + (1.0 / fps if fps > 0 else 0.0)
                if frame.width * frame.height > MAX_SOURCE_PIXELS:
                    raise VideoError(f"{name}: frames of {frame.width}x{frame.height} are larger than 8K")
                img = frame.to_ndarray(format="rgb24")
                # The mean colour from a strided subsample under max_pixels (cheap, and unchanged by scaling).
                step = max(1, int(np.ceil(np.sqrt(img.shape[0] * img.shape[1] / sampling.max_pixels)))
                           if sampling.max_pixels > 0 else 1)
                means.append(img[::step, ::step].reshape(-1, 3).mean(axis=0))
                shapes.append(img.shape[:2])
                if len(means) >= sampling.max_frames > 0:
                    break
    except (av.error.FFmpegError, OSError, ValueError, EOFError) as exc:
        raise VideoError(f"cannot decode {name}: {exc}") from exc
    if not means:
        raise VideoError(f"{name} holds no frames")
    keep, cap = _budget(shapes, sampling)
    sizes = [frame_size(*shapes[i], min_pixels=sampling.min_pixels, max_pixels=cap) for i in keep]
    rgb = np.mean([means[i] for i in keep], axis=0)
    red, green, blue = (float(v) for v in rgb)
    return VideoSummary(nearest_color(rgb), len(keep), (red, green, blue), sum(h * w for h, w in sizes))


def choose_option(transcript: str, color: str) -> tuple[str, bool]:
    """The letter of the option naming ``color`` in the heard question; ``(letter, heard)``."""
    heard = []
    for word in transcript.lower().replace(",", " ").replace(".", " ").split():
        if word in PALETTE and word not in heard:
            heard.append(word)
    if color in heard[:len(LETTERS)]:
        return LETTERS[heard.index(color)], True
    return LETTERS[list(PALETTE).index(color) % len(LETTERS)], False
