"""Video-AMME-style requests on the local target: read the ``videos``/``audios`` files (media.py
decides which may be read), then answer with ``Answer: <LETTER>`` (see vision.py for how, and
why it is a substitute)."""

from __future__ import annotations

from .errors import RequestError
from .media import MediaPolicy, read_media
from .protocol import ChatRequest, audio_tokens
from .speech import Recognizer
from .vision import TOKENS_PER_FRAME, Sampling, VideoError, choose_option, summarize_video
from .wav import AudioLimits, decode_wav


def is_multimodal(request: ChatRequest) -> bool:
    """True when the request carries videos or audio files."""
    return bool(request.extra.get("videos") or request.extra.get("audios"))


def sampling_of(extra: dict) -> Sampling:
    """The request's ``video_*`` fields (already checked: finite, >= 0)."""
    return Sampling(fps=extra["video_fps"], max_frames=int(extra["video_max_frames"]),
                    max_pixels=int(extra["video_max_pixels"]), min_pixels=int(extra["video_min_pixels"]),
                    total_pixels=int(extra["video_total_pixels"]))


def answer(request: ChatRequest, recognizer: Recognizer, max_seq_len: int, media: MediaPolicy,
           limits: AudioLimits) -> str:
    """Read and check the files, add their tokens to the prompt, and compose the reply text."""
    sampling = sampling_of(request.extra)
    summaries = []
    for i, path in enumerate(request.extra.get("videos", [])):
        what = f"videos[{i}]"
        try:
            summaries.append(summarize_video(read_media(path, what, media), sampling, what))
        except VideoError as exc:
            raise RequestError(400, str(exc)) from exc
    heard = []
    for i, path in enumerate(request.extra.get("audios", [])):
        what = f"audios[{i}]"
        samples, rate = decode_wav(read_media(path, what, media), what, limits)
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
