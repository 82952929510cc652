"""Video-AMME-style requests on the local target: check the ``videos``/``audios`` files, then
answer with ``Answer: <LETTER>`` (see vision.py for how, and why it is a substitute)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from ..audio import AudioError, read_wav_bytes
from .protocol import ChatRequest, RequestError, audio_tokens
from .speech import Recognizer
from .vision import TOKENS_PER_FRAME, VideoError, choose_option, summarize_video


def _paths(extra: dict[str, Any], key: str) -> list[str]:
    value = extra.get(key, [])
    if not isinstance(value, list) or not all(isinstance(p, str) and p for p in value):
        raise RequestError(400, f"'{key}' must be a list of file paths")
    for path in value:
        if not Path(path).is_file():
            raise RequestError(400, f"{key[:-1]} file not found: {path}")
    return value


def _number(extra: dict[str, Any], key: str, default: float) -> float:
    value = extra.get(key, default)
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value) or value < 0:
        raise RequestError(400, f"'{key}' must be a number >= 0")
    return float(value)


def is_multimodal(request: ChatRequest) -> bool:
    """True when the request carries videos or audio files."""
    return bool(request.extra.get("videos") or request.extra.get("audios"))


def answer(request: ChatRequest, recognizer: Recognizer, max_seq_len: int) -> str:
    """Validate the files, add their tokens to the prompt, and compose the reply text."""
    videos, audios = _paths(request.extra, "videos"), _paths(request.extra, "audios")
    fps = _number(request.extra, "video_fps", 2.0)
    max_frames = int(_number(request.extra, "video_max_frames", 128))
    max_pixels = int(_number(request.extra, "video_max_pixels", 401408))
    summaries = []
    for path in videos:
        try:
            summaries.append(summarize_video(path, fps=fps, max_frames=max_frames, max_pixels=max_pixels))
        except VideoError as exc:
            raise RequestError(400, str(exc)) from exc
    heard = []
    for path in audios:
        try:
            samples, rate = read_wav_bytes(Path(path).read_bytes())
        except AudioError as exc:
            raise RequestError(400, f"audio file {path}: {exc}") from exc
        request.prompt_tokens += audio_tokens(len(samples) / rate)
        heard.append(recognizer.transcribe(samples, rate))
    request.prompt_tokens += TOKENS_PER_FRAME * sum(s.frames for s in summaries)
    if request.prompt_tokens >= max_seq_len:
        raise RequestError(400, f"The input ({request.prompt_tokens} tokens) is longer than the model's context "
                                f"length ({max_seq_len} tokens).")
    if not summaries:
        return f"I heard: {' '.join(heard)}." if heard else request.prompt
    color = summaries[0].color
    letter, _ = choose_option(" ".join(heard), color)
    return f"The video is mostly {color}. Answer: {letter}"
